/*
 * runs_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md (async-
 * signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). Records a termination request (SIGTERM, SIGINT, SIGHUP) in the run file's
 * term block, then lets the signal do exactly what it would have done. The fd and the previous
 * actions were prepared by aft_run_start. Previous action default: reset, re-raise (siginfo
 * kept), unblock, so the process dies of it; ignored: nothing recorded; a handler: called as
 * is.
 */
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "shim_internal.h"
#include "runs_internal.h"

uint32_t aft_async_run_check(const void *block, size_t size_before_check) {
    return aft_async_crc32(0, block, size_before_check) | 1u;
}

static int aft_async_run_index(int signo) {
    for (int i = 0; i < AFT_RUN_SIGNAL_COUNT; i++)
        if (aft_g_run_signals[i] == signo) return i;
    return -1;
}

static void aft_async_run_write_term(void) {
    int fd = aft_g_run.fd;
    if (fd < 0) return;
    aft_g_run.term.check = aft_async_run_check(&aft_g_run.term, offsetof(aft_run_term, check));
    (void)aft_async_pwrite_all(fd, &aft_g_run.term, sizeof(aft_run_term),
                               (off_t)offsetof(aft_run_file, term));
}

void aft_async_run_term_handler(int signo, siginfo_t *info, void *ucontext) {
    int saved_errno = errno;
    int index = aft_async_run_index(signo);
    struct sigaction previous;
    if (index >= 0) {
        previous = aft_g_run.previous[index];
    } else {
        aft_async_memset(&previous, 0, sizeof(previous));
        previous.sa_handler = SIG_DFL;
    }
    int has_function = (previous.sa_flags & SA_SIGINFO)
                           ? previous.sa_sigaction != NULL
                           : (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN);
    if (!has_function && previous.sa_handler == SIG_IGN && !(previous.sa_flags & SA_SIGINFO)) {
        errno = saved_errno; /* ignored before us: ignored now, and not a termination */
        return;
    }

    uint32_t count = atomic_fetch_add(&aft_g_run.term_count, 1) + 1;
    if (count == 1) {
        aft_run_term *t = &aft_g_run.term;
        aft_async_memset(t, 0, sizeof(*t));
        t->signal = signo;
        t->code = info ? info->si_code : 0;
        t->sender_pid = -1;
        t->sender_uid = -1;
        if (info && info->si_code <= 0) { /* sent by a process: kill, sigqueue, tgkill */
            t->sender_pid = info->si_pid;
            t->sender_uid = info->si_uid;
        }
        t->time_realtime_ns = aft_async_now_ns(CLOCK_REALTIME);
        t->disposition = has_function ? AFT_TERM_HANDLER : AFT_TERM_DEFAULT;
    }
    aft_g_run.term.count = count;
    aft_async_run_write_term();

    if (has_function) {
        aft_async_await_exports(); /* the app's handler may end the process */
        if (previous.sa_flags & SA_RESETHAND) {
            struct sigaction dfl;
            aft_async_memset(&dfl, 0, sizeof(dfl));
            dfl.sa_handler = SIG_DFL;
            sigaction(signo, &dfl, NULL);
        }
        /* The mask the app asked for while its handler runs (sigreturn restores ours). */
        sigprocmask(SIG_BLOCK, &previous.sa_mask, NULL);
        errno = saved_errno;
        if (previous.sa_flags & SA_SIGINFO)
            previous.sa_sigaction(signo, info, ucontext);
        else
            previous.sa_handler(signo);
        return;
    }

    /* The default action ends the process: no new hand-off to the exporter, and the one in
     * progress finished first. Then restore it and re-raise on this thread with the original
     * siginfo, unblocked so it is delivered now. */
    atomic_store(&aft_g_exports_refused, 1);
    aft_async_await_exports();
    sigaction(signo, &previous, NULL);
    aft_async_reraise(signo, info);

    /* Still alive: the kernel dropped it (PID 1 of a PID namespace ignores default-action
     * signals), as it would have without us. Withdraw the record and keep catching. */
    atomic_store(&aft_g_exports_refused, 0);
    if (count == 1) {
        aft_async_memset(&aft_g_run.term, 0, sizeof(aft_run_term));
        aft_async_run_write_term();
        atomic_store(&aft_g_run.term_count, 0);
    }
    struct sigaction again;
    aft_async_memset(&again, 0, sizeof(again));
    again.sa_sigaction = aft_async_run_term_handler;
    again.sa_flags = SA_SIGINFO | SA_RESTART | (previous.sa_flags & SA_ONSTACK);
    sigemptyset(&again.sa_mask);
    sigaction(signo, &again, NULL);
    errno = saved_errno;
}
