/*
 * watchdog_controls.c: NORMAL-TIME CODE. What the app's threads call into the hang watchdog
 * (watchdog.c): the main-queue ping's answer and the heartbeat's rare path (which bind the
 * watched thread and let the capture signal through on it), pause/resume, foreground, the
 * previous session, and the watchdog's counters.
 */
#include <string.h>
#include <time.h>

#include "CSignalShim.h"
#include "watchdog_internal.h"

void aft_watchdog_ping_ran(void) {
    aft_watchdog *w = &aft_g_watchdog;
    aft_watchdog_admit_capture_signal(w);
    uint64_t now = aft_async_now_ns(CLOCK_MONOTONIC);
    atomic_store(&w->watched_tid, aft_async_gettid());
    atomic_store(&w->ping_ran_ns, now);
    __atomic_fetch_add(&aft_g_heartbeat_beats, 1, __ATOMIC_RELEASE);
    atomic_store(&w->ping_outstanding, 0);
    int was_armed = atomic_exchange(&w->armed, 1);
    if (!was_armed || atomic_load(&w->in_hang)) aft_watchdog_wake(w);
}

void aft_heartbeat_slow(void) {
    aft_watchdog *w = &aft_g_watchdog;
    uint32_t attention = __atomic_load_n(&aft_g_heartbeat_attention, __ATOMIC_ACQUIRE);
    uint64_t tid = aft_async_gettid();
    if (attention & AFT_ATTENTION_BIND) {
        atomic_store(&w->watched_tid, tid);
        aft_watchdog_admit_capture_signal(w);
        __atomic_fetch_and(&aft_g_heartbeat_attention, ~AFT_ATTENTION_BIND, __ATOMIC_RELEASE);
        if (!atomic_exchange(&w->armed, 1)) aft_watchdog_wake(w);
    }
    if ((attention & AFT_ATTENTION_HANG) && tid == atomic_load(&w->watched_tid)) {
        uint64_t zero = 0;
        atomic_compare_exchange_strong(&w->hang_end_ns, &zero, aft_async_now_ns(CLOCK_MONOTONIC));
        __atomic_fetch_and(&aft_g_heartbeat_attention, ~AFT_ATTENTION_HANG, __ATOMIC_RELEASE);
        aft_watchdog_wake(w);
    }
}

void aft_watchdog_pause(void) {
    atomic_fetch_add(&aft_g_watchdog.pause_depth, 1);
    aft_watchdog_wake(&aft_g_watchdog);
}

void aft_watchdog_resume(void) {
    _Atomic int32_t *word = &aft_g_watchdog.pause_depth;
    int32_t depth = atomic_load(word);
    while (depth > 0 && !atomic_compare_exchange_weak(word, &depth, depth - 1)) {
    }
    aft_watchdog_wake(&aft_g_watchdog);
}

void aft_watchdog_set_foreground(int32_t foreground) {
    atomic_store(&aft_g_watchdog.foreground, foreground != 0);
    aft_watchdog_wake(&aft_g_watchdog);
}

int32_t aft_watchdog_is_foreground(void) { return atomic_load(&aft_g_watchdog.foreground) ? 1 : 0; }

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
    out->watched_tid = atomic_load(&w->armed) ? atomic_load(&w->watched_tid) : 0;
    out->watchdog_tid = atomic_load(&w->watchdog_tid);
    out->capture_signal = w->capture_signal;
}
