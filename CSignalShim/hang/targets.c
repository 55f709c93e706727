/*
 * targets.c: NORMAL-TIME CODE. The hang watchdog's targets other than the main one: adding and
 * removing them, and what their threads call (a ping's answer, a beat, a pause, a unit of
 * work's begin and end). The pinger thread is in pinger.c; the watchdog's step for each target
 * is in watchdog_tick.c.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "CSignalShim.h"
#include "shim_internal.h"
#include "watchdog_internal.h"

static _Thread_local uint64_t aft_tls_tid;
static _Thread_local int aft_tls_admitted;

static uint64_t aft_cached_tid(void) {
    if (aft_tls_tid == 0) aft_tls_tid = aft_async_gettid();
    return aft_tls_tid;
}

static aft_watch_target *aft_target(int32_t handle) { return aft_watch_target_of(handle); }

void aft_watchdog_reset_target(aft_watch_target *t) {
    t->stretch = AFT_STRETCH_NONE;
    t->rebase = 1;
    t->blocked_since = t->earliest_onset = t->last_beats = t->last_ping_ns = 0;
    t->idle_seen_ns = 0;
    t->loop_wait.nr = t->asked_wait.nr = -1;
    t->loop_wait_seen = t->loop_wait_asks = 0;
    t->loop_wait_cpu_ns = UINT64_MAX;
    t->hang_fd = -1;
    t->hang_onset_ns = t->hang_stopped_ns = t->hang_last_live_ns = 0;
    t->rate_tokens_ns = (uint64_t)AFT_WATCH_RATE_BURST * AFT_WATCH_RATE_REFILL_S * 1000000000ull;
    t->rate_last_ns = 0;
    t->suppressed = 0;
    atomic_store(&t->in_hang, 0);
    atomic_store(&t->hang_end_ns, 0);
}

/* swift_job_run's address range, to tell the threads running a Swift job; the pool's width.
 * On the pinger thread before its first probe: start's caller pays for neither, and the
 * loader's lock (dlsym) is never waited for by the watchdog. */
void aft_watchdog_prepare_pool(aft_watchdog *w) {
    if (atomic_load(&w->pool_width) != 0) return;
    if (w->job_run_start != 0) return;
    void *symbol = dlsym(RTLD_DEFAULT, "swift_job_run");
    Dl_info info;
    const ElfW(Sym) *entry = NULL;
    if (symbol != NULL && dladdr1(symbol, &info, (void **)&entry, RTLD_DL_SYMENT)) {
        uint64_t size = entry != NULL && entry->st_size != 0 ? entry->st_size : 256u;
        w->job_run_end = (uint64_t)(uintptr_t)symbol + size;
        w->job_run_start = (uint64_t)(uintptr_t)symbol;
    }
    atomic_store(&w->pool_width, aft_watch_pool_width()); /* published last */
}

uint32_t aft_watch_pool_width(void) {
    long n = sysconf(_SC_NPROCESSORS_CONF);
    return n > 0 ? (uint32_t)n : 1u;
}

int32_t aft_watch_add(uint32_t kind, const char *name, uint32_t threshold_ms) {
    return aft_watch_add_tagged(kind, name, threshold_ms, -1);
}

int32_t aft_watch_add_tagged(uint32_t kind, const char *name, uint32_t threshold_ms, int32_t tag) {
    aft_watchdog *w = &aft_g_watchdog;
    if (kind == AFT_HANG_KIND_MAIN || kind > AFT_HANG_KIND_CONCURRENCY_POOL || threshold_ms == 0)
        return -EINVAL;
    for (uint32_t i = 1; i < AFT_WATCH_MAX_TARGETS; i++) {
        aft_watch_target *t = &w->targets[i];
        uint32_t s = atomic_load(&t->slot);
        if ((s & 0xffu) != AFT_SLOT_FREE) continue;
        uint32_t claimed = (s & ~0xffu) + 0x100u + AFT_SLOT_CLAIMED;
        if (!atomic_compare_exchange_strong(&t->slot, &s, claimed)) continue;
        t->kind = kind;
        t->source = kind == AFT_HANG_KIND_THREAD ? AFT_SOURCE_BEAT
                    : kind == AFT_HANG_KIND_WORK ? AFT_SOURCE_UNIT
                                                 : AFT_SOURCE_PING;
        t->threshold_ms = threshold_ms;
        t->threshold_ns = (uint64_t)threshold_ms * 1000000ull;
        t->parent = -1;
        t->tag = tag;
        size_t n = 0;
        while (name != NULL && name[n] != '\0' && n + 1 < sizeof(t->name)) {
            t->name[n] = name[n];
            n++;
        }
        t->name[n] = '\0';
        atomic_store(&t->tid, 0);
        atomic_store(&t->roaming, 0);
        t->ping_due_ns = 0;
        atomic_store(&t->pause_depth, 0);
        atomic_store(&t->ping_outstanding, 0);
        atomic_store(&t->beats, 0);
        /* A work target needs no first sign of life: its units are watched from their begin. */
        atomic_store(&t->armed, kind == AFT_HANG_KIND_WORK);
        atomic_store(&t->attention, kind == AFT_HANG_KIND_THREAD ? AFT_TARGET_BIND : 0u);
        t->syscall_fd = -1;
        t->syscall_fd_tid = 0;
        aft_watchdog_reset_target(t);
        atomic_store(&t->slot, (claimed & ~0xffu) | AFT_SLOT_ACTIVE);
        uint32_t high = atomic_load(&w->target_high);
        while (high < i + 1 && !atomic_compare_exchange_weak(&w->target_high, &high, i + 1)) {
        }
        aft_watchdog_wake(w);
        return aft_watch_handle(i, claimed);
    }
    return -ENOSPC;
}

void aft_watch_remove(int32_t target) {
    aft_watch_target *t = target > 0 ? aft_target(target) : NULL;
    if (t == NULL) return;
    /* The watchdog finishes a hang in progress when it sees the slot go, and frees it: it owns
     * the target's files. Without its thread the slot is free at once. */
    uint32_t s = atomic_load(&t->slot);
    atomic_store(&t->hang_end_ns, aft_async_now_ns(CLOCK_MONOTONIC));
    atomic_store(&t->slot, (s & ~0xffu) | AFT_SLOT_ENDED);
    aft_watchdog_wake(&aft_g_watchdog);
    for (int i = 0; i < 500 && aft_watchdog_thread_running(); i++) {
        if ((atomic_load(&t->slot) & 0xffu) != AFT_SLOT_ENDED) return;
        usleep(1000);
    }
    if (aft_watchdog_thread_running()) return; /* freed at its next tick */
    if (t->syscall_fd >= 0) close(t->syscall_fd);
    t->syscall_fd = -1;
    t->syscall_fd_tid = 0;
    uint32_t ended = (s & ~0xffu) | AFT_SLOT_ENDED;
    atomic_compare_exchange_strong(&t->slot, &ended, (s & ~0xffu) | AFT_SLOT_FREE);
}

void aft_watch_ping_ran(int32_t target) {
    aft_watchdog *w = &aft_g_watchdog;
    aft_watch_target *t = aft_target(target);
    if (t == NULL) return;
    /* The capture signal through on the thread that ran it: an event loop's, or a pool worker
     * (libdispatch's block every signal), which a pool's hang then reads in full. */
    aft_watchdog_admit_capture_signal(w);
    uint64_t now = aft_async_now_ns(CLOCK_MONOTONIC);
    uint64_t tid = aft_async_gettid(), before = atomic_exchange(&t->tid, tid);
    if (before != 0 && before != tid) atomic_store(&t->roaming, 1); /* not one thread's loop */
    atomic_store(&t->ping_ran_ns, now);
    if (target == 0) __atomic_fetch_add(&aft_g_heartbeat_beats, 1, __ATOMIC_RELEASE);
    atomic_store(&t->ping_outstanding, 0);
    int was_armed = atomic_exchange(&t->armed, 1);
    if (!was_armed || atomic_load(&t->in_hang)) aft_watchdog_wake(w);
}

void aft_watch_beat(int32_t target) {
    aft_watch_target *t = aft_target(target);
    if (t == NULL || target == 0) return;
    atomic_fetch_add_explicit(&t->beats, 1, memory_order_relaxed);
    uint32_t attention = atomic_load_explicit(&t->attention, memory_order_relaxed);
    if (__builtin_expect(attention == 0, 1)) return;
    uint64_t tid = aft_cached_tid();
    if (attention & AFT_TARGET_BIND) {
        atomic_store(&t->tid, tid);
        aft_watchdog_admit_capture_signal(&aft_g_watchdog);
        atomic_fetch_and(&t->attention, ~AFT_TARGET_BIND);
        if (!atomic_exchange(&t->armed, 1)) aft_watchdog_wake(&aft_g_watchdog);
    }
    if ((attention & AFT_TARGET_HANG) && tid == atomic_load(&t->tid)) {
        uint64_t zero = 0;
        atomic_compare_exchange_strong(&t->hang_end_ns, &zero, aft_async_now_ns(CLOCK_MONOTONIC));
        atomic_fetch_and(&t->attention, ~AFT_TARGET_HANG);
        aft_watchdog_wake(&aft_g_watchdog);
    }
}

void aft_watch_pause(int32_t target) {
    aft_watch_target *t = aft_target(target);
    if (t == NULL) return;
    atomic_fetch_add(&t->pause_depth, 1);
    atomic_fetch_add(&t->generation, 1);
    aft_watchdog_wake(&aft_g_watchdog);
}

void aft_watch_resume(int32_t target) {
    aft_watch_target *t = aft_target(target);
    if (t == NULL) return;
    int32_t depth = atomic_load(&t->pause_depth);
    while (depth > 0 && !atomic_compare_exchange_weak(&t->pause_depth, &depth, depth - 1)) {
    }
    atomic_fetch_add(&t->generation, 1);
    aft_watchdog_wake(&aft_g_watchdog);
}

/* ---- units of work ---- */

int32_t aft_work_begin(int32_t target) {
    aft_watchdog *w = &aft_g_watchdog;
    aft_watch_target *parent = target > 0 ? aft_target(target) : NULL;
    if (parent == NULL || parent->kind != AFT_HANG_KIND_WORK) return -1;
    uint32_t hint = atomic_load_explicit(&w->unit_hint, memory_order_relaxed);
    for (uint32_t k = 0; k < AFT_WATCH_MAX_UNITS; k++) {
        uint32_t i = (hint + k) % AFT_WATCH_MAX_UNITS;
        aft_watch_target *u = &w->targets[AFT_WATCH_MAX_TARGETS + i];
        uint32_t s = atomic_load_explicit(&u->slot, memory_order_relaxed);
        if ((s & 0xffu) != AFT_SLOT_FREE) continue;
        uint32_t claimed = (s & ~0xffu) + 0x100u + AFT_SLOT_CLAIMED;
        if (!atomic_compare_exchange_strong(&u->slot, &s, claimed)) continue;
        u->kind = AFT_HANG_KIND_WORK;
        u->source = AFT_SOURCE_UNIT;
        u->threshold_ms = parent->threshold_ms;
        u->threshold_ns = parent->threshold_ns;
        u->parent = (int32_t)((uint32_t)target & 0xffu); /* its index */
        u->syscall_fd = -1;                              /* a unit opens none: never close(0) */
        u->syscall_fd_tid = 0;
        atomic_store_explicit(&u->tid, aft_cached_tid(), memory_order_relaxed);
        atomic_store_explicit(&u->begin_ns, aft_async_now_ns(CLOCK_MONOTONIC),
                              memory_order_relaxed);
        atomic_store_explicit(&u->hang_end_ns, 0, memory_order_relaxed);
        atomic_store_explicit(&u->armed, 1, memory_order_relaxed);
        atomic_store(&u->slot, (claimed & ~0xffu) | AFT_SLOT_ACTIVE);
        atomic_store_explicit(&w->unit_hint, i + 1, memory_order_relaxed);
        uint32_t high = atomic_load(&w->unit_high);
        while (high < i + 1 && !atomic_compare_exchange_weak(&w->unit_high, &high, i + 1)) {
        }
        if (!aft_tls_admitted) { /* once per thread: the capture signal through */
            aft_watchdog_admit_capture_signal(w);
            aft_tls_admitted = 1;
        }
        /* The handle names the slot and this unit's sequence: a second end, or one after the
         * slot was taken again, finds another sequence and changes nothing. */
        return (int32_t)(((claimed >> 8) & 0x7fffffu) << 8 | i);
    }
    return -1;
}

void aft_work_end(int32_t unit) {
    if (unit < 0 || ((uint32_t)unit & 0xffu) >= AFT_WATCH_MAX_UNITS) return;
    aft_watch_target *u = &aft_g_watchdog.targets[AFT_WATCH_MAX_TARGETS + ((uint32_t)unit & 0xffu)];
    uint32_t s = atomic_load(&u->slot);
    if (((s >> 8) & 0x7fffffu) != ((uint32_t)unit >> 8)) return; /* not this unit's slot now */
    if ((s & 0xffu) == AFT_SLOT_ACTIVE &&
        atomic_compare_exchange_strong(&u->slot, &s, (s & ~0xffu) | AFT_SLOT_FREE))
        return;
    if ((s & 0xffu) != AFT_SLOT_HUNG) return;
    /* Hung: the watchdog finishes the hang and frees the slot. */
    atomic_store(&u->hang_end_ns, aft_async_now_ns(CLOCK_MONOTONIC));
    atomic_compare_exchange_strong(&u->slot, &s, (s & ~0xffu) | AFT_SLOT_ENDED);
    aft_watchdog_wake(&aft_g_watchdog);
}
