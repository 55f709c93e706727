/*
 * threads_record_async.c: CRASH-TIME CODE, under the crash-time contract of
 * CSignalShim/README.md (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift;
 * checked by AsyncSafetyTests). The capture of every thread, once the threads are paused
 * (threads_capture_async.c): their stacks unwound and their stack memory copied, then their
 * release. Also the answer to an alternate-stack request, which gives a thread that existed
 * before start an alternate stack from its own signal handler.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <time.h>
#include <unistd.h>

#include "threads_internal.h"
#include "watchdog_internal.h"

aft_altstack_requests aft_g_altstack_requests;

int aft_async_threads_altstack_request(void *ucontext) {
    aft_altstack_requests *q = &aft_g_altstack_requests;
    if (!atomic_load(&q->open) || ucontext == NULL) return 0;
    uint64_t tid = aft_async_gettid();
    uint32_t n = atomic_load(&q->count);
    for (uint32_t i = 0; i < n && i < AFT_ALTSTACK_REQUESTS; i++) {
        aft_altstack_request *r = &q->requests[i];
        if (atomic_load(&r->tid) != tid) continue;
        uint32_t pending = AFT_ALTSTACK_PENDING;
        if (!atomic_compare_exchange_strong(&r->state, &pending, AFT_ALTSTACK_ANSWERING)) return 1;
        /* The return from this handler (sigreturn) restores the alternate stack its context
         * holds: the new one goes there, and takes effect as the handler returns. */
        ucontext_t *uc = ucontext;
        uint32_t outcome = AFT_ALTSTACK_HAD_ONE;
        if (uc->uc_stack.ss_flags & SS_DISABLE) {
            uc->uc_stack.ss_sp = r->base;
            uc->uc_stack.ss_size = r->size;
            uc->uc_stack.ss_flags = 0;
            outcome = AFT_ALTSTACK_GIVEN;
        }
        atomic_store(&r->state, outcome);
        aft_async_futex_wake(&r->state);
        return 1;
    }
    return 0;
}

/* A context of a thread the kernel gave sp and pc for, its frame pointer the record of its first
 * function that keeps one (by the unwind tables, else the first record above sp), and its
 * registers as the readers of a minidump (and the next launch) unwind them. */
static void *aft_async_syscall_context(aft_thread_capture *c, aft_thread *r) {
    int by_tables = 0;
    void *uc = aft_async_arch_synthesize_context(c->synthetic, sizeof(c->synthetic), r->pc, r->sp,
                                                 c->scan, &by_tables);
    if (by_tables) r->flags |= AFT_THREAD_FP_FROM_TABLES;
    if (uc != NULL) {
        aft_crash_info regs;
        aft_async_memset(&regs, 0, sizeof(regs));
        aft_async_arch_registers(uc, &regs);
        aft_async_memcpy(r->registers, regs.registers, sizeof(r->registers));
        r->register_count = regs.register_count;
    }
    return uc;
}

/* The stack of a paused thread, or of one the kernel gave sp and pc for. */
static void aft_async_unwind_thread(aft_thread_capture *c, uint32_t index, uint64_t deadline_ns) {
    aft_capture_slot *slot = &c->slots[index];
    aft_thread *r = &c->records[index];
    uint64_t *frames = c->frames + c->frame_count;
    uint32_t room = AFT_THREADS_FRAME_CAPACITY - c->frame_count;
    uint32_t capacity = room < AFT_THREAD_MAX_FRAMES ? room : AFT_THREAD_MAX_FRAMES;
    uint32_t n = 0, unwinder = AFT_UNWINDER_NONE, truncated = 0, status = AFT_UNWIND_STATUS_SKIPPED;
    uint32_t state = atomic_load(&slot->state);
    if (capacity == 0) {
        /* no room left */
    } else if (c->for_hang &&
               (state == AFT_SLOT_PARKED || r->context_source == AFT_THREAD_CONTEXT_SYSCALL)) {
        /* A hang's: frame pointers only, on a window of its own. libunwind's helper would wait
         * on a lock a paused thread may hold (the loader's), and a helper killed at its
         * deadline would take libunwind from every later crash. */
        uint64_t pc = r->pc, fp = 0;
        /* A paused thread in a system call (a lock's wait) is in libc, which keeps no frame
         * record: from its sp, as a thread the kernel gave sp and pc for (the unwind tables,
         * else the first record above sp, which also fills c->scan for the walk). */
        int from_sp = r->sp != 0 && (state != AFT_SLOT_PARKED || r->syscall_number >= 0);
        if (from_sp) {
            fp = aft_async_frame_record_above(r->sp, c->scan);
            n = aft_async_walk_from_sp(&c->window, pc, r->sp, fp, c->scan, frames, capacity,
                                       &truncated);
        } else {
            if (slot->ucontext != NULL) aft_async_arch_pc_fp(slot->ucontext, &pc, &fp);
            n = aft_async_frame_pointer_walk(&c->window, pc, fp, frames, capacity, &truncated);
        }
        unwinder = n > 1    ? AFT_UNWINDER_FRAME_POINTER
                   : n == 1 ? AFT_UNWINDER_PC_ONLY
                            : AFT_UNWINDER_NONE;
    } else if ((r->flags & AFT_THREAD_AFTERMATH) && r->pc != 0) {
        frames[0] = r->pc; /* one of ours, paused (it named itself): where it was is enough */
        n = 1;
        unwinder = AFT_UNWINDER_PC_ONLY;
    } else if (state == AFT_SLOT_PARKED && slot->ucontext != NULL) {
        uint64_t now = aft_async_now_ns(CLOCK_MONOTONIC);
        uint64_t budget = deadline_ns > now ? deadline_ns - now : 0;
        if (budget > AFT_THREADS_UNWIND_EACH_NS) budget = AFT_THREADS_UNWIND_EACH_NS;
        if (budget >= 1000000ull && !atomic_load(&aft_g_libunwind_abandoned)) {
            n = aft_async_unwind_context(slot->ucontext, frames, capacity, c->unwind_slot, budget,
                                         &unwinder, &truncated, &status);
        } else {
            n = aft_async_unwind_frame_pointers(slot->ucontext, frames, capacity, c->unwind_slot,
                                                &unwinder, &truncated);
        }
    } else if (r->context_source == AFT_THREAD_CONTEXT_SYSCALL && r->pc != 0 &&
               (r->flags & AFT_THREAD_AFTERMATH)) {
        frames[0] = r->pc; /* one of ours: where it waits is enough */
        n = 1;
        unwinder = AFT_UNWINDER_PC_ONLY;
    } else if (r->context_source == AFT_THREAD_CONTEXT_SYSCALL && r->pc != 0) {
        /* Only sp and pc: the unwind tables still find its callers (a thread in a system call
         * is in libc, whose tables say where each frame keeps its return address). */
        uint64_t now = aft_async_now_ns(CLOCK_MONOTONIC);
        uint64_t budget = deadline_ns > now ? deadline_ns - now : 0;
        if (budget > AFT_THREADS_UNWIND_EACH_NS) budget = AFT_THREADS_UNWIND_EACH_NS;
        void *uc = aft_async_syscall_context(c, r);
        if (uc != NULL && budget >= 1000000ull && !atomic_load(&aft_g_libunwind_abandoned))
            n = aft_async_unwind_context(uc, frames, capacity, c->unwind_slot, budget, &unwinder,
                                         &truncated, &status);
        if (n < 2 && uc != NULL) {
            /* Past the budget, or without libunwind: the walk from sp, by the unwind tables up
             * to the first frame record (the frame pointer alone would skip the frames below
             * it), then frame pointers. */
            uint64_t upc = 0, fp = 0;
            aft_async_arch_pc_fp(uc, &upc, &fp);
            n = aft_async_walk_from_sp(&c->window, r->pc, r->sp, fp, c->scan, frames, capacity,
                                       &truncated);
            unwinder = n > 1 ? AFT_UNWINDER_FRAME_POINTER : AFT_UNWINDER_NONE;
        }
        if (n < 2) {
            frames[0] = r->pc;
            n = 1;
            unwinder = AFT_UNWINDER_PC_ONLY;
            truncated = 0;
        }
    }
    r->frame_count = n;
    r->frames_truncated = truncated;
    r->unwinder = unwinder;
    r->unwind_status = status;
    c->frame_count += n;
}

/* Opens a capture whose first slot is the calling thread's. */
static void aft_async_capture_open(aft_thread_capture *c, uint64_t self_tid) {
    aft_async_memset(&c->info, 0, sizeof(c->info));
    c->frame_count = 0;
    c->swift_async.count = 0;
    c->sigprof_borrowed = 0;
    c->sigprof_left_pending = 0;
    c->stack_in_place = 0;
    atomic_store(&c->answered, 0);
    atomic_store(&c->left, 0);
    atomic_store(&c->count, 0);
    atomic_store(&c->slots[0].tid, self_tid);
    c->slots[0].signal = 0;
    atomic_store(&c->slots[0].state, AFT_SLOT_LISTED);
    atomic_store(&c->count, 1);
    c->info.seen = 1;
    uint32_t gen = atomic_load(&c->generation);
    atomic_store(&c->generation, (gen | 1u) + 2u); /* odd: open, and not the last capture's */
}

int aft_async_capture_signal(aft_thread_capture *c) {
    if (!c->capture_checked) {
        c->capture_checked = 1;
        int capture = atomic_load(&aft_g_thread_capture_signal);
        struct sigaction current;
        if (capture > 0 &&
            (sigaction(capture, NULL, &current) != 0 || !(current.sa_flags & SA_SIGINFO) ||
             current.sa_sigaction != aft_async_watchdog_capture_handler))
            capture = 0;
        c->info.capture_signal = capture > 0 ? (uint32_t)capture : 0;
    }
    return (int)c->info.capture_signal;
}

/* Lists, signals and collects every other thread, then unwinds them and copies their stacks. */
static void aft_async_capture_run(aft_thread_capture *c, uint64_t begin) {
    c->capture_checked = 0;
    c->info.capture_signal = 0;
    uint64_t first_signal = 0;
    for (uint32_t round = 0; round < AFT_THREADS_ROUNDS; round++) {
        c->info.rounds = round + 1;
        /* Again only while threads are being paused: a thread created meanwhile is listed. */
        if (aft_async_threads_list(c, &first_signal) == 0 || first_signal == 0) break;
    }
    if (first_signal != 0) aft_async_threads_collect(c, aft_async_capture_signal(c), first_signal);
    uint64_t collected = aft_async_now_ns(CLOCK_MONOTONIC);
    c->info.capture_ns = collected - begin;

    /* Drop the threads that ended (and a hang's capturer); keep the order of the rest. */
    uint32_t count = atomic_load(&c->count), kept = c->for_hang ? 0 : 1;
    for (uint32_t i = 1; i < count; i++) {
        if (atomic_load(&c->slots[i].state) == AFT_SLOT_EXITED) continue;
        if (kept != i) {
            aft_async_memcpy(&c->records[kept], &c->records[i], sizeof(aft_thread));
            c->slots[kept].ucontext = c->slots[i].ucontext;
            c->slots[kept].signal = c->slots[i].signal;
            atomic_store(&c->slots[kept].state, atomic_load(&c->slots[i].state));
            atomic_store(&c->slots[kept].tid, atomic_load(&c->slots[i].tid));
        }
        kept++;
    }
    atomic_store(&c->count, kept);
    c->info.recorded = kept;

    /* The stacks first: whether a thread's whole stack is in the file decides who unwinds it. */
    uint64_t used = 0;
    c->mappings_read = 0;
    c->mapping_count = 0;
    for (uint32_t i = 0; i < kept && !c->for_hang; i++) aft_async_copy_stack(c, i, &used);
    c->info.stack_bytes = (uint32_t)used;
    uint64_t unwind_deadline = collected + AFT_THREADS_UNWIND_NS;
    for (uint32_t i = c->for_hang ? 0 : 1; i < kept; i++) {
        aft_thread *known = &c->records[i];
        int from_syscall = known->context_source == AFT_THREAD_CONTEXT_SYSCALL;
        if (aft_async_thread_unwind_deferrable(c, i) &&
            (!from_syscall || aft_async_syscall_context(c, known) != NULL)) {
            aft_thread *r = &c->records[i];
            if (c->frame_count < AFT_THREADS_FRAME_CAPACITY) {
                c->frames[c->frame_count++] = aft_async_arch_code_address(r->pc);
                r->frame_count = 1;
            }
            r->unwinder = AFT_UNWINDER_DEFERRED;
            r->unwind_status = AFT_UNWIND_STATUS_COMPLETE;
        } else {
            aft_async_unwind_thread(c, i, unwind_deadline);
        }
        aft_async_swift_chain_of_record(&c->swift_async, &c->records[i]); /* while it waits */
    }
    c->info.unwind_ns = aft_async_now_ns(CLOCK_MONOTONIC) - collected;
}

void aft_async_threads_capture(const aft_crash_info *ci, const void *ucontext,
                               const uint64_t *frames, uint32_t frame_count, uint32_t truncated,
                               int spare_sleepers, int defer_unwinding) {
    aft_thread_capture *c = &aft_g_threads;
    c->spare_sleepers = spare_sleepers;
    c->defer_unwinding = defer_unwinding;
    uint64_t begin = aft_async_now_ns(CLOCK_MONOTONIC);
    aft_async_capture_open(c, ci->thread_id);
    /* The crashing thread first, from its own fault. */
    aft_thread *r = &c->records[0];
    aft_async_memset(r, 0, sizeof(*r));
    r->thread_id = ci->thread_id;
    aft_async_memcpy(r->name, ci->thread_name, sizeof(r->name));
    r->flags = AFT_THREAD_CRASHED | (ci->is_main_thread ? AFT_THREAD_MAIN : 0);
    r->state = 'R';
    r->syscall_number = -2;
    if (ucontext != NULL) aft_async_fill_from_context(r, ucontext, AFT_THREAD_CONTEXT_CRASH);
    r->thread_pointer = aft_async_arch_thread_pointer();
    r->unwinder = ci->unwinder;
    r->unwind_status = ci->unwind_status;
    uint32_t n = frame_count < AFT_MAX_FRAMES ? frame_count : AFT_MAX_FRAMES;
    aft_async_memcpy(c->frames, frames, (size_t)n * sizeof(uint64_t));
    r->frame_count = n;
    r->frames_truncated = truncated;
    c->frame_count = n;
    aft_async_capture_run(c, begin);
}

void aft_async_threads_capture_for_hang(uint64_t watched_tid, int pool) {
    aft_thread_capture *c = &aft_g_hang_threads;
    c->for_hang = 1;
    c->for_pool = pool;
    c->unwind_slot = AFT_UNWIND_SLOT_CAPTURE;
    uint64_t begin = aft_async_now_ns(CLOCK_MONOTONIC);
    c->skip_tid = watched_tid;
    c->pid = (uint64_t)getpid();
    aft_async_capture_open(c, aft_async_gettid());
    aft_async_capture_run(c, begin);
}

void aft_async_threads_release(int wait) {
    aft_async_threads_release_capture(&aft_g_threads, wait);
}

void aft_async_threads_release_capture(aft_thread_capture *c, int wait) {
    uint32_t gen = atomic_load(&c->generation);
    if (!(gen & 1u)) return;
    atomic_store(&c->released, gen);
    /* A wake only where a thread was sent a signal: none else waits on the word. */
    uint32_t count = atomic_load(&c->count);
    int sent = 0;
    for (uint32_t i = 0; i < count && !sent; i++) sent = c->slots[i].signal != 0;
    if (sent) aft_async_futex_wake(&c->released);
    atomic_store(&c->generation, gen + 1u); /* closed: a late signal finds nothing to answer */
    uint64_t deadline = aft_async_now_ns(CLOCK_MONOTONIC) + 20ull * 1000 * 1000;
    while (wait) {
        uint32_t left = atomic_load(&c->left);
        if (left >= atomic_load(&c->answered) || aft_async_now_ns(CLOCK_MONOTONIC) >= deadline)
            break;
        aft_async_futex_wait_until(&c->left, left, deadline);
    }
    /* SIGPROF back to its owner, unless a thread we sent it to never answered: it may still be
     * pending there, and its default action would end the process. */
    if (c->sigprof_borrowed) {
        int pending = c->sigprof_left_pending;
        uint32_t n = atomic_load(&c->count);
        for (uint32_t i = 1; i < n; i++)
            if (c->slots[i].signal == SIGPROF && atomic_load(&c->slots[i].state) == AFT_SLOT_LATE)
                pending = 1;
        aft_async_sigprof_return(c, pending);
    }
}
