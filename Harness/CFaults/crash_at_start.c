/*
 * crash_at_start.c: NORMAL-TIME CODE, test-only. An app's own SIGSEGV handler, installed before
 * Aftermath, which Aftermath's handler chains to once the crash is written: it waits, then
 * counts the threads Aftermath started meanwhile (named "aftermath." but for the delivery
 * thread), and ends the process with that count. Test code: it reads /proc in a signal handler
 * where the crash is already written.
 */
#include "CHarnessFaults.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint32_t aft_g_count_wait_ms;

static int aft_test_count_started(const char *name, void *context) {
    if (strncmp(name, "aftermath.", 10) == 0 && strncmp(name, "aftermath.deliv", 15) != 0)
        (*(int *)context)++;
    return 0;
}

static int aft_test_started_threads(void) {
    int count = 0;
    return aft_test_each_thread_name(aft_test_count_started, &count) < 0 ? -1 : count;
}

static void aft_test_counting_handler(int signo, siginfo_t *info, void *context) {
    (void)signo;
    (void)info;
    (void)context;
    struct timespec wait = {(time_t)(aft_g_count_wait_ms / 1000),
                            (long)(aft_g_count_wait_ms % 1000) * 1000000L};
    while (nanosleep(&wait, &wait) != 0 && errno == EINTR) {
    }
    int started = aft_test_started_threads();
    _exit(started < 0 ? 99 : 20 + (started > 20 ? 20 : started));
}

int aft_test_install_thread_counting_handler(uint32_t wait_ms) {
    aft_g_count_wait_ms = wait_ms;
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = aft_test_counting_handler;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    return sigaction(SIGSEGV, &action, NULL) == 0 ? 0 : errno;
}

int aft_test_run_on_one_cpu(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return errno;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &set)) continue;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0) return errno;
        /* A new thread may still preempt its creator under the fair scheduler (a loaded machine
         * runs it first): first-in-first-out, which the threads started inherit, does not. */
        struct sched_param fifo = {.sched_priority = 1};
        (void)sched_setscheduler(0, SCHED_FIFO, &fifo); /* where allowed (root) */
        return 0;
    }
    return EINVAL;
}
