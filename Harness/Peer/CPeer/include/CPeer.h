/*
 * CPeer: the probes of the side-by-side benchmark with sentry-native (scripts/peer-bench.sh,
 * Harness/Peer/README.md). Benchmark-only C, linked by peer-app and peer-baseline-app and
 * compiled into the C apps (sentry_app.c); no product links it. Every figure is printed to fd 1
 * as `key=value` tokens with write(2).
 */
#ifndef CPEER_H
#define CPEER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t cpeer_now_ns(void);

/* Writes ` key=value` to fd 1 (write(2), no stdio buffer). */
void cpeer_print(const char *key, uint64_t value);
/* Writes a newline to fd 1. */
void cpeer_newline(void);

/* Installs the app's own SIGSEGV handler (before any SDK, which then chains to it): it prints
 * handler_ns= (its entry minus the stamp cpeer_fault took) and _exit(0)s. */
void cpeer_install_handler(void);

/* A memory file for an SDK's own handler timing (Aftermath's benchmark-only
 * handlerTimingFileDescriptor, 8 bytes: signal entry to committed file, ns); the handler of
 * cpeer_install_handler then also prints sdk_handler_ns=. Returns the descriptor, or -1. */
int cpeer_sdk_timing_fd(void);

/* A null store (SIGSEGV) on the calling thread; stamps CLOCK_MONOTONIC just before it. */
void cpeer_fault(void);

/* Prints children= (the app's child processes alive now, found through
 * /proc/self/task/<tid>/children, else by scanning /proc for this parent), child_cpu_ns= (their
 * run time: every task's /proc/<pid>/task/<tid>/schedstat, first field) and child_aft_unw=
 * (how many are named aftermath.unw). */
void cpeer_report_children_cpu(void);

/* sync(), then prints self_pd_kb= (Private_Dirty of /proc/self/smaps_rollup), self_fds= (entries
 * of /proc/self/fd), self_threads= and, over the app's child processes: child_pd_kb= (Private_Dirty of those
 * with an address space of their own), child_fds= (the entries of those with a descriptor table
 * of their own), child_shared_vm= and child_shared_fds= (how many share the app's address space
 * or descriptor table, kcmp(2); theirs are already in the app's figures), child_raw_pd_kb= and
 * child_raw_fds= (what the children's own /proc files read, shared or not), children=. */
void cpeer_report_memory(void);

#ifdef __cplusplus
}
#endif

#endif
