/*
 * threads_park_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). The paused threads' side of the capture of every thread
 * (threads_capture_async.c): in the capture signal's handler a thread writes its record from its
 * signal frame (registers, floating-point state, thread pointer; its own fault's context when it
 * crashed too), answers, and waits on a futex until released; and the threads that crash while
 * another's crash is written, remembered with their context; and the signal a crash's capture
 * sends (SIGPROF, borrowed, or the capture signal).
 */
#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "threads_internal.h"
#include "watchdog_internal.h"

void aft_async_fill_from_context(aft_thread *r, const void *ucontext, uint32_t source) {
    aft_crash_info regs;
    aft_async_memset(&regs, 0, sizeof(regs));
    aft_async_arch_registers(ucontext, &regs);
    aft_async_memcpy(r->registers, regs.registers, sizeof(r->registers));
    r->register_count = regs.register_count;
    r->pc = regs.pc;
    r->sp = regs.sp;
    r->fp_state_size = aft_async_arch_fp_state(ucontext, r->fp_state, AFT_FP_STATE_CAPACITY);
    r->context_source = source;
    r->why = AFT_THREAD_WHY_NONE;
}

aft_also_crashed *aft_async_also_crashed(uint64_t tid) {
    for (uint32_t i = 0; i < AFT_THREADS_ALSO_CRASHED; i++)
        if (atomic_load(&aft_g_threads.also[i].tid) == tid &&
            atomic_load(&aft_g_threads.also[i].ready))
            return &aft_g_threads.also[i];
    return NULL;
}

AFT_SMALL_STATE aft_lent_thread aft_g_lent_threads[AFT_LENT_THREADS];

static aft_lent_thread *aft_async_lent(uint64_t tid) {
    for (uint32_t i = 0; i < AFT_LENT_THREADS; i++)
        if (atomic_load(&aft_g_lent_threads[i].tid) == tid) return &aft_g_lent_threads[i];
    return NULL;
}

const char *aft_async_lent_name(uint64_t tid) {
    aft_lent_thread *l = aft_async_lent(tid);
    return l != NULL ? l->name : NULL;
}

aft_park_note *aft_async_lent_note(uint64_t tid) {
    aft_lent_thread *l = aft_async_lent(tid);
    return l != NULL ? &l->note : NULL;
}

void aft_async_threads_note_crash(int signo, void *ucontext) {
    uint64_t tid = aft_async_gettid();
    for (uint32_t i = 0; i < AFT_THREADS_ALSO_CRASHED && ucontext != NULL; i++) {
        aft_also_crashed *a = &aft_g_threads.also[i];
        uint64_t free_tid = 0;
        if (!atomic_compare_exchange_strong(&a->tid, &free_tid, tid)) continue;
        /* Claimed first, then filled, then published: no other thread writes this entry. */
        a->ucontext = ucontext;
        a->signo = signo;
        atomic_store(&a->ready, 1);
        return;
    }
}

void aft_async_threads_lived_on(void) {
    aft_thread_capture *c = &aft_g_threads;
    atomic_store(&c->lived_on, atomic_load(&c->released));
    aft_async_futex_wake(&c->lived_on);
}

void aft_async_threads_forget(void) {
    for (uint32_t i = 0; i < AFT_THREADS_ALSO_CRASHED; i++) {
        atomic_store(&aft_g_threads.also[i].ready, 0);
        atomic_store(&aft_g_threads.also[i].tid, 0);
    }
}

/* The name of the calling thread into r; 1 when it is one of Aftermath's own threads (by its
 * name, or lent to the app's code under the app's). */
static int aft_async_own_name(aft_thread *r, uint64_t tid) {
    char name[AFT_THREAD_NAME + 1];
    aft_async_memset(name, 0, sizeof(name));
    const char *lent = aft_async_lent_name(tid);
    if (lent != NULL) {
        aft_async_copy_tail(r->name, AFT_THREAD_NAME, lent, aft_async_strlen(lent, 15));
        return 1;
    }
    if (syscall(SYS_prctl, PR_GET_NAME, name, 0L, 0L, 0L) != 0) name[0] = '\0';
    aft_async_copy_tail(r->name, AFT_THREAD_NAME, name, aft_async_strlen(name, AFT_THREAD_NAME));
    static const char own[] = "aftermath.";
    int ours = 1;
    for (uint32_t k = 0; k < sizeof(own) - 1 && ours; k++) ours = name[k] == own[k];
    return ours;
}

/* What /proc would have said of a thread signalled unread: its state as the signal found it
 * (in a system call: asleep, else running). */
static void aft_async_state_itself(aft_thread *r, const void *ucontext) {
    int64_t nr = -2;
    int in_call = aft_async_arch_in_syscall(ucontext, &nr);
    r->state = in_call ? 'S' : 'R';
    r->syscall_number = in_call ? nr : -1;
}

static int aft_async_threads_park(aft_thread_capture *c, uint32_t gen, void *ucontext) {
    uint64_t tid = aft_async_gettid();
    uint32_t n = atomic_load(&c->count);
    for (uint32_t i = 1; i < n && i < AFT_MAX_THREADS; i++) {
        aft_capture_slot *slot = &c->slots[i];
        if (atomic_load(&slot->tid) != tid) continue;
        uint32_t expected = AFT_SLOT_SENT;
        if (!atomic_compare_exchange_strong(&slot->state, &expected, AFT_SLOT_FILLING))
            return 1; /* closed at the deadline, or not sent: a late answer changes nothing */
        aft_thread *r = &c->records[i];
        if (slot->unread && aft_async_own_name(r, tid)) {
            /* One of Aftermath's (its delivery, its start): listed, not paused, as those known
             * by their ids are. It answers and goes on at once. */
            r->flags |= AFT_THREAD_AFTERMATH;
            r->why = AFT_THREAD_WHY_OWN;
            uint32_t filling = AFT_SLOT_FILLING;
            if (!atomic_compare_exchange_strong(&slot->state, &filling, AFT_SLOT_LISTED)) return 1;
            atomic_fetch_add(&c->left, 1);
            atomic_fetch_add(&c->answered, 1);
            aft_async_futex_wake(&c->answered);
            return 1;
        }
        /* Only a crash's capture: a hang's never takes a crashing thread's frame. */
        aft_also_crashed *also = c->for_hang ? NULL : aft_async_also_crashed(tid);
        if (also != NULL) { /* paused inside its own crash: its fault's context, not ours */
            aft_async_fill_from_context(r, also->ucontext, AFT_THREAD_CONTEXT_CRASH);
            r->flags |= AFT_THREAD_ALSO_CRASHED;
            r->crash_signal = also->signo;
            slot->ucontext = also->ucontext;
        } else {
            aft_async_fill_from_context(r, ucontext, AFT_THREAD_CONTEXT_SIGNAL);
            slot->ucontext = ucontext;
        }
        r->thread_pointer = aft_async_arch_thread_pointer();
        if (slot->unread) aft_async_state_itself(r, ucontext);
        /* Answered, unless the capture closed this slot meanwhile (it no longer waits for us,
         * and the slot may hold another thread by now): then leave without a word. */
        uint32_t filling = AFT_SLOT_FILLING;
        if (!atomic_compare_exchange_strong(&slot->state, &filling, AFT_SLOT_PARKED)) return 1;
        atomic_fetch_add(&c->answered, 1);
        aft_async_futex_wake(&c->answered);
        /* Until released; should the crashing thread never release us, on by ourselves. */
        uint64_t deadline = aft_async_now_ns(CLOCK_MONOTONIC) + AFT_THREADS_PARK_NS;
        for (;;) {
            uint32_t released = atomic_load(&c->released);
            if ((int32_t)(released - gen) >= 0 || aft_async_now_ns(CLOCK_MONOTONIC) >= deadline)
                break;
            /* A hang's pause gives way to a crash: the crash's capture pauses us itself. */
            if (c->for_hang && aft_async_crash_in_progress()) break;
            uint64_t slice = aft_async_now_ns(CLOCK_MONOTONIC) +
                             (c->for_hang ? 10000000ull : AFT_THREADS_PARK_NS);
            aft_async_futex_wait_until(&c->released, released, slice < deadline ? slice : deadline);
        }
        atomic_fetch_add(&c->left, 1);
        aft_async_futex_wake(&c->left);
        /* A crash's pause cut this thread's sleep short (nanosleep, poll, a futex wait with a
         * timeout: never restarted): returning now would wake it early, and let it run ahead
         * (return from main, exit) while the crash takes its course. It stays here instead,
         * until the process dies of the crash, or lives on (the crash withdrawn), or 2 s.
         * Nothing is blocked here that the Swift runtime's backtracer pauses threads with. */
        if (!c->for_hang && aft_async_arch_interrupted_syscall(ucontext)) {
            uint64_t until = aft_async_now_ns(CLOCK_MONOTONIC) + 2 * AFT_THREADS_PARK_NS;
            for (;;) {
                uint32_t lived = atomic_load(&c->lived_on);
                if (lived == gen || aft_async_now_ns(CLOCK_MONOTONIC) >= until) break;
                aft_async_futex_wait_until(&c->lived_on, lived, until);
            }
        }
        return 1;
    }
    return 0;
}

int aft_async_threads_on_signal(int signo, siginfo_t *info, void *ucontext) {
    (void)signo;
    if (info == NULL || info->si_code != SI_TKILL || info->si_pid != getpid()) return 0;
    aft_thread_capture *captures[2] = {&aft_g_threads, &aft_g_hang_threads};
    for (int k = 0; k < 2; k++) {
        uint32_t gen = atomic_load(&captures[k]->generation);
        if ((gen & 1u) && aft_async_threads_park(captures[k], gen, ucontext)) return 1;
    }
    return aft_async_threads_altstack_request(ucontext);
}

/* ---- the signal a crash's capture sends ---- */

static void aft_async_sigprof_handler(int signo, siginfo_t *info, void *ucontext) {
    int saved_errno = errno;
    if (!aft_async_threads_on_signal(signo, info, ucontext)) {
        /* A profiler's own tick while we hold the signal: its handler still gets it. */
        struct sigaction prev = aft_g_sigprof_loan.previous;
        if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction != NULL)
            prev.sa_sigaction(signo, info, ucontext);
        else if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler != SIG_DFL &&
                 prev.sa_handler != SIG_IGN)
            prev.sa_handler(signo);
    }
    errno = saved_errno;
}

/* 1 when SIGPROF's handler is ours; 0 when it is nobody's (its default action); else -1. */
int aft_async_sigprof_owner(void) {
    struct sigaction now;
    if (sigaction(SIGPROF, NULL, &now) != 0) return -1;
    if (now.sa_flags & SA_SIGINFO) return now.sa_sigaction == aft_async_sigprof_handler ? 1 : -1;
    return now.sa_handler == SIG_DFL ? 0 : -1;
}

AFT_SMALL_STATE aft_sigprof_loan aft_g_sigprof_loan;

static uint32_t aft_async_sigprof_bit(const aft_thread_capture *c) {
    return c == &aft_g_threads ? 1u : 2u;
}

/* Installs the captures' handler on SIGPROF; 1 when done, the action it replaced in *before. */
static int aft_async_sigprof_take(struct sigaction *before) {
    struct sigaction ours;
    aft_async_memset(&ours, 0, sizeof(ours));
    ours.sa_sigaction = aft_async_sigprof_handler;
    /* SA_NODEFER: a thread still in this handler can take SIGPROF again, from the other
     * capture or from whoever pauses threads after us (the Swift runtime's backtracer). */
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER;
    sigemptyset(&ours.sa_mask);
    return sigaction(SIGPROF, &ours, before) == 0;
}

void aft_async_sigprof_return(aft_thread_capture *c, int pending) {
    aft_sigprof_loan *loan = &aft_g_sigprof_loan;
    if (!c->sigprof_borrowed) return;
    c->sigprof_borrowed = 0;
    if (pending) atomic_store(&loan->stranded, 1);
    uint32_t mine = aft_async_sigprof_bit(c);
    uint32_t others = atomic_fetch_and(&loan->holders, ~mine) & ~mine;
    /* Only while still ours: a profiler that took it meanwhile keeps it. */
    if (others != 0 || atomic_load(&loan->stranded) || aft_async_sigprof_owner() != 1) return;
    sigaction(SIGPROF, &loan->previous, NULL);
    /* The other capture took it between the count and the restore: ours again, at once. */
    struct sigaction before;
    if (atomic_load(&loan->holders) != 0) (void)aft_async_sigprof_take(&before);
}

/* The signal a thread with this blocked mask can take: the capture signal, else SIGPROF
 * (libdispatch's workers block every asynchronous signal but SIGPROF), else 0. A hang's
 * capture (the app lives on) takes SIGPROF only where nobody handles or ignores it. */
int aft_async_pick_signal(aft_thread_capture *c, uint64_t blocked, int capture) {
    if (capture > 0 && !((blocked >> (capture - 1)) & 1u)) return capture; /* 0: SIGPROF only */
    if ((blocked >> (SIGPROF - 1)) & 1u) return 0;
    if (c->for_hang && !c->sigprof_borrowed && aft_async_sigprof_owner() < 0)
        return 0; /* a live app's SIGPROF stays its own */
    if (!c->sigprof_borrowed) {
        /* Held before it is taken: a capture that gives it back meanwhile leaves it ours. */
        uint32_t mine = aft_async_sigprof_bit(c);
        atomic_fetch_or(&aft_g_sigprof_loan.holders, mine);
        struct sigaction before;
        if (!aft_async_sigprof_take(&before)) {
            atomic_fetch_and(&aft_g_sigprof_loan.holders, ~mine);
            return 0;
        }
        /* Ours already (the other capture's, or left by one with a late answer): the owner's
         * action was saved when it was taken from the owner. */
        if (!((before.sa_flags & SA_SIGINFO) && before.sa_sigaction == aft_async_sigprof_handler))
            aft_g_sigprof_loan.previous = before;
        c->sigprof_borrowed = 1;
        c->info.flags |= AFT_THREADS_SIGPROF_BORROWED;
    }
    return SIGPROF;
}
