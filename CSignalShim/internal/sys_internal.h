/*
 * sys_internal.h: CRASH-TIME CODE. The system calls that only a crash, a hang's capture or an
 * unwinding helper makes, through syscall(2) rather than their libc wrappers. A wrapper is
 * bound at its first call (a lookup over every loaded image): bound at start instead
 * (crash/bind.c), each cost every launch about 1 µs and a system call for a crash most runs
 * never have; syscall(2) is bound once for them all. Each makes the system call glibc's
 * wrapper makes, so that a service's system call filter sees the same calls. Not imported by
 * Swift.
 */
#ifndef AFT_SYS_INTERNAL_H
#define AFT_SYS_INTERNAL_H

#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static inline int aft_sys_kill(pid_t pid, int signo) { return (int)syscall(SYS_kill, pid, signo); }

/* waitpid(2) as wait4 without a usage record. */
static inline pid_t aft_sys_waitpid(pid_t pid, int *status, int options) {
    return (pid_t)syscall(SYS_wait4, pid, status, options, NULL);
}

/* nanosleep(2) as clock_nanosleep on the realtime clock: -1 and errno (EINTR) on failure. */
static inline int aft_sys_nanosleep(const struct timespec *duration, struct timespec *left) {
    return (int)syscall(SYS_clock_nanosleep, CLOCK_REALTIME, 0, duration, left);
}

static inline int aft_sys_unlinkat(int dir_fd, const char *name, int flags) {
    return (int)syscall(SYS_unlinkat, dir_fd, name, flags);
}

static inline ssize_t aft_sys_write(int fd, const void *bytes, size_t size) {
    return (ssize_t)syscall(SYS_write, fd, bytes, size);
}

static inline off_t aft_sys_lseek(int fd, off_t offset, int whence) {
    return (off_t)syscall(SYS_lseek, fd, offset, whence);
}

static inline int aft_sys_ftruncate(int fd, off_t size) {
    return (int)syscall(SYS_ftruncate, fd, size);
}

static inline int aft_sys_fsync(int fd) { return (int)syscall(SYS_fsync, fd); }

static inline pid_t aft_sys_getppid(void) { return (pid_t)syscall(SYS_getppid); }

/* sigpending(2): the kernel's set (8 bytes) into a cleared sigset_t. */
static inline int aft_sys_sigpending(sigset_t *set) {
    sigemptyset(set);
    return (int)syscall(SYS_rt_sigpending, set, (size_t)(_NSIG / 8));
}

#endif /* AFT_SYS_INTERNAL_H */
