/*
 * aftermath_format_runs.h: the run-file and handled-error-file part of aftermath_format.h, which
 * includes it at its end; the rules at the top of aftermath_format.h hold here too. Included
 * alone, it includes aftermath_format.h first, for the types the two share (aft_file_header,
 * aft_context, ...).
 */
#ifndef AFTERMATH_FORMAT_RUNS_H
#define AFTERMATH_FORMAT_RUNS_H

#include <stdint.h>
#include <stddef.h>

#include "aftermath_format.h"

/* ---- run files and handled-error files ----
 *
 * A run file, runs/<run id hex>.run, has a FIXED layout (aft_run_file) so it can be updated in
 * place with one pwrite per block:
 *   header  aft_file_header, kind AFT_KIND_RUN; body_size/body_crc cover `info` only;
 *   info    written once at start (the run's context, boot id, cgroups, baselines);
 *   live[2] updated about once a second; slots alternate, each with a sequence number and a
 *           check value, so a torn write leaves the other slot intact (highest valid wins);
 *   term    written by the termination-signal handler (SIGTERM, SIGINT, SIGHUP), own check;
 *   exit    written on normal termination (exit, return from main), own check.
 * The file is created as .run.tmp, locked (flock LOCK_EX), written, renamed: the lock is held
 * for the process's life, so an unlocked .run is a run that ended.
 */
#define AFT_KIND_RUN 3u
#define AFT_KIND_ERROR 4u

#define AFT_RUN_LIVE_SLOTS 2u
#define AFT_RUN_UNREAD 0xFFFFFFFFFFFFFFFFull /* a counter that could not be read */
#define AFT_RUN_CLEAN_MARKER 0x4E41454Cu     /* "LEAN": aft_run_exit.clean */
#define AFT_BOOT_ID_CAPACITY 40u
#define AFT_RUN_DEFAULT_INTERVAL_MS 1000u

/* OOM-kill counters, indices into aft_run_info.oom_at_start and aft_run_live.oom. */
#define AFT_OOM_V1_SELF 0u       /* cgroup v1 memory.oom_control oom_kill, own cgroup */
#define AFT_OOM_V1_PARENT 1u     /* the same, parent cgroup */
#define AFT_OOM_V2_SELF 2u       /* cgroup v2 memory.events oom_kill, own cgroup */
#define AFT_OOM_V2_SELF_GROUP 3u /* cgroup v2 memory.events oom_group_kill, own cgroup */
#define AFT_OOM_V2_PARENT 4u
#define AFT_OOM_V2_PARENT_GROUP 5u
#define AFT_OOM_USED 6u
#define AFT_OOM_COUNTERS 8u /* capacity */

/* aft_run_info.cgroup_dirs indices */
#define AFT_CGROUP_V1_SELF 0u
#define AFT_CGROUP_V1_PARENT 1u
#define AFT_CGROUP_V2_SELF 2u
#define AFT_CGROUP_V2_PARENT 3u
#define AFT_CGROUP_DIRS 4u

/* aft_run_term.disposition: what the handler did after recording */
#define AFT_TERM_DEFAULT 1u /* default action: re-raised, the process died of it */
#define AFT_TERM_HANDLER 2u /* the app's own handler was called */

/* Written once at start. */
typedef struct aft_run_info {
    aft_context context; /* run id, first session, release, os, kernel, pid, start */
    uint64_t start_monotonic_ns;
    uint64_t start_boottime_ns;
    uint64_t watchdog_usec;             /* systemd WATCHDOG_USEC for this pid, else 0 */
    int64_t parent_pid;                 /* getppid() at start (the service manager of a service) */
    char boot_id[AFT_BOOT_ID_CAPACITY]; /* /proc/sys/kernel/random/boot_id */
    char cgroup_dirs[AFT_CGROUP_DIRS][AFT_PATH_CAPACITY]; /* "" when absent */
    uint64_t oom_at_start[AFT_OOM_COUNTERS];
    uint64_t vmstat_oom_kill_at_start;
    uint32_t update_interval_ms;
    uint32_t flags;               /* none defined yet; kept when unknown */
    uint64_t process_start_ticks; /* /proc/self/stat starttime (clock ticks after boot);
                                         0 when unknown (files written before it existed) */
    uint8_t _reserved[56];
} aft_run_info;

/* Updated in place; two slots alternate. */
typedef struct aft_run_live {
    uint64_t sequence;            /* 1, 2, 3, ...: the valid slot with the highest wins */
    uint64_t updated_realtime_ns; /* the last time the run was seen alive */
    uint64_t updated_monotonic_ns;
    uint64_t updated_boottime_ns;
    uint8_t session_id[AFT_ID_SIZE];
    uint8_t previous_session_id[AFT_ID_SIZE]; /* zero until startNewSession */
    uint32_t foreground;                      /* 1 foreground, 0 background */
    uint32_t debugger_seen;                   /* TracerPid was non-zero at some update */
    uint64_t tracer_pid;                      /* the last non-zero TracerPid */
    uint64_t oom[AFT_OOM_COUNTERS];           /* last values read, AFT_RUN_UNREAD when unreadable */
    uint64_t vmstat_oom_kill;      /* /proc/vmstat oom_kill, AFT_RUN_UNREAD when unreadable */
    uint32_t psi_some_avg10_centi; /* /proc/pressure/memory some avg10 x100; UINT32_MAX n/a */
    uint32_t psi_full_avg10_centi;
    uint64_t update_count;
    char screen[AFT_NAME_STRING]; /* app.screen.name, "" when none */
    uint8_t _reserved[32];
    uint32_t _reserved1;
    uint32_t check; /* aft_run_check over the bytes before it */
} aft_run_live;

/* A termination request the handler caught. signal == 0: none. */
typedef struct aft_run_term {
    int32_t signal;
    int32_t code;       /* si_code: SI_USER (kill), SI_KERNEL, SI_QUEUE, ... */
    int64_t sender_pid; /* -1 when not sent by a process */
    int64_t sender_uid;
    uint64_t time_realtime_ns;
    uint32_t disposition; /* AFT_TERM_* */
    uint32_t count;       /* termination requests caught so far */
    uint8_t _reserved[16];
    uint32_t _reserved1;
    uint32_t check;
} aft_run_term;

/* Normal termination. */
typedef struct aft_run_exit {
    uint32_t clean; /* AFT_RUN_CLEAN_MARKER */
    int32_t status; /* exit status (on_exit), -1 when unknown */
    uint64_t time_realtime_ns;
    uint8_t _reserved[16];
    uint32_t _reserved1;
    uint32_t check;
} aft_run_exit;

typedef struct aft_run_file {
    aft_file_header header;
    aft_run_info info;
    aft_run_live live[AFT_RUN_LIVE_SLOTS];
    aft_run_term term;
    aft_run_exit exit;
} aft_run_file;

/* A handled error file, errors/<id hex>.error: aft_file_header (kind AFT_KIND_ERROR, CRC and
 * commit over the body) then sections: CONTEXT (aft_context), ERROR (aft_error_info), TEXT
 * (type, message, fingerprint: UTF-8, sizes in aft_error_info), FRAMES, IMAGES (those the
 * frames refer to). Written to .tmp and renamed: a file with its final name is whole. */
#define AFT_SECTION_ERROR 16u
#define AFT_SECTION_TEXT 17u
#define AFT_ERROR_TYPE_CAPACITY 512u
#define AFT_ERROR_MESSAGE_CAPACITY 8192u
#define AFT_ERROR_FINGERPRINT_CAPACITY 512u
#define AFT_ERROR_MAX_FRAMES 256u
#define AFT_ERROR_HAS_FINGERPRINT 0x1u

typedef struct aft_error_info {
    uint8_t error_id[AFT_ID_SIZE]; /* entropy of log.record.uid */
    uint8_t previous_session_id[AFT_ID_SIZE];
    uint64_t time_realtime_ns;
    uint64_t thread_id;
    uint32_t type_size;
    uint32_t message_size;
    uint32_t fingerprint_size;
    uint32_t flags; /* AFT_ERROR_* */
    uint32_t is_main_thread;
    uint32_t message_truncated;
    char screen[AFT_NAME_STRING];
    uint8_t _reserved[32];
} aft_error_info;

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(aft_run_info) == 2240, "aft_run_info size");
_Static_assert(offsetof(aft_run_info, boot_id) == 1032, "boot_id offset");
_Static_assert(offsetof(aft_run_info, cgroup_dirs) == 1072, "cgroup_dirs offset");
_Static_assert(offsetof(aft_run_info, oom_at_start) == 2096, "oom_at_start offset");
_Static_assert(offsetof(aft_run_info, process_start_ticks) == 2176, "process_start_ticks offset");
_Static_assert(sizeof(aft_run_live) == 336, "aft_run_live size");
_Static_assert(offsetof(aft_run_live, oom) == 80, "live oom offset");
_Static_assert(offsetof(aft_run_live, screen) == 168, "live screen offset");
_Static_assert(offsetof(aft_run_live, check) == 332, "live check offset");
_Static_assert(sizeof(aft_run_term) == 64, "aft_run_term size");
_Static_assert(offsetof(aft_run_term, check) == 60, "term check offset");
_Static_assert(sizeof(aft_run_exit) == 40, "aft_run_exit size");
_Static_assert(offsetof(aft_run_exit, check) == 36, "exit check offset");
_Static_assert(offsetof(aft_run_file, info) == 64, "run info offset");
_Static_assert(offsetof(aft_run_file, live) == 2304, "run live offset");
_Static_assert(offsetof(aft_run_file, term) == 2976, "run term offset");
_Static_assert(offsetof(aft_run_file, exit) == 3040, "run exit offset");
_Static_assert(sizeof(aft_run_file) == 3080, "aft_run_file size");
_Static_assert(sizeof(aft_error_info) == 232, "aft_error_info size");
#endif

#endif /* AFTERMATH_FORMAT_RUNS_H */
