/*
 * threads_collect_async.c: CRASH-TIME CODE, under the crash-time contract of
 * CSignalShim/README.md (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift;
 * checked by AsyncSafetyTests). The crashing thread's wait for the other threads' answers
 * (threads_capture_async.c sent the signals): a thread still silent after the first wait is
 * looked up in /proc (stopped, a zombie, or blocking the signal it was sent: the other one
 * then; in uninterruptible sleep, it is given AFT_THREADS_UNINTERRUPTIBLE_NS to come out), and
 * at the deadline every slot still open is closed.
 */
#include <signal.h>
#include <time.h>

#include "threads_internal.h"
#include "watchdog_internal.h"
#include "sys_internal.h"

/* The name and state of a thread signalled unread that will not name itself (it did not
 * answer), from its status file. */
static void aft_async_unread_from_status(aft_thread_capture *c, uint32_t i) {
    if (!c->slots[i].unread) return;
    ssize_t n = aft_async_task_file(c, c->records[i].thread_id, "status");
    if (n <= 0) return;
    c->records[i].state = aft_async_status_state(c->proc, (size_t)n);
    aft_async_status_name(c->proc, (size_t)n, c->records[i].name);
}

/* A thread that has not answered yet. Listed unread, /proc says now whether it can answer at
 * all (stopped, in uninterruptible sleep, a zombie: the kernel's sp and pc instead) and names
 * it. If it blocks the signal it was sent, the other one (SIGPROF or the capture signal) where
 * it can take that, else /proc's sp and pc. The first signal stays pending there, and finds
 * nothing to answer once the thread lets it through. */
static void aft_async_threads_retry_blocked(aft_thread_capture *c, uint32_t i, int capture,
                                            uint64_t *first_signal_ns) {
    aft_capture_slot *slot = &c->slots[i];
    aft_thread *r = &c->records[i];
    if (atomic_load(&slot->state) != AFT_SLOT_SENT) return;
    if (slot->signal != capture && !slot->unread) return;
    uint64_t blocked = 0;
    ssize_t n = aft_async_task_file(c, r->thread_id, "status");
    if (n <= 0 || !aft_async_status_field(c->proc, (size_t)n, "SigBlk", 1, &blocked)) return;
    uint32_t why = AFT_THREAD_WHY_BLOCKS_SIGNAL;
    if (slot->unread) {
        char state = aft_async_status_state(c->proc, (size_t)n);
        /* 't', a tracer's stop, with our signal no longer pending is that signal's own
         * delivery stop: the tracer may let it through yet, so it is waited for (and listed as
         * not answering at the deadline). With it still pending, the thread stopped before. */
        uint64_t pending = 0;
        if (state == 't' && (!aft_async_status_field(c->proc, (size_t)n, "SigPnd", 1, &pending) ||
                             !((pending >> (slot->signal - 1)) & 1u)))
            state = 'S';
        why = state == 'T' || state == 't'   ? AFT_THREAD_WHY_STOPPED
              : state == 'D'                 ? AFT_THREAD_WHY_UNINTERRUPTIBLE
              : state == 'Z' || state == 'X' ? AFT_THREAD_WHY_ZOMBIE
                                             : AFT_THREAD_WHY_BLOCKS_SIGNAL;
        if (why == AFT_THREAD_WHY_UNINTERRUPTIBLE && !((blocked >> (slot->signal - 1)) & 1u)) {
            slot->waking = 1; /* takes the signal when it leaves the kernel */
            c->waking++;
            return;
        }
        uint32_t sent = AFT_SLOT_SENT;
        if (why != AFT_THREAD_WHY_BLOCKS_SIGNAL &&
            atomic_compare_exchange_strong(&slot->state, &sent, AFT_SLOT_LATE)) {
            c->info.signalled--;
            r->state = state;
            aft_async_status_name(c->proc, (size_t)n, r->name);
            if (why == AFT_THREAD_WHY_ZOMBIE)
                r->why = why;
            else
                aft_async_from_syscall_file(c, r, why);
            return;
        }
    }
    if (!((blocked >> (slot->signal - 1)) & 1u)) return; /* it will answer: not scheduled yet */
    uint32_t sent = AFT_SLOT_SENT;
    if (!atomic_compare_exchange_strong(&slot->state, &sent, AFT_SLOT_LISTED)) return;
    c->info.signalled--;
    if (slot->signal == SIGPROF) c->sigprof_left_pending = 1;
    int signo = slot->signal == SIGPROF
                    ? (capture > 0 && !((blocked >> (capture - 1)) & 1u) ? capture : 0)
                    : aft_async_pick_signal(c, blocked, 0);
    if (signo == 0 || !aft_async_threads_send(c, i, signo, first_signal_ns)) {
        if (atomic_load(&slot->state) == AFT_SLOT_LISTED) {
            aft_async_unread_from_status(c, i);
            aft_async_from_syscall_file(c, r, AFT_THREAD_WHY_BLOCKS_SIGNAL);
        }
    }
}

/* Waits until every signalled thread has answered, or until the deadline. */
static void aft_async_threads_await(aft_thread_capture *c, uint64_t deadline) {
    for (;;) {
        uint32_t answered = atomic_load(&c->answered);
        if (answered >= c->info.signalled) break;
        if (aft_async_now_ns(CLOCK_MONOTONIC) >= deadline) break;
        aft_async_futex_wait_until(&c->answered, answered, deadline);
    }
}

/* A thread that was in uninterruptible sleep and has not answered: still in it, it is listed
 * from /proc now; out of it, it answers yet (its signal was pending), by the deadline. */
static void aft_async_threads_close_waking(aft_thread_capture *c, uint32_t i) {
    aft_capture_slot *slot = &c->slots[i];
    if (!slot->waking || atomic_load(&slot->state) != AFT_SLOT_SENT) return;
    ssize_t n = aft_async_task_file(c, c->records[i].thread_id, "status");
    if (n <= 0 || aft_async_status_state(c->proc, (size_t)n) != 'D') return;
    uint32_t sent = AFT_SLOT_SENT;
    if (!atomic_compare_exchange_strong(&slot->state, &sent, AFT_SLOT_LATE)) return;
    c->info.signalled--;
    c->records[i].state = 'D';
    aft_async_status_name(c->proc, (size_t)n, c->records[i].name);
    aft_async_from_syscall_file(c, &c->records[i], AFT_THREAD_WHY_UNINTERRUPTIBLE);
}

void aft_async_threads_collect(aft_thread_capture *c, int capture, uint64_t first_signal_ns) {
    uint64_t deadline = first_signal_ns + AFT_THREADS_ANSWER_NS;
    c->info.deadline_ns = AFT_THREADS_ANSWER_NS;
    /* The first answers; then the silent threads' masks, and the rest of the answers. */
    aft_async_threads_await(c, aft_async_now_ns(CLOCK_MONOTONIC) + AFT_THREADS_FIRST_WAIT_NS);
    uint32_t count = atomic_load(&c->count);
    c->waking = 0;
    for (uint32_t i = 1; i < count; i++)
        aft_async_threads_retry_blocked(c, i, capture, &first_signal_ns);
    if (c->waking > 0) {
        uint64_t waking_deadline = first_signal_ns + AFT_THREADS_UNINTERRUPTIBLE_NS;
        aft_async_threads_await(c, waking_deadline < deadline ? waking_deadline : deadline);
        for (uint32_t i = 1; i < count; i++) aft_async_threads_close_waking(c, i);
    }
    aft_async_threads_await(c, deadline);
    uint32_t n = atomic_load(&c->count);
    uint64_t filling_deadline = aft_async_now_ns(CLOCK_MONOTONIC) + 2000000ull;
    for (uint32_t i = 1; i < n; i++) {
        aft_capture_slot *slot = &c->slots[i];
        uint32_t expected = AFT_SLOT_SENT;
        if (atomic_compare_exchange_strong(&slot->state, &expected, AFT_SLOT_LATE)) {
            c->info.flags |= AFT_THREADS_DEADLINE_REACHED;
            aft_async_unread_from_status(c, i);
            aft_async_from_syscall_file(c, &c->records[i], AFT_THREAD_WHY_NO_ANSWER);
            continue;
        }
        /* Answering right now: a moment more (2 ms for all such threads together), then the
         * slot is closed under it, and it leaves without answering. */
        while (atomic_load(&slot->state) == AFT_SLOT_FILLING &&
               aft_async_now_ns(CLOCK_MONOTONIC) < filling_deadline) {
            struct timespec us = {.tv_sec = 0, .tv_nsec = 20000};
            aft_sys_nanosleep(&us, NULL);
        }
        uint32_t filling = AFT_SLOT_FILLING;
        if (atomic_compare_exchange_strong(&slot->state, &filling, AFT_SLOT_LATE)) {
            c->info.flags |= AFT_THREADS_DEADLINE_REACHED;
            aft_async_unread_from_status(c, i);
            aft_async_from_syscall_file(c, &c->records[i], AFT_THREAD_WHY_NO_ANSWER);
        }
    }
    c->info.answered = atomic_load(&c->answered);
}
