/*
 * thread_named.c: NORMAL-TIME CODE, test-only. Whether a thread of this process has a given
 * name, read from /proc/self/task/<tid>/comm with plain system calls (Foundation's first file
 * read sets up its text encodings, a tenth of a second on a fresh process).
 */
#include "CHarnessFaults.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int aft_test_thread_named(const char *name) {
    DIR *dir = opendir("/proc/self/task");
    if (dir == NULL) return -1;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(dir)) != NULL) {
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
        found = strcmp(comm, name) == 0;
    }
    closedir(dir);
    return found;
}
