/*
 * CSignalShim: the C half of Aftermath. The only header Swift imports.
 *
 * Normal-time functions (called from Swift at start or in tests) are named aft_*; functions that
 * may run in a signal handler or while the main thread is stuck are named aft_async_* and live
 * in files ending in _async.c. See CSignalShim/README.md for the boundary and its rules.
 */
#ifndef CSIGNALSHIM_H
#define CSIGNALSHIM_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include <signal.h>
#include "aftermath_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What aft_install needs; everything is copied, nothing is kept by reference. */
typedef struct aft_install_options {
    const char *crash_directory; /* existing directory for crash files */
    aft_context context;         /* the run's context (report_id = this run's crash id) */
    int32_t fsync_reports;       /* fsync a crash file before renaming it into place */
    int32_t timing_fd;           /* benchmark only: the handler writes its duration here; -1 */
    uint32_t alt_stack_size;     /* 0 = 64 KiB */
    /* Non-zero: aft_install starts no thread to finish its work; the caller has one of its own
     * call aft_install_complete soon after. */
    uint32_t complete_later;
    /* The signal that pauses the other threads at a crash (shared with the hang watchdog's
     * capture): 0 = a free real-time signal; never one the app handles. */
    int32_t capture_signal;
} aft_install_options;

/* Installs the crash handlers (SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE, SIGABRT, SIGSYS) on an
 * alternate stack, remembering the previous handlers. Returns 0, or an errno value with a
 * message in error (NUL-terminated). Calling it again replaces the context and directory. */
int aft_install(const aft_install_options *options, char *error, size_t error_capacity);

/* The inode number of this run's crash reserve in the crash directory (0 when it has none):
 * the next launch's quiet delivery tells it from a dead run's by its directory entry alone. */
uint64_t aft_crash_reserve_inode(void);

/* The images read at install (with build ids), in address order; returns their number. */
uint32_t aft_installed_images(aft_image *images, uint32_t capacity);
/* Finishes what aft_install leaves to a thread of its own, or to the caller's thread with
 * complete_later (every image's build id, libunwind's warm-up, an alternate stack for every
 * thread that existed before); returns once that is done, at once when it was. Idempotent. */
void aft_install_complete(void);
/* Fills buf with size random bytes from getrandom(2). 0, or -1 where it is missing. */
int aft_random_bytes(void *buf, size_t size);
/* A directory read with getdents64(2), without a DIR (its allocation and fcntl calls). */
typedef struct aft_dir_reader {
    int fd;
    uint32_t pos, len;
    _Alignas(8) unsigned char buf[4096];
} aft_dir_reader;
/* Opens the directory at path: non-blocking, without following a final link. 0 or an errno. */
int aft_dir_reader_open(aft_dir_reader *r, const char *path);
/* The next entry's name (in r until the next call), inode and d_type; NULL at the end, or on
 * an error with errno set. */
const char *aft_dir_reader_next(aft_dir_reader *r, uint64_t *inode, uint8_t *type);
void aft_dir_reader_close(aft_dir_reader *r);
/* Renames from to to in one step, never replacing an existing to (RENAME_NOREPLACE): 0, or an
 * errno (EEXIST; EINVAL or ENOSYS where the file system or kernel has no such rename). */
int aft_rename_noreplace(const char *from, const char *to);
/* Gives the heap's free memory back to the system (malloc_trim): called once the delivery of
 * earlier reports, start's background work, is done. Called on a thread other than the main
 * one, it also asks for aft_release_memory_of_ended_thread once that thread has ended. */
void aft_release_free_memory(void);
/* The trim again, once the thread that last called aft_release_free_memory has ended (what it
 * freed last is in its own cache until then): 1 when made, 0 when there was none to make or that
 * thread still runs. Called by the run record's updater at each update. */
int aft_release_memory_of_ended_thread(void);
/* Gives attributes a stack of its own (mapped here, the size of a default thread's) for start's
 * delivery thread: once that thread has called aft_release_free_memory and ended, the trim
 * after it unmaps the stack whole, where glibc would keep a stack it made cached. 0, or an
 * errno (EBUSY while an earlier one is still in use): then the thread gets glibc's. When no
 * thread was made with them, aft_own_stack_unused unmaps it. */
int aft_own_stack_attributes(pthread_attr_t *attributes);
void aft_own_stack_unused(void);
/* The lowest address of that stack's mapping while it is in use, else 0 (tests). */
uintptr_t aft_own_stack_address(void);
/* One delivery of pending reports at a time in this process (across processes: the delivery's
 * lock file). aft_delivery_lock returns 0 once held, EDEADLK when the calling thread holds it
 * already (a delivery asked for from inside one): then it is not taken. */
int aft_delivery_lock(void);
void aft_delivery_unlock(void);
/* Gives back the calling thread's stack pages below its caller's frame (their contents are dead
 * once the deep calls returned): for a thread about to end, whose stack glibc keeps cached with
 * every page it touched. Nothing on the main thread. Returns the bytes released. */
/* For start's delivery thread as it takes on a role (the pinger, the run's updater): the heap's
 * free memory and its stack below the caller's frame go back, as when a thread ends. */
void aft_release_before_role(void);
size_t aft_release_thread_stack_below(void);

/* Names the calling thread (its first 15 bytes): one prctl, where Swift, without prctl or
 * pthread_setname_np, would write /proc/thread-self/comm (an open, a write and a close). */
void aft_set_thread_name(const char *name);

/* The context the handler writes (with the app build id read at install). */
void aft_installed_context(aft_context *context);

/* Gives the calling thread an alternate signal stack of at least 64 KiB with a guard page,
 * unless it already has an adequate one. Returns 0 or an errno value. */
int aft_prepare_thread(void);

/* Replaces the session id that later reports of this run carry. */
void aft_set_session_id(const uint8_t session_id[AFT_ID_SIZE]);

/* A file-size limit (ulimit -f) makes a write past it raise SIGXFSZ, whose default action ends
 * the process. Aftermath's writes must fail with EFBIG instead: around them the calling thread
 * holds SIGXFSZ blocked, and on release one they raised is taken back and the mask restored.
 * Threads created meanwhile (Aftermath's own) keep it blocked. */
typedef struct aft_file_size_hold {
    sigset_t saved_mask;
    int was_pending;
} aft_file_size_hold;
void aft_hold_file_size_signal(aft_file_size_hold *hold);
void aft_release_file_size_signal(const aft_file_size_hold *hold);

/* The kernel thread id of the caller. */
uint64_t aft_gettid(void);

/* CRC-32 (IEEE 802.3), as used in aft_file_header.body_crc. Start with crc = 0. */
uint32_t aft_crc32(uint32_t crc, const void *data, size_t size);
/* The same CRC by table alone (what aft_crc32 computes where the processor has no faster way). */
uint32_t aft_crc32_by_table(uint32_t crc, const void *data, size_t size);
/* 1 when aft_crc32 and the crash handler use the processor's carry-less multiply (x86-64
 * PCLMULQDQ), 0 when they use tables. */
int aft_crc32_accelerated(void);

/* Parses a /proc/<pid>/maps stream from fd into images (executable file mappings and the
 * vdso, segments merged). When read_build_ids is non-zero the GNU build id of each image (or
 * its text hash) is read from this process's memory, so only pass it for this process's own maps.
 * Returns the number of images written; *truncated is set when more did not fit. */
uint32_t aft_images_from_maps_fd(int fd, aft_image *images, uint32_t capacity, int read_build_ids,
                                 const char *main_executable_path, uint32_t *truncated);

/* Reads the GNU build id of the ELF image loaded at base from this process's memory; without
 * one, its text hash, and AFT_IMAGE_BUILD_ID_TEXT_HASH is added to *flags (flags may be NULL).
 * Returns its size (0 when there is none or it cannot be read). */
uint32_t aft_build_id_at(uint64_t base, uint8_t *out, uint32_t capacity, uint64_t *load_bias,
                         uint32_t *flags);

/* The calling thread's stack (libunwind; frame pointers as fallback), skipping `skip` frames
 * of its own callers. Returns the number of frames written. */
uint32_t aft_current_stack(uint64_t *frames, uint32_t capacity, uint32_t skip);
/* Starts the resident unwinding helper (once per process) and waits, bounded, until it runs;
 * normal time only. Called after a process's first hang: until then each capture that needs a
 * helper starts one of its own (the first hang's pause is 0.6-1.0 ms, later ones 0.11-0.16 ms),
 * and a process that never hangs pays for no helper. */
void aft_unwind_resident_start(void);
/* 1 once libunwind has unwound a stack for Aftermath in this process (a hang's capture, a
 * recorded error), else 0: start itself never uses it. */
int aft_libunwind_used(void);
/* Loads libunwind now, at normal time; 1 when it is loaded. Otherwise it is loaded (dlopen) at
 * its first use: a recorded error, a process's first hang, the resident helper's start, a
 * deferred crash at the next launch. Until then a crash unwound in its handler (a forked child's,
 * one whose stacks the crash file cannot hold) walks frame pointers. */
int aft_libunwind_preload(void);
/* 1 when the install's completion asked thread tid to take an alternate stack (it asks the
 * threads that existed before start, but not start's caller, whose stack the install set up). */
int aft_threads_alternate_stack_asked(uint64_t tid);
/* The passes over the process's threads that giving them alternate stacks took: 1 when none
 * had to be asked again (still starting, asleep, not answering); 0 before it ran. */
int aft_threads_alternate_stack_rounds(void);
/* On one of Aftermath's own threads ("aftermath.*"), takes the name of the thread that started
 * Aftermath for the app's code it is about to run: the threads that code creates inherit the
 * name, and must be the app's (Aftermath's are never paused at a crash). The thread itself is
 * still known as Aftermath's, by its id, and keeps running through a crash. The old name in
 * saved and 1 when renamed (then aft_thread_restore_name after); 0 on any other thread. */
int aft_thread_take_app_name(char saved[16]);
void aft_thread_restore_name(const char saved[16]);
/* On a thread renamed so: notes its caller's stack pointer and the pc after the call, where it
 * hands over to the app's code, which a crash meanwhile lists it at (it is never paused). */
void aft_thread_note_handing_off(void);

/* The calling thread's Swift async callers (aftermath_format_async.h), innermost first, when it
 * runs in a Swift task; 0 otherwise or before the install's completion. */
uint32_t aft_current_swift_async_chain(aft_swift_async_link *out, uint32_t capacity);

/* ---- unwinding at the next launch (unwind_remote.c; normal time) ----
 * A crashed thread's stack from its crash file alone: its registers at the fault and its stack
 * bytes, against the images' files on disk, each used only when its build id matches. */
typedef struct aft_remote_memory {
    uint64_t start; /* the crashed process's address of bytes[0] */
    uint64_t size;
    const uint8_t *bytes;
} aft_remote_memory;
typedef struct aft_remote_image {
    uint64_t start, end, load_bias; /* as the crash file has them (aft_image) */
    const char *path;               /* its file now */
    const uint8_t *build_id;
    uint32_t build_id_size;
} aft_remote_image;
typedef struct aft_remote_unwind_input {
    uint32_t arch;           /* AFT_ARCH_* of the crash: only this machine's is unwound */
    uint32_t register_count; /* registers in aft_crash_info order */
    const uint64_t *registers;
    const aft_remote_memory *memory;
    uint32_t memory_count;
    uint32_t image_count;
    const aft_remote_image *images;
} aft_remote_unwind_input;
/* The frames (the pc first, then return addresses); *truncated when capacity cut them. 0 when
 * nothing could be unwound (another architecture, no registers). */
uint32_t aft_remote_unwind(const aft_remote_unwind_input *in, uint64_t *frames, uint32_t capacity,
                           uint32_t *truncated);

/* ---- the hang watchdog (watchdog.c; its hang path in watchdog_async.c) ----
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

#define AFT_HEARTBEAT_MAIN_QUEUE 0u
#define AFT_HEARTBEAT_MANUAL 1u

/* Events the watchdog passes to options.notify, with the target they concern (0: the main
 * one). Never on the watchdog thread: on the pinger thread ("aftermath.ping"), whose only job
 * is these calls, so that a call that blocks (a lock a stuck thread holds) delays pings, never a
 * hang's capture; the first main ping is posted by aft_watchdog_start on the caller's thread,
 * queued before any job the app adds after start. */
#define AFT_WATCHDOG_EVENT_PING                                                                    \
    1u                                      /* run one job on the target's thread or queue that
                                               calls aft_watchdog_ping_ran (target 0) or
                                               aft_watch_ping_ran(target) */
#define AFT_WATCHDOG_EVENT_HANG_FINISHED 2u /* a hang file got AFT_FLAG_HANG_FINISHED */

/* attention bits of aft_g_heartbeat_attention: the next heartbeat takes the slow path. */
#define AFT_ATTENTION_BIND 0x1u /* record the caller as the watched thread and arm */
#define AFT_ATTENTION_HANG 0x2u /* a hang is in progress: record its end, wake the watchdog */

typedef struct aft_watchdog_options {
    const char *hang_directory; /* existing directory for hang files */
    uint32_t threshold_ms;      /* 0 = 250 */
    int32_t capture_signal;     /* 0 = a free real-time signal (else SIGURG); never used
                                       when the app handles it */
    uint32_t heartbeat_mode;    /* AFT_HEARTBEAT_* */
    uint32_t thread_later;      /* 1: the thread is started by aft_watchdog_start_thread */
    uint32_t other_threads;     /* 1: a hang also records every other thread (paused for
                                       a moment; those asleep in a call a signal would cut
                                       short are read from /proc instead) */
    void (*notify)(uint32_t event, int32_t target); /* on the pinger thread; may be NULL */
} aft_watchdog_options;

/* What the watchdog did so far (tests and benchmark). */
typedef struct aft_watchdog_stats {
    uint64_t wakeups;                   /* times the watchdog thread woke up */
    uint64_t hangs;                     /* hangs persisted */
    uint64_t ignored_stretches;         /* suspected hangs ignored: tracer or stopped thread */
    uint64_t late_ticks;                /* ticks that came late: the process had been stopped */
    uint64_t last_detection_latency_ns; /* detection time minus the estimated onset */
    uint64_t last_detection_ns;         /* CLOCK_MONOTONIC when the last hang was detected */
    uint64_t last_capture_pause_ns;     /* how long the signal handler held the watched thread */
    uint32_t last_capture_method;       /* AFT_CAPTURE_* of the last hang */
    uint32_t signal_usable;             /* 1 when the capture signal may be sent */
    uint64_t watched_tid;               /* 0 until armed */
    uint64_t watchdog_tid;              /* the watchdog thread's kernel tid */
    int32_t capture_signal;             /* the signal chosen at start (usable or not) */
    uint32_t _reserved;
    uint64_t pings;        /* pings posted, every target */
    uint64_t idle_skips;   /* pings not posted: the event loop was idle */
    uint64_t rate_limited; /* hangs left unrecorded by the rate limit */
    uint64_t pinger_tid;   /* the pinger thread's kernel tid */
} aft_watchdog_stats;

/* Starts (or restarts with new options) the watchdog thread. Returns 0, or an errno value with
 * a message in error (NUL-terminated). The crash handler must be installed first (aft_install):
 * hang files copy its prepared context. */
int aft_watchdog_start(const aft_watchdog_options *options, char *error, size_t error_capacity);

/* Starts the thread aft_watchdog_start left for later (options.thread_later), from any
 * thread. Returns 0, or an errno value with a message in error; the watchdog is then stopped.
 * With pinger_later the pinger's role waits for the calling thread: it calls aft_pinger_adopt
 * once its own work is done, or aft_pinger_start_pending for a thread of the pinger's own. */
int aft_watchdog_start_thread(int pinger_later, char *error, size_t error_capacity);
/* The calling thread takes the pinger's role left for later and keeps it until the watchdog
 * stops: 1 then, 0 at once where there is no such role (none left, or a thread took it). */
int aft_pinger_adopt(void);
/* Makes the pinger's thread where its role is still left for later. */
void aft_pinger_start_pending(void);

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

/* The session before the current one (startNewSession), for the hang files to come; NULL
 * clears it. Byte copies: a hang detected at this moment may carry a mix (still this run's). */
void aft_watchdog_set_previous_session(const uint8_t previous_session_id[AFT_ID_SIZE]);

/* Manual mode: the next aft_heartbeat() caller becomes the watched thread. */
void aft_watchdog_watch_next_heartbeat_thread(void);

/* Copies the watchdog's counters into out. */
void aft_watchdog_get_stats(aft_watchdog_stats *out);

/* ---- more watched targets (targets.c), served by the same watchdog thread ----
 *
 * Target 0 is the main one above. Others are added at any time, before or after start:
 *   - AFT_HANG_KIND_EVENT_LOOP and AFT_HANG_KIND_CONCURRENCY_POOL are pinged: notify(PING, t)
 *     runs a job on the loop (or as a Task of the pool's priority) that calls
 *     aft_watch_ping_ran(t). An event loop waiting in epoll_wait, poll or select is idle and is
 *     pinged at most every AFT_WATCH_IDLE_PING_MS; a busy one every 100 ms.
 *   - AFT_HANG_KIND_THREAD beats: its thread calls aft_watch_beat(t); the first caller is
 *     watched.
 *   - AFT_HANG_KIND_WORK is a kind of unit: aft_work_begin(t) on the thread doing the work
 *     takes a unit, aft_work_end(unit) gives it back; a unit longer than the threshold is a hang.
 * A target is reported at most AFT_WATCH_RATE_BURST times, then once per
 * AFT_WATCH_RATE_REFILL_S seconds; the stretches left out are counted in the next record. */
#define AFT_HANG_KIND_MAIN 0u
#define AFT_HANG_KIND_EVENT_LOOP 1u
#define AFT_HANG_KIND_THREAD 2u
#define AFT_HANG_KIND_WORK 3u
#define AFT_HANG_KIND_CONCURRENCY_POOL 4u

#define AFT_WATCH_MAX_TARGETS 256u /* the main target included: a loop per core of a big host */
#define AFT_WATCH_MAX_UNITS 256u   /* units of work in progress at once, every kind together */
#define AFT_WATCH_IDLE_PING_MS 2000u
#define AFT_WATCH_RATE_BURST 10u
#define AFT_WATCH_RATE_REFILL_S 60u

/* Adds a target (name: at most 63 bytes kept). Returns its handle (1 and up: its place and that
 * place's sequence, so a handle kept after its target ended names no later target), or -errno:
 * EINVAL (kind or threshold), ENOSPC (every target taken). A target whose one thread ends (a
 * loop that was shut down, a thread that beats, a unit's) ends with it, as if removed; an event
 * loop whose jobs ran on more than one thread is not bound to one and stays. */
int32_t aft_watch_add(uint32_t kind, const char *name, uint32_t threshold_ms);
/* The same with a tag of the caller's (0 and up), set before the target can be pinged and read
 * back with aft_watch_tag (the concurrency pool's probes: their task priority). */
int32_t aft_watch_add_tagged(uint32_t kind, const char *name, uint32_t threshold_ms, int32_t tag);
/* An active target's tag; -1 when it has none or is not active. */
int32_t aft_watch_tag(int32_t target);
/* 1 while the target a handle names is watched; 0 once it was removed or ended. */
int32_t aft_watch_active(int32_t target);
/* The first active target after `after` (0: from the first) with a tag, or -1. */
int32_t aft_watch_next_tagged(int32_t after);
/* Removes a target: a hang in progress is finished at this moment; its place is reused. */
void aft_watch_remove(int32_t target);
/* Called by the job a ping ran (event loops, the pool): records the thread and the time. */
void aft_watch_ping_ran(int32_t target);
/* One heartbeat of a thread target from its thread: a relaxed add and a predicted branch. */
void aft_watch_beat(int32_t target);
/* Nested pause of one target around an intended wait; its blocked time restarts at resume. */
void aft_watch_pause(int32_t target);
void aft_watch_resume(int32_t target);
/* A unit of work of a work target begins on the calling thread. Returns the unit (its slot and
 * sequence, 0 and up), or -1 when every unit is taken (that unit is then not watched). */
int32_t aft_work_begin(int32_t target);
/* The unit ends (a negative unit is ignored). */
void aft_work_end(int32_t unit);
/* The Swift concurrency pool's width (sysconf(_SC_NPROCESSORS_CONF): what the Dispatch-based
 * executor's queues are limited to). */
uint32_t aft_watch_pool_width(void);

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

/* The run record and its evidence readers: CSignalShimRuns.h. */
#include "CSignalShimRuns.h"

#ifdef __cplusplus
}
#endif

#endif /* CSIGNALSHIM_H */
