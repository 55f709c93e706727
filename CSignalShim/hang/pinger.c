/*
 * pinger.c: NORMAL-TIME CODE. The pinger thread, the only thread that calls out of C for the
 * hang watchdog (options.notify), so that the watchdog itself never runs code that may take a
 * lock a stuck thread holds: it posts the pings the watchdog asks for (the main queue's, an
 * event loop's, the pool's probes), tells of finished hangs, loads libunwind for a first
 * capture, and between pings does the run record's periodic updates (runs_updater.c).
 * Started with the watchdog, or, for start's delivery thread, taken on by that thread once its
 * delivery found nothing to send (aft_pinger_adopt): one thread's creation and end less a launch.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>

#include "CSignalShim.h"
#include "shim_internal.h"
#include "libunwind_local.h"
#include "role_internal.h"
#include "runs_internal.h"
#include "watchdog_internal.h"

/* The target at index (the pinger's requests), without a handle's sequence. */
static aft_watch_target *aft_target_at(uint32_t index) {
    if (index >= AFT_WATCH_MAX_TARGETS) return NULL;
    aft_watch_target *t = &aft_g_watchdog.targets[index];
    return index == 0 || (atomic_load(&t->slot) & 0xffu) == AFT_SLOT_ACTIVE ? t : NULL;
}

/* ---- the pinger thread ---- */

AFT_SMALL_STATE static pthread_t aft_g_pinger;
AFT_SMALL_STATE static int aft_g_pinger_running;
/* The pinger's role (role_internal.h): changed under aft_g_watchdog_thread_lock but for the
 * delivery thread's taking it, by compare-and-swap. */
AFT_SMALL_STATE static _Atomic uint32_t aft_g_pinger_role;
AFT_SMALL_STATE static _Atomic uint32_t aft_g_pinger_done;
/* The run record's updates: no pinger, a pinger that may take them on, one that does. */
enum { AFT_RUN_HOST_NONE, AFT_RUN_HOST_OPEN, AFT_RUN_HOST_BUSY };
AFT_SMALL_STATE static _Atomic uint32_t aft_g_run_host;

static void aft_pinger_wake(aft_watchdog *w) {
    atomic_fetch_add(&w->pinger_wake, 1);
    aft_async_futex_wake(&w->pinger_wake);
}

void aft_watchdog_request_ping(aft_watchdog *w, uint32_t target) {
    if (target >= AFT_WATCH_MAX_TARGETS || w->notify == NULL) return;
    atomic_fetch_or(&w->ping_requests[target / 64u], 1ull << (target % 64u));
    aft_pinger_wake(w);
}

void aft_watch_pool_appeared(void) {
    aft_watchdog *w = &aft_g_watchdog;
    uint32_t high = atomic_load(&w->target_high);
    for (uint32_t i = 1; i < AFT_WATCH_MAX_TARGETS && i < high; i++) {
        aft_watch_target *t = aft_target_at(i);
        if (t != NULL && t->kind == AFT_HANG_KIND_CONCURRENCY_POOL && t->source == AFT_SOURCE_PING)
            aft_watchdog_request_ping(w, i);
    }
}

int aft_pinger_host_run(void) {
    uint32_t open = AFT_RUN_HOST_OPEN;
    if (!atomic_compare_exchange_strong(&aft_g_run_host, &open, AFT_RUN_HOST_BUSY)) return 0;
    aft_pinger_wake(&aft_g_watchdog); /* its wait takes the updates' deadline */
    return 1;
}

void aft_pinger_unhost_run(void) {
    uint32_t busy = AFT_RUN_HOST_BUSY;
    atomic_compare_exchange_strong(&aft_g_run_host, &busy, AFT_RUN_HOST_OPEN);
}

void aft_watchdog_request_finished(aft_watchdog *w) {
    atomic_store(&w->finished_requests, 1);
    aft_pinger_wake(w);
}

int aft_watchdog_request_libunwind(aft_watchdog *w) {
    if (!aft_g_pinger_running) return 0;
    atomic_store(&w->libunwind_requests, 1);
    aft_pinger_wake(w);
    return 1;
}

/* The app's code the pinger runs may create threads (a probe Task starts a pool worker): they
 * inherit the creator's name and signal mask, and must be the app's, not ours (a thread named
 * "aftermath.*" is never paused at a crash; one that blocks the backtracer's signals is missing
 * from its report). The name and mask of the thread that started the watchdog, meanwhile. */
static void aft_pinger_notify(aft_watchdog *w, uint32_t event, int32_t target) {
    prctl(PR_SET_NAME, w->app_thread_name, 0, 0, 0);
    pthread_sigmask(SIG_SETMASK, &w->app_mask, NULL);
    w->notify(event, target);
    aft_thread_set_own_mask();
    prctl(PR_SET_NAME, "aftermath.ping", 0, 0, 0);
}

/* How long an event loop's ping waits once asked for: AFT_LOOP_PING_DELAY_NS, at most a quarter
 * of its threshold. Its silence counts from the post (a loop always has its whole threshold to
 * answer), so a stall is seen that much later. */
static uint64_t aft_loop_ping_delay(const aft_watch_target *t) {
    uint64_t quarter = t->threshold_ns / 4u;
    return quarter < AFT_LOOP_PING_DELAY_NS ? quarter : AFT_LOOP_PING_DELAY_NS;
}

/* Posts target i's ping, if it still needs one. Returns 1 when it is held back until
 * *defer_due (the earliest of those held back). */
static int aft_pinger_ping(aft_watchdog *w, uint32_t i, uint64_t *defer_due) {
    aft_watch_target *t = aft_target_at(i);
    if (t == NULL || t->source != AFT_SOURCE_PING || atomic_load(&t->ping_outstanding)) return 0;
    uint32_t slot = atomic_load(&t->slot);
    uint64_t now = aft_async_now_ns(CLOCK_MONOTONIC);
    if (t->kind == AFT_HANG_KIND_EVENT_LOOP && atomic_load(&t->tid) != 0) {
        /* A loop that was shut down refuses jobs (SwiftNIO traps in strict mode) while its
         * thread still ends, and a thread that ends is seen leaving its wait, as a loop with
         * work is: its ping goes a moment later (aft_loop_ping_delay), once the thread is seen
         * still there. One that has ended is over: its place is freed. */
        if (t->ping_due_ns == 0) t->ping_due_ns = now + aft_loop_ping_delay(t);
        if (now < t->ping_due_ns) {
            if (*defer_due == 0 || t->ping_due_ns < *defer_due) *defer_due = t->ping_due_ns;
            return 1;
        }
        t->ping_due_ns = 0;
        if (aft_watch_thread_gone(t)) {
            aft_watchdog_retire_target(w, t, slot, now);
            return 0;
        }
    }
    if (t->kind == AFT_HANG_KIND_CONCURRENCY_POOL) {
        /* No pool yet (no thread of libdispatch's): nothing to starve, and a probe would
         * start the pool's threads itself. Asked again when it has one. Then a first probe
         * that does not start is a hang already. */
        if (!aft_concurrency_pool_in_use()) return 0;
        if (!atomic_exchange(&t->armed, 1)) aft_watchdog_wake(w);
        aft_watchdog_prepare_pool(w);
    }
    atomic_store(&t->ping_posted_ns, now);
    atomic_store(&t->ping_outstanding, 1);
    atomic_fetch_add(&w->pings, 1);
    aft_pinger_notify(w, AFT_WATCHDOG_EVENT_PING, aft_watch_handle(i, slot));
    return 0;
}

static void *aft_pinger_main(void *arg) {
    aft_watchdog *w = arg;
    prctl(PR_SET_NAME, "aftermath.ping", 0, 0, 0);
    aft_thread_set_own_mask();
    atomic_store(&w->pinger_tid, aft_async_gettid());
    while (!atomic_load(&w->stop)) {
        uint32_t seen = atomic_load(&w->pinger_wake);
        uint32_t finished = atomic_exchange(&w->finished_requests, 0);
        /* Before any ping: the watchdog waits for it, with a hang's capture on hold. */
        if (atomic_exchange(&w->libunwind_requests, 0)) (void)aft_libunwind_load();
        uint64_t defer_due = 0;
        for (uint32_t k = 0; k < AFT_WATCH_MAX_TARGETS / 64u; k++) {
            uint64_t requests = atomic_exchange(&w->ping_requests[k], 0), deferred = 0;
            for (uint32_t b = 0; b < 64u && requests != 0; b++) {
                if (!((requests >> b) & 1u)) continue;
                requests &= ~(1ull << b);
                if (aft_pinger_ping(w, k * 64u + b, &defer_due)) deferred |= 1ull << b;
            }
            if (deferred != 0) atomic_fetch_or(&w->ping_requests[k], deferred); /* at defer_due */
        }
        if (finished && w->notify) aft_pinger_notify(w, AFT_WATCHDOG_EVENT_HANG_FINISHED, 0);
        uint64_t due = 0;
        if (atomic_load(&aft_g_run_host) == AFT_RUN_HOST_BUSY)
            due = aft_run_hosted_tick(aft_async_now_ns(CLOCK_MONOTONIC));
        if (defer_due != 0 && (due == 0 || defer_due < due)) due = defer_due;
        aft_park_note_wait(&aft_g_park_pinger);
        if (atomic_load(&w->pinger_wake) == seen && !atomic_load(&w->stop))
            aft_async_futex_wait_until(&w->pinger_wake, seen, due);
        aft_park_note_awake(&aft_g_park_pinger);
    }
    return NULL;
}

static int aft_pinger_create(aft_watchdog *w) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256u * 1024u);
    int err = aft_thread_create(&aft_g_pinger, &attr, aft_pinger_main, w);
    pthread_attr_destroy(&attr);
    return err;
}

int aft_watchdog_start_pinger(aft_watchdog *w, int later) {
    if (aft_g_pinger_running) return 0;
    if (later) {
        /* Its requests wait in their words until the delivery thread takes the role on or
         * makes the thread, moments later: the first main-queue ping went from start. */
        atomic_store(&aft_g_pinger_role, AFT_ROLE_PENDING);
    } else {
        int err = aft_pinger_create(w);
        if (err != 0) return err;
        atomic_store(&aft_g_pinger_role, AFT_ROLE_MADE);
    }
    aft_g_pinger_running = 1;
    atomic_store(&aft_g_run_host, AFT_RUN_HOST_OPEN);
    return 0;
}

static void aft_pinger_loop(void) { (void)aft_pinger_main(&aft_g_watchdog); }

int aft_pinger_adopt(void) {
    return aft_role_take(&aft_g_pinger_role, &aft_g_pinger_done, aft_pinger_loop);
}

void aft_pinger_start_pending(void) {
    if (atomic_load(&aft_g_pinger_role) != AFT_ROLE_PENDING) return;
    aft_watchdog_lock_threads();
    if (atomic_load(&aft_g_pinger_role) == AFT_ROLE_PENDING &&
        aft_pinger_create(&aft_g_watchdog) == 0)
        atomic_store(&aft_g_pinger_role, AFT_ROLE_MADE);
    aft_watchdog_unlock_threads();
}

/* Caller holds aft_g_watchdog_thread_lock, and w->stop is set. */
void aft_watchdog_stop_pinger(aft_watchdog *w) {
    if (!aft_g_pinger_running) return;
    uint32_t host = atomic_exchange(&aft_g_run_host, AFT_RUN_HOST_NONE);
    aft_pinger_wake(w);
    /* A role still to come is not taken on now; the delivery thread in it leaves it at its next
     * wake; a thread of its own is joined. */
    int own = atomic_load(&w->pinger_tid) == aft_async_gettid();
    if (aft_role_stop(&aft_g_pinger_role, &aft_g_pinger_done, own) == AFT_ROLE_MADE)
        pthread_join(aft_g_pinger, NULL);
    aft_g_pinger_running = 0;
    atomic_store(&w->pinger_tid, 0);
    if (host == AFT_RUN_HOST_BUSY) aft_run_host_ended(); /* the run outlives the watchdog */
}

/* A forked child has neither thread. */
void aft_watchdog_forget_pinger(void) {
    aft_g_pinger_running = 0;
    atomic_store(&aft_g_pinger_role, AFT_ROLE_MADE);
    atomic_store(&aft_g_pinger_done, 1);
    atomic_store(&aft_g_run_host, AFT_RUN_HOST_NONE);
}
