/*
 * runs_internal.h: state shared by runs.c and runs_updater.c (normal time), runs_async.c (the
 * termination recorder), exports_async.c (the hand-offs to the exporter) and the hang
 * watchdog's pinger, which may host the periodic updates. Not seen by Swift.
 */
#ifndef AFT_RUNS_INTERNAL_H
#define AFT_RUNS_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "CSignalShim.h"

#define AFT_RUN_SIGNAL_COUNT 3
typedef struct aft_run_state {
    int fd; /* the open, locked run file; -1 when none */
    struct sigaction previous[AFT_RUN_SIGNAL_COUNT];
    int handlers_installed;
    _Atomic uint32_t term_count;
    aft_run_term term; /* the first request, rewritten per request */
} aft_run_state;
extern aft_run_state aft_g_run;
extern const int aft_g_run_signals[AFT_RUN_SIGNAL_COUNT];
void aft_async_run_term_handler(int signo, siginfo_t *info, void *ucontext);
uint32_t aft_async_run_check(const void *block, size_t size_before_check);

/* Hand-offs to the exporter in progress (a futex word), and whether new ones are refused
 * (a termination signal is ending the process; a crash in progress refuses them too). */
extern _Atomic uint32_t aft_g_exports_in_flight;
extern _Atomic uint32_t aft_g_exports_refused;
/* Waits (a futex, at most AFT_EXPORT_WAIT_MS) until no hand-off to the exporter is in progress
 * on another thread than the caller's (exports_async.c). */
void aft_async_await_exports(void);

/* The next launch's run file, made ahead by this one in the background (runs_prepare.c): an
 * empty file of ours under this name in runs/, which start takes over (locked, checked, renamed)
 * instead of creating an inode on the caller's thread. */
#define AFT_RUN_SPARE_NAME AFT_RUN_SPARE_FILE_NAME
/* The spare in dir_fd, locked and checked (regular, empty, ours, one link); -1 when none. */
int aft_run_take_spare(int dir_fd);
/* Makes the spare in the runs directory at path unless there is one. */
void aft_run_make_spare(const char *runs_directory);

/* A run file's first blocks in place (runs_prepare.c): the info block, the live slot with
 * sequence 1 and the header over the info block, as aft_run_prepare_with fills a whole file. */
void aft_run_prepare_blocks(const aft_run_options *o, aft_file_header *header, aft_run_info *info,
                            aft_run_live *live, int defer_baseline);
/* Paths without snprintf (evidence.c): vfprintf's frames, some 1.8 KiB, would take the stack
 * of start's caller, or of the thread sampling the run every second, a page deeper for good.
 * "a/b" into out, or "" and 0 when it does not fit; src into out, cut to fit, as "%s" does. */
int aft_run_join(char *out, size_t capacity, const char *a, const char *b);
/* The values of keys (count of them, at most 4) in the "key value" lines of the file at path,
 * each AFT_RUN_UNREAD when absent: one read of the file for all of them (evidence.c). Returns
 * 1 when the file opened as a regular file, else 0. */
int aft_read_counters(const char *path, const char *const *keys, uint64_t *values, uint32_t count);
/* aft_find_cgroup_dirs that reads each directory's OOM counters into oom[AFT_OOM_COUNTERS] as
 * it probes it: the open of the counter file is the probe (cgroups.c). */
void aft_find_cgroup_dirs_reading(const char *proc_root, const char *sys_root,
                                  char dirs[AFT_CGROUP_DIRS][AFT_PATH_CAPACITY], uint64_t *oom);
void aft_run_copy(char *out, size_t capacity, const char *src);

/* The run record's normal-time state (runs.c), guarded by aft_g_run_lock. */
extern pthread_mutex_t aft_g_run_lock;
extern aft_run_info aft_g_run_info;
extern aft_run_live aft_g_run_live;
extern char aft_g_run_dir[AFT_PATH_CAPACITY * 2]; /* where the next launch's spare goes */
extern char aft_g_run_proc[AFT_PATH_CAPACITY];
extern char aft_g_run_sys[AFT_PATH_CAPACITY];
extern _Atomic int aft_g_run_spare_made; /* made or recycled after the delivery, else at exit */
extern _Atomic int aft_g_run_exited;     /* set by on_exit while an update may run */
/* The OOM and vmstat baseline is read by the run's first work, not by start. */
extern int aft_g_run_baseline_pending;
/* Writes the live block to its next slot. Caller holds aft_g_run_lock. */
int aft_run_write_live(void);

/* ---- the periodic updates (runs_updater.c) ---- */

/* Start asked for them: now (an updater thread that does the run's first work itself), or
 * later, at aft_run_start_updater. */
void aft_run_updater_arm(int start_now);
/* Ends them (the updater thread joined, or the pinger no longer hosting them). */
void aft_run_updater_stop(void);
/* In a forked child: neither the updater thread nor the pinger exists. */
void aft_run_updater_after_fork_in_child(void);
/* On the pinger, while it hosts the updates: one update when it is due; returns when the
 * next is (CLOCK_MONOTONIC ns). */
uint64_t aft_run_hosted_tick(uint64_t now_ns);
/* The pinger stopped while it hosted the updates: an updater thread takes them over. Called
 * with the watchdog's thread lock held, never with aft_g_run_lock. */
void aft_run_host_ended(void);

/* ---- the pinger's side (hang/pinger.c) ---- */

/* The pinger takes the updates on: 1, or 0 when no pinger runs. */
int aft_pinger_host_run(void);
/* The pinger stops hosting them (its next wait has no deadline for them). */
void aft_pinger_unhost_run(void);

#endif /* AFT_RUNS_INTERNAL_H */
