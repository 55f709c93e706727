/*
 * watchdog_signal.c: NORMAL-TIME CODE. The hang watchdog's capture signal: its choice (a free
 * real-time signal that can be sent, unless the app asked for one), its handler's installation
 * (never over a handler of the app's), letting it through on the watched thread at every ping,
 * and giving it back at stop; and the signal mask of Aftermath's own threads, with
 * aft_thread_create, which starts them with it.
 */
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "CSignalShim.h"
#include "threads_internal.h"
#include "watchdog_internal.h"

/* The signal whose handler is ours (kept from one start to the next), 0: none. */
AFT_SMALL_STATE static int aft_g_watchdog_handler_installed;

/* The signal mask of Aftermath's own threads. */
static void aft_thread_own_mask(sigset_t *mask) {
    sigfillset(mask);
    for (int i = 0; i < AFT_SIGNAL_COUNT; i++) sigdelset(mask, aft_g_signals[i]);
    /* The Swift runtime's backtracer pauses every other thread of a crashing process with
     * SIGUSR1, SIGUSR2 or SIGPROF, whichever the thread lets through; a thread that blocks all
     * three is missing from its report. SIGPROF: the one signal an app sends without caring
     * which thread takes it (a profiling timer). */
    sigdelset(mask, SIGPROF);
}

void aft_thread_set_own_mask(void) {
    sigset_t mask;
    aft_thread_own_mask(&mask);
    /* Set, not added: a thread started from one that blocks everything (a libdispatch worker)
     * inherits that mask. */
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
}

int aft_thread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                      void *arg) {
    /* The new thread inherits the creator's mask: give it its own from its first instruction,
     * so a crash right after start never finds it blocking what the backtracer needs. */
    sigset_t mask, saved;
    aft_thread_own_mask(&mask);
    pthread_sigmask(SIG_SETMASK, &mask, &saved);
    int err = pthread_create(thread, attr, start, arg);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    return err;
}

/* Lets the capture signal through on the calling thread, the one to be watched. libdispatch's
 * workers (which serve the main queue under dispatchMain() and an async main) block every
 * asynchronous signal; the signal is ours alone, so letting it through changes nothing else. Done
 * at every ping: the app may block it again, and the thread serving the main queue may change. */
void aft_watchdog_admit_capture_signal(aft_watchdog *w) {
    if (!w->signal_usable) return;
    struct sigaction current; /* an app that took the signal since start keeps its mask */
    if (sigaction(w->capture_signal, NULL, &current) != 0 || !(current.sa_flags & SA_SIGINFO) ||
        current.sa_sigaction != aft_async_watchdog_capture_handler)
        return;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, w->capture_signal);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

/* Whether signo's action is left to its default (nobody handles or ignores it). */
static int aft_watchdog_signal_free(int signo) {
    struct sigaction current;
    if (sigaction(signo, NULL, &current) != 0) return 0;
    return !(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_DFL;
}

/* Whether signo can be sent to this thread. qemu-user accepts a handler for every real-time
 * signal but has fewer host signals to map them to: sending the highest fails with EINVAL. Sent
 * here while blocked and taken back with sigtimedwait, it runs neither a handler nor its default
 * action. */
static int aft_watchdog_signal_deliverable(int signo) {
    sigset_t one, old;
    sigemptyset(&one);
    sigaddset(&one, signo);
    if (pthread_sigmask(SIG_BLOCK, &one, &old) != 0) return 0;
    int taken = 0;
    if (syscall(SYS_tgkill, (long)getpid(), (long)aft_async_gettid(), (long)signo) == 0) {
        struct timespec zero = {0, 0};
        taken = sigtimedwait(&one, NULL, &zero) == signo;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return taken;
}

/* A real-time signal nobody uses that can be sent, from the top down (libraries that take one
 * take SIGRTMIN + n), or 0. One the starting thread blocks while others are let through is
 * skipped: an app waiting for a signal with sigwait() blocks it first. */
static int aft_watchdog_choose_signal(void) {
    if (aft_g_watchdog_handler_installed) return aft_g_watchdog_handler_installed; /* kept */
    sigset_t blocked;
    pthread_sigmask(SIG_BLOCK, NULL, &blocked);
    for (int pass = 0; pass < 2; pass++) {
        for (int signo = SIGRTMAX; signo >= SIGRTMIN; signo--) {
            if (pass == 0 && sigismember(&blocked, signo)) continue;
            if (aft_watchdog_signal_free(signo) && aft_watchdog_signal_deliverable(signo))
                return signo;
        }
    }
    return 0;
}

void aft_watchdog_install_signal(aft_watchdog *w, int signo) {
    struct sigaction current;
    if (signo == 0) signo = aft_watchdog_choose_signal();
    if (signo == 0) signo = SIGURG;
    w->capture_signal = signo;
    w->signal_usable = 0;
    if (signo <= 0 || signo >= 65 || sigaction(signo, NULL, &current) != 0) return;
    int ours = (current.sa_flags & SA_SIGINFO) &&
               current.sa_sigaction == aft_async_watchdog_capture_handler;
    int app_handles = !ours && ((current.sa_flags & SA_SIGINFO) ||
                                (current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN));
    if (app_handles) return; /* never take a signal the app uses: /proc capture only */
    if (!ours) {
        struct sigaction action;
        memset(&action, 0, sizeof(action));
        action.sa_sigaction = aft_async_watchdog_capture_handler;
        action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
        sigemptyset(&action.sa_mask);
        if (sigaction(signo, &action, &w->previous_action) != 0) return;
        aft_g_watchdog_handler_installed = signo;
    }
    w->signal_usable = 1;
}

int aft_watchdog_prepare_capture_signal(int requested) {
    aft_watchdog *w = &aft_g_watchdog;
    if (aft_g_watchdog_handler_installed) return aft_g_watchdog_handler_installed;
    aft_watchdog_install_signal(w, requested);
    return w->signal_usable ? w->capture_signal : 0;
}

void aft_watchdog_release_capture_signal(aft_watchdog *w) {
    /* A capture signal still pending would find the previous action (for a real-time signal,
     * the default: death). Our handler stays; it ignores captures nobody asked for. */
    /* Nor while the crash handler's capture of every thread uses it: installed for the
     * process's life then, and captures may have left it pending on threads that block it. */
    if (aft_g_watchdog_handler_installed && !atomic_load(&w->capture_undelivered) &&
        atomic_load(&aft_g_thread_capture_signal) != aft_g_watchdog_handler_installed) {
        sigaction(aft_g_watchdog_handler_installed, &w->previous_action, NULL);
        aft_g_watchdog_handler_installed = 0;
    }
    w->signal_usable = 0;
}
