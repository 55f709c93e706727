/*
 * CSignalShimRuns.h: the run record of this process (runs/) and the evidence readers the running
 * process and the next launch share, part of CSignalShim.h's API.
 */
#ifndef CSIGNALSHIM_RUNS_H
#define CSIGNALSHIM_RUNS_H

#include <stddef.h>
#include <stdint.h>

#include "aftermath_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the run record of this process (runs.c) ---- */

typedef struct aft_run_options {
    const char *runs_directory;  /* existing directory */
    const char *proc_root;       /* "/proc", or a crafted tree in tests */
    const char *sys_root;        /* "/sys", or a crafted tree in tests */
    aft_context context;         /* the run's context (run id, session, release) */
    uint64_t watchdog_usec;      /* WATCHDOG_USEC meant for this pid, else 0 */
    uint32_t foreground;         /* aft_run_prepare only: aft_run_start reads the hang
                                     watchdog's state (Aftermath.setForeground), one place */
    uint32_t update_interval_ms; /* 0: AFT_RUN_DEFAULT_INTERVAL_MS */
    uint32_t catch_termination;  /* record SIGTERM, SIGINT, SIGHUP, then chain */
    uint32_t start_updater;      /* run the background updater thread: 0 no, 1 now,
                                     AFT_RUN_UPDATER_LATER at aft_run_start_updater */
} aft_run_options;
#define AFT_RUN_UPDATER_LATER 2u

/* Creates runs/<run id>.run, locks it, writes it whole, records clean exits (on_exit) and,
 * when asked, termination signals, and starts the updater. Calling it again ends the previous
 * run record (closes its file without a clean-exit mark; tests only). Returns 0 or an errno
 * value with a message in error. */
int aft_run_start(const aft_run_options *options, char *error, size_t error_capacity);
/* Starts the updater aft_run_start left for later (AFT_RUN_UPDATER_LATER), from any thread but
 * the app's (start's background thread): the run's first work, the OOM baseline and a first
 * sample, is done on the caller first. 0, or the errno of its thread's
 * creation. With later, where the pinger does not take the updates on, the updater's role waits
 * for the caller: aft_run_updater_adopt, or aft_run_updater_start_pending for a thread. */
int aft_run_start_updater(int later);
/* The calling thread takes the updater's role left for later and keeps it until the updates
 * stop: 1 then, 0 at once where there is no such role. */
int aft_run_updater_adopt(void);
/* Makes the updater's thread where its role is still left for later. */
void aft_run_updater_start_pending(void);

/* Hands a batch of records to the exporter and deletes their files once it acknowledged:
 * aft_export_begin() returns 1 when the hand-off may start, 0 when the process is being ended by
 * a termination signal or a crash is in progress (the files stay for the next launch). A
 * termination signal whose default action ends the process, and a crash once its report is
 * written, wait for hand-offs in progress on other threads (at most AFT_EXPORT_WAIT_MS), so
 * that a record is never both exported and left behind. */
#define AFT_EXPORT_WAIT_MS 500u
int aft_export_begin(void);
void aft_export_end(void);
/* 1 from the moment a crash handler of this process begins until the process dies of the
 * crash (0 again if it lives on): what is exported then would be cut short by the death. One
 * atomic load. */
int aft_crash_in_progress(void);
/* Sets app.screen.name (NULL or "" clears it) and writes the live block now. */
void aft_run_set_screen(const char *name);
/* Sets the current and previous session and writes the live block now. */
void aft_run_set_session(const uint8_t session_id[AFT_ID_SIZE],
                         const uint8_t previous_session_id[AFT_ID_SIZE]);
/* Reads the evidence and writes the live block now. Returns 0 or an errno value. */
int aft_run_update_now(void);
/* What the run record of this process read at start under proc_root: the boot id (into boot_id,
 * NUL-terminated, "" when it was unreadable) and /proc/self/stat's start ticks (0 when
 * unreadable). 1 when known, 0 without a run record of this process under that root (before
 * start, in a forked child, or another root): the caller reads them itself. */
int aft_run_started_with(const char *proc_root, char *boot_id, size_t capacity,
                         uint64_t *start_ticks);
/* The inode number of this run's file in runs/ (0 when none). */
uint64_t aft_run_file_inode(void);
/* Writes the clean-exit block, as normal termination does (tests). */
void aft_run_mark_clean_exit(int32_t status);
/* Stops the updater, closes the file (releasing the lock) without a clean-exit mark, restores
 * the termination handlers (tests). */
void aft_run_stop(void);

/* ---- evidence readers, shared by the running process and the next launch (runs.c) ---- */

/* The name in runs/ of the run file a launch makes ahead for the next one: unwritten until taken
 * (empty, or a recycled run file whose header is zero). */
#define AFT_RUN_SPARE_FILE_NAME "spare.run.tmp"
/* Makes this run's spare for the next launch unless it has made or recycled one: from start's
 * background thread once its delivery no longer needs the runs it found. */
void aft_run_make_spare_once(void);
/* Makes name in the runs directory dir_fd, a dead run's file judged clean with nothing of its
 * run left to send, the next launch's spare: renamed without replacing one (renameat2's
 * RENAME_NOREPLACE), then its header zeroed through fd, opened for writing and locked by the
 * caller, so no launch takes it meanwhile. 0, or an errno value (EEXIST: a spare is there
 * already; EINVAL or ENOSYS: no such rename here). */
int aft_run_recycle_as_spare(int dir_fd, const char *name, int fd);
/* 1 when name in dir_fd (AT_FDCWD for a path) is an unwritten spare a launch may take: a regular
 * file, empty, or no larger than a run file and its header zero. 0 otherwise. */
int aft_run_spare_unwritten(int dir_fd, const char *name);
/* 1 when another open file holds a lock on path (a live run), 0 when not, -1 on error. */
int aft_run_is_locked(const char *path);
/* The value of the first line "key<space or tab>value" of a small file; AFT_RUN_UNREAD when the
 * file or key is missing. key includes any trailing colon ("TracerPid:"). */
uint64_t aft_read_counter(const char *path, const char *key);
/* avg10 x100 of the PSI line starting with prefix ("some" or "full"); UINT32_MAX when absent. */
uint32_t aft_read_psi_avg10(const char *path, const char *prefix);
/* Reads the first line of a file (boot_id) into out without its newline. Returns its length
 * or -1. */
int aft_read_line(const char *path, char *out, size_t capacity);
/* The starttime field of <proc_root>/self/stat: when this process began, in clock ticks after
 * boot. It survives execve, with the pid: a run with the same pid and start time as this
 * process was this process before an exec. 0 when unreadable. */
uint64_t aft_process_start_ticks(const char *proc_root);
/* Finds this process's memory cgroups from <proc_root>/self/cgroup and the mounts under
 * <sys_root>/fs/cgroup: dirs[AFT_CGROUP_*] receive directories that hold the counter files
 * ("" when absent). */
void aft_find_cgroup_dirs(const char *proc_root, const char *sys_root,
                          char dirs[AFT_CGROUP_DIRS][AFT_PATH_CAPACITY]);
/* Reads the OOM-kill counters of the given directories into out[AFT_OOM_COUNTERS]. */
void aft_read_oom_counters(const char dirs[AFT_CGROUP_DIRS][AFT_PATH_CAPACITY],
                           uint64_t out[AFT_OOM_COUNTERS]);
/* The same for the cgroup directories a run recorded; out holds AFT_OOM_COUNTERS values. */
void aft_run_read_oom_now(const aft_run_info *info, uint64_t *out);
/* Whether the run's own cgroup's OOM-kill counter (v1 or v2) was read into oom: then
 * /proc/vmstat's oom_kill is left unread (AFT_RUN_UNREAD) by the baseline and the samples. */
int aft_run_own_oom_readable(const uint64_t oom[AFT_OOM_COUNTERS]);
/* Builds a whole run file for options in memory, reading the evidence under its roots, as
 * aft_run_start writes it (header, info, live slot with sequence 1, empty term and exit). No
 * global state: tests build crafted run files with it. Returns 0. */
int aft_run_prepare(const aft_run_options *options, aft_run_file *file);
/* The same; defer_baseline != 0 leaves the OOM counters and vmstat's oom_kill unread
 * (AFT_RUN_UNREAD) for aft_run_read_baseline to fill later, as aft_run_start does when its
 * updater thread runs. */
int aft_run_prepare_with(const aft_run_options *options, aft_run_file *file, int defer_baseline);
/* Reads a run's baseline into info: its cgroup directories, their OOM counters, vmstat's
 * oom_kill where the own cgroup's counter is unreadable. */
void aft_run_read_baseline(const char *proc_root, const char *sys_root, aft_run_info *info);
/* The header of a run file whose info block is info (CRC and commit set). */
void aft_run_header(aft_file_header *header, const aft_run_info *info);
/* Reads the evidence under proc_root into live (times, TracerPid, OOM counters of the run's
 * cgroups, vmstat where the own cgroup's is unreadable, PSI) and counts the update. The check
 * is not computed. */
void aft_run_sample(const char *proc_root, const aft_run_info *info, aft_run_live *live);
/* The same; at_start != 0 takes the OOM and vmstat counters from the run's baseline in info,
 * read a moment before, instead of reading them again. */
void aft_run_sample_with(const char *proc_root, const aft_run_info *info, aft_run_live *live,
                         int at_start);
/* The check value of a run block: CRC-32 of its bytes before the check field, never 0. */
uint32_t aft_run_check(const void *block, size_t size_before_check);

#ifdef __cplusplus
}
#endif

#endif /* CSIGNALSHIM_RUNS_H */
