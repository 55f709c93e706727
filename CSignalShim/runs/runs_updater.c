/*
 * runs_updater.c: NORMAL-TIME CODE (never runs in a signal handler). Keeps the run record's
 * live block current: the run's first work once (the OOM baseline, a first sample), then a
 * sample about once a second. While the hang watchdog's
 * pinger runs, the samples are its work between pings: it wakes for them anyway, and a thread
 * of their own would cost the app its creation, its stack's pages and a wake-up a second.
 * Without a pinger (hang detection off, or stopped), an updater thread does them: at start,
 * start's delivery thread, which takes the role on once its delivery found nothing to send
 * (aft_run_updater_adopt), as it takes the pinger's where hangs are watched.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "CSignalShim.h"
#include "shim_internal.h"
#include "role_internal.h"
#include "runs_internal.h"
#include "threads_internal.h"

/* Guarded by aft_g_run_thread_lock: the updater's creation (by the caller of
 * aft_run_start_updater, another thread than start's, or by the pinger's end) against its end. */
AFT_SMALL_STATE static pthread_mutex_t aft_g_run_thread_lock = PTHREAD_MUTEX_INITIALIZER;
AFT_SMALL_STATE static pthread_t aft_g_run_thread;
AFT_SMALL_STATE static int aft_g_run_thread_running;  /* an updater thread of its own */
AFT_SMALL_STATE static int aft_g_run_hosted;          /* the pinger does the updates */
AFT_SMALL_STATE static int aft_g_run_updater_pending; /* left to aft_run_start_updater */
/* The updater thread's role (role_internal.h), where start's delivery thread may take it on. */
AFT_SMALL_STATE static _Atomic uint32_t aft_g_run_role;
AFT_SMALL_STATE static _Atomic uint32_t aft_g_run_role_done;
/* Guarded by aft_g_run_lock. */
AFT_SMALL_STATE static pthread_cond_t aft_g_run_wake = PTHREAD_COND_INITIALIZER;
AFT_SMALL_STATE static int aft_g_run_thread_stop;
AFT_SMALL_STATE static uint64_t aft_g_run_due_ns; /* the hosted updates' next, CLOCK_MONOTONIC */

static uint64_t aft_run_interval_ns(void) {
    return (uint64_t)aft_g_run_info.update_interval_ms * 1000000ull;
}

/* The run's baseline (its cgroups' OOM counters, vmstat's oom_kill) read now, and the run
 * file's info block rewritten with it, then a first full sample. Caller holds the lock. */
static void aft_run_complete_baseline(void) {
    aft_g_run_baseline_pending = 0;
    aft_run_read_baseline(aft_g_run_proc, aft_g_run_sys, &aft_g_run_info);
    if (aft_g_run.fd < 0 || aft_g_run_exited) return;
    struct {
        aft_file_header header;
        aft_run_info info;
    } head;
    aft_run_header(&head.header, &aft_g_run_info);
    head.info = aft_g_run_info;
    _Static_assert(offsetof(aft_run_file, info) == sizeof(aft_file_header), "info follows");
    if (aft_async_pwrite_all(aft_g_run.fd, &head, sizeof(head), 0) != 0) return;
    /* at_start: the counters just read for the baseline are the sample's (read once) */
    aft_run_sample_with(aft_g_run_proc, &aft_g_run_info, &aft_g_run_live, 1);
    aft_run_write_live();
}

/* The run's first work, once: the OOM baseline and a first sample. The next launch's spare run
 * file is made after start's delivery (aft_run_make_spare_once), which may make the run it
 * found ended cleanly the spare instead. Caller holds the lock. */
static void aft_run_first_work(void) {
    if (aft_g_run_baseline_pending) aft_run_complete_baseline();
}

/* One periodic update. Caller holds the lock. */
static void aft_run_update_locked(void) {
    aft_install_refresh_images();
    if (aft_g_run.fd >= 0 && !aft_g_run_exited) {
        aft_g_run_live.foreground = (uint32_t)aft_watchdog_is_foreground();
        aft_run_sample(aft_g_run_proc, &aft_g_run_info, &aft_g_run_live);
        aft_run_write_live();
    }
    (void)aft_release_memory_of_ended_thread(); /* the delivery thread's, once it ended */
}

static void *aft_run_updater(void *arg) {
    (void)arg;
    aft_thread_set_own_mask();
    prctl(PR_SET_NAME, "aftermath.run", 0, 0, 0); /* here: one call, no file for the creator */
    atomic_store(&aft_g_run_updater_tid, aft_async_gettid()); /* listed at a crash without /proc */
    pthread_mutex_lock(&aft_g_run_lock);
    aft_run_first_work();
    while (!aft_g_run_thread_stop) {
        uint32_t ms = aft_g_run_info.update_interval_ms;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += ms / 1000;
        until.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        int rc = 0;
        aft_park_note_wait(&aft_g_park_run);
        while (!aft_g_run_thread_stop && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&aft_g_run_wake, &aft_g_run_lock, &until);
        aft_park_note_awake(&aft_g_park_run);
        if (aft_g_run_thread_stop) break;
        aft_run_update_locked();
    }
    pthread_mutex_unlock(&aft_g_run_lock);
    return NULL;
}

/* An updater thread. Caller holds aft_g_run_thread_lock. */
static int aft_run_create_updater_locked(void) {
    pthread_mutex_lock(&aft_g_run_lock);
    aft_g_run_thread_stop = 0;
    pthread_mutex_unlock(&aft_g_run_lock);
    int err = aft_thread_create(&aft_g_run_thread, NULL, aft_run_updater, NULL);
    if (err == 0) aft_g_run_thread_running = 1;
    return err;
}

uint64_t aft_run_hosted_tick(uint64_t now_ns) {
    pthread_mutex_lock(&aft_g_run_lock);
    if (now_ns >= aft_g_run_due_ns) {
        aft_run_update_locked();
        aft_g_run_due_ns = now_ns + aft_run_interval_ns();
    }
    uint64_t due = aft_g_run_due_ns;
    pthread_mutex_unlock(&aft_g_run_lock);
    return due;
}

void aft_run_host_ended(void) {
    pthread_mutex_lock(&aft_g_run_thread_lock);
    if (aft_g_run_hosted) {
        aft_g_run_hosted = 0;
        /* The first work is done: the thread's own first call finds nothing left of it. */
        (void)aft_run_create_updater_locked();
    }
    pthread_mutex_unlock(&aft_g_run_thread_lock);
}

static void aft_run_updater_loop(void) { (void)aft_run_updater(NULL); }

int aft_run_updater_adopt(void) {
    return aft_role_take(&aft_g_run_role, &aft_g_run_role_done, aft_run_updater_loop);
}

void aft_run_updater_start_pending(void) {
    if (atomic_load(&aft_g_run_role) != AFT_ROLE_PENDING) return;
    pthread_mutex_lock(&aft_g_run_thread_lock);
    if (atomic_load(&aft_g_run_role) == AFT_ROLE_PENDING &&
        aft_thread_create(&aft_g_run_thread, NULL, aft_run_updater, NULL) == 0)
        atomic_store(&aft_g_run_role, AFT_ROLE_MADE);
    pthread_mutex_unlock(&aft_g_run_thread_lock);
}

static int aft_run_start_updater_with(int first_work_here, int later) {
    pthread_mutex_lock(&aft_g_run_thread_lock);
    int err = 0;
    if (aft_g_run_updater_pending && !aft_g_run_thread_running && !aft_g_run_hosted) {
        aft_g_run_updater_pending = 0;
        if (first_work_here) {
            /* Its deepest calls (the cgroups' paths, the baseline's file reads) on the caller,
             * start's background thread, whose stack is given back when it ends: the stack that
             * samples stays as shallow as the periodic sample, for the run's life. */
            pthread_mutex_lock(&aft_g_run_lock);
            aft_run_first_work();
            aft_g_run_due_ns = aft_async_now_ns(CLOCK_MONOTONIC) + aft_run_interval_ns();
            pthread_mutex_unlock(&aft_g_run_lock);
            aft_g_run_hosted = aft_pinger_host_run();
        }
        if (!aft_g_run_hosted && later) {
            /* Left to the caller, start's delivery thread: it takes the role on, or makes the
             * thread before a delivery that may take long. */
            pthread_mutex_lock(&aft_g_run_lock);
            aft_g_run_thread_stop = 0;
            pthread_mutex_unlock(&aft_g_run_lock);
            atomic_store(&aft_g_run_role, AFT_ROLE_PENDING);
            aft_g_run_thread_running = 1;
        } else if (!aft_g_run_hosted) {
            err = aft_run_create_updater_locked();
        }
    }
    pthread_mutex_unlock(&aft_g_run_thread_lock);
    return err;
}

int aft_run_start_updater(int later) { return aft_run_start_updater_with(1, later); }

void aft_run_updater_arm(int start_now) {
    pthread_mutex_lock(&aft_g_run_thread_lock);
    aft_g_run_updater_pending = 1;
    pthread_mutex_unlock(&aft_g_run_thread_lock);
    if (start_now) aft_run_start_updater_with(0, 0);
}

void aft_run_updater_stop(void) {
    pthread_mutex_lock(&aft_g_run_thread_lock);
    aft_g_run_updater_pending = 0;
    if (aft_g_run_hosted) {
        aft_pinger_unhost_run();
        aft_g_run_hosted = 0;
    }
    if (aft_g_run_thread_running) {
        pthread_mutex_lock(&aft_g_run_lock);
        aft_g_run_thread_stop = 1;
        pthread_cond_broadcast(&aft_g_run_wake);
        pthread_mutex_unlock(&aft_g_run_lock);
        /* A role still to come is not taken now; one taken ends at its next wake. */
        int own = atomic_load(&aft_g_run_updater_tid) == aft_async_gettid();
        if (aft_role_stop(&aft_g_run_role, &aft_g_run_role_done, own) == AFT_ROLE_MADE)
            pthread_join(aft_g_run_thread, NULL);
        aft_g_run_thread_running = 0;
    }
    pthread_mutex_unlock(&aft_g_run_thread_lock);
}

void aft_run_updater_after_fork_in_child(void) {
    aft_g_run_thread_running = 0;
    atomic_store(&aft_g_run_role, AFT_ROLE_MADE);
    atomic_store(&aft_g_run_role_done, 1);
    aft_g_run_hosted = 0;
    aft_g_run_updater_pending = 0;
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    aft_g_run_thread_lock = fresh;
}
