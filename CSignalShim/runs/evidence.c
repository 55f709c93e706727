/*
 * evidence.c: NORMAL-TIME CODE (never runs in a signal handler). Reads the evidence a run
 * record keeps and the next launch compares: counters in "key value" files (the cgroups' OOM
 * kills, found by cgroups.c; /proc/vmstat), PSI, TracerPid, boot_id, and whether a run file is
 * still locked by its run.
 * Used by the running process (runs.c) and by the next launch (through Swift).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "CSignalShim.h"
#include "runs_internal.h"
#include "shim_internal.h"

static ssize_t aft_run_read_file(const char *path, char *buf, size_t capacity) {
    return aft_async_read_small_file(path, buf, capacity);
}

int aft_run_join(char *out, size_t capacity, const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la + 1 + lb >= capacity) {
        if (capacity > 0) out[0] = '\0';
        return 0;
    }
    memcpy(out, a, la);
    out[la] = '/';
    memcpy(out + la + 1, b, lb + 1);
    return 1;
}

void aft_run_copy(char *out, size_t capacity, const char *src) {
    if (capacity == 0) return;
    size_t n = strnlen(src, capacity - 1);
    memcpy(out, src, n);
    out[n] = '\0';
}

static int aft_run_parse_u64(const char *p, uint64_t *out) {
    while (*p == ' ' || *p == '\t') p++;
    if (*p < '0' || *p > '9') return 0;
    uint64_t v = 0;
    while (*p >= '0' && *p <= '9') {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return 0; /* overflow: hostile */
        v = v * 10 + d;
        p++;
    }
    *out = v;
    return 1;
}

/* The value of the line "key value" (first such line), or AFT_RUN_UNREAD. */
static uint64_t aft_counter_in_line(const char *line, const char *key, size_t klen, int *found) {
    if (strncmp(line, key, klen) != 0 || (line[klen] != ' ' && line[klen] != '\t')) return 0;
    *found = 1;
    uint64_t v;
    return aft_run_parse_u64(line + klen, &v) ? v : AFT_RUN_UNREAD;
}

int aft_read_counters(const char *path, const char *const *keys, uint64_t *values, uint32_t count) {
    for (uint32_t i = 0; i < count; i++) values[i] = AFT_RUN_UNREAD;
    if (!path || path[0] == '\0' || count == 0 || count > 4) return 0;
    /* Non-blocking, no final symlink, regular files only, as aft_async_read_small_file. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return 0;
    }
    /* Line by line through 1 KiB: /proc/vmstat is some 5 KiB, and the thread that samples the
     * run record every second keeps every stack page it ever touched. A line longer than that
     * (no counter's) is skipped. */
    char buf[1024];
    size_t klen[4], have = 0;
    int found[4] = {0, 0, 0, 0};
    uint32_t missing = count;
    for (uint32_t i = 0; i < count; i++) klen[i] = strlen(keys[i]);
    int skipping = 0, ended = 0;
    while (missing > 0 && !ended) {
        ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { /* the end: a last line without its newline counts too */
            ended = 1;
            if (have == 0 || skipping) break;
            buf[have++] = '\n';
        } else {
            have += (size_t)n;
        }
        size_t start = 0;
        char *newline;
        while (missing > 0 && (newline = memchr(buf + start, '\n', have - start)) != NULL) {
            *newline = '\0';
            for (uint32_t i = 0; i < count && !skipping; i++) {
                if (found[i]) continue;
                uint64_t v = aft_counter_in_line(buf + start, keys[i], klen[i], &found[i]);
                if (found[i]) {
                    values[i] = v;
                    missing--;
                    break; /* a line holds one key */
                }
            }
            skipping = 0;
            start = (size_t)(newline - buf) + 1;
        }
        memmove(buf, buf + start, have - start);
        have -= start;
        if (have == sizeof(buf) - 1) { /* one line fills the buffer: skipped to its end */
            skipping = 1;
            have = 0;
        }
    }
    close(fd);
    return 1;
}

uint64_t aft_read_counter(const char *path, const char *key) {
    uint64_t value;
    if (!key) return AFT_RUN_UNREAD;
    aft_read_counters(path, &key, &value, 1);
    return value;
}

/* The avg10 of the line that begins with prefix in a pressure file's text, in hundredths. */
static uint32_t aft_psi_avg10_in(const char *buf, const char *prefix) {
    size_t plen = strlen(prefix);
    for (const char *line = buf; line && *line;) {
        const char *next = strchr(line, '\n');
        if (next) next++;
        if (strncmp(line, prefix, plen) == 0 && line[plen] == ' ') {
            const char *a = strstr(line, "avg10="); /* the first field after the prefix */
            if (!a) return UINT32_MAX;
            uint64_t whole = 0, frac = 0;
            if (!aft_run_parse_u64(a + 6, &whole) || whole > 100) return UINT32_MAX;
            const char *dot = strchr(a + 6, '.');
            if (dot && dot[1] >= '0' && dot[1] <= '9') {
                frac = (uint64_t)(dot[1] - '0') * 10;
                if (dot[2] >= '0' && dot[2] <= '9') frac += (uint64_t)(dot[2] - '0');
            }
            return (uint32_t)(whole * 100 + frac);
        }
        line = next;
    }
    return UINT32_MAX;
}

uint32_t aft_read_psi_avg10(const char *path, const char *prefix) {
    char buf[1024];
    if (aft_run_read_file(path, buf, sizeof(buf)) <= 0) return UINT32_MAX;
    return aft_psi_avg10_in(buf, prefix);
}

/* Both lines of a pressure file, from one read. Never inlined: its buffer would widen the
 * sampler's own frame, under which the counters' reads go, a page deeper on its thread. */
__attribute__((noinline)) static void aft_read_psi_both(const char *path, uint32_t *some,
                                                        uint32_t *full) {
    char buf[1024];
    *some = *full = UINT32_MAX;
    if (aft_run_read_file(path, buf, sizeof(buf)) <= 0) return;
    *some = aft_psi_avg10_in(buf, "some");
    *full = aft_psi_avg10_in(buf, "full");
}

int aft_read_line(const char *path, char *out, size_t capacity) {
    char buf[256];
    if (capacity == 0) return -1;
    out[0] = '\0';
    ssize_t n = aft_run_read_file(path, buf, sizeof(buf));
    if (n <= 0) return -1;
    size_t len = 0;
    while (len < (size_t)n && buf[len] != '\n' && buf[len] != '\0') len++;
    if (len >= capacity) len = capacity - 1;
    memcpy(out, buf, len);
    out[len] = '\0';
    return (int)len;
}

uint64_t aft_process_start_ticks(const char *proc_root) {
    /* Field 22 lies within the first 430 bytes (a 15-byte comm, 20-digit fields); start's frames
     * on the app's stack stay shallower with half a kilobyte. */
    char path[AFT_PATH_CAPACITY + 64], buf[512];
    if (!proc_root || !aft_run_join(path, sizeof(path), proc_root, "self/stat")) return 0;
    ssize_t n = aft_run_read_file(path, buf, sizeof(buf) - 1);
    if (n <= 0) return 0;
    buf[n] = '\0';
    /* "pid (comm) state ppid ...": comm may hold spaces and ')', so count after the last ')'.
     * starttime is field 22, the 20th after the comm. Found by hand, not strrchr: a library
     * call first made here is bound by the dynamic linker on start's deepest frames. */
    char *p = NULL;
    for (ssize_t i = n - 1; i >= 0 && !p; i--)
        if (buf[i] == ')') p = buf + i;
    if (!p) return 0;
    p++;
    for (int field = 3; field < 22; field++) {
        while (*p == ' ') p++;
        while (*p && *p != ' ') p++;
        if (!*p) return 0;
    }
    while (*p == ' ') p++;
    uint64_t v = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 20; p++, digits++) v = v * 10 + (uint64_t)(*p - '0');
    return digits > 0 && (*p == ' ' || *p == '\n' || *p == '\0') ? v : 0;
}

int aft_run_is_locked(const char *path) {
    /* Non-blocking and regular files only: a FIFO named like a run file must not block. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    int locked = 0;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        locked = (errno == EWOULDBLOCK) ? 1 : -1;
    } else {
        flock(fd, LOCK_UN);
    }
    close(fd);
    return locked;
}

/* ---- the live block ---- */

static void aft_run_path_in(char *out, size_t capacity, const char *root, const char *rest) {
    aft_run_join(out, capacity, root, rest);
}

/* The run's own cgroup counts every kernel OOM kill of its processes, the host's OOM killer's
 * too (its oom_kill since Linux 4.13): where it can be read, /proc/vmstat's host-wide count
 * adds only other processes' kills, and is not read (the kernel computes every counter of that
 * file for each read, some 25-30 us). */
int aft_run_own_oom_readable(const uint64_t oom[AFT_OOM_COUNTERS]) {
    return oom[AFT_OOM_V1_SELF] != AFT_RUN_UNREAD || oom[AFT_OOM_V2_SELF] != AFT_RUN_UNREAD;
}

void aft_run_read_oom_now(const aft_run_info *info, uint64_t *out) {
    aft_read_oom_counters((const char(*)[AFT_PATH_CAPACITY])info->cgroup_dirs, out);
}

void aft_run_sample(const char *proc_root, const aft_run_info *info, aft_run_live *l) {
    aft_run_sample_with(proc_root, info, l, 0);
}

void aft_run_sample_with(const char *proc_root, const aft_run_info *info, aft_run_live *l,
                         int at_start) {
    char path[AFT_PATH_CAPACITY + 64];
    l->updated_realtime_ns = aft_async_now_ns(CLOCK_REALTIME);
    l->updated_monotonic_ns = aft_async_now_ns(CLOCK_MONOTONIC);
    l->updated_boottime_ns = aft_async_now_ns(CLOCK_BOOTTIME);
    aft_run_path_in(path, sizeof(path), proc_root, "self/status");
    uint64_t tracer = aft_read_counter(path, "TracerPid:");
    if (tracer != AFT_RUN_UNREAD && tracer != 0) {
        l->debugger_seen = 1;
        l->tracer_pid = tracer;
    }
    if (at_start) { /* the counters were read for the run's baseline a moment ago */
        memcpy(l->oom, info->oom_at_start, sizeof(l->oom));
        l->vmstat_oom_kill = info->vmstat_oom_kill_at_start;
    } else {
        aft_run_read_oom_now(info, l->oom);
        l->vmstat_oom_kill = AFT_RUN_UNREAD;
        if (!aft_run_own_oom_readable(l->oom)) {
            aft_run_path_in(path, sizeof(path), proc_root, "vmstat");
            l->vmstat_oom_kill = aft_read_counter(path, "oom_kill");
        }
    }
    aft_run_path_in(path, sizeof(path), proc_root, "pressure/memory");
    aft_read_psi_both(path, &l->psi_some_avg10_centi, &l->psi_full_avg10_centi);
    l->update_count++;
}
