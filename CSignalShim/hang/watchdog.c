/*
 * watchdog.c: NORMAL-TIME CODE. The hang watchdog's thread: start/stop, the tick on
 * CLOCK_MONOTONIC (at most 10 wakeups a second, none while paused, in the background or before
 * the first heartbeat), stop detection (a late tick), the main-queue ping's posting. Its controls
 * (pause/resume, foreground, the heartbeat's rare path, the ping's answer) are in
 * watchdog_controls.c; the capture signal's choice and the mask of Aftermath's threads in
 * watchdog_signal.c. Everything it does once the watched thread is suspected stuck is in
 * watchdog_async.c; the only call out of C (notify) is made by start, or while the watched thread
 * is known to be running.
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
#include "watchdog_internal.h"

aft_watchdog aft_g_watchdog = {.dir_fd = -1, .hang_fd = -1, .foreground = 1};
uint64_t aft_g_heartbeat_beats;
uint32_t aft_g_heartbeat_attention;

static pthread_t aft_g_watchdog_thread;
static int aft_g_watchdog_running;    /* started: directory, capture signal, first ping */
static int aft_g_watchdog_has_thread; /* and its thread created */
/* Guards the thread's creation (aft_watchdog_start_thread, from another thread than start's)
 * against its end. */
static pthread_mutex_t aft_g_watchdog_thread_lock = PTHREAD_MUTEX_INITIALIZER;

/* A forked child has no watchdog thread (fork copies only the caller), and the lock may have
 * been held by a thread the child does not have. */
static void aft_watchdog_atfork_child(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    aft_g_watchdog_thread_lock = fresh;
    aft_g_watchdog_has_thread = 0;
    aft_g_watchdog_running = 0;
    if (aft_g_watchdog.hang_fd >= 0) close(aft_g_watchdog.hang_fd); /* the parent's hang */
    aft_g_watchdog.hang_fd = -1;
    if (aft_g_watchdog.dir_fd >= 0) close(aft_g_watchdog.dir_fd);
    aft_g_watchdog.dir_fd = -1;
}
static pthread_once_t aft_g_watchdog_atfork_once = PTHREAD_ONCE_INIT;
static void aft_watchdog_register_atfork(void) {
    pthread_atfork(NULL, NULL, aft_watchdog_atfork_child);
}

enum { AFT_STRETCH_NONE, AFT_STRETCH_HANG, AFT_STRETCH_IGNORED };

void aft_watchdog_wake(aft_watchdog *w) {
    atomic_fetch_add(&w->wake, 1);
    aft_async_futex_wake(&w->wake);
}

static int aft_watchdog_detecting(aft_watchdog *w) {
    return atomic_load(&w->armed) && atomic_load(&w->pause_depth) <= 0 &&
           atomic_load(&w->foreground);
}

static uint64_t aft_beats(void) {
    return __atomic_load_n(&aft_g_heartbeat_beats, __ATOMIC_ACQUIRE);
}

/* Posts one main-queue ping; returns its time, or 0 when none was posted. */
static uint64_t aft_watchdog_post_ping(aft_watchdog *w) {
    if (w->mode != AFT_HEARTBEAT_MAIN_QUEUE || w->notify == NULL) return 0;
    if (atomic_load(&w->ping_outstanding)) return 0;
    uint64_t now = aft_async_now_ns(CLOCK_MONOTONIC);
    atomic_store(&w->ping_posted_ns, now);
    atomic_store(&w->ping_outstanding, 1);
    w->notify(AFT_WATCHDOG_EVENT_PING);
    return now;
}

/* The watched thread ran again: close the hang's file and tell the owner. */
static void aft_watchdog_finish(aft_watchdog *w, uint64_t end_ns) {
    aft_async_watchdog_update_hang(w, end_ns, 1);
    atomic_store(&w->in_hang, 0);
    __atomic_fetch_and(&aft_g_heartbeat_attention, ~AFT_ATTENTION_HANG, __ATOMIC_RELEASE);
    atomic_store(&w->hang_end_ns, 0);
    if (w->notify) w->notify(AFT_WATCHDOG_EVENT_HANG_FINISHED);
}

static void *aft_watchdog_main(void *arg) {
    aft_watchdog *w = arg;
    prctl(PR_SET_NAME, "aftermath.hang", 0, 0, 0); /* here: one call, no file for the creator */
    aft_thread_set_own_mask();
    atomic_store(&w->watchdog_tid, aft_async_gettid());

    int stretch = AFT_STRETCH_NONE, rebase = 1;
    uint64_t now = 0, deadline = 0, prev_tick = 0, last_beats = 0;
    uint64_t blocked_since = 0;  /* no sign of life since: the hang's lower bound */
    uint64_t earliest_onset = 0; /* alive at or after this: the hang began after it */
    while (!atomic_load(&w->stop)) {
        uint32_t seen = atomic_load(&w->wake);
        if (stretch != AFT_STRETCH_HANG && !aft_watchdog_detecting(w)) {
            /* Paused, in the background, or never heard from: sleep until told otherwise.
             * In main-queue mode one ping is outstanding, and its running arms us. */
            if (!atomic_load(&w->armed)) aft_watchdog_post_ping(w);
            if (atomic_load(&w->wake) == seen && !aft_watchdog_detecting(w))
                aft_async_futex_wait_until(&w->wake, seen, 0);
            atomic_fetch_add(&w->wakeups, 1);
            stretch = AFT_STRETCH_NONE;
            rebase = 1;
            continue;
        }
        if (rebase) {
            now = aft_async_now_ns(CLOCK_MONOTONIC);
            last_beats = aft_beats();
            prev_tick = blocked_since = earliest_onset = now;
            /* A ping still waiting from before (a pause) counts from now, like a new one. */
            aft_watchdog_post_ping(w);
            deadline = now + AFT_WATCHDOG_TICK_NS;
            rebase = 0;
        }
        aft_async_futex_wait_until(&w->wake, seen, deadline);
        atomic_fetch_add(&w->wakeups, 1);
        if (atomic_load(&w->stop)) break;
        now = aft_async_now_ns(CLOCK_MONOTONIC);
        if (now < deadline) {
            /* Woken early: a hang's end is handled now; anything else (pause, resume,
             * foreground, a restart of the clock) starts a fresh baseline. */
            int ended = stretch == AFT_STRETCH_HANG &&
                        (w->mode == AFT_HEARTBEAT_MAIN_QUEUE ? !atomic_load(&w->ping_outstanding)
                                                             : atomic_load(&w->hang_end_ns) != 0);
            if (!ended) {
                if (stretch != AFT_STRETCH_HANG) rebase = 1;
                continue;
            }
        }
        uint64_t late = now > deadline ? now - deadline : 0;
        uint64_t beats = aft_beats();
        int alive = beats != last_beats;
        last_beats = beats;

        if (late > AFT_WATCHDOG_LATE_NS) {
            /* Our own sleep overshot: the process was stopped (SIGSTOP, freezer) or starved.
             * That time is nobody's hang. */
            atomic_fetch_add(&w->late_ticks, 1);
            if (stretch == AFT_STRETCH_HANG) {
                w->hang_stopped_ns += late;
            } else {
                prev_tick = blocked_since = earliest_onset = now;
                deadline = now + AFT_WATCHDOG_TICK_NS;
                continue;
            }
        }

        if (stretch == AFT_STRETCH_HANG) {
            uint64_t end = 0;
            if (w->mode == AFT_HEARTBEAT_MAIN_QUEUE) {
                if (!atomic_load(&w->ping_outstanding)) end = atomic_load(&w->ping_ran_ns);
            } else if (atomic_load(&w->hang_end_ns) != 0) {
                end = atomic_load(&w->hang_end_ns);
            } else if (alive) {
                end = prev_tick + (now - prev_tick) / 2;
            }
            if (end != 0) {
                aft_watchdog_finish(w, end);
                stretch = AFT_STRETCH_NONE;
                alive = 1;
                earliest_onset = end;
                blocked_since = now;
            } else if (now + 5000000ull >= w->hang_last_live_ns + AFT_WATCHDOG_LIVE_NS) {
                aft_async_watchdog_update_hang(w, now, 0);
            }
        } else if (stretch == AFT_STRETCH_IGNORED && alive) {
            stretch = AFT_STRETCH_NONE;
        }

        if (stretch == AFT_STRETCH_NONE) {
            if (w->mode == AFT_HEARTBEAT_MANUAL && alive) {
                earliest_onset = prev_tick;
                blocked_since = now;
            } else if (w->mode == AFT_HEARTBEAT_MAIN_QUEUE && !atomic_load(&w->ping_outstanding)) {
                uint64_t ran = atomic_load(&w->ping_ran_ns);
                uint64_t posted = aft_watchdog_post_ping(w);
                if (posted != 0) {
                    earliest_onset = ran > earliest_onset ? ran : earliest_onset;
                    blocked_since = posted;
                }
            } else if (now - blocked_since > w->threshold_ns) {
                /* Past the threshold: only now is /proc worth reading. */
                uint64_t tid = atomic_load(&w->watched_tid);
                aft_hang_facts facts = {
                    .silent_ns = now - blocked_since,
                    .threshold_ns = w->threshold_ns,
                    .armed = atomic_load(&w->armed),
                    .pause_depth = atomic_load(&w->pause_depth),
                    .foreground = atomic_load(&w->foreground),
                    .crash_in_progress = aft_async_crash_in_progress(),
                    .traced = aft_async_watchdog_traced(w),
                    .thread_state = aft_async_watchdog_thread_state(w, tid),
                };
                uint32_t verdict = aft_async_hang_decide(&facts);
                if (verdict == AFT_HANG_VERDICT_OFF) {
                    rebase = 1; /* paused or sent to the background just now */
                } else if (verdict == AFT_HANG_VERDICT_IGNORE) {
                    atomic_fetch_add(&w->ignored, 1);
                    stretch = AFT_STRETCH_IGNORED;
                } else if (verdict == AFT_HANG_VERDICT_HANG) {
                    uint64_t onset = earliest_onset + (blocked_since - earliest_onset) / 2;
                    atomic_store(&w->hang_end_ns, 0);
                    atomic_store(&w->in_hang, 1);
                    if (w->mode == AFT_HEARTBEAT_MANUAL)
                        __atomic_fetch_or(&aft_g_heartbeat_attention, AFT_ATTENTION_HANG,
                                          __ATOMIC_RELEASE);
                    aft_async_watchdog_begin_hang(w, tid, onset, now);
                    stretch = AFT_STRETCH_HANG;
                }
            }
        }

        prev_tick = now;
        now = aft_async_now_ns(CLOCK_MONOTONIC);
        deadline = now + AFT_WATCHDOG_TICK_NS;
        uint64_t next = 0;
        if (stretch == AFT_STRETCH_NONE) next = blocked_since + w->threshold_ns + 1000000ull;
        if (stretch == AFT_STRETCH_HANG) next = w->hang_last_live_ns + AFT_WATCHDOG_LIVE_NS;
        if (next > now && next < deadline) deadline = next;
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
    w->threshold_ns = (uint64_t)w->threshold_ms * 1000000ull;
    w->mode = options->heartbeat_mode == AFT_HEARTBEAT_MANUAL ? AFT_HEARTBEAT_MANUAL
                                                              : AFT_HEARTBEAT_MAIN_QUEUE;
    w->notify = options->notify;
    w->capture_other_threads = options->other_threads != 0;
    w->hang_fd = -1;
    atomic_store(&w->stop, 0);
    atomic_store(&w->in_hang, 0);
    atomic_store(&w->hang_end_ns, 0);
    atomic_store(&w->ping_outstanding, 0);
    atomic_store(&w->capture_state, AFT_CAPTURE_IDLE);
    __atomic_fetch_and(&aft_g_heartbeat_attention, ~AFT_ATTENTION_HANG, __ATOMIC_RELEASE);
    if (w->mode == AFT_HEARTBEAT_MANUAL) {
        /* A loop that already beat keeps its thread; otherwise its first heartbeat binds. */
        if (atomic_load(&w->watched_tid) == 0 || !atomic_load(&w->armed)) {
            atomic_store(&w->armed, 0);
            __atomic_fetch_or(&aft_g_heartbeat_attention, AFT_ATTENTION_BIND, __ATOMIC_RELEASE);
        }
    } else {
        atomic_store(&w->armed, 0);
        atomic_store(&w->watched_tid, 0);
        __atomic_fetch_and(&aft_g_heartbeat_attention, ~AFT_ATTENTION_BIND, __ATOMIC_RELEASE);
    }
    aft_watchdog_install_signal(w, options->capture_signal);
    /* The first ping now, from the caller: queued before any job the app adds after start, it
     * arms detection as soon as the main queue is served, so a first job that hangs is seen. */
    aft_watchdog_post_ping(w);
    pthread_mutex_lock(&aft_g_watchdog_thread_lock);
    aft_g_watchdog_running = 1;
    pthread_mutex_unlock(&aft_g_watchdog_thread_lock);
    return options->thread_later ? 0 : aft_watchdog_start_thread(error, error_capacity);
}

/* Stops the watchdog; the caller holds aft_g_watchdog_thread_lock. */
static void aft_watchdog_stop_locked(void) {
    aft_watchdog *w = &aft_g_watchdog;
    if (!aft_g_watchdog_running) return;
    atomic_store(&w->stop, 1);
    aft_watchdog_wake(w);
    if (aft_g_watchdog_has_thread) pthread_join(aft_g_watchdog_thread, NULL);
    aft_g_watchdog_has_thread = 0;
    aft_g_watchdog_running = 0;
    if (w->hang_fd >= 0) { /* unfinished: the next launch reports its last duration */
        close(w->hang_fd);
        w->hang_fd = -1;
    }
    atomic_store(&w->in_hang, 0);
    aft_watchdog_release_capture_signal(w);
    close(w->dir_fd);
    w->dir_fd = -1;
}

int aft_watchdog_start_thread(char *error, size_t error_capacity) {
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
    if (err == 0) {
        aft_g_watchdog_has_thread = 1;
    } else {
        aft_watchdog_stop_locked(); /* under the lock: a start meanwhile is not undone */
        aft_watchdog_set_error(error, error_capacity, "creating the watchdog thread", err);
    }
    pthread_mutex_unlock(&aft_g_watchdog_thread_lock);
    return err;
}

void aft_watchdog_stop(void) {
    pthread_mutex_lock(&aft_g_watchdog_thread_lock);
    aft_watchdog_stop_locked();
    pthread_mutex_unlock(&aft_g_watchdog_thread_lock);
}
