/*
 * watchdog_internal.h: the hang watchdog's state, shared by watchdog.c, watchdog_signal.c and
 * watchdog_controls.c (normal time: the thread, its clock, the capture signal, pause and
 * foreground) and watchdog_async.c (the hang path: capture, persist, live updates). Not imported by Swift. Everything the hang path touches is prepared at start.
 */
#ifndef AFT_WATCHDOG_INTERNAL_H
#define AFT_WATCHDOG_INTERNAL_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "CSignalShim.h"
#include "shim_internal.h"
#include "park_internal.h"
#include "swift_async_internal.h"

#define AFT_WATCHDOG_TICK_NS (100ull * 1000 * 1000)      /* at most 10 wakeups a second */
#define AFT_WATCHDOG_IDLE_TICK_NS (125ull * 1000 * 1000) /* while every watched loop is idle */
#define AFT_WATCHDOG_LIVE_NS (250ull * 1000 * 1000)      /* live block update period */
#define AFT_LOOP_PING_DELAY_NS (50ull * 1000 * 1000)     /* an event loop's ping, once asked */
#define AFT_WATCHDOG_LATE_NS (100ull * 1000 * 1000)      /* a tick this late: we were stopped */
#define AFT_WATCHDOG_CAPTURE_NS (200ull * 1000 * 1000)   /* the signal's delivery budget */
#define AFT_WATCHDOG_SCAN_FRAMES 128u
#define AFT_WATCHDOG_GAP_FRAMES 32u /* the watched thread's walk from sp, beside libunwind's */
#define AFT_WATCHDOG_SCAN_BYTES (256u * 1024u)

/* capture_state values (low 8 bits; the generation is in the upper bits). */
#define AFT_CAPTURE_IDLE 0u
#define AFT_CAPTURE_REQUESTED 1u
#define AFT_CAPTURE_RUNNING 2u
#define AFT_CAPTURE_DONE 3u
#define AFT_CAPTURE_CANCELLED 4u

/* How a target shows it is alive. */
#define AFT_SOURCE_PING 0u /* a job it runs when asked (the main queue, a loop, the pool) */
#define AFT_SOURCE_BEAT 1u /* its own loop's heartbeats */
#define AFT_SOURCE_UNIT 2u /* a unit of work: alive until it lasts longer than the threshold */

/* aft_watch_target.slot: lifecycle (low 8 bits; a unit's sequence in the upper bits). */
#define AFT_SLOT_FREE 0u
#define AFT_SLOT_CLAIMED 1u /* being filled in by its owner */
#define AFT_SLOT_ACTIVE 2u
#define AFT_SLOT_HUNG 3u  /* (units) the watchdog took it as a hang: only it frees the slot */
#define AFT_SLOT_ENDED 4u /* (units) ended during its hang: end_ns is the end */

/* aft_watch_target.attention: the next beat takes the slow path. */
#define AFT_TARGET_BIND 0x1u
#define AFT_TARGET_HANG 0x2u

/* Stretch states (watchdog thread only). */
#define AFT_STRETCH_NONE 0
#define AFT_STRETCH_HANG 1
#define AFT_STRETCH_IGNORED 2

/* One watched target: the main one (index 0), an added one, or a unit of work in progress. */
/* Where a thread waits in a system call, from /proc/self/task/<tid>/syscall; nr < 0: none. */
typedef struct aft_wait_site {
    uint64_t tid, sp, pc;
    int64_t nr;
} aft_wait_site;

typedef struct aft_watch_target {
    /* Set while the slot is claimed, read-only while active. */
    _Atomic uint32_t slot; /* AFT_SLOT_* | sequence << 8 */
    uint32_t kind;         /* AFT_HANG_KIND_* */
    uint32_t source;       /* AFT_SOURCE_* */
    uint32_t threshold_ms;
    uint64_t threshold_ns;
    int32_t parent; /* a unit: its work target; else -1 */
    int32_t tag;    /* the adder's (aft_watch_add_tagged), -1: none */
    char name[AFT_SHORT_STRING];

    /* Shared with the target's threads. */
    _Atomic uint64_t tid;
    _Atomic int roaming;  /* (pinged) its jobs ran on more than one thread: not a thread's loop */
    uint64_t ping_due_ns; /* (pinger only) an event loop's ping asked for goes at this time */
    _Atomic int armed;
    _Atomic int32_t pause_depth;
    _Atomic uint32_t generation; /* bumped by pause and resume: a fresh baseline */
    _Atomic uint64_t beats;
    _Atomic uint32_t attention; /* AFT_TARGET_* */
    _Atomic int ping_outstanding;
    _Atomic uint64_t ping_posted_ns; /* CLOCK_MONOTONIC */
    _Atomic uint64_t ping_ran_ns;
    _Atomic uint64_t begin_ns;    /* a unit: when it began */
    _Atomic uint64_t hang_end_ns; /* set by the beat or end that ended a hang */
    _Atomic int in_hang;

    /* The watchdog thread's alone. */
    int stretch, rebase;
    uint32_t seen_generation;
    uint64_t blocked_since;     /* no sign of life since: the hang's lower bound */
    uint64_t earliest_onset;    /* alive at or after this: the hang began after it */
    uint64_t baseline_ns;       /* the last fresh start (start, resume, a stop of the process) */
    uint32_t parent_generation; /* a unit: its work target's generation last seen */
    uint64_t last_beats;
    uint64_t last_ping_ns; /* when a ping was last asked for */
    int syscall_fd;        /* an event loop's /proc/self/task/<tid>/syscall, kept open */
    uint64_t syscall_fd_tid;
    uint64_t idle_run_ns;  /* its CPU time when last found idle (UINT64_MAX: not idle) */
    uint64_t idle_seen_ns; /* when it was last found idle */
    /* The main thread's run loop between jobs (main_idle.c): where it waits (system call,
     * stack pointer, pc), learned from waits a ping then woke at once, and the wait read when
     * the last ping was asked for. */
    aft_wait_site loop_wait, asked_wait;
    uint32_t loop_wait_seen;   /* pings that found it waiting there and ran at once */
    uint32_t loop_wait_asks;   /* pings asked for before the first look (main_idle.c) */
    uint64_t loop_wait_cpu_ns; /* its CPU time when last found there (UINT64_MAX: not) */
    int hang_fd;               /* the committed file of its hang, kept open for live updates */
    uint64_t hang_onset_ns, hang_stopped_ns, hang_last_live_ns;
    uint64_t rate_tokens_ns; /* the rate limit's bucket, in nanoseconds of refill */
    uint64_t rate_last_ns;
    uint32_t suppressed; /* stretches left out by the rate limit since the last record */
} aft_watch_target;

#define AFT_WATCH_SLOTS (AFT_WATCH_MAX_TARGETS + AFT_WATCH_MAX_UNITS)

typedef struct aft_watchdog {
    /* Prepared at start, read-only while the thread runs. */
    int dir_fd;
    uint32_t threshold_ms; /* the main target's */
    int capture_signal;
    int signal_usable;                /* our handler is installed for capture_signal */
    struct sigaction previous_action; /* capture_signal's action before us */
    uint32_t mode;                    /* AFT_HEARTBEAT_*: the main target's source */
    int capture_other_threads;        /* a hang also lists every other thread */
    void (*notify)(uint32_t event, int32_t target);
    uint64_t job_run_start, job_run_end; /* swift_job_run, to tell the pool's workers */
    sigset_t app_mask;                   /* start's caller's: the pinger's while it calls out */
    char app_thread_name[16];
    _Atomic uint32_t pool_width;  /* set with the range, by the pinger thread */
    _Atomic uint32_t target_high; /* added targets: slots 1 .. target_high-1 may be in use */
    _Atomic uint32_t unit_high;   /* units: AFT_WATCH_MAX_TARGETS .. +unit_high-1 */
    _Atomic uint32_t unit_hint;

    /* Shared with other threads. */
    _Atomic uint32_t wake; /* futex word: bumped by pause/resume/ping/stop/... */
    _Atomic int stop;
    _Atomic int background;         /* 0 (the default): the app is in the foreground */
    _Atomic uint32_t capture_state; /* generation << 8 | AFT_CAPTURE_* */
    _Atomic uint64_t capture_tid;
    _Atomic int capture_undelivered; /* a capture signal was sent and may still be pending */
    volatile uint8_t previous_session_id[AFT_ID_SIZE]; /* for hang files; zero: none */
    /* The pinger thread: requests (one bit per target) and its futex word. */
    _Atomic uint64_t ping_requests[AFT_WATCH_MAX_TARGETS / 64u];
    _Atomic uint32_t finished_requests;
    _Atomic uint32_t libunwind_requests; /* load libunwind (a first hang's capture waits) */
    _Atomic uint32_t pinger_wake;

    /* Counters (aft_watchdog_stats). */
    _Atomic uint64_t wakeups, hangs, ignored, late_ticks, detection_latency_ns, detection_ns;
    _Atomic uint64_t pings, idle_skips, rate_limited;
    _Atomic uint64_t watchdog_tid, pinger_tid;
    _Atomic uint32_t last_capture_method;
    _Atomic uint64_t last_capture_pause_ns; /* for the stats: hang_info is the watchdog's own */

    /* Every target: the main one, the added ones, then units of work. Last of what start and
     * every ping write, so that those fields share the struct's first pages. */
    aft_watch_target targets[AFT_WATCH_SLOTS];

    /* The signal handler's results (valid when capture_state is DONE). */
    uint64_t capture_frames[AFT_MAX_FRAMES + AFT_UNWIND_SLACK]; /* the unwinder needs the slack */
    uint32_t capture_frame_count;
    uint32_t capture_truncated;
    uint64_t capture_pause_ns;
    aft_crash_info capture_regs;                     /* the handler's: the signal frame's */
    uint64_t capture_scan[AFT_WATCHDOG_SCAN_FRAMES]; /* its walk from sp */
    uint64_t capture_merged[AFT_MAX_FRAMES];         /* the unwinder's frames and the walk's */
    aft_swift_async_link capture_swift_async[AFT_SWIFT_ASYNC_MAX_LINKS]; /* its async callers */
    uint32_t capture_swift_async_count;
    uint64_t capture_swift_scratch[AFT_SWIFT_ASYNC_MAX_LINKS][2];

    /* The hang being captured (watchdog thread only). */
    uint64_t hang_counter;
    aft_context hang_context;
    aft_hang_info hang_info;
    aft_hang_target hang_target;
    uint64_t pool_frames[AFT_THREAD_MAX_FRAMES];
    uint64_t scan_frames[AFT_WATCHDOG_SCAN_FRAMES];
    uint64_t stack_chunk[512];
    char proc_buf[4096];
    char path_buf[96];
    char tmp_name[AFT_FILE_NAME_CAPACITY];
    char final_name[AFT_FILE_NAME_CAPACITY];
    aft_maps_scratch scratch;
    aft_image images[AFT_MAX_IMAGES];

} aft_watchdog;

/* In bss_pairs.c, right after the thread registry: its first fields, the ones a watched app
 * uses, share a page with the registry's last slots. */
extern aft_watchdog *const aft_g_watchdog_ref;
#define aft_g_watchdog (*aft_g_watchdog_ref)

/* A handle of an added target: its index and its slot's sequence, so that a handle kept after
 * its target ended (a stop, a loop whose thread ended) never reaches a later target in the same
 * place. The main target's handle is 0. */
_Static_assert(AFT_WATCH_MAX_TARGETS <= 256u, "a target's index fits a handle's low byte");
static inline int32_t aft_watch_handle(uint32_t index, uint32_t slot) {
    return index == 0 ? 0 : (int32_t)(((slot >> 8) & 0x7fffffu) << 8 | index);
}

/* The active target a handle names, or NULL. */
static inline aft_watch_target *aft_watch_target_of(int32_t handle) {
    if (handle == 0) return &aft_g_watchdog.targets[0];
    uint32_t index = (uint32_t)handle & 0xffu;
    if (handle < 0 || index == 0 || index >= AFT_WATCH_MAX_TARGETS) return NULL;
    aft_watch_target *t = &aft_g_watchdog.targets[index];
    uint32_t slot = atomic_load(&t->slot);
    return (slot & 0xffu) == AFT_SLOT_ACTIVE && ((slot >> 8) & 0x7fffffu) == (uint32_t)handle >> 8
               ? t
               : NULL;
}

/* Normal time: installs the capture signal's handler once per process (requested: 0 = a free
 * real-time signal), also for the capture of every thread at a crash; the signal, 0: none. */
int aft_watchdog_prepare_capture_signal(int requested);
/* Normal time, between watchdog.c, watchdog_signal.c and watchdog_controls.c: wakes the
 * watchdog's thread; installs the capture signal for w (signo 0: choose one; w->signal_usable
 * says whether it can be used); lets it through on the calling thread, the watched one; gives
 * it back at stop (the handler stays while a capture signal may still be pending). */
void aft_watchdog_wake(aft_watchdog *w);
void aft_watchdog_install_signal(aft_watchdog *w, int signo);
void aft_watchdog_admit_capture_signal(aft_watchdog *w);
void aft_watchdog_release_capture_signal(aft_watchdog *w);

/* ---- the hang path (watchdog_async.c) ---- */
/* In the capture handler: adds the frames the walk from sp found between two frames the unwinder
 * found next to each other (capture_gaps_async.c). */
void aft_async_watchdog_fill_gaps(aft_watchdog *w, const void *ucontext, uint32_t *truncated);
/* The capture signal's handler, run on the watched thread. */
void aft_async_watchdog_capture_handler(int signo, siginfo_t *info, void *ucontext);
/* 1 when the process is traced (TracerPid != 0). */
int aft_async_watchdog_traced(aft_watchdog *w);
/* The watched thread's state letter from /proc ('?' when unknown). */
char aft_async_watchdog_thread_state(aft_watchdog *w, uint64_t tid);
/* Captures the target's thread (a pool: its workers) and persists the hang. Returns 0 or an
 * errno value. */
int aft_async_watchdog_begin_hang(aft_watchdog *w, aft_watch_target *t, uint64_t tid,
                                  uint64_t onset_ns, uint64_t now_ns);
/* Rewrites the target's live block with the duration so far (and the finished flag). */
void aft_async_watchdog_update_hang(aft_watchdog *w, aft_watch_target *t, uint64_t end_ns,
                                    int finished);
/* A pool's hang: marks the threads inside a Swift job in the capture, counts them into
 * w->hang_target and returns the record of the one whose stack leads the hang (a blocked one
 * first), or -1. */
int32_t aft_async_pool_classify(aft_watchdog *w, struct aft_thread_capture *c);
/* A pool's hang: every thread captured, those inside a Swift job marked, the lead one's fields
 * into h and its frames into w->pool_frames; their number (0: none). */
uint32_t aft_async_pool_hang(aft_watchdog *w, aft_hang_info *h);
/* The frames of record index of a capture, into out; their number. */
uint32_t aft_async_pool_record_frames(const struct aft_thread_capture *c, uint32_t index,
                                      uint64_t *out, uint32_t capacity);
/* The watchdog thread's per-target step (watchdog_tick.c): the target's next verdict at now. */
void aft_watchdog_tick_target(aft_watchdog *w, aft_watch_target *t, uint64_t now,
                              uint64_t prev_tick, uint64_t late);
/* Asks an unarmed pinged target for its first ping (at most once a second). */
void aft_watchdog_arm_target(aft_watchdog *w, aft_watch_target *t, uint64_t now);
/* 1 when the target needs no tick before AFT_WATCHDOG_IDLE_TICK_NS: an event loop last found
 * idle, or not watched now. */
int aft_watchdog_target_idle(aft_watchdog *w, aft_watch_target *t);
/* The earliest time the target needs the watchdog again (0: no need before the next tick). */
uint64_t aft_watchdog_target_due(aft_watchdog *w, aft_watch_target *t);
/* Normal time: the pinger thread and its requests. */
void aft_watchdog_request_ping(aft_watchdog *w, uint32_t target);
void aft_watchdog_request_finished(aft_watchdog *w);
/* Asks the pinger thread to load libunwind (libunwind_load.c); 0 when there is no pinger. */
int aft_watchdog_request_libunwind(aft_watchdog *w);
/* Starts the pinger's thread, or with later leaves the role to aft_pinger_adopt or
 * aft_pinger_start_pending. */
int aft_watchdog_start_pinger(aft_watchdog *w, int later);
void aft_watchdog_stop_pinger(aft_watchdog *w);
/* aft_g_watchdog_thread_lock, for the pinger's thread made later. */
void aft_watchdog_lock_threads(void);
void aft_watchdog_unlock_threads(void);
/* On the watchdog thread as it starts: swift_job_run's range and the pool's width. */
void aft_watchdog_prepare_pool(aft_watchdog *w);
/* Whether slot i may be in use (below the high-water marks): the rest was never touched. */
int aft_watchdog_slot_used(aft_watchdog *w, uint32_t i);
/* Whether the watchdog's thread runs now. */
int aft_watchdog_thread_running(void);
/* A forked child has no pinger thread. */
void aft_watchdog_forget_pinger(void);
/* Resets a target's watchdog-side state (start, restart, a slot reused). */
void aft_watchdog_reset_target(aft_watch_target *t);
/* A target's hang ended at end_ns: finishes its file and tells the owner. */
void aft_watchdog_finish_target(aft_watchdog *w, aft_watch_target *t, uint64_t end_ns);
/* Whether the one thread an added target is bound to (a loop's, a beating thread's, a unit's)
 * has ended: never for the main target, the pool, or a loop whose jobs ran on several threads. */
int aft_watch_thread_gone(aft_watch_target *t);
/* Ends a target whose thread has ended, as a stop does: a hang in progress ends at end_ns, and
 * the watchdog frees the place. slot: the value it was seen with (changes nothing if it moved). */
void aft_watchdog_retire_target(aft_watchdog *w, aft_watch_target *t, uint32_t slot,
                                uint64_t end_ns);

/* What the watchdog knows about the watched thread at a tick (aft_async_hang_decide). */
typedef struct aft_hang_facts {
    int32_t thread_gone; /* the watched thread no longer exists */
    uint64_t silent_ns;  /* since its last sign of life, time stopped excluded */
    uint64_t threshold_ns;
    int32_t armed;       /* a first heartbeat or ping was seen */
    int32_t pause_depth; /* aft_watchdog_pause() calls not yet resumed */
    int32_t foreground;
    int32_t crash_in_progress; /* a crash handler (ours) holds the process */
    int32_t traced;            /* TracerPid != 0: a debugger may hold the thread */
    int32_t thread_state;      /* /proc state letter ('?' unknown) */
} aft_hang_facts;

#define AFT_HANG_VERDICT_OFF 0u    /* detection off: not armed, paused or in the background */
#define AFT_HANG_VERDICT_ALIVE 1u  /* silent for less than the threshold */
#define AFT_HANG_VERDICT_IGNORE 2u /* silent past it, but held by a crash, debugger or SIGSTOP */
#define AFT_HANG_VERDICT_HANG 3u   /* hung: capture and persist it */

/* The main thread idle in its run loop: asked before a ping of the main queue is (main_idle.c). */
int aft_main_loop_idle(aft_watch_target *t, uint64_t tid);
/* Notes where the main thread waits as its ping is asked for, and learns from the answer. */
void aft_main_note_ping(aft_watch_target *t, uint64_t tid);
void aft_main_note_answer(aft_watch_target *t);
/* A thread of this process's CPU time, from its CPU clock (no /proc, no descriptor);
 * UINT64_MAX when unreadable. */
uint64_t aft_thread_cpu_ns(uint64_t tid);
/* Opens /proc/self/task/<tid>/<leaf> for reading (pread at 0). */
int aft_watchdog_open_task_leaf(uint64_t tid, const char *leaf);

/* The hang decision: a pure function of the facts (no clock, no /proc, no state). */
uint32_t aft_async_hang_decide(const aft_hang_facts *facts);

/* Parsers shared with the test entry points. */
char aft_async_stat_state(const char *text, size_t length);
int aft_async_syscall_parse(const char *text, size_t length, int64_t *nr, uint64_t *sp,
                            uint64_t *pc);
int aft_async_syscall_interrupted(int64_t nr);
/* The first decimal number of a /proc text (schedstat's CPU time); 1 when there is one. */
int aft_async_first_number(const char *text, size_t length, uint64_t *out);
/* 1 for the calls an idle event loop waits in (epoll_wait, poll, select and their kin). */
int aft_async_syscall_idle_wait(int64_t nr);
/* Finds "key:" at a line start in a /proc status text and parses its value (decimal, or hex
 * when hex != 0) into *out. Returns 1 when found. */
int aft_async_status_field(const char *text, size_t length, const char *key, int hex,
                           uint64_t *out);
/* A status file's "State:" letter ('?' without one) and its "Name:" as the kernel prints it,
 * into AFT_THREAD_NAME bytes. */
char aft_async_status_state(const char *text, size_t length);
void aft_async_status_name(const char *text, size_t length, char *out);

/* Test-only (a test target defines it; apps do not, and it reads as absent): a hang capture's
 * handler sleeps this long once it has taken the request. */
extern volatile uint64_t aft_g_test_capture_delay_ns __attribute__((weak));

#endif
