/*
 * thread_named.c: NORMAL-TIME CODE, test-only. The names of this process's threads, read from
 * /proc/self/task/<tid>/comm with plain system calls (Foundation's first file read sets up its
 * text encodings, a tenth of a second on a fresh process).
 */
#include "CHarnessFaults.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int aft_test_each_thread_name(int (*visit)(const char *name, void *context), void *context) {
    DIR *dir = opendir("/proc/self/task");
    if (dir == NULL) return -1;
    int stopped = 0;
    struct dirent *e;
    while (!stopped && (e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[sizeof(e->d_name) + 32], comm[32];
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t n = read(fd, comm, sizeof(comm) - 1);
        close(fd);
        if (n <= 0) continue;
        comm[n] = '\0';
        if (comm[n - 1] == '\n') comm[n - 1] = '\0';
        stopped = visit(comm, context);
    }
    closedir(dir);
    return stopped;
}

static int aft_test_is_name(const char *name, void *context) {
    return strcmp(name, (const char *)context) == 0;
}

int aft_test_thread_named(const char *name) {
    return aft_test_each_thread_name(aft_test_is_name, (void *)name);
}
