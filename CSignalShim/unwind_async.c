/*
 * unwind_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). The crashing (or blocked) thread's stack. Known risk, left as libunwind's:
 * unw_step looks up unwind tables through dl_iterate_phdr, which takes the loader's lock; a
 * crash inside dlopen could wait on it. libunwind is warmed up at install so its caches are
 * filled outside the crash. The frame-pointer walk reads memory through aft_async_read_memory,
 * so a corrupt chain ends the walk instead of faulting.
 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <ucontext.h>

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

/* Return addresses as image offsets can use (arm64: pointer-authentication signatures of
 * saved return addresses stripped; libunwind does not always strip them). */
static void aft_async_code_addresses(uint64_t *frames, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) frames[i] = aft_async_arch_code_address(frames[i]);
}

/* Fast path: libunwind's tracer (unw_backtrace) walks from here, through the kernel's signal
 * frame, with its per-thread cache of frame descriptions (about 10x cheaper per frame than
 * unw_step). The frames above the faulting pc (this handler) are dropped. */
static uint32_t aft_async_trace_from_here(uint64_t pc, uint64_t *frames, uint32_t capacity,
                                          uint32_t *truncated) {
    uint32_t room = capacity + AFT_UNWIND_SLACK;
    int n = unw_backtrace((void **)frames, (int)room);
    if (n <= 0) return 0;
    aft_async_code_addresses(frames, (uint32_t)n);
    for (uint32_t i = 0; i < (uint32_t)n && i < AFT_UNWIND_SLACK; i++) {
        if (frames[i] != pc) continue;
        uint32_t count = (uint32_t)n - i;
        if (count > capacity) count = capacity;
        for (uint32_t j = 0; j < count; j++) frames[j] = frames[i + j];
        *truncated = (uint32_t)n == room || (uint32_t)n - i > capacity;
        return count;
    }
    return 0;
}

uint32_t aft_async_unwind_context(void *ucontext, uint64_t *frames, uint32_t capacity,
                                  uint32_t *unwinder, uint32_t *truncated) {
    uint32_t n = 0;
    *truncated = 0;
    if (ucontext == NULL) {
        /* Called without the signal's context (a handler that chained to us with NULL): the
         * stack from here, through that handler and the signal frame, to the fault. */
        int traced = capacity > 0 ? unw_backtrace((void **)frames, (int)capacity) : 0;
        n = traced > 0 ? (uint32_t)traced : 0;
        *truncated = n == capacity;
        *unwinder = n > 0 ? AFT_UNWINDER_LIBUNWIND : AFT_UNWINDER_NONE;
        return n;
    }
    uint64_t context_pc = 0, context_fp = 0;
    aft_async_arch_pc_fp(ucontext, &context_pc, &context_fp);
    if (context_pc != 0 && capacity > 0) {
        n = aft_async_trace_from_here(context_pc, frames, capacity, truncated);
        if (n >= 2) {
            *unwinder = AFT_UNWINDER_LIBUNWIND;
            return n;
        }
        n = 0;
        *truncated = 0;
    }
    /* Slow path: step from the signal context itself. */
    unw_cursor_t cursor;
    if (capacity > 0 &&
        unw_init_local2(&cursor, (unw_context_t *)ucontext, UNW_INIT_SIGNAL_FRAME) == 0) {
        for (;;) {
            unw_word_t ip = 0;
            if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
            frames[n++] = aft_async_arch_code_address((uint64_t)ip);
            int step = unw_step(&cursor);
            if (step <= 0) break;
            if (n == capacity) {
                *truncated = 1;
                break;
            }
        }
    }
    *unwinder = AFT_UNWINDER_LIBUNWIND;
    if (n >= 2) return n;
    /* libunwind found nothing useful (no unwind info, corrupt stack): frame pointers. */
    uint32_t fp_truncated = 0;
    uint32_t m =
        aft_async_frame_pointer_walk(context_pc, context_fp, frames, capacity, &fp_truncated);
    if (m > n) {
        *truncated = fp_truncated;
        *unwinder = m > 1 ? AFT_UNWINDER_FRAME_POINTER : AFT_UNWINDER_PC_ONLY;
        return m;
    }
    if (n == 0) *unwinder = AFT_UNWINDER_NONE;
    return n;
}
