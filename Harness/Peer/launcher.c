/*
 * launcher.c: times one whole process for the side-by-side benchmark (Harness/Peer/README.md).
 * Usage: launcher PROGRAM [ARGS...]. CLOCK_MONOTONIC before fork(2), then the child
 * (core dumps off, stdin /dev/null, stdout a memory file, stderr /dev/null unless
 * PEER_VERBOSE is set) execve(2)s PROGRAM with this environment, the parent wait4(2)s it and
 * reads the clock again. Prints one line: `wall_ns= cpu_ns= user_ns= sys_ns= exit= signal=`
 * (cpu from wait4's rusage: the process's threads and any child it reaped, not the children it
 * left alive), followed by what the program wrote to stdout (newlines as spaces).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t timeval_ns(struct timeval tv) {
    return (uint64_t)tv.tv_sec * 1000000000u + (uint64_t)tv.tv_usec * 1000u;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PROGRAM [ARGS...]\n", argv[0]);
        return 2;
    }
    int out = memfd_create("peer-out", MFD_CLOEXEC);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (out < 0 || null < 0) {
        perror("launcher: memfd_create or /dev/null");
        return 2;
    }
    int verbose = getenv("PEER_VERBOSE") != NULL;
    uint64_t start = now_ns();
    pid_t pid = fork();
    if (pid < 0) {
        perror("launcher: fork");
        return 2;
    }
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        dup2(null, 0);
        dup2(out, 1);
        if (!verbose) dup2(null, 2);
        execve(argv[1], argv + 1, environ);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof(ru));
    while (wait4(pid, &status, 0, &ru) < 0) {
    }
    uint64_t end = now_ns();
    uint64_t user = timeval_ns(ru.ru_utime), sys = timeval_ns(ru.ru_stime);
    printf("wall_ns=%llu cpu_ns=%llu user_ns=%llu sys_ns=%llu exit=%d signal=%d",
           (unsigned long long)(end - start), (unsigned long long)(user + sys),
           (unsigned long long)user, (unsigned long long)sys,
           WIFEXITED(status) ? WEXITSTATUS(status) : -1,
           WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    /* The program's output; a child it left alive may share the descriptor, so read by
     * size rather than to an end of file. */
    struct stat st;
    if (fstat(out, &st) == 0 && st.st_size > 0) {
        size_t size = (size_t)st.st_size > 65536 ? 65536 : (size_t)st.st_size;
        char *buf = malloc(size + 1);
        ssize_t n = buf != NULL ? pread(out, buf, size, 0) : -1;
        for (ssize_t i = 0; i < n; i++) putchar(buf[i] == '\n' ? ' ' : buf[i]);
        free(buf);
    }
    putchar('\n');
    return 0;
}
