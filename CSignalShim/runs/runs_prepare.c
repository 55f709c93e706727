/*
 * runs_prepare.c: NORMAL-TIME CODE (never runs in a signal handler). A run file's first
 * contents, before runs.c writes them at start: the info block (context, clocks, parent, boot
 * id, the OOM and vmstat baseline, read now or left to the updater thread), the first live
 * block, the header over the info block, and every block's check value. And the file itself
 * for the next launch, made ahead (the spare).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "CSignalShim.h"
#include "dir_internal.h"
#include "runs_internal.h"
#include "reserve_internal.h"
#include "shim_internal.h"

void aft_run_read_baseline(const char *proc_root, const char *sys_root, aft_run_info *info) {
    char path[AFT_PATH_CAPACITY + 64];
    aft_find_cgroup_dirs_reading(proc_root, sys_root, info->cgroup_dirs, info->oom_at_start);
    info->vmstat_oom_kill_at_start = AFT_RUN_UNREAD;
    if (!aft_run_own_oom_readable(info->oom_at_start)) {
        aft_run_join(path, sizeof(path), proc_root, "vmstat");
        info->vmstat_oom_kill_at_start = aft_read_counter(path, "oom_kill");
    }
}

void aft_run_header(aft_file_header *h, const aft_run_info *info) {
    memset(h, 0, sizeof(*h));
    h->magic = AFT_MAGIC;
    h->version = AFT_FORMAT_VERSION;
    h->header_size = sizeof(aft_file_header);
    h->kind = AFT_KIND_RUN;
    h->body_size = sizeof(aft_run_info);
    h->body_crc = aft_crc32(0, info, sizeof(aft_run_info));
    h->commit = AFT_COMMIT_MARKER;
}

int aft_run_prepare(const aft_run_options *o, aft_run_file *file) {
    return aft_run_prepare_with(o, file, 0);
}

int aft_run_prepare_with(const aft_run_options *o, aft_run_file *file, int defer_baseline) {
    memset(file, 0, sizeof(*file));
    aft_run_prepare_blocks(o, &file->header, &file->info, &file->live[1], defer_baseline);
    file->term.check = aft_run_check(&file->term, offsetof(aft_run_term, check));
    file->exit.check = aft_run_check(&file->exit, offsetof(aft_run_exit, check));
    return 0;
}

void aft_run_prepare_blocks(const aft_run_options *o, aft_file_header *header, aft_run_info *info,
                            aft_run_live *l, int defer_baseline) {
    memset(info, 0, sizeof(*info));
    memset(l, 0, sizeof(*l));
    info->context = o->context;
    info->start_monotonic_ns = aft_async_now_ns(CLOCK_MONOTONIC);
    info->start_boottime_ns = aft_async_now_ns(CLOCK_BOOTTIME);
    info->watchdog_usec = o->watchdog_usec;
    info->parent_pid = (int64_t)getppid();
    info->process_start_ticks = aft_process_start_ticks(o->proc_root);
    info->update_interval_ms =
        o->update_interval_ms ? o->update_interval_ms : AFT_RUN_DEFAULT_INTERVAL_MS;
    char path[AFT_PATH_CAPACITY + 64];
    if (aft_run_join(path, sizeof(path), o->proc_root, "sys/kernel/random/boot_id"))
        aft_read_line(path, info->boot_id, AFT_BOOT_ID_CAPACITY);
    memcpy(l->session_id, o->context.session_id, AFT_ID_SIZE);
    l->foreground = o->foreground ? 1 : 0;
    if (defer_baseline) {
        /* Unread until the updater reads them, moments later: a run that dies before has
         * no OOM evidence, the same as where the counters cannot be read. */
        for (uint32_t i = 0; i < AFT_OOM_COUNTERS; i++)
            info->oom_at_start[i] = l->oom[i] = AFT_RUN_UNREAD;
        info->vmstat_oom_kill_at_start = l->vmstat_oom_kill = AFT_RUN_UNREAD;
        l->psi_some_avg10_centi = l->psi_full_avg10_centi = UINT32_MAX;
        l->updated_realtime_ns = aft_async_now_ns(CLOCK_REALTIME);
        l->updated_monotonic_ns = aft_async_now_ns(CLOCK_MONOTONIC);
        l->updated_boottime_ns = aft_async_now_ns(CLOCK_BOOTTIME);
    } else {
        aft_run_read_baseline(o->proc_root, o->sys_root, info);
        aft_run_sample_with(o->proc_root, info, l, 1);
    }
    aft_run_header(header, info);
    l->sequence = 1;
    l->check = aft_run_check(l, offsetof(aft_run_live, check));
}

int aft_run_take_spare(int dir_fd) {
    return aft_take_empty_file(dir_fd, AFT_RUN_SPARE_NAME, sizeof(aft_run_file));
}

int aft_run_spare_unwritten(int dir_fd, const char *name) {
    int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return 0;
    struct stat st;
    int unwritten = fstat(fd, &st) == 0 && aft_file_unwritten(fd, &st, sizeof(aft_run_file));
    close(fd);
    return unwritten;
}

void aft_run_make_spare_once(void) {
    if (aft_g_run.fd >= 0 && !aft_g_run_exited && !atomic_exchange(&aft_g_run_spare_made, 1))
        aft_run_make_spare(aft_g_run_dir);
}

int aft_run_recycle_as_spare(int dir_fd, const char *name, int fd) {
    int error = aft_renameat_noreplace(dir_fd, name, dir_fd, AFT_RUN_SPARE_NAME);
    if (error != 0) return error;
    /* Its header zeroed under its new name, its lock held: unwritten, as a new spare is, without
     * the truncation (a journaled block release, 30-40 µs on ext4) and the next run's block
     * allocation an emptied file would cost. The rest is an earlier run's of the same app, which
     * the run that takes the file overwrites whole. A process that dies in between leaves a
     * written spare, which no launch takes and the next delivery removes. */
    static const uint8_t zero[sizeof(aft_file_header)];
    error = aft_async_pwrite_all(fd, zero, sizeof(zero), 0);
    if (error != 0) return error;
    struct stat st;
    if (fstat(fd, &st) != 0) return errno;
    if ((st.st_mode & 07777) != 0600 && fchmod(fd, 0600) != 0) return errno;
    atomic_store(&aft_g_run_spare_made, 1);
    return 0;
}

void aft_run_make_spare(const char *runs_directory) {
    int dir = open(runs_directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return;
    /* Made in place, only where no spare is (O_EXCL): one a launch is writing (its own run file
     * until renamed) is never replaced. Empty as it appears, it may be taken at once: the taker
     * sets its mode too. No hidden name and rename: a directory update less at every launch. */
    int fd =
        openat(dir, AFT_RUN_SPARE_NAME, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        (void)fchmod(fd, 0600); /* whatever the umask */
        close(fd);
    }
    close(dir);
}
