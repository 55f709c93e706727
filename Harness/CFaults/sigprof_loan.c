/*
 * sigprof_loan.c: NORMAL-TIME CODE, test-only. A hang's capture of every thread held open (its
 * threads paused) while the test does something else, such as a crash that is withdrawn: what
 * SIGPROF's handler is while the two overlap, and after. The thread the hang's capture pauses
 * with SIGPROF: one masked as libdispatch's workers are, busy (a hang's capture signals running
 * threads only).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <time.h>

#include "CHarnessFaults.h"
#include "threads_internal.h"

void aft_test_block_all_but_sigprof(void) {
    sigset_t mask;
    sigfillset(&mask);
    int open[] = {SIGILL, SIGTRAP, SIGFPE, SIGBUS, SIGSEGV, SIGSYS, SIGPIPE, SIGPROF};
    for (size_t i = 0; i < sizeof(open) / sizeof(open[0]); i++) sigdelset(&mask, open[i]);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
}

static _Atomic int aft_g_spinner_ready;

static void *aft_sigprof_spinner(void *arg) {
    (void)arg;
    prctl(PR_SET_NAME, "dispatch-spin", 0, 0, 0);
    aft_test_block_all_but_sigprof();
    atomic_store(&aft_g_spinner_ready, 1);
    volatile uint64_t spins = 0;
    for (;;) spins++;
    return NULL;
}

int aft_test_start_sigprof_spinner(void) {
    pthread_t t;
    int err = pthread_create(&t, NULL, aft_sigprof_spinner, NULL);
    if (err != 0) return err;
    pthread_detach(t);
    struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000 * 1000};
    for (int waited = 0; !atomic_load(&aft_g_spinner_ready); waited++) {
        if (waited > 5000) return -1;
        nanosleep(&ms, NULL);
    }
    return 0;
}

void aft_test_hang_capture_hold(uint64_t watched_tid) {
    aft_async_threads_capture_for_hang(watched_tid, 0);
}

void aft_test_hang_capture_release(void) {
    aft_async_threads_release_capture(&aft_g_hang_threads, 1);
}

int aft_test_hang_capture_borrowed_sigprof(void) { return aft_g_hang_threads.sigprof_borrowed; }

int aft_test_sigprof_owner(void) { return aft_async_sigprof_owner(); }

int aft_test_sigprof_stranded(void) { return atomic_load(&aft_g_sigprof_loan.stranded); }
