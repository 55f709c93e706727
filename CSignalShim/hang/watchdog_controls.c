/*
 * watchdog_controls.c: NORMAL-TIME CODE. What the app's threads call into the hang watchdog
 * (watchdog.c): the main-queue ping's answer and the heartbeat's rare path (which bind the
 * watched thread and let the capture signal through on it), pause/resume, foreground, the
 * previous session, the targets' tags, and the watchdog's counters.
 */
#include <string.h>
#include <time.h>

#include "CSignalShim.h"
#include "watchdog_internal.h"

void aft_watchdog_ping_ran(void) { aft_watch_ping_ran(0); }

int32_t aft_watch_tag(int32_t target) {
    const aft_watch_target *t = target > 0 ? aft_watch_target_of(target) : NULL;
    return t != NULL ? t->tag : -1;
}

int32_t aft_watch_active(int32_t target) {
    return target > 0 && aft_watch_target_of(target) != NULL;
}

int32_t aft_watch_next_tagged(int32_t after) {
    /* Below the highest target ever added: the untouched slots' pages stay untouched. */
    uint32_t high = atomic_load(&aft_g_watchdog.target_high);
    uint32_t first = after < 1 ? 1u : ((uint32_t)after & 0xffu) + 1u;
    for (uint32_t i = first; i < high; i++) {
        const aft_watch_target *t = &aft_g_watchdog.targets[i];
        uint32_t slot = atomic_load(&t->slot);
        if ((slot & 0xffu) == AFT_SLOT_ACTIVE && t->tag >= 0) return aft_watch_handle(i, slot);
    }
    return -1;
}

void aft_heartbeat_slow(void) {
    aft_watchdog *w = &aft_g_watchdog;
    aft_watch_target *t = &w->targets[0];
    uint32_t attention = __atomic_load_n(&aft_g_heartbeat_attention, __ATOMIC_ACQUIRE);
    uint64_t tid = aft_async_gettid();
    if (attention & AFT_ATTENTION_BIND) {
        atomic_store(&t->tid, tid);
        aft_watchdog_admit_capture_signal(w);
        __atomic_fetch_and(&aft_g_heartbeat_attention, ~AFT_ATTENTION_BIND, __ATOMIC_RELEASE);
        if (!atomic_exchange(&t->armed, 1)) aft_watchdog_wake(w);
    }
    if ((attention & AFT_ATTENTION_HANG) && tid == atomic_load(&t->tid)) {
        uint64_t zero = 0;
        atomic_compare_exchange_strong(&t->hang_end_ns, &zero, aft_async_now_ns(CLOCK_MONOTONIC));
        __atomic_fetch_and(&aft_g_heartbeat_attention, ~AFT_ATTENTION_HANG, __ATOMIC_RELEASE);
        aft_watchdog_wake(w);
    }
}

void aft_watchdog_pause(void) { aft_watch_pause(0); }

void aft_watchdog_resume(void) { aft_watch_resume(0); }

void aft_watchdog_set_foreground(int32_t foreground) {
    aft_watchdog *w = &aft_g_watchdog;
    atomic_store(&w->background, foreground == 0);
    uint32_t high = atomic_load(&w->target_high); /* the untouched slots stay untouched */
    for (uint32_t i = 0; i < AFT_WATCH_MAX_TARGETS && (i == 0 || i < high); i++)
        atomic_fetch_add(&w->targets[i].generation, 1);
    aft_watchdog_wake(w);
}

int32_t aft_watchdog_is_foreground(void) { return atomic_load(&aft_g_watchdog.background) ? 0 : 1; }

void aft_watchdog_set_previous_session(const uint8_t previous_session_id[AFT_ID_SIZE]) {
    for (uint32_t i = 0; i < AFT_ID_SIZE; i++)
        aft_g_watchdog.previous_session_id[i] = previous_session_id ? previous_session_id[i] : 0;
}

void aft_watchdog_watch_next_heartbeat_thread(void) {
    __atomic_fetch_or(&aft_g_heartbeat_attention, AFT_ATTENTION_BIND, __ATOMIC_RELEASE);
}

void aft_watchdog_get_stats(aft_watchdog_stats *out) {
    aft_watchdog *w = &aft_g_watchdog;
    memset(out, 0, sizeof(*out));
    out->wakeups = atomic_load(&w->wakeups);
    out->hangs = atomic_load(&w->hangs);
    out->ignored_stretches = atomic_load(&w->ignored);
    out->late_ticks = atomic_load(&w->late_ticks);
    out->last_detection_latency_ns = atomic_load(&w->detection_latency_ns);
    out->last_detection_ns = atomic_load(&w->detection_ns);
    out->last_capture_pause_ns = atomic_load(&w->last_capture_pause_ns);
    out->last_capture_method = atomic_load(&w->last_capture_method);
    out->signal_usable = (uint32_t)w->signal_usable;
    out->watched_tid = atomic_load(&w->targets[0].armed) ? atomic_load(&w->targets[0].tid) : 0;
    out->pings = atomic_load(&w->pings);
    out->idle_skips = atomic_load(&w->idle_skips);
    out->rate_limited = atomic_load(&w->rate_limited);
    out->pinger_tid = atomic_load(&w->pinger_tid);
    out->watchdog_tid = atomic_load(&w->watchdog_tid);
    out->capture_signal = w->capture_signal;
}
