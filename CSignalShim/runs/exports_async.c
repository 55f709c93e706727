/*
 * exports_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). The hand-offs of records to the exporter: begun and ended by a delivery
 * (aft_export_begin, aft_export_end, at normal time), refused once a crash or a termination
 * signal is ending the process, and waited for by their handlers, so that the process dies
 * neither with records both exported and left behind, nor exporting anew.
 */
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim_internal.h"
#include "runs_internal.h"

AFT_SMALL_STATE _Atomic uint32_t aft_g_exports_in_flight;
AFT_SMALL_STATE _Atomic uint32_t aft_g_exports_refused;

/* The threads in a hand-off now, by tid (0: a free slot). A handler running on one of them
 * does not wait for it: that hand-off cannot go on while its thread is in the handler. One that
 * found no free slot is waited for wherever it runs. A termination that lands on the exporting
 * thread itself (an app's thread: a delivery on the caller; Aftermath's threads and
 * libdispatch's workers block these signals) so ends the process at once, and what the
 * hand-off sent is sent again by the next launch, under the same log.record.uid, which a
 * backend deduplicates by: the termination is never held for an export that may take seconds
 * (Ctrl-C on a tool delivering on its main thread), nor a record lost. */
#define AFT_EXPORT_SLOTS 8
AFT_SMALL_STATE static _Atomic uint64_t aft_g_export_threads[AFT_EXPORT_SLOTS];

/* One hand-off fewer in flight; its waiters woken. */
static void aft_export_count_down(void) {
    atomic_fetch_sub(&aft_g_exports_in_flight, 1);
    syscall(SYS_futex, (uint32_t *)&aft_g_exports_in_flight, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL,
            NULL, 0);
}

int aft_export_begin(void) {
    /* Counted first, then the refusals read (sequentially consistent, as the handlers mark the
     * refusal, then read the count): a handler either sees this hand-off and waits for it, or
     * this hand-off sees the refusal. */
    atomic_fetch_add(&aft_g_exports_in_flight, 1);
    if (atomic_load(&aft_g_exports_refused) || aft_async_crash_in_progress()) {
        /* The process is ending: the next launch sends it. Only counted down: a slot of this
         * thread is an outer hand-off's, still going on. */
        aft_export_count_down();
        return 0;
    }
    uint64_t tid = aft_async_gettid();
    for (int i = 0; i < AFT_EXPORT_SLOTS; i++) {
        uint64_t free_slot = 0;
        if (atomic_compare_exchange_strong(&aft_g_export_threads[i], &free_slot, tid)) break;
    }
    return 1;
}

void aft_export_end(void) {
    uint64_t tid = aft_async_gettid();
    for (int i = 0; i < AFT_EXPORT_SLOTS; i++) {
        uint64_t mine = tid;
        if (atomic_compare_exchange_strong(&aft_g_export_threads[i], &mine, 0)) break;
    }
    aft_export_count_down();
}

/* Of n hand-offs in progress, those on other threads than the calling one. */
static uint32_t aft_async_exports_elsewhere(uint32_t n) {
    if (n == 0) return 0; /* none in flight: no system call */
    uint64_t tid = aft_async_gettid();
    for (int i = 0; i < AFT_EXPORT_SLOTS; i++)
        if (atomic_load(&aft_g_export_threads[i]) == tid) return n > 0 ? n - 1 : 0;
    return n;
}

void aft_async_await_exports(void) {
    uint64_t deadline =
        aft_async_now_ns(CLOCK_MONOTONIC) + (uint64_t)AFT_EXPORT_WAIT_MS * 1000000ull;
    for (;;) {
        uint32_t n = atomic_load(&aft_g_exports_in_flight);
        if (aft_async_exports_elsewhere(n) == 0 || aft_async_now_ns(CLOCK_MONOTONIC) >= deadline)
            return;
        struct timespec ts = {.tv_sec = (time_t)(deadline / 1000000000ull),
                              .tv_nsec = (long)(deadline % 1000000000ull)};
        syscall(SYS_futex, (uint32_t *)&aft_g_exports_in_flight, FUTEX_WAIT_BITSET_PRIVATE, n, &ts,
                NULL, FUTEX_BITSET_MATCH_ANY);
    }
}
