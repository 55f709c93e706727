/*
 * emulator_probe.c: what the machine running it does differently from the Linux kernel, for
 * scripts/arm64.sh --quick. Run under qemu-user, each known emulator limit is looked for here
 * and printed as one line "name|holds|evidence" (holds: 1 when the machine differs from the
 * kernel, 0 when it behaves as the kernel does), so the list the script prints is the one
 * observed, not a remembered one.
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void report(const char *name, int holds, const char *evidence) {
    printf("%s|%d|%s\n", name, holds, evidence);
}

/* Field 22 of a stat file (the start time in clock ticks), or 0. */
static unsigned long long start_ticks(const char *path) {
    char buf[1024];
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL) return 0;
    for (int field = 2; *p != '\0' && field < 22; p++)
        if (*p == ' ') field++;
    return strtoull(p, NULL, 10);
}

#if defined(__aarch64__)
static volatile sig_atomic_t ill_code = -1;
static void on_ill(int signo, siginfo_t *info, void *context) {
    (void)signo;
    ill_code = info->si_code;
    ucontext_t *uc = context;
    uc->uc_mcontext.pc += 4; /* past the udf */
}
#endif

static int child_main(void *arg) {
    (void)arg;
    return 0;
}

int main(int argc, char **argv) {
    char evidence[256];
    if (argc == 3 && strcmp(argv[1], "--after-exec") == 0) {
        unsigned long long before = strtoull(argv[2], NULL, 10),
                           after = start_ticks("/proc/self/stat");
        snprintf(evidence, sizeof(evidence),
                 "/proc/self/stat start time %llu before exec, %llu after (the kernel keeps it)",
                 before, after);
        report("exec-start-time", before != after, evidence);
        return 0;
    }

    errno = 0;
    long r = ptrace(PTRACE_PEEKUSER, 0, NULL, NULL);
    snprintf(evidence, sizeof(evidence), "ptrace: %s", r == -1 ? strerror(errno) : "answered");
    report("ptrace", r == -1 && errno == ENOSYS, evidence);

    uint32_t action = SECCOMP_RET_KILL_PROCESS;
    r = syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action);
    snprintf(evidence, sizeof(evidence), "seccomp: %s", r == -1 ? strerror(errno) : "available");
    report("seccomp", r == -1 && errno == ENOSYS, evidence);

    /* This thread's own syscall file, read while it is in read(2). */
    char path[64], line[256] = "";
    snprintf(path, sizeof(path), "/proc/self/task/%ld/syscall", (long)syscall(SYS_gettid));
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, line, sizeof(line) - 1) : -1;
    if (fd >= 0) close(fd);
    line[n > 0 ? n : 0] = '\0';
    line[strcspn(line, " \n")] = '\0';
    snprintf(evidence, sizeof(evidence),
             "/proc/<tid>/syscall during read(2) says %.20s, read is %d here", line, (int)SYS_read);
    report("proc-syscall", n > 0 && atoi(line) != SYS_read, evidence);

    /* SigBlk with one real-time signal blocked: its bit, or another one. */
    int rt = SIGRTMAX - 2;
    sigset_t one, old;
    sigemptyset(&one);
    sigaddset(&one, rt);
    sigprocmask(SIG_SETMASK, &one, &old);
    snprintf(path, sizeof(path), "/proc/self/task/%ld/status", (long)syscall(SYS_gettid));
    FILE *f = fopen(path, "r");
    unsigned long long blocked = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "SigBlk:", 7) == 0) blocked = strtoull(line + 7, NULL, 16);
    if (f != NULL) fclose(f);
    sigprocmask(SIG_SETMASK, &old, NULL);
    snprintf(evidence, sizeof(evidence), "only signal %d blocked, SigBlk says %#llx", rt, blocked);
    report("sigblk-numbering", blocked != 1ull << (rt - 1), evidence);

    /* A single-threaded process: its tasks. */
    int tasks = 0;
    DIR *d = opendir("/proc/self/task");
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.') tasks++;
    if (d != NULL) closedir(d);
    snprintf(evidence, sizeof(evidence),
             "a process with one thread has %d tasks in /proc/self/task", tasks);
    report("extra-task", tasks > 1, evidence);

    /* The two highest real-time signals, sent while blocked and taken back. */
    int unsendable = 0;
    for (int signo = SIGRTMAX - 1; signo <= SIGRTMAX; signo++) {
        sigemptyset(&one);
        sigaddset(&one, signo);
        sigprocmask(SIG_BLOCK, &one, &old);
        if (syscall(SYS_tgkill, (long)getpid(), (long)syscall(SYS_gettid), (long)signo) != 0)
            unsendable++;
        else
            sigwaitinfo(&one, NULL);
        sigprocmask(SIG_SETMASK, &old, NULL);
    }
    snprintf(evidence, sizeof(evidence), "%d of signals %d and %d cannot be sent (EINVAL)",
             unsendable, SIGRTMAX - 1, SIGRTMAX);
    report("rt-signals", unsendable > 0, evidence);

    /* A copy of the process without SIGCHLD as its exit signal. */
    static uint8_t stack[65536] __attribute__((aligned(16)));
    pid_t pid = clone(child_main, stack + sizeof(stack), CLONE_UNTRACED, NULL);
    int clone_errno = errno;
    if (pid > 0) waitpid(pid, NULL, __WALL);
    snprintf(evidence, sizeof(evidence), "clone(CLONE_UNTRACED, no exit signal): %s",
             pid > 0 ? "a child" : strerror(clone_errno));
    report("clone-exit-signal", pid < 0 && clone_errno == EINVAL, evidence);

    /* A process that shares our memory without being a thread: the resident unwinding helper. */
    pid = clone(child_main, stack + sizeof(stack), CLONE_VM | CLONE_FILES | CLONE_UNTRACED, NULL);
    clone_errno = errno;
    if (pid > 0) waitpid(pid, NULL, __WALL);
    snprintf(evidence, sizeof(evidence), "clone(CLONE_VM|CLONE_FILES|CLONE_UNTRACED): %s",
             pid > 0 ? "a child" : strerror(clone_errno));
    report("clone-vm-process", pid < 0 && clone_errno == EINVAL, evidence);

    /* /proc/self/maps read under a file-size limit smaller than it, in a child. */
    pid = fork();
    if (pid == 0) {
        sigset_t xfsz, pending;
        sigemptyset(&xfsz);
        sigaddset(&xfsz, SIGXFSZ);
        sigprocmask(SIG_BLOCK, &xfsz, NULL);
        struct rlimit limit = {.rlim_cur = 1024, .rlim_max = 1024};
        setrlimit(RLIMIT_FSIZE, &limit);
        char chunk[4096];
        ssize_t got, total = 0;
        int maps = open("/proc/self/maps", O_RDONLY);
        while (maps >= 0 && (got = read(maps, chunk, sizeof(chunk))) > 0) total += got;
        if (maps >= 0) close(maps);
        int raised = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1;
        _exit(total == 1024 || raised ? 1 : 0);
    }
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    int cut = pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 1;
    snprintf(evidence, sizeof(evidence), "/proc/self/maps under a 1 KiB file-size limit: %s",
             cut ? "cut at 1 KiB, SIGXFSZ raised" : "whole");
    report("proc-fsize", cut, evidence);

#if defined(__aarch64__)
    struct sigaction action_ill;
    memset(&action_ill, 0, sizeof(action_ill));
    action_ill.sa_sigaction = on_ill;
    action_ill.sa_flags = SA_SIGINFO;
    sigaction(SIGILL, &action_ill, NULL);
    __asm__ volatile("udf #0");
    snprintf(evidence, sizeof(evidence), "udf gives SIGILL code %d, the kernel ILL_ILLOPC (%d)",
             (int)ill_code, ILL_ILLOPC);
    report("sigill-code", ill_code != ILL_ILLOPC, evidence);
#endif

    fflush(stdout);
    char ticks[32];
    snprintf(ticks, sizeof(ticks), "%llu", start_ticks("/proc/self/stat"));
    usleep(50 * 1000); /* a start time taken anew would differ */
    execl("/proc/self/exe", argv[0], "--after-exec", ticks, (char *)NULL);
    report("exec-start-time", 0, "exec failed");
    return 0;
}
