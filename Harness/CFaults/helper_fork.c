/*
 * helper_fork.c: NORMAL-TIME CODE, test-only. The unwinding helpers' shared answer buffer
 * across fork(2). The parent's and the child's must never be one buffer (a helper of either
 * would answer the other): the child replaces it in place at fork, or, where none was mapped,
 * maps its own at its first use.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "CHarnessFaults.h"

/* The inodes of this process's shared anonymous mappings ("/dev/zero (deleted)" in maps), at
 * most capacity of them; their number. Plain system calls: also run in a forked child. */
static int shared_anonymous_inodes(uint64_t *inodes, int capacity) {
    static char maps[65536];
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t used = 0;
    ssize_t n;
    while (used < sizeof(maps) - 1 && (n = read(fd, maps + used, sizeof(maps) - 1 - used)) > 0)
        used += (size_t)n;
    close(fd);
    maps[used] = '\0';
    int count = 0;
    for (char *line = maps; line && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        static const char suffix[] = "/dev/zero (deleted)";
        size_t len = strlen(line);
        if (len >= sizeof(suffix) - 1 && strcmp(line + len - (sizeof(suffix) - 1), suffix) == 0) {
            /* start-end perms offset dev inode path */
            char *p = line;
            for (int field = 0; field < 4 && p; field++) {
                p = strchr(p, ' ');
                while (p && *p == ' ') p++;
            }
            if (p && count < capacity) inodes[count] = strtoull(p, NULL, 10);
            count++;
        }
        line = end ? end + 1 : NULL;
    }
    return count;
}

int aft_test_shared_anonymous_mappings(void) {
    uint64_t inodes[4];
    return shared_anonymous_inodes(inodes, 4);
}

int aft_test_fork_helper_buffers(void) {
    uint64_t parent[4] = {0};
    int in_parent = shared_anonymous_inodes(parent, 4);
    if (in_parent < 0 || in_parent > 1) return 100 + in_parent;
    pid_t pid = fork();
    if (pid < 0) return 99;
    if (pid == 0) {
        uint64_t child[4] = {0};
        int in_child = shared_anonymous_inodes(child, 4);
        /* As many as the parent's (one replaced in place, or none yet), never the same one. */
        if (in_child != in_parent) _exit(10 + in_child);
        if (in_child == 1 && child[0] == parent[0]) _exit(20);
        _exit(0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
