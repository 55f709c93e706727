/*
 * watchdog.c: NORMAL-TIME CODE. The hang watchdog's thread, one for every watched target:
 * start/stop, the tick on CLOCK_MONOTONIC (at most 10 wakeups a second, none while nothing is
 * watched: paused, in the background, or before the first sign of life), stop detection (a late
 * tick). Each target's step is in watchdog_tick.c, the targets in targets.c, the pinger thread
 * in pinger.c; the main target's controls (pause/resume, foreground, the heartbeat's rare path, the
 * ping's answer) are in watchdog_controls.c; the capture signal's choice and the mask of
 * Aftermath's threads in watchdog_signal.c. Everything it does once a target is suspected stuck
 * is in watchdog_async.c. It never calls out of C: the only such call (notify) is the pinger's,
 * and start's first ping.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "CSignalShim.h"
#include "shim_internal.h"
#include "watchdog_internal.h"

/* Zero-initialized, so in .bss (its size would otherwise be in every app's binary): dir_fd is
 * set by aft_watchdog_start before anything reads it. */
AFT_SMALL_STATE uint64_t aft_g_heartbeat_beats;
AFT_SMALL_STATE uint32_t aft_g_heartbeat_attention;

AFT_SMALL_STATE static pthread_t aft_g_watchdog_thread;
/* started: directory, capture signal, first ping */
AFT_SMALL_STATE static int aft_g_watchdog_running;
AFT_SMALL_STATE static int aft_g_watchdog_has_thread; /* and its thread created */
/* Guards the thread's creation (aft_watchdog_start_thread, from another thread than start's)
 * against its end. */
AFT_SMALL_STATE static pthread_mutex_t aft_g_watchdog_thread_lock = PTHREAD_MUTEX_INITIALIZER;

/* A forked child has no watchdog thread (fork copies only the caller), and the lock may have
 * been held by a thread the child does not have. */
static void aft_watchdog_atfork_child(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    aft_g_watchdog_thread_lock = fresh;
    aft_g_watchdog_has_thread = 0;
    aft_g_watchdog_running = 0;
    aft_watchdog_forget_pinger();
    for (uint32_t i = 0; i < AFT_WATCH_SLOTS; i++) {
        if (!aft_watchdog_slot_used(&aft_g_watchdog, i)) continue;
        aft_watch_target *t = &aft_g_watchdog.targets[i];
        if (t->stretch == AFT_STRETCH_HANG && t->hang_fd >= 0) close(t->hang_fd); /* the parent's */
        if (t->syscall_fd_tid != 0) { /* the parent's threads' */
            if (t->syscall_fd >= 0) close(t->syscall_fd);
        }
        t->hang_fd = t->syscall_fd = -1;
        t->syscall_fd_tid = 0;
        t->stretch = AFT_STRETCH_NONE;
        atomic_store(&t->in_hang, 0);
    }
    if (aft_g_watchdog.dir_fd >= 0) close(aft_g_watchdog.dir_fd);
    aft_g_watchdog.dir_fd = -1;
}
AFT_SMALL_STATE static pthread_once_t aft_g_watchdog_atfork_once = PTHREAD_ONCE_INIT;
static void aft_watchdog_register_atfork(void) {
    pthread_atfork(NULL, NULL, aft_watchdog_atfork_child);
}

int aft_watchdog_slot_used(aft_watchdog *w, uint32_t i) {
    if (i < AFT_WATCH_MAX_TARGETS) return i == 0 || i < atomic_load(&w->target_high);
    return i - AFT_WATCH_MAX_TARGETS < atomic_load(&w->unit_high);
}

void aft_watchdog_wake(aft_watchdog *w) {
    atomic_fetch_add(&w->wake, 1);
    aft_async_futex_wake(&w->wake);
}

/* Calls f for every target in use: the main one, the added ones, the units of work. */
#define AFT_FOR_EACH_TARGET(w, t, body)                                                            \
    do {                                                                                           \
        uint32_t high_ = atomic_load(&(w)->target_high), units_ = atomic_load(&(w)->unit_high);    \
        if (high_ < 1) high_ = 1; /* the main target, always */                                    \
        for (uint32_t i_ = 0; i_ < AFT_WATCH_MAX_TARGETS + units_; i_++) {                         \
            if (i_ >= high_ && i_ < AFT_WATCH_MAX_TARGETS) {                                       \
                i_ = AFT_WATCH_MAX_TARGETS - 1;                                                    \
                continue;                                                                          \
            }                                                                                      \
            aft_watch_target *t = &(w)->targets[i_];                                               \
            uint32_t state_ = atomic_load(&t->slot) & 0xffu;                                       \
            if (i_ != 0 && state_ != AFT_SLOT_ACTIVE && state_ != AFT_SLOT_HUNG &&                 \
                state_ != AFT_SLOT_ENDED)                                                          \
                continue;                                                                          \
            body;                                                                                  \
        }                                                                                          \
    } while (0)

/* A target removed, or a unit that ended during its hang: the slot is free again once its hang
 * (if any) is finished. */
static void aft_watchdog_release_ended(aft_watchdog *w, aft_watch_target *t, uint64_t now) {
    if (t == &w->targets[0]) return;
    uint32_t s = atomic_load(&t->slot);
    if ((s & 0xffu) != AFT_SLOT_ENDED) return;
    if (t->stretch == AFT_STRETCH_HANG) {
        uint64_t end = atomic_load(&t->hang_end_ns);
        aft_watchdog_finish_target(w, t, end != 0 ? end : now);
    }
    if (t->syscall_fd >= 0) close(t->syscall_fd);
    t->syscall_fd = -1;
    t->syscall_fd_tid = 0;
    t->stretch = AFT_STRETCH_NONE;
    atomic_store(&t->slot, (s & ~0xffu) | AFT_SLOT_FREE);
}

/* Whether any target needs the clock: watched now, or a hang in progress. */
static int aft_watchdog_needs_ticks(aft_watchdog *w, uint64_t now) {
    int needed = 0;
    AFT_FOR_EACH_TARGET(w, t, {
        aft_watchdog_release_ended(w, t, now);
        if (t->stretch == AFT_STRETCH_HANG ||
            (atomic_load(&t->armed) && atomic_load(&t->pause_depth) <= 0 &&
             !atomic_load(&w->background)))
            needed = 1;
        else
            aft_watchdog_arm_target(w, t, now);
    });
    return needed;
}

static void *aft_watchdog_main(void *arg) {
    aft_watchdog *w = arg;
    prctl(PR_SET_NAME, "aftermath.hang", 0, 0, 0); /* here: one call, no file for the creator */
    aft_thread_set_own_mask();
    atomic_store(&w->watchdog_tid, aft_async_gettid());

    uint64_t prev_tick = aft_async_now_ns(CLOCK_MONOTONIC);
    while (!atomic_load(&w->stop)) {
        uint32_t seen = atomic_load(&w->wake);
        uint64_t now = aft_async_now_ns(CLOCK_MONOTONIC);
        if (!aft_watchdog_needs_ticks(w, now)) {
            /* Paused, in the background, or never heard from: sleep until told otherwise. A
             * pinged target not yet heard from has a ping outstanding, whose running wakes us. */
            aft_park_note_wait(&aft_g_park_watchdog);
            if (atomic_load(&w->wake) == seen) aft_async_futex_wait_until(&w->wake, seen, 0);
            aft_park_note_awake(&aft_g_park_watchdog);
            atomic_fetch_add(&w->wakeups, 1);
            AFT_FOR_EACH_TARGET(w, t, {
                if (t->stretch != AFT_STRETCH_HANG) t->rebase = 1;
            });
            prev_tick = aft_async_now_ns(CLOCK_MONOTONIC);
            continue;
        }
        /* Every watched target an event loop found idle: a stall can only begin once one has
         * work, and is still seen within its threshold and AFT_WATCHDOG_IDLE_TICK_NS. */
        int all_idle = 1;
        AFT_FOR_EACH_TARGET(w, t, {
            if (!aft_watchdog_target_idle(w, t)) all_idle = 0;
        });
        uint64_t deadline = now + (all_idle ? AFT_WATCHDOG_IDLE_TICK_NS : AFT_WATCHDOG_TICK_NS);
        AFT_FOR_EACH_TARGET(w, t, {
            uint64_t due = aft_watchdog_target_due(w, t);
            if (due > now && due < deadline) deadline = due;
        });
        aft_park_note_wait(&aft_g_park_watchdog);
        aft_async_futex_wait_until(&w->wake, seen, deadline);
        aft_park_note_awake(&aft_g_park_watchdog);
        atomic_fetch_add(&w->wakeups, 1);
        if (atomic_load(&w->stop)) break;
        now = aft_async_now_ns(CLOCK_MONOTONIC);
        /* Our own sleep overshot: the process was stopped (SIGSTOP, freezer) or starved. That
         * time is nobody's hang. */
        uint64_t late = now > deadline ? now - deadline : 0;
        if (late > AFT_WATCHDOG_LATE_NS) {
            atomic_fetch_add(&w->late_ticks, 1);
        } else {
            late = 0;
        }
        AFT_FOR_EACH_TARGET(w, t, {
            aft_watchdog_tick_target(w, t, now, prev_tick, late);
            aft_watchdog_release_ended(w, t, now);
        });
        prev_tick = now;
    }
    return NULL;
}

static void aft_watchdog_set_error(char *error, size_t capacity, const char *what, int err) {
    if (error && capacity > 0) snprintf(error, capacity, "%s: %s", what, strerror(err));
}

int aft_watchdog_start(const aft_watchdog_options *options, char *error, size_t error_capacity) {
    if (!options || !options->hang_directory) {
        aft_watchdog_set_error(error, error_capacity, "aft_watchdog_start", EINVAL);
        return EINVAL;
    }
    pthread_once(&aft_g_watchdog_atfork_once, aft_watchdog_register_atfork);
    aft_watchdog_stop();
    aft_watchdog *w = &aft_g_watchdog;
    int dir_fd = open(options->hang_directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) {
        int err = errno;
        aft_watchdog_set_error(error, error_capacity, "opening the hang directory", err);
        return err;
    }
    w->dir_fd = dir_fd;
    w->threshold_ms = options->threshold_ms ? options->threshold_ms : 250u;
    w->mode = options->heartbeat_mode == AFT_HEARTBEAT_MANUAL ? AFT_HEARTBEAT_MANUAL
                                                              : AFT_HEARTBEAT_MAIN_QUEUE;
    w->notify = options->notify;
    w->capture_other_threads = options->other_threads != 0;
    /* What the app's threads look like (the caller's), for those the pinger's calls create. */
    pthread_sigmask(SIG_SETMASK, NULL, &w->app_mask);
    if (prctl(PR_GET_NAME, w->app_thread_name, 0, 0, 0) != 0) w->app_thread_name[0] = '\0';
    w->app_thread_name[sizeof(w->app_thread_name) - 1] = '\0';
    atomic_store(&w->stop, 0);
    atomic_store(&w->capture_state, AFT_CAPTURE_IDLE);
    for (uint32_t k = 0; k < AFT_WATCH_MAX_TARGETS / 64u; k++)
        atomic_store(&w->ping_requests[k], 0);
    atomic_store(&w->finished_requests, 0);
    for (uint32_t i = 1; i < AFT_WATCH_SLOTS; i++) {
        if (!aft_watchdog_slot_used(w, i)) continue; /* untouched memory stays untouched */
        aft_watch_target *t = &w->targets[i];
        uint32_t state = atomic_load(&t->slot) & 0xffu;
        if (state == AFT_SLOT_FREE) continue;
        aft_watchdog_reset_target(t);
        atomic_store(&t->ping_outstanding, 0); /* a ping of the last start never counts */
        if (t->kind == AFT_HANG_KIND_EVENT_LOOP || t->kind == AFT_HANG_KIND_CONCURRENCY_POOL)
            atomic_store(&t->armed, 0);
    }
    aft_watch_target *main_target = &w->targets[0];
    main_target->kind = AFT_HANG_KIND_MAIN;
    main_target->source = w->mode == AFT_HEARTBEAT_MANUAL ? AFT_SOURCE_BEAT : AFT_SOURCE_PING;
    main_target->threshold_ms = w->threshold_ms;
    main_target->threshold_ns = (uint64_t)w->threshold_ms * 1000000ull;
    main_target->parent = -1;
    aft_async_memcpy(main_target->name, "main", 5);
    main_target->syscall_fd = -1;
    aft_watchdog_reset_target(main_target);
    atomic_store(&main_target->ping_outstanding, 0);
    __atomic_fetch_and(&aft_g_heartbeat_attention, ~AFT_ATTENTION_HANG, __ATOMIC_RELEASE);
    if (w->mode == AFT_HEARTBEAT_MANUAL) {
        /* A loop that already beat keeps its thread; otherwise its first heartbeat binds. */
        if (atomic_load(&main_target->tid) == 0 || !atomic_load(&main_target->armed)) {
            atomic_store(&main_target->armed, 0);
            __atomic_fetch_or(&aft_g_heartbeat_attention, AFT_ATTENTION_BIND, __ATOMIC_RELEASE);
        }
    } else {
        atomic_store(&main_target->armed, 0);
        atomic_store(&main_target->tid, 0);
        __atomic_fetch_and(&aft_g_heartbeat_attention, ~AFT_ATTENTION_BIND, __ATOMIC_RELEASE);
    }
    aft_watchdog_install_signal(w, options->capture_signal);
    /* The first ping now, from the caller: queued before any job the app adds after start, it
     * arms detection as soon as the main queue is served, so a first job that hangs is seen. */
    if (main_target->source == AFT_SOURCE_PING && w->notify != NULL) {
        uint64_t now = aft_async_now_ns(CLOCK_MONOTONIC);
        atomic_store(&main_target->ping_posted_ns, now);
        atomic_store(&main_target->ping_outstanding, 1);
        main_target->last_ping_ns = now;
        w->notify(AFT_WATCHDOG_EVENT_PING, 0);
    }
    pthread_mutex_lock(&aft_g_watchdog_thread_lock);
    aft_g_watchdog_running = 1;
    pthread_mutex_unlock(&aft_g_watchdog_thread_lock);
    return options->thread_later ? 0 : aft_watchdog_start_thread(0, error, error_capacity);
}

/* Stops the watchdog; the caller holds aft_g_watchdog_thread_lock. */
static void aft_watchdog_stop_locked(void) {
    aft_watchdog *w = &aft_g_watchdog;
    if (!aft_g_watchdog_running) return;
    atomic_store(&w->stop, 1);
    aft_watchdog_wake(w);
    if (aft_g_watchdog_has_thread) pthread_join(aft_g_watchdog_thread, NULL);
    aft_watchdog_stop_pinger(w);
    aft_g_watchdog_has_thread = 0;
    aft_g_watchdog_running = 0;
    for (uint32_t i = 0; i < AFT_WATCH_SLOTS; i++) {
        if (!aft_watchdog_slot_used(w, i)) continue;
        aft_watch_target *t = &w->targets[i];
        if (t->stretch == AFT_STRETCH_HANG && t->hang_fd >= 0)
            close(t->hang_fd); /* unfinished: the next launch reports its last duration */
        if (t->stretch == AFT_STRETCH_HANG) t->hang_fd = -1;
        t->stretch = AFT_STRETCH_NONE;
        atomic_store(&t->in_hang, 0);
    }
    aft_watchdog_release_capture_signal(w);
    close(w->dir_fd);
    w->dir_fd = -1;
}

void aft_watchdog_lock_threads(void) { pthread_mutex_lock(&aft_g_watchdog_thread_lock); }
void aft_watchdog_unlock_threads(void) { pthread_mutex_unlock(&aft_g_watchdog_thread_lock); }

int aft_watchdog_start_thread(int pinger_later, char *error, size_t error_capacity) {
    pthread_mutex_lock(&aft_g_watchdog_thread_lock);
    if (!aft_g_watchdog_running || aft_g_watchdog_has_thread) {
        pthread_mutex_unlock(&aft_g_watchdog_thread_lock);
        return 0;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256u * 1024u);
    int err = aft_thread_create(&aft_g_watchdog_thread, &attr, aft_watchdog_main, &aft_g_watchdog);
    pthread_attr_destroy(&attr);
    if (err == 0) aft_g_watchdog_has_thread = 1;
    if (err == 0) err = aft_watchdog_start_pinger(&aft_g_watchdog, pinger_later);
    if (err != 0) {
        aft_watchdog_stop_locked(); /* under the lock: a start meanwhile is not undone */
        aft_watchdog_set_error(error, error_capacity, "creating the watchdog thread", err);
    }
    pthread_mutex_unlock(&aft_g_watchdog_thread_lock);
    return err;
}

int aft_watchdog_thread_running(void) {
    pthread_mutex_lock(&aft_g_watchdog_thread_lock);
    int running = aft_g_watchdog_has_thread;
    pthread_mutex_unlock(&aft_g_watchdog_thread_lock);
    return running;
}

void aft_watchdog_stop(void) {
    pthread_mutex_lock(&aft_g_watchdog_thread_lock);
    aft_watchdog_stop_locked();
    pthread_mutex_unlock(&aft_g_watchdog_thread_lock);
}
