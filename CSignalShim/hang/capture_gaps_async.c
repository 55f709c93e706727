/*
 * capture_gaps_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift). Runs in the hang
 * capture's signal handler on the watched thread: the frames a function without unwind tables
 * or frame record hides, found by the walk from sp and merged into the unwinder's.
 */
#include "unwind_internal.h"
#include "watchdog_internal.h"

/* A function without unwind tables or a frame record (a thunk of libswiftDispatch's, which a
 * blocked Task or loop waits in) makes libunwind and the frame-pointer walk both skip its
 * caller. The walk from sp with the return addresses between records finds it: what it found
 * between two frames the unwinder found next to each other is added there. */
void aft_async_watchdog_fill_gaps(aft_watchdog *w, const void *ucontext, uint32_t *truncated) {
    aft_crash_info *regs = &w->capture_regs;
    aft_async_memset(regs, 0, sizeof(*regs));
    aft_async_arch_registers(ucontext, regs);
    /* From sp, as for a thread known by sp and pc: code without frame pointers (libc's wait)
     * keeps anything in the frame-pointer register. The innermost frames are where such
     * functions are (the waits); deeper, the unwinder's frames stand alone. */
    if (regs->sp == 0) return;
    uint32_t scan_truncated = 0;
    uint32_t n = aft_async_walk_from_sp_window(&aft_g_stack_windows[AFT_UNWIND_SLOT_CAPTURE],
                                               regs->pc, regs->sp, w->capture_scan,
                                               AFT_WATCHDOG_GAP_FRAMES, &scan_truncated);
    /* Every frame the unwinder found, in its order; between two of them, at most two frames the
     * walk found there too (it saw both neighbours). */
    const uint64_t *a = w->capture_frames, *b = w->capture_scan;
    uint32_t na = w->capture_frame_count, out = 0, j = 0, inserted = 0;
    for (uint32_t i = 0; i < na && out < AFT_MAX_FRAMES; i++) {
        uint32_t k = j;
        while (k < n && k < j + 3 && b[k] != a[i]) k++;
        if (k < n && b[k] == a[i]) {
            for (uint32_t m = j; m < k && out < AFT_MAX_FRAMES && i > 0; m++) {
                w->capture_merged[out++] = b[m];
                inserted++;
            }
            j = k + 1;
        }
        if (out < AFT_MAX_FRAMES) w->capture_merged[out++] = a[i];
    }
    if (inserted == 0) return;
    aft_async_memcpy(w->capture_frames, w->capture_merged, (size_t)out * sizeof(uint64_t));
    w->capture_frame_count = out;
    if (out == AFT_MAX_FRAMES) *truncated = 1;
    (void)scan_truncated;
}
