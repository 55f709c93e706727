/*
 * unwind_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). The crashing (or blocked) thread's stack, in two steps.
 *
 * 1. Lock free, always: the frame-pointer walk from the signal context, every read through
 *    aft_async_read_memory, so a corrupt chain ends the walk instead of faulting.
 * 2. Better, within a deadline: libunwind reads unwind tables through dl_iterate_phdr (the
 *    loader's lock) and takes mutexes of its own, so it never runs in the handler. A helper
 *    process that shares our memory (clone(2) with CLONE_VM, its own stack and signal
 *    dispositions, prepared at install) unwinds from the same context into a buffer prepared
 *    at install. The handler waits for it at most its deadline, then kills it: a helper stuck
 *    on a lock another thread holds, or faulting on a corrupt stack, ends alone, and the
 *    frame-pointer stack stands. Where CLONE_VM is refused (qemu-user accepts it only with
 *    the thread flags) the helper is a copy of the process instead, writing into a shared
 *    mapping.
 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "shim_internal.h"

uint32_t aft_async_frame_pointer_walk(uint64_t pc, uint64_t fp, uint64_t *frames, uint32_t capacity,
                                      uint32_t *truncated) {
    uint32_t n = 0;
    if (capacity == 0) return 0;
    if (pc != 0) frames[n++] = pc;
    while (fp != 0 && (fp & 7) == 0) {
        uint64_t pair[2]; /* saved fp, return address */
        if (aft_async_read_memory(fp, pair, sizeof(pair)) != 0) break;
        if (pair[1] == 0) break;
        if (n == capacity) {
            if (truncated) *truncated = 1;
            break;
        }
        frames[n++] = aft_async_arch_code_address(pair[1]);
        if (pair[0] <= fp) break; /* stacks grow down: the chain must go up */
        fp = pair[0];
    }
    return n;
}

/* ---- the unwinding helper ---- */

/* Runs in the helper process, never in a signal handler. */
static int aft_unwind_helper_main(void *arg) {
    aft_unwind_slot *slot = arg;
    aft_unwind_shared *out = slot->shared;
    /* A fault in libunwind ends this helper alone, by the default action, whatever the app
     * installed: the helper has its own copy of the dispositions. */
    struct sigaction dfl;
    aft_async_memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int i = 0; i < AFT_SIGNAL_COUNT; i++) sigaction(aft_g_signals[i], &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    uint32_t n = 0, truncated = 0;
    unw_cursor_t cursor;
    int flags = slot->context_is_signal ? UNW_INIT_SIGNAL_FRAME : 0;
    if (unw_init_local2(&cursor, (unw_context_t *)slot->context, flags) == 0) {
        for (;;) {
            unw_word_t ip = 0;
            if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
            out->frames[n++] = aft_async_arch_code_address((uint64_t)ip);
            if (unw_step(&cursor) <= 0) break;
            if (n == slot->capacity) {
                truncated = 1;
                break;
            }
        }
    }
    out->count = n;
    out->truncated = truncated;
    atomic_store(&out->done, 1);
    /* Shared (not private) futex: in the copy-of-the-process mode the word is in a mapping
     * the two processes share. */
    syscall(SYS_futex, (uint32_t *)&out->done, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
    return 0;
}

/* Waits on the helper's done word until deadline_ns (CLOCK_MONOTONIC), or until it exited. */
static int aft_async_wait_helper(aft_unwind_shared *out, pid_t pid, uint64_t deadline_ns,
                                 int *reaped) {
    for (;;) {
        if (atomic_load(&out->done)) return 1;
        int status = 0;
        if (waitpid(pid, &status, __WALL | WNOHANG) == pid) {
            *reaped = 1;
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

/* Runs libunwind in the helper from ucontext (NULL: from here) within budget_ns. Returns the
 * frame count and points *frames at them (the slot's shared buffer), or 0 with *status
 * saying why not. */
static uint32_t aft_async_unwind_isolated(uint32_t slot_index, void *ucontext, uint32_t capacity,
                                          uint64_t budget_ns, const uint64_t **frames,
                                          uint32_t *truncated, uint32_t *status) {
    static unw_context_t own_contexts[AFT_UNWIND_SLOTS];
    *truncated = 0;
    *frames = NULL;
    *status = AFT_UNWIND_STATUS_HELPER_FAILED;
    if (slot_index >= AFT_UNWIND_SLOTS) return 0;
    aft_unwind_slot *slot = &aft_g_unwind_slots[slot_index];
    aft_unwind_shared *out = slot->shared;
    if (out == NULL || slot->stack_top == NULL) return 0;
    atomic_store(&out->done, 0);
    out->count = 0;
    out->truncated = 0;
    slot->capacity = capacity < AFT_MAX_FRAMES ? capacity : AFT_MAX_FRAMES;
    slot->context = ucontext;
    slot->context_is_signal = ucontext != NULL;
    if (ucontext == NULL) {
        unw_getcontext(&own_contexts[slot_index]);
        slot->context = &own_contexts[slot_index];
    }

    /* No exit signal: the app sees no SIGCHLD, and its waitpid(-1) does not see the helper. */
    pid_t pid = clone(aft_unwind_helper_main, slot->stack_top, CLONE_VM | CLONE_UNTRACED, slot);
    if (pid < 0) pid = clone(aft_unwind_helper_main, slot->stack_top, CLONE_UNTRACED, slot);
    if (pid < 0) return 0;
    int reaped = 0;
    int done =
        aft_async_wait_helper(out, pid, aft_async_now_ns(CLOCK_MONOTONIC) + budget_ns, &reaped);
    if (!reaped) {
        if (!done) kill(pid, SIGKILL);
        /* Reap it (bounded: a helper in uninterruptible sleep is left behind). */
        struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000 * 1000};
        for (int i = 0; i < 200; i++) {
            int st = 0;
            pid_t r = waitpid(pid, &st, __WALL | WNOHANG);
            if (r == pid || (r < 0 && errno != EINTR)) break;
            nanosleep(&ms, NULL);
        }
    }
    if (!done) {
        *status = reaped ? AFT_UNWIND_STATUS_HELPER_FAILED : AFT_UNWIND_STATUS_TIMED_OUT;
        return 0;
    }
    *status = AFT_UNWIND_STATUS_COMPLETE;
    *truncated = out->truncated;
    *frames = out->frames;
    return out->count <= slot->capacity ? out->count : slot->capacity;
}

uint32_t aft_async_unwind_context(void *ucontext, uint64_t *frames, uint32_t capacity,
                                  uint32_t slot, uint64_t budget_ns, uint32_t *unwinder,
                                  uint32_t *truncated, uint32_t *status) {
    *truncated = 0;
    *unwinder = AFT_UNWINDER_NONE;
    *status = AFT_UNWIND_STATUS_HELPER_FAILED;
    if (capacity == 0) return 0;

    /* 1. Lock free: frame pointers from the signal context (without one, from here). */
    uint64_t pc = 0, fp = 0;
    if (ucontext != NULL) {
        aft_async_arch_pc_fp(ucontext, &pc, &fp);
    } else {
        fp = (uint64_t)(uintptr_t)__builtin_frame_address(0);
    }
    uint32_t n = aft_async_frame_pointer_walk(pc, fp, frames, capacity, truncated);
    *unwinder = n > 1    ? AFT_UNWINDER_FRAME_POINTER
                : n == 1 ? AFT_UNWINDER_PC_ONLY
                         : AFT_UNWINDER_NONE;

    /* 2. libunwind in the helper, within the budget: it reads unwind tables, so it also
     * finds the frames of code built without frame pointers. */
    const uint64_t *better = NULL;
    uint32_t better_truncated = 0;
    uint32_t m = aft_async_unwind_isolated(slot, ucontext, capacity, budget_ns, &better,
                                           &better_truncated, status);
    if (better != NULL && m >= 2) {
        aft_async_memcpy(frames, better, (size_t)m * sizeof(uint64_t));
        *truncated = better_truncated;
        *unwinder = AFT_UNWINDER_LIBUNWIND;
        return m;
    }
    return n;
}
