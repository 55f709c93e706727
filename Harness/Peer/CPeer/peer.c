/*
 * peer.c: the probes of the side-by-side benchmark (CPeer.h). Normal-time code, benchmark
 * only, except the SIGSEGV handler, which calls write(2) and _exit(2) alone.
 */
#include "CPeer.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CPEER_MAX_CHILDREN 64

uint64_t cpeer_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Async-signal-safe: no stdio. */
void cpeer_print(const char *key, uint64_t value) {
    char buf[96];
    size_t n = 0;
    buf[n++] = ' ';
    for (const char *k = key; *k != '\0' && n < 60; k++) buf[n++] = *k;
    buf[n++] = '=';
    char digits[24];
    size_t d = 0;
    do {
        digits[d++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    while (d > 0) buf[n++] = digits[--d];
    ssize_t ignored = write(1, buf, n);
    (void)ignored;
}

void cpeer_newline(void) {
    ssize_t ignored = write(1, "\n", 1);
    (void)ignored;
}

/* ---- the handler ---- */

static volatile uint64_t cpeer_g_stamp;
static int cpeer_g_timing_fd = -1;
static int *volatile cpeer_g_null; /* NULL, but the compiler cannot know it */

static void cpeer_handler(int signo, siginfo_t *info, void *context) {
    uint64_t now = cpeer_now_ns(); /* clock_gettime is async-signal-safe */
    (void)info;
    (void)context;
    cpeer_print("handler_ns", now - cpeer_g_stamp);
    cpeer_print("handler_signal", (uint64_t)signo);
    uint64_t sdk = 0;
    if (cpeer_g_timing_fd >= 0 && pread(cpeer_g_timing_fd, &sdk, sizeof(sdk), 0) == sizeof(sdk))
        cpeer_print("sdk_handler_ns", sdk);
    cpeer_newline();
    _exit(0);
}

void cpeer_install_handler(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = cpeer_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
}

int cpeer_sdk_timing_fd(void) {
    if (cpeer_g_timing_fd < 0) cpeer_g_timing_fd = memfd_create("peer-sdk-timing", MFD_CLOEXEC);
    return cpeer_g_timing_fd;
}

void cpeer_fault(void) {
    cpeer_g_stamp = cpeer_now_ns();
    *cpeer_g_null = 1;
}

/* ---- the app's child processes ---- */

static size_t cpeer_read_file(const char *path, char *buf, size_t capacity) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return (size_t)-1;
    size_t total = 0;
    while (total + 1 < capacity) {
        ssize_t n = read(fd, buf + total, capacity - 1 - total);
        if (n <= 0) break;
        total += (size_t)n;
    }
    close(fd);
    buf[total] = '\0';
    return total;
}

static int cpeer_is_pid(const char *name) {
    if (*name == '\0') return 0;
    for (const char *c = name; *c != '\0'; c++)
        if (*c < '0' || *c > '9') return 0;
    return 1;
}

/* State and parent of pid from /proc/<pid>/stat (after the comm's closing parenthesis). */
static int cpeer_stat(int pid, char *state, int *ppid) {
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    if (cpeer_read_file(path, buf, sizeof(buf)) == (size_t)-1) return -1;
    char *close_paren = strrchr(buf, ')');
    if (close_paren == NULL) return -1;
    return sscanf(close_paren + 1, " %c %d", state, ppid) == 2 ? 0 : -1;
}

/* The live (not zombie) child processes of this process; their number. */
static size_t cpeer_children(int *pids, size_t capacity) {
    size_t count = 0;
    int found_file = 0;
    DIR *tasks = opendir("/proc/self/task");
    struct dirent *e;
    while (tasks != NULL && (e = readdir(tasks)) != NULL) {
        if (!cpeer_is_pid(e->d_name)) continue;
        char path[320], buf[4096];
        snprintf(path, sizeof(path), "/proc/self/task/%s/children", e->d_name);
        if (cpeer_read_file(path, buf, sizeof(buf)) == (size_t)-1) continue;
        found_file = 1;
        for (char *tok = strtok(buf, " \n"); tok != NULL && count < capacity;
             tok = strtok(NULL, " \n"))
            pids[count++] = atoi(tok);
    }
    if (tasks != NULL) closedir(tasks);
    if (!found_file) { /* a kernel without CONFIG_PROC_CHILDREN: scan /proc */
        int self = (int)getpid();
        DIR *proc = opendir("/proc");
        while (proc != NULL && (e = readdir(proc)) != NULL && count < capacity) {
            char state;
            int ppid;
            if (cpeer_is_pid(e->d_name) && cpeer_stat(atoi(e->d_name), &state, &ppid) == 0 &&
                ppid == self)
                pids[count++] = atoi(e->d_name);
        }
        if (proc != NULL) closedir(proc);
    }
    size_t live = 0;
    for (size_t i = 0; i < count; i++) {
        char state;
        int ppid;
        if (cpeer_stat(pids[i], &state, &ppid) == 0 && state != 'Z') pids[live++] = pids[i];
    }
    return live;
}

static int cpeer_is_aftermath_helper(int pid) {
    char path[64], buf[64];
    snprintf(path, sizeof(path), "/proc/%d/comm", pid);
    if (cpeer_read_file(path, buf, sizeof(buf)) == (size_t)-1) return 0;
    return strcmp(buf, "aftermath.unw\n") == 0;
}

/* Run time (ns) of every task of pid. */
static uint64_t cpeer_cpu_ns(int pid) {
    char path[320], buf[256];
    uint64_t total = 0;
    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    DIR *tasks = opendir(path);
    struct dirent *e;
    while (tasks != NULL && (e = readdir(tasks)) != NULL) {
        if (!cpeer_is_pid(e->d_name)) continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat", pid, e->d_name);
        if (cpeer_read_file(path, buf, sizeof(buf)) != (size_t)-1) total += strtoull(buf, NULL, 10);
    }
    if (tasks != NULL) closedir(tasks);
    return total;
}

void cpeer_report_children_cpu(void) {
    int pids[CPEER_MAX_CHILDREN];
    size_t n = cpeer_children(pids, CPEER_MAX_CHILDREN);
    uint64_t cpu = 0, helpers = 0;
    for (size_t i = 0; i < n; i++) {
        cpu += cpeer_cpu_ns(pids[i]);
        helpers += (uint64_t)cpeer_is_aftermath_helper(pids[i]);
    }
    cpeer_print("children", n);
    cpeer_print("child_cpu_ns", cpu);
    cpeer_print("child_aft_unw", helpers);
    cpeer_newline();
}

/* ---- memory and descriptors ---- */

static uint64_t cpeer_private_dirty_kb(const char *pid) {
    char path[64], buf[4096];
    snprintf(path, sizeof(path), "/proc/%s/smaps_rollup", pid);
    if (cpeer_read_file(path, buf, sizeof(buf)) == (size_t)-1) return 0;
    char *line = strstr(buf, "Private_Dirty:");
    return line == NULL ? 0 : strtoull(line + strlen("Private_Dirty:"), NULL, 10);
}

/* Entries of /proc/<pid>/fd, the descriptor reading them not counted. */
static uint64_t cpeer_fd_count(const char *pid) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%s/fd", pid);
    DIR *d = opendir(path);
    if (d == NULL) return 0;
    uint64_t count = 0;
    struct dirent *e;
    char own[16];
    snprintf(own, sizeof(own), "%d", dirfd(d));
    int self = strcmp(pid, "self") == 0;
    while ((e = readdir(d)) != NULL)
        if (cpeer_is_pid(e->d_name) && !(self && strcmp(e->d_name, own) == 0)) count++;
    closedir(d);
    return count;
}

/* 1 when pid shares this process's resource of kcmp type, 0 when not, -1 when unknown. */
static int cpeer_shares(int pid, int type) {
    long r = syscall(SYS_kcmp, (long)getpid(), (long)pid, (long)type, 0L, 0L);
    return r < 0 ? -1 : r == 0;
}

/* Threads of this process. */
static uint64_t cpeer_thread_count(void) {
    DIR *tasks = opendir("/proc/self/task");
    uint64_t count = 0;
    struct dirent *e;
    while (tasks != NULL && (e = readdir(tasks)) != NULL)
        count += (uint64_t)cpeer_is_pid(e->d_name);
    if (tasks != NULL) closedir(tasks);
    return count;
}

void cpeer_report_memory(void) {
    sync();
    cpeer_print("self_pd_kb", cpeer_private_dirty_kb("self"));
    cpeer_print("self_fds", cpeer_fd_count("self"));
    cpeer_print("self_threads", cpeer_thread_count());
    int pids[CPEER_MAX_CHILDREN];
    size_t n = cpeer_children(pids, CPEER_MAX_CHILDREN);
    uint64_t pd = 0, fds = 0, raw_pd = 0, raw_fds = 0;
    uint64_t shared_vm = 0, shared_fds = 0, unknown = 0, helpers = 0;
    for (size_t i = 0; i < n; i++) {
        char pid[16];
        snprintf(pid, sizeof(pid), "%d", pids[i]);
        int vm = cpeer_shares(pids[i], KCMP_VM), files = cpeer_shares(pids[i], KCMP_FILES);
        uint64_t child_pd = cpeer_private_dirty_kb(pid), child_fds = cpeer_fd_count(pid);
        unknown += (uint64_t)(vm < 0 || files < 0);
        raw_pd += child_pd;
        raw_fds += child_fds;
        if (vm == 1)
            shared_vm++;
        else
            pd += child_pd;
        if (files == 1)
            shared_fds++;
        else
            fds += child_fds;
        helpers += (uint64_t)cpeer_is_aftermath_helper(pids[i]);
    }
    cpeer_print("children", n);
    cpeer_print("child_aft_unw", helpers);
    cpeer_print("child_pd_kb", pd);
    cpeer_print("child_fds", fds);
    cpeer_print("child_raw_pd_kb", raw_pd);
    cpeer_print("child_raw_fds", raw_fds);
    cpeer_print("child_shared_vm", shared_vm);
    cpeer_print("child_shared_fds", shared_fds);
    cpeer_print("child_kcmp_unknown", unknown);
    cpeer_newline();
}
