/*
 * cgroups.c: NORMAL-TIME CODE (never runs in a signal handler). Where a process's memory cgroup
 * keeps its OOM-kill counters (v1's memory.oom_control, v2's memory.events; its own cgroup and
 * its parent's), found from /proc/self/cgroup at start, and their values read then and at each
 * sample (evidence.c reads the files).
 */
#include <string.h>

#include "CSignalShim.h"
#include "runs_internal.h"
#include "shim_internal.h"

/* The counters of a directory's file: v1's memory.oom_control, v2's memory.events. */
static const char *const aft_v1_keys[1] = {"oom_kill"};
static const char *const aft_v2_keys[2] = {"oom_kill", "oom_group_kill"};

/* Paths are joined by hand here, not by snprintf: the run's first work is a process's only
 * user of the printf family at start, whose first call costs 14-20 µs (then 1).
 * a, then len bytes of b, into out; 0 (out "") when it does not fit. */
static int aft_run_concat(char *out, size_t capacity, const char *a, const char *b, size_t len) {
    size_t la = strlen(a);
    if (la + len >= capacity) {
        if (capacity > 0) out[0] = '\0';
        return 0;
    }
    memcpy(out, a, la);
    memcpy(out + la, b, len);
    out[la + len] = '\0';
    return 1;
}

/* base + path into out (AFT_PATH_CAPACITY) when its counter file, probe, opens; "" when too
 * long or it does not. The open is the probe: the file's counters (count keys) are read into
 * values on the way, so that a run's start opens each file once. */
static void aft_run_cgroup_dir(char *out, const char *base, const char *path, size_t path_len,
                               const char *probe, const char *const *keys, uint32_t count,
                               uint64_t *values) {
    out[0] = '\0';
    char dir[AFT_PATH_CAPACITY], file[AFT_PATH_CAPACITY + 64];
    if (path_len == 1 && path[0] == '/') path_len = 0; /* the root: no suffix */
    if (!aft_run_concat(dir, sizeof(dir), base, path, path_len)) return;
    if (!aft_run_join(file, sizeof(file), dir, probe)) return;
    if (!aft_read_counters(file, keys, values, count)) return;
    memcpy(out, dir, strlen(dir) + 1);
}

/* The parent of a cgroup path: its length without the last component; 0 when it has none. */
static size_t aft_run_parent_len(const char *path, size_t len) {
    while (len > 0 && path[len - 1] == '/') len--;
    if (len == 0) return 0;
    while (len > 0 && path[len - 1] != '/') len--;
    if (len > 1) len--; /* drop the separator, keep "/" for the root */
    return len;
}

/* Whether the controller list [p, end) names memory. */
static int aft_run_has_memory(const char *p, const char *end) {
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        if (stop - p == 6 && memcmp(p, "memory", 6) == 0) return 1;
        p = stop + 1;
    }
    return 0;
}

/* Whether /proc/self/cgroup's text lists memory on a v1 hierarchy (a line
 * "id:controllers:path" whose controllers include memory). */
static int aft_run_lists_v1_memory(const char *text) {
    for (const char *line = text; line && *line;) {
        const char *next = strchr(line, '\n');
        const char *end = next ? next : line + strlen(line);
        const char *c1 = memchr(line, ':', (size_t)(end - line));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
        if (c2 && aft_run_has_memory(c1 + 1, c2)) return 1;
        line = next ? next + 1 : NULL;
    }
    return 0;
}

void aft_find_cgroup_dirs(const char *proc_root, const char *sys_root,
                          char dirs[AFT_CGROUP_DIRS][AFT_PATH_CAPACITY]) {
    aft_find_cgroup_dirs_reading(proc_root, sys_root, dirs, NULL);
}

void aft_find_cgroup_dirs_reading(const char *proc_root, const char *sys_root,
                                  char dirs[AFT_CGROUP_DIRS][AFT_PATH_CAPACITY], uint64_t *oom) {
    uint64_t unused[AFT_OOM_COUNTERS];
    if (!oom) oom = unused;
    for (uint32_t i = 0; i < AFT_OOM_COUNTERS; i++) oom[i] = AFT_RUN_UNREAD;
    for (uint32_t i = 0; i < AFT_CGROUP_DIRS; i++) dirs[i][0] = '\0';
    char path[AFT_PATH_CAPACITY + 32], buf[4096];
    if (!aft_run_join(path, sizeof(path), proc_root, "self/cgroup") ||
        aft_async_read_small_file(path, buf, sizeof(buf)) <= 0)
        return;
    char v1_base[AFT_PATH_CAPACITY], v2_unified[AFT_PATH_CAPACITY], v2_base[AFT_PATH_CAPACITY];
    if (!aft_run_join(v1_base, sizeof(v1_base), sys_root, "fs/cgroup/memory") ||
        !aft_run_join(v2_unified, sizeof(v2_unified), sys_root, "fs/cgroup/unified") ||
        !aft_run_join(v2_base, sizeof(v2_base), sys_root, "fs/cgroup"))
        return; /* a root that long has no cgroups under it here */
    /* A controller is in one hierarchy at a time: where a v1 line lists memory, the unified
     * one (a hybrid system's "0::" line) has no memory.events to look for. */
    const int memory_on_v1 = aft_run_lists_v1_memory(buf);
    for (char *line = buf; line && *line;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        /* hierarchy-ID:controller-list:cgroup-path */
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c1 && c2 && c2[1] == '/') {
            const char *cg = c2 + 1;
            size_t cg_len = strlen(cg);
            size_t parent = aft_run_parent_len(cg, cg_len);
            int is_v2 = (c1 - line == 1 && line[0] == '0' && c2 == c1 + 1) && !memory_on_v1;
            int is_memory = aft_run_has_memory(c1 + 1, c2);
            if (is_memory) {
                aft_run_cgroup_dir(dirs[AFT_CGROUP_V1_SELF], v1_base, cg, cg_len,
                                   "memory.oom_control", aft_v1_keys, 1, &oom[AFT_OOM_V1_SELF]);
                if (parent > 0)
                    aft_run_cgroup_dir(dirs[AFT_CGROUP_V1_PARENT], v1_base, cg, parent,
                                       "memory.oom_control", aft_v1_keys, 1,
                                       &oom[AFT_OOM_V1_PARENT]);
            } else if (is_v2) {
                /* Both counters of one memory.events: AFT_OOM_V2_SELF and its _GROUP after it. */
                uint64_t *self = &oom[AFT_OOM_V2_SELF], *up = &oom[AFT_OOM_V2_PARENT];
                aft_run_cgroup_dir(dirs[AFT_CGROUP_V2_SELF], v2_unified, cg, cg_len,
                                   "memory.events", aft_v2_keys, 2, self);
                if (dirs[AFT_CGROUP_V2_SELF][0] == '\0')
                    aft_run_cgroup_dir(dirs[AFT_CGROUP_V2_SELF], v2_base, cg, cg_len,
                                       "memory.events", aft_v2_keys, 2, self);
                if (parent > 0) {
                    aft_run_cgroup_dir(dirs[AFT_CGROUP_V2_PARENT], v2_unified, cg, parent,
                                       "memory.events", aft_v2_keys, 2, up);
                    if (dirs[AFT_CGROUP_V2_PARENT][0] == '\0')
                        aft_run_cgroup_dir(dirs[AFT_CGROUP_V2_PARENT], v2_base, cg, parent,
                                           "memory.events", aft_v2_keys, 2, up);
                }
            }
        }
        line = next;
    }
}

static uint64_t aft_run_counter_in(const char *dir, const char *file, const char *key) {
    if (dir[0] == '\0') return AFT_RUN_UNREAD;
    char path[AFT_PATH_CAPACITY + 32];
    if (!aft_run_join(path, sizeof(path), dir, file)) return AFT_RUN_UNREAD;
    return aft_read_counter(path, key);
}

static void aft_run_events_in(const char *dir, const char *const keys[2], uint64_t values[2]) {
    values[0] = values[1] = AFT_RUN_UNREAD;
    if (dir[0] == '\0') return;
    char path[AFT_PATH_CAPACITY + 32];
    if (!aft_run_join(path, sizeof(path), dir, "memory.events")) return;
    aft_read_counters(path, keys, values, 2);
}

void aft_read_oom_counters(const char dirs[AFT_CGROUP_DIRS][AFT_PATH_CAPACITY],
                           uint64_t out[AFT_OOM_COUNTERS]) {
    for (uint32_t i = 0; i < AFT_OOM_COUNTERS; i++) out[i] = AFT_RUN_UNREAD;
    out[AFT_OOM_V1_SELF] =
        aft_run_counter_in(dirs[AFT_CGROUP_V1_SELF], "memory.oom_control", "oom_kill");
    out[AFT_OOM_V1_PARENT] =
        aft_run_counter_in(dirs[AFT_CGROUP_V1_PARENT], "memory.oom_control", "oom_kill");
    /* v2: both counters from one read of memory.events. */
    uint64_t v[2];
    aft_run_events_in(dirs[AFT_CGROUP_V2_SELF], aft_v2_keys, v);
    out[AFT_OOM_V2_SELF] = v[0];
    out[AFT_OOM_V2_SELF_GROUP] = v[1];
    aft_run_events_in(dirs[AFT_CGROUP_V2_PARENT], aft_v2_keys, v);
    out[AFT_OOM_V2_PARENT] = v[0];
    out[AFT_OOM_V2_PARENT_GROUP] = v[1];
}
