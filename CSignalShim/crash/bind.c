/*
 * bind.c: NORMAL-TIME CODE. Calls, once, every library function the crash-time code calls, with
 * arguments that do nothing (a descriptor of -1, an empty path, a query). An app linked without
 * -z now (Swift's default) binds a function at its first call: the dynamic linker looks its name
 * up in every loaded image and saves the vector registers on the stack it runs on, 1-3 µs a
 * function and a page of the alternate signal stack. Bound here, a crash's handler never enters
 * the linker (CrashPathBindingTests lists the crash-time objects' calls and checks each slot).
 * Every call is one a service's system call filter allows where it allows the crash path: none
 * is made that the crash path does not make. The calls only a crash makes go through syscall(2)
 * instead (sys_internal.h): nothing of theirs to bind.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h> /* renameat */
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim_internal.h"

/* A size the compiler cannot see: a copy it would inline is a call here. */
static volatile size_t aft_g_bind_size = 1;

void aft_bind_crash_calls(void) {
    int saved_errno = errno;
    char byte = 0, copy = 0;
    struct stat st;
    struct timespec now = {0, 0};
    sigset_t set, old;
    struct sigaction action;

    (void)syscall(SYS_getpid);
    (void)getpid();
    (void)clock_gettime(CLOCK_MONOTONIC, &now);
    (void)clone(NULL, NULL, 0, NULL); /* no function: EINVAL before any system call */

    (void)open("", O_RDONLY | O_CLOEXEC); /* empty paths: ENOENT */
    (void)openat(-1, "", O_RDONLY | O_CLOEXEC);
    (void)renameat(-1, "", -1, "");
    (void)read(-1, &byte, 0); /* a descriptor of -1: EBADF */
    (void)pread(-1, &byte, 0, 0);
    (void)pwrite(-1, &byte, 0, 0);
    (void)fchmod(-1, 0600);
    (void)fstat(-1, &st);
    (void)close(-1);
    (void)memcpy(&copy, &byte, aft_g_bind_size);

    (void)sigemptyset(&set);
    (void)sigfillset(&set);
    (void)sigdelset(&set, SIGSEGV);
    (void)sigaddset(&set, SIGSEGV);
    (void)sigismember(&set, SIGSEGV);
    (void)sigprocmask(SIG_BLOCK, NULL, &old); /* queries */
    (void)sigaction(SIGSEGV, NULL, &action);
    sigjmp_buf jump;
    if (sigsetjmp(jump, 0) == 0) siglongjmp(jump, 1);
    errno = saved_errno;
}
