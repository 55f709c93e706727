/*
 * unwind_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). The crashing (or blocked) thread's stack, one of two ways.
 *
 * 1. libunwind, within a deadline. It reads unwind tables through dl_iterate_phdr (the
 *    loader's lock) and takes mutexes of its own, so it never runs in the handler. A helper
 *    process that shares our memory (clone(2) with CLONE_VM and CLONE_VFORK, its own stack
 *    and signal dispositions, mapped at the first use) unwinds from the same context into a
 *    buffer mapped with it. Its first act is a timer that sends it SIGKILL at the
 *    deadline: a helper stuck on a lock another thread holds, or faulting on a corrupt stack,
 *    ends alone. Where CLONE_VM is refused (qemu-user accepts it only with the thread flags)
 *    the helper is a copy of the process instead, writing into a shared mapping, and the
 *    handler waits for it with the same deadline. A request goes to the resident helper
 *    (unwind_resident_async.c) when there is one for this process and it is free.
 * 2. Without libunwind's stack, lock free: the frame-pointer walk from the signal context
 *    (unwind_walk_async.c), every read through aft_async_read_memory, so a corrupt chain ends
 *    the walk instead of faulting. The report never waits on a lock longer than the deadline.
 */
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "libunwind_local.h"
#include "shim_internal.h"
#include "unwind_internal.h"
#include "sys_internal.h"

/* ---- the unwinding helper ---- */

AFT_SMALL_STATE _Atomic int aft_g_libunwind_abandoned;
AFT_SMALL_STATE _Atomic int aft_g_libunwind_warm;

/* The helper's side: frames, then the done word. A shared (not private) futex: in the
 * copy-of-the-process mode the word is in a mapping the two processes share. */
static void aft_unwind_finish(aft_unwind_shared *out, uint32_t count, uint32_t truncated) {
    out->count = count;
    out->truncated = truncated;
    atomic_store(&out->done, 1);
    syscall(SYS_futex, (uint32_t *)&out->done, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}

/* Plain loads: only the helper reads this way, where a fault ends the helper alone. */
static int aft_unwind_plain_read(uint64_t address, void *out, size_t size) {
    aft_async_memcpy(out, (const void *)(uintptr_t)address, size);
    return 0;
}

int aft_async_unwind_link_map(uint32_t slot_index, uint64_t *count, uint64_t *hash) {
    if (slot_index >= AFT_UNWIND_SLOTS) return 0;
    aft_unwind_shared *out = aft_g_unwind_slots[slot_index].shared;
    if (out == NULL || !atomic_load(&out->done) || !out->link_map_valid) return 0;
    *count = out->link_count;
    *hash = out->link_hash;
    return 1;
}

/* unw_step from the context, frame by frame. */
static uint32_t aft_unwind_step_all(aft_unwind_slot *slot, uint64_t *frames, uint32_t *truncated) {
    uint32_t n = 0;
    *truncated = 0;
    const aft_libunwind *u = aft_async_libunwind();
    if (u == NULL) return 0; /* not loaded: the requester walks frame pointers */
    unw_cursor_t cursor;
    int flags = slot->context_is_signal ? UNW_INIT_SIGNAL_FRAME : 0;
    if (u->init_local2(&cursor, (unw_context_t *)slot->context, flags) != 0) return 0;
    for (;;) {
        unw_word_t ip = 0;
        if (u->get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
        frames[n++] = aft_async_arch_code_address((uint64_t)ip);
        if (u->step(&cursor) <= 0) break;
        if (n == slot->capacity) {
            *truncated = 1;
            break;
        }
    }
    return n;
}

/* One request, in a helper: the loader's list, then the stack. */
void aft_async_unwind_serve(aft_unwind_slot *slot) {
    atomic_store(&slot->shared->started, 1);
    if (&aft_g_test_fault_in_helper != NULL && aft_g_test_fault_in_helper)
        *(volatile int *)aft_g_test_fault_in_helper = 0;
    /* The loader's list, before libunwind can wait on the loader's lock: one load per library
     * here instead of one read of /proc/self/mem each in the handler. */
    if (slot->wants_link_map)
        slot->shared->link_map_valid = (uint32_t)aft_async_link_map_signature_with(
            aft_unwind_plain_read, &slot->shared->link_count, &slot->shared->link_hash);
    if (slot->link_map_only) {
        aft_unwind_finish(slot->shared, 0, 0);
        return;
    }
    /* unw_step from the context, not libunwind's tracer (unw_backtrace): as fast at a hang's
     * depths, and without the tracer's 256 KiB cache, dirty for good in the resident. */
    uint32_t truncated = 0;
    uint32_t n = aft_unwind_step_all(slot, slot->shared->frames, &truncated);
    aft_unwind_finish(slot->shared, n, truncated);
}

/* ---- a helper's faults ---- */

_Atomic int aft_g_unwind_last_status = -1;

/* Each helper's fault handler runs on a stack of its own: one per slot (a helper of its own),
 * one for the resident. */
static uint8_t aft_g_helper_fault_stacks[AFT_UNWIND_SLOTS + 1][16384] __attribute__((aligned(16)));

/* A fault in libunwind (a corrupt stack, a half-changed list of objects) ends the helper alone,
 * by _exit: never by the signal's default action, whose core dump on kernels before 5.16 kills
 * every process that shares the memory, the app included. */
static void aft_unwind_helper_fault(int signo) {
    syscall(SYS_exit_group, (long)(AFT_UNWIND_HELPER_FAULT_EXIT + signo));
}

/* A helper's signals, whatever the app installed (a helper has its own copy of the
 * dispositions): the crash signals go to aft_unwind_helper_fault on stack_index's stack; with
 * block_all every other signal is blocked (the resident), else none. */
void aft_async_unwind_helper_signals(int block_all, uint32_t stack_index) {
    stack_t alt = {.ss_sp = aft_g_helper_fault_stacks[stack_index],
                   .ss_size = sizeof(aft_g_helper_fault_stacks[stack_index]),
                   .ss_flags = 0};
    syscall(SYS_sigaltstack, &alt, NULL);
    struct sigaction fault;
    aft_async_memset(&fault, 0, sizeof(fault));
    fault.sa_handler = aft_unwind_helper_fault;
    fault.sa_flags = SA_ONSTACK;
    sigfillset(&fault.sa_mask);
    for (int i = 0; i < AFT_SIGNAL_COUNT; i++) sigaction(aft_g_signals[i], &fault, NULL);
    struct sigaction deadline;
    aft_async_memset(&deadline, 0, sizeof(deadline));
    deadline.sa_handler = SIG_DFL;
    sigaction(AFT_UNWIND_DEADLINE_SIGNAL, &deadline, NULL);
    sigset_t mask;
    if (block_all) {
        sigfillset(&mask);
        for (int i = 0; i < AFT_SIGNAL_COUNT; i++) sigdelset(&mask, aft_g_signals[i]);
        sigdelset(&mask, AFT_UNWIND_DEADLINE_SIGNAL);
    } else {
        sigemptyset(&mask);
    }
    sigprocmask(SIG_SETMASK, &mask, NULL);
}

/* Runs in a helper process of its own, never in a signal handler. */
static int aft_unwind_helper_main(void *arg) {
    aft_unwind_slot *slot = arg;
    aft_async_unwind_helper_signals(0, (uint32_t)(slot - aft_g_unwind_slots));
    /* The deadline, enforced on the helper itself: AFT_UNWIND_DEADLINE_SIGNAL then, which ends
     * it outside libunwind's masked sections, and SIGKILL, which no mask blocks, a grace later.
     * Without both timers, no unwinding: the handler waits for this process. */
    if (slot->budget_ns == 0) return 1;
    for (int k = 0; k < 2; k++) {
        struct sigevent at;
        aft_async_memset(&at, 0, sizeof(at));
        at.sigev_notify = SIGEV_SIGNAL;
        at.sigev_signo = k == 0 ? AFT_UNWIND_DEADLINE_SIGNAL : SIGKILL;
        uint64_t ns = slot->budget_ns + (k == 0 ? 0 : AFT_UNWIND_KILL_GRACE_NS);
        struct itimerspec when = {.it_value = {.tv_sec = (time_t)(ns / 1000000000ull),
                                               .tv_nsec = (long)(ns % 1000000000ull)}};
        int timer = -1;
        if (syscall(SYS_timer_create, (long)CLOCK_MONOTONIC, &at, &timer) != 0 ||
            syscall(SYS_timer_settime, (long)timer, 0L, &when, NULL) != 0)
            return 1;
    }
    aft_async_unwind_serve(slot);
    return 0;
}

/* Waits on the helper's done word until deadline_ns (CLOCK_MONOTONIC), or until it exited. */
static int aft_async_wait_helper(aft_unwind_shared *out, pid_t pid, uint64_t deadline_ns,
                                 int *reaped, int *killed) {
    for (;;) {
        if (atomic_load(&out->done)) return 1;
        int status = 0;
        if (aft_sys_waitpid(pid, &status, __WALL | WNOHANG) == pid) {
            *reaped = 1;
            atomic_store(&aft_g_unwind_last_status, status);
            /* Its own deadline timers (or ours); another signal: it faulted. */
            *killed = WIFSIGNALED(status) && (WTERMSIG(status) == SIGKILL ||
                                              WTERMSIG(status) == AFT_UNWIND_DEADLINE_SIGNAL);
            return atomic_load(&out->done) != 0;
        }
        uint64_t now = aft_async_now_ns(CLOCK_MONOTONIC);
        if (now >= deadline_ns) return 0;
        /* Wake at least every 5 ms to notice a helper that died without finishing. */
        uint64_t until = deadline_ns - now > 5000000ull ? now + 5000000ull : deadline_ns;
        struct timespec ts = {.tv_sec = (time_t)(until / 1000000000ull),
                              .tv_nsec = (long)(until % 1000000000ull)};
        syscall(SYS_futex, (uint32_t *)&out->done, FUTEX_WAIT_BITSET, 0u, &ts, NULL,
                FUTEX_BITSET_MATCH_ANY);
    }
}

/* Starts libunwind's helper for slot from ucontext (NULL: from here); its pid, or -1. */
static pid_t aft_async_helper_start(uint32_t slot_index, void *ucontext, uint32_t capacity,
                                    uint64_t deadline_ns) {
    AFT_SMALL_STATE static unw_context_t own_contexts[AFT_UNWIND_SLOTS];
    if (slot_index >= AFT_UNWIND_SLOTS) return -1;
    aft_unwind_slot *slot = &aft_g_unwind_slots[slot_index];
    aft_unwind_shared *out = slot->shared;
    if (out == NULL || slot->stack_top == NULL) return -1;
    out->count = 0; /* done and link_map_valid: cleared by aft_async_unwind_context */
    out->truncated = 0;
    atomic_store(&out->started, 0);
    slot->wants_link_map = slot_index == AFT_UNWIND_SLOT_CRASH;
    slot->capacity = capacity < AFT_MAX_FRAMES ? capacity : AFT_MAX_FRAMES;
    uint64_t now = aft_async_now_ns(CLOCK_MONOTONIC);
    slot->budget_ns = deadline_ns > now ? deadline_ns - now : 0;
    slot->context = ucontext;
    slot->context_is_signal = ucontext != NULL;
    if (ucontext == NULL) {
        const aft_libunwind *u = aft_async_libunwind();
        if (u == NULL || AFT_UNW_GETCONTEXT(u, &own_contexts[slot_index]) != 0) return -1;
        slot->context = &own_contexts[slot_index];
    }
    slot->resident = 0;
    pid_t resident = -1;
    /* Not from our own context: the frame it was taken in ends before the resident reads it
     * (a helper of its own runs while this thread waits, CLONE_VFORK). */
    if (ucontext != NULL && aft_async_resident_take(slot, &resident)) return resident;
    /* A helper of its own. No exit signal:
     * the app sees no SIGCHLD, and its waitpid(-1) does not see the helper. CLONE_VFORK: this
     * thread sleeps until the helper has ended (its timer bounds that), so the helper runs at
     * once on this CPU; emulators that turn it into a copy of the process return at once. */
    void *stack = slot->stack_top;
    /* CLONE_FILES: descriptors libunwind opens (its memory-validation pipe, whose numbers it
     * keeps in the memory we share) are then ours too. */
    slot->shares_memory = 1;
    pid_t pid = clone(aft_unwind_helper_main, stack,
                      CLONE_VM | CLONE_VFORK | CLONE_FILES | CLONE_UNTRACED, slot);
    if (pid < 0) slot->shares_memory = 0;
    if (pid < 0) pid = clone(aft_unwind_helper_main, stack, CLONE_UNTRACED, slot);
    /* qemu-user refuses both (EINVAL): a copy of the process there must have SIGCHLD as its
     * exit signal and no CLONE_UNTRACED. A kernel never refuses them, so only an emulator
     * comes here; the app may then see one SIGCHLD for the helper. */
    if (pid < 0 && errno == EINVAL) pid = clone(aft_unwind_helper_main, stack, SIGCHLD, slot);
    return pid;
}

/* Waits for the helper until deadline_ns, kills it after that, reaps it. Returns the frame
 * count and points *frames at them (the slot's shared buffer), or 0 with *status saying why
 * not. */
static uint32_t aft_async_helper_finish(uint32_t slot_index, pid_t pid, uint64_t deadline_ns,
                                        const uint64_t **frames, uint32_t *truncated,
                                        uint32_t *status) {
    *frames = NULL;
    *truncated = 0;
    *status = AFT_UNWIND_STATUS_HELPER_FAILED;
    if (pid < 0) return 0;
    aft_unwind_slot *slot = &aft_g_unwind_slots[slot_index];
    aft_unwind_shared *out = slot->shared;
    int reaped = 0, killed = 0;
    int done = aft_async_wait_helper(out, pid, deadline_ns, &reaped, &killed);
    if (!reaped && done && !slot->resident) {
        /* It has finished and is exiting: reap it. */
        int st = 0;
        while (aft_sys_waitpid(pid, &st, __WALL) < 0 && errno == EINTR) {
        }
        atomic_store(&aft_g_unwind_last_status, st);
    } else if (!reaped && !done) {
        /* The deadline signal, then SIGKILL once the grace is over (see unwind_internal.h).
         * Reaped within 200 ms more (a helper in uninterruptible sleep is left behind). */
        aft_sys_kill(pid, AFT_UNWIND_DEADLINE_SIGNAL);
        killed = 1;
        uint64_t now = aft_async_now_ns(CLOCK_MONOTONIC);
        uint64_t kill_at = now + AFT_UNWIND_KILL_GRACE_NS, give_up = kill_at + 200000000ull;
        struct timespec pause = {.tv_sec = 0, .tv_nsec = 50 * 1000};
        for (int sent = 0; now < give_up; now = aft_async_now_ns(CLOCK_MONOTONIC)) {
            if (!sent && now >= kill_at) {
                (void)aft_sys_kill(pid, SIGKILL);
                sent = 1;
            }
            int st = 0;
            pid_t r = aft_sys_waitpid(pid, &st, __WALL | WNOHANG);
            if (r == pid) atomic_store(&aft_g_unwind_last_status, st);
            if (r == pid || (r < 0 && errno != EINTR)) break;
            aft_sys_nanosleep(&pause, NULL);
        }
    }
    if (slot->resident) {
        /* Dead or killed: later requests start helpers of their own. */
        if (!done || reaped) atomic_store(&aft_g_unwind_resident.pid, 0);
        atomic_store(&aft_g_unwind_resident.busy, 0);
    }
    if (!done) {
        *status = reaped && !killed ? AFT_UNWIND_STATUS_HELPER_FAILED : AFT_UNWIND_STATUS_TIMED_OUT;
        /* Ended while it shared our memory: by SIGKILL it may have held one of libunwind's
         * locks; by SIGALRM, outside them, it may still have been re-making libunwind's
         * memory-validation pipe, whose descriptors are ours too. */
        if (*status == AFT_UNWIND_STATUS_TIMED_OUT && slot->shares_memory &&
            atomic_load(&out->started))
            atomic_store(&aft_g_libunwind_abandoned, 1);
        return 0;
    }
    *status = AFT_UNWIND_STATUS_COMPLETE;
    if (aft_async_libunwind() != NULL) atomic_store(&aft_g_libunwind_warm, 1);
    *truncated = out->truncated;
    *frames = out->frames;
    return out->count <= slot->capacity ? out->count : slot->capacity;
}

void aft_async_unwind_warm_up(void) {
    if (atomic_load(&aft_g_libunwind_warm) || atomic_load(&aft_g_libunwind_abandoned)) return;
    /* Not loaded yet: the pinger loads it (the loader's lock may be the hung thread's). */
    if (aft_async_libunwind_request(AFT_LIBUNWIND_LOAD_WAIT_NS) == NULL) return;
    uint64_t frames[8];
    uint32_t unwinder = 0, truncated = 0, status = 0;
    (void)aft_async_unwind_context(NULL, frames, 8, AFT_UNWIND_SLOT_CAPTURE,
                                   AFT_UNWIND_COLD_BUDGET_NS, &unwinder, &truncated, &status);
}

uint32_t aft_async_unwind_context(void *ucontext, uint64_t *frames, uint32_t capacity,
                                  uint32_t slot, uint64_t budget_ns, uint32_t *unwinder,
                                  uint32_t *truncated, uint32_t *status) {
    *truncated = 0;
    *unwinder = AFT_UNWINDER_NONE;
    *status = AFT_UNWIND_STATUS_HELPER_FAILED;
    if (capacity == 0 || slot >= AFT_UNWIND_SLOTS) return 0;
    /* A hang's first capture: libunwind's set-up too. Not a crash's: its helper may be blocked
     * for good (the loader's lock held by a thread the crash stopped), and the process must
     * die as soon as it would have. */
    if (slot == AFT_UNWIND_SLOT_CAPTURE && !atomic_load(&aft_g_libunwind_warm) &&
        budget_ns < AFT_UNWIND_COLD_BUDGET_NS)
        budget_ns = AFT_UNWIND_COLD_BUDGET_NS;
    uint64_t deadline = aft_async_now_ns(CLOCK_MONOTONIC) + budget_ns;
    (void)aft_async_unwind_helpers_ready(); /* none: the frame-pointer stack below */
    aft_unwind_shared *answer = aft_g_unwind_slots[slot].shared;
    if (answer != NULL) { /* no earlier answer may pass for this request's */
        atomic_store(&answer->done, 0);
        answer->link_map_valid = 0;
    }

    /* libunwind's stack, when it comes within the budget: it reads unwind tables, so it also
     * finds the frames of code built without frame pointers. The helper cannot change the
     * crashed thread's stack, so the walk below reads the same stack after it. */
    const uint64_t *better = NULL;
    uint32_t better_truncated = 0, m = 0;
    if (atomic_load(&aft_g_libunwind_abandoned)) {
        *status = AFT_UNWIND_STATUS_SKIPPED;
    } else {
        pid_t helper = aft_async_helper_start(slot, ucontext, capacity, deadline);
        m = aft_async_helper_finish(slot, helper, deadline, &better, &better_truncated, status);
    }
    if (better != NULL && m >= 2) {
        aft_async_memcpy(frames, better, (size_t)m * sizeof(uint64_t));
        *truncated = better_truncated;
        *unwinder = AFT_UNWINDER_LIBUNWIND;
        return m;
    }

    /* Without it, lock free: frame pointers from the signal context (without one, from here). */
    uint64_t pc = 0, fp = 0;
    if (ucontext != NULL) {
        aft_async_arch_pc_fp(ucontext, &pc, &fp);
    } else {
        fp = (uint64_t)(uintptr_t)__builtin_frame_address(0);
    }
    uint32_t n = aft_async_frame_pointer_walk(&aft_g_stack_windows[slot], pc, fp, frames, capacity,
                                              truncated);
    *unwinder = n > 1    ? AFT_UNWINDER_FRAME_POINTER
                : n == 1 ? AFT_UNWINDER_PC_ONLY
                         : AFT_UNWINDER_NONE;
    return n;
}

int aft_async_unwind_link_map_only(void *ucontext, uint64_t budget_ns, uint64_t *count,
                                   uint64_t *hash) {
    aft_unwind_slot *slot = &aft_g_unwind_slots[AFT_UNWIND_SLOT_CRASH];
    if (ucontext == NULL || !aft_async_unwind_helpers_ready() || slot->shared == NULL) return 0;
    atomic_store(&slot->shared->done, 0);
    slot->shared->link_map_valid = 0;
    uint64_t deadline = aft_async_now_ns(CLOCK_MONOTONIC) + budget_ns;
    slot->link_map_only = 1;
    pid_t helper = aft_async_helper_start(AFT_UNWIND_SLOT_CRASH, ucontext, 1, deadline);
    const uint64_t *frames = NULL;
    uint32_t truncated = 0, status = 0;
    (void)aft_async_helper_finish(AFT_UNWIND_SLOT_CRASH, helper, deadline, &frames, &truncated,
                                  &status);
    slot->link_map_only = 0;
    return aft_async_unwind_link_map(AFT_UNWIND_SLOT_CRASH, count, hash);
}
