/* aft_watchdog.h: the hang watchdog's C interface (issue 3). Included by CSignalShim.h.
 *
 * A watchdog thread (normal-time C, watchdog.c) watches one thread, "the watched thread", for
 * stretches without a heartbeat longer than a threshold. Heartbeats come two ways:
 *   - AFT_HEARTBEAT_MAIN_QUEUE: the watchdog asks its owner (notify(AFT_WATCHDOG_EVENT_PING)) to
 *     post a block on the main queue that calls aft_watchdog_ping_ran(); the thread that runs it
 *     becomes the watched thread. Detection arms when the first ping ran.
 *   - AFT_HEARTBEAT_MANUAL: the app's own loop calls aft_heartbeat(); the first caller (or the
 *     next caller after aft_watchdog_watch_next_heartbeat_thread()) is the watched thread.
 * A hang is captured and persisted by watchdog_async.c (no malloc, no locks) into
 * <hang directory>/<hang id>.hang, its duration kept up to date in the header's live block.
 */
#ifndef AFT_WATCHDOG_H
#define AFT_WATCHDOG_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AFT_HEARTBEAT_MAIN_QUEUE 0u
#define AFT_HEARTBEAT_MANUAL 1u

/* Events the watchdog thread passes to options.notify (in normal time, never during a hang). */
#define AFT_WATCHDOG_EVENT_PING 1u          /* post one main-queue block calling ..._ping_ran */
#define AFT_WATCHDOG_EVENT_HANG_FINISHED 2u /* a hang file got AFT_FLAG_HANG_FINISHED */

/* attention bits of aft_g_heartbeat_attention: the next heartbeat takes the slow path. */
#define AFT_ATTENTION_BIND 0x1u   /* record the caller as the watched thread and arm */
#define AFT_ATTENTION_HANG 0x2u   /* a hang is in progress: record its end, wake the watchdog */

typedef struct aft_watchdog_options {
    const char *hang_directory;     /* existing directory for hang files */
    uint32_t threshold_ms;          /* 0 = 250 */
    int32_t capture_signal;         /* 0 = SIGURG; never used when the app handles it */
    uint32_t heartbeat_mode;        /* AFT_HEARTBEAT_* */
    uint32_t _reserved;
    void (*notify)(uint32_t event); /* called on the watchdog thread; may be NULL */
} aft_watchdog_options;

/* What the watchdog did so far (tests and benchmark). */
typedef struct aft_watchdog_stats {
    uint64_t wakeups;               /* times the watchdog thread woke up */
    uint64_t hangs;                 /* hangs persisted */
    uint64_t ignored_stretches;     /* suspected hangs ignored: tracer or stopped thread */
    uint64_t late_ticks;            /* ticks that came late: the process had been stopped */
    uint64_t last_detection_latency_ns; /* detection time minus the estimated onset */
    uint64_t last_detection_ns;     /* CLOCK_MONOTONIC when the last hang was detected */
    uint64_t last_capture_pause_ns; /* how long the signal handler held the watched thread */
    uint32_t last_capture_method;   /* AFT_CAPTURE_* of the last hang */
    uint32_t signal_usable;         /* 1 when the capture signal may be sent */
    uint64_t watched_tid;           /* 0 until armed */
    uint64_t watchdog_tid;          /* the watchdog thread's kernel tid */
} aft_watchdog_stats;

/* Starts (or restarts with new options) the watchdog thread. Returns 0, or an errno value with
 * a message in error (NUL-terminated). The crash handler must be installed first (aft_install):
 * hang files copy its prepared context. */
int aft_watchdog_start(const aft_watchdog_options *options, char *error, size_t error_capacity);

/* Stops the watchdog thread and restores the capture signal's previous action. An unfinished
 * hang is left on disk as it is (the next launch reports it unfinished). */
void aft_watchdog_stop(void);

/* Nested pause for intentional blocking: no detection and no wakeups until as many resumes. */
void aft_watchdog_pause(void);
void aft_watchdog_resume(void);

/* Foreground (default) or background: detection only runs in the foreground. */
void aft_watchdog_set_foreground(int32_t foreground);
/* The foreground state (one place for the watchdog and the run record). */
int32_t aft_watchdog_is_foreground(void);

/* Called by the main-queue ping block: records the calling thread and the time it ran. */
void aft_watchdog_ping_ran(void);

/* Manual mode: the next aft_heartbeat() caller becomes the watched thread. */
void aft_watchdog_watch_next_heartbeat_thread(void);

/* Copies the watchdog's counters into out. */
void aft_watchdog_get_stats(aft_watchdog_stats *out);

/* The heartbeat's shared words (watchdog.c). Read by the watchdog thread. */
extern uint64_t aft_g_heartbeat_beats;
extern uint32_t aft_g_heartbeat_attention;

/* The rare path of aft_heartbeat (binding, the end of a hang). */
void aft_heartbeat_slow(void);

/* One heartbeat from the app's own loop: two relaxed memory accesses and a predicted branch;
 * no allocation, no lock, no system call except on the first call and at the end of a hang. */
static inline void aft_heartbeat(void) {
    uint64_t beats = __atomic_load_n(&aft_g_heartbeat_beats, __ATOMIC_RELAXED);
    __atomic_store_n(&aft_g_heartbeat_beats, beats + 1, __ATOMIC_RELAXED);
    if (__builtin_expect(__atomic_load_n(&aft_g_heartbeat_attention, __ATOMIC_RELAXED) != 0, 0))
        aft_heartbeat_slow();
}

/* Test and benchmark helpers (watchdog.c), normal time. */
/* Parses the state letter of a /proc/<pid>/task/<tid>/stat text ('?' when malformed). */
char aft_proc_stat_state(const char *text, size_t length);
/* Parses a /proc/.../syscall text: returns 1 and sets nr (-1 = blocked outside a syscall),
 * sp and pc; returns 0 for "running" or malformed text. */
int aft_proc_syscall_parse(const char *text, size_t length, int64_t *nr, uint64_t *sp,
                           uint64_t *pc);
/* 1 when a thread blocked in syscall nr would see EINTR if a signal handler ran. */
int aft_syscall_interrupted_by_handler(int64_t nr);
/* The TracerPid value of a /proc/<pid>/status text (0 when absent or malformed). */
int64_t aft_proc_status_tracer(const char *text, size_t length);
/* Whether signal signo is set in the SigBlk mask of a /proc/.../status text (-1: no SigBlk). */
int aft_proc_status_blocks(const char *text, size_t length, int signo);

#ifdef __cplusplus
}
#endif

#endif /* AFT_WATCHDOG_H */
