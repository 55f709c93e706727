/*
 * runs_internal.h: state shared by runs.c (normal time), runs_async.c (the termination
 * recorder) and exports_async.c (the hand-offs to the exporter). Not seen by Swift.
 */
#ifndef AFT_RUNS_INTERNAL_H
#define AFT_RUNS_INTERNAL_H

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

#endif /* AFT_RUNS_INTERNAL_H */
