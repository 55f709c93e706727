/*
 * runs.c: NORMAL-TIME CODE (never runs in a signal handler). The run record: creates and
 * locks runs/<run id>.run at start, writes its live block on every change, marks normal
 * termination in on_exit, installs the termination-signal recorder (runs_async.c). The
 * periodic updates (about once a second) are runs_updater.c's; the file's first contents are
 * prepared by runs_prepare.c; the evidence it records is read by evidence.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "CSignalShim.h"
#include "shim_internal.h"
#include "runs_internal.h"
#include "threads_internal.h"

aft_run_state aft_g_run = {.fd = -1};
const int aft_g_run_signals[AFT_RUN_SIGNAL_COUNT] = {SIGTERM, SIGINT, SIGHUP};

/* Normal-time state, guarded by aft_g_run_lock (runs_internal.h). */
AFT_SMALL_STATE pthread_mutex_t aft_g_run_lock = PTHREAD_MUTEX_INITIALIZER;
AFT_SMALL_STATE aft_run_info aft_g_run_info;
AFT_SMALL_STATE aft_run_live aft_g_run_live;
AFT_SMALL_STATE static char aft_g_run_path[AFT_PATH_CAPACITY * 2];
AFT_SMALL_STATE char aft_g_run_dir[AFT_PATH_CAPACITY * 2];
AFT_SMALL_STATE _Atomic int aft_g_run_spare_made;
AFT_SMALL_STATE char aft_g_run_proc[AFT_PATH_CAPACITY];
AFT_SMALL_STATE char aft_g_run_sys[AFT_PATH_CAPACITY];
AFT_SMALL_STATE static int aft_g_run_hooks_registered;
AFT_SMALL_STATE _Atomic int aft_g_run_exited;
AFT_SMALL_STATE int aft_g_run_baseline_pending;

static void aft_run_set_error(char *error, size_t capacity, const char *what, int err) {
    if (error && capacity > 0) snprintf(error, capacity, "%s: %s", what, strerror(err));
}

uint32_t aft_run_check(const void *block, size_t size_before_check) {
    return aft_async_run_check(block, size_before_check);
}

int aft_run_write_live(void) {
    if (aft_g_run.fd < 0) return EBADF;
    aft_run_live *l = &aft_g_run_live;
    l->sequence++;
    l->check = aft_run_check(l, offsetof(aft_run_live, check));
    off_t offset = (off_t)offsetof(aft_run_file, live) +
                   (off_t)(l->sequence % AFT_RUN_LIVE_SLOTS) * (off_t)sizeof(aft_run_live);
    return aft_async_pwrite_all(aft_g_run.fd, l, sizeof(*l), offset);
}

int aft_run_update_now(void) {
    pthread_mutex_lock(&aft_g_run_lock);
    int err = EBADF;
    if (aft_g_run.fd >= 0 && !aft_g_run_exited) {
        aft_g_run_live.foreground = (uint32_t)aft_watchdog_is_foreground();
        aft_run_sample(aft_g_run_proc, &aft_g_run_info, &aft_g_run_live);
        err = aft_run_write_live();
    }
    pthread_mutex_unlock(&aft_g_run_lock);
    return err;
}

int aft_run_started_with(const char *proc_root, char *boot_id, size_t capacity,
                         uint64_t *start_ticks) {
    pthread_mutex_lock(&aft_g_run_lock);
    int known = aft_g_run.fd >= 0 && aft_g_run_info.context.pid == (uint64_t)getpid() &&
                strcmp(proc_root, aft_g_run_proc) == 0;
    if (known) {
        if (capacity > 0)
            snprintf(boot_id, capacity, "%.*s", (int)sizeof(aft_g_run_info.boot_id),
                     aft_g_run_info.boot_id);
        *start_ticks = aft_g_run_info.process_start_ticks;
    }
    pthread_mutex_unlock(&aft_g_run_lock);
    return known;
}

void aft_run_set_screen(const char *name) {
    pthread_mutex_lock(&aft_g_run_lock);
    size_t len = name ? strnlen(name, 4096) : 0;
    char *screen = aft_g_run_live.screen;
    memset(screen, 0, AFT_NAME_STRING);
    if (len > AFT_NAME_STRING - 1) {
        len = AFT_NAME_STRING - 1;
        while (len > 0 && ((unsigned char)name[len] & 0xC0) == 0x80) len--; /* UTF-8 boundary */
    }
    if (len > 0) memcpy(screen, name, len);
    if (aft_g_run.fd >= 0 && !aft_g_run_exited) {
        aft_g_run_live.updated_realtime_ns = aft_async_now_ns(CLOCK_REALTIME);
        aft_run_write_live();
    }
    pthread_mutex_unlock(&aft_g_run_lock);
}

void aft_run_set_session(const uint8_t session_id[AFT_ID_SIZE],
                         const uint8_t previous_session_id[AFT_ID_SIZE]) {
    pthread_mutex_lock(&aft_g_run_lock);
    memcpy(aft_g_run_live.session_id, session_id, AFT_ID_SIZE);
    if (previous_session_id)
        memcpy(aft_g_run_live.previous_session_id, previous_session_id, AFT_ID_SIZE);
    else
        memset(aft_g_run_live.previous_session_id, 0, AFT_ID_SIZE);
    if (aft_g_run.fd >= 0 && !aft_g_run_exited) {
        aft_g_run_live.updated_realtime_ns = aft_async_now_ns(CLOCK_REALTIME);
        aft_run_write_live();
    }
    pthread_mutex_unlock(&aft_g_run_lock);
}

/* ---- normal termination and fork ---- */

static void aft_run_write_exit(int32_t status) {
    if (aft_g_run.fd < 0) return;
    aft_run_exit e;
    memset(&e, 0, sizeof(e));
    e.clean = AFT_RUN_CLEAN_MARKER;
    e.status = status;
    e.time_realtime_ns = aft_async_now_ns(CLOCK_REALTIME);
    e.check = aft_run_check(&e, offsetof(aft_run_exit, check));
    aft_async_pwrite_all(aft_g_run.fd, &e, sizeof(e), (off_t)offsetof(aft_run_file, exit));
}

uint64_t aft_run_file_inode(void) {
    pthread_mutex_lock(&aft_g_run_lock);
    struct stat st;
    uint64_t inode = aft_g_run.fd >= 0 && fstat(aft_g_run.fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
    pthread_mutex_unlock(&aft_g_run_lock);
    return inode;
}

void aft_run_mark_clean_exit(int32_t status) {
    pthread_mutex_lock(&aft_g_run_lock);
    aft_run_write_exit(status);
    pthread_mutex_unlock(&aft_g_run_lock);
}

static void aft_run_on_exit(int status, void *arg) {
    (void)arg;
    /* No lock: exit() may run while the updater holds it. One pwrite of a fixed block. */
    aft_g_run_exited = 1;
    aft_run_write_exit(status);
    /* A run too short for its updater to have made the next launch's run file: made now. */
    if (aft_g_run.fd >= 0 && !atomic_exchange(&aft_g_run_spare_made, 1))
        aft_run_make_spare(aft_g_run_dir);
}

static void aft_run_atfork_child(void) {
    /* A forked child is not this run: it must not mark it ended or write to it. Closing our
     * descriptor leaves the parent's lock in place (the parent still holds its own). */
    if (aft_g_run.fd >= 0) close(aft_g_run.fd);
    aft_g_run.fd = -1;
    aft_run_updater_after_fork_in_child();
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    aft_g_run_lock = fresh;
}

/* ---- start and stop ---- */

static void aft_run_install_handlers(void) {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = aft_async_run_term_handler;
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < AFT_RUN_SIGNAL_COUNT; i++) {
        struct sigaction previous;
        if (sigaction(aft_g_run_signals[i], NULL, &previous) != 0) continue;
        if (previous.sa_handler == SIG_IGN && !(previous.sa_flags & SA_SIGINFO)) {
            /* Ignored (nohup, a shell's background job): leave it ignored, record nothing. */
            if (!aft_g_run.handlers_installed) aft_g_run.previous[i] = previous;
            continue;
        }
        if (previous.sa_sigaction == aft_async_run_term_handler) continue; /* already ours */
        /* The app's handler runs from ours: on the stack it asked for (its own alternate
         * stack only with SA_ONSTACK), never on the crash handler's. */
        action.sa_flags = SA_SIGINFO | SA_RESTART | (previous.sa_flags & SA_ONSTACK);
        if (sigaction(aft_g_run_signals[i], &action, &previous) != 0) continue;
        aft_g_run.previous[i] = previous;
    }
    aft_g_run.handlers_installed = 1;
}

static void aft_run_restore_handlers(void) {
    if (!aft_g_run.handlers_installed) return;
    for (int i = 0; i < AFT_RUN_SIGNAL_COUNT; i++) {
        struct sigaction current;
        if (sigaction(aft_g_run_signals[i], NULL, &current) != 0) continue;
        if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == aft_async_run_term_handler)
            sigaction(aft_g_run_signals[i], &aft_g_run.previous[i], NULL);
    }
    aft_g_run.handlers_installed = 0;
}

void aft_run_stop(void) {
    aft_run_updater_stop();
    aft_run_restore_handlers();
    pthread_mutex_lock(&aft_g_run_lock);
    int fd = aft_g_run.fd;
    aft_g_run.fd = -1; /* the handler sees -1 from now on */
    if (fd >= 0) close(fd);
    pthread_mutex_unlock(&aft_g_run_lock);
}

/* The run file's first contents from where they are: header, info, an empty live slot, the
 * live block in the second, empty term and exit blocks. Caller holds aft_g_run_lock. */
static int aft_run_write_first(int fd, const aft_file_header *header) {
    aft_run_live empty_live;
    aft_run_term term;
    aft_run_exit exit_block;
    memset(&empty_live, 0, sizeof(empty_live));
    memset(&term, 0, sizeof(term));
    memset(&exit_block, 0, sizeof(exit_block));
    term.check = aft_run_check(&term, offsetof(aft_run_term, check));
    exit_block.check = aft_run_check(&exit_block, offsetof(aft_run_exit, check));
    _Static_assert(AFT_RUN_LIVE_SLOTS == 2, "the live block goes to the second slot");
    struct iovec v[6] = {
        {(void *)header, sizeof(*header)},
        {&aft_g_run_info, sizeof(aft_g_run_info)},
        {&empty_live, sizeof(empty_live)},
        {&aft_g_run_live, sizeof(aft_g_run_live)},
        {&term, sizeof(term)},
        {&exit_block, sizeof(exit_block)},
    };
    size_t total = 0;
    for (int i = 0; i < 6; i++) total += v[i].iov_len;
    if (total != sizeof(aft_run_file)) return EINVAL; /* the blocks are the file, no padding */
    off_t at = 0;
    for (int i = 0; i < 6;) { /* one call, unless cut short (a full disk, ulimit -f) */
        ssize_t n = pwritev(fd, v + i, 6 - i, at);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return errno;
        if (n == 0) return EIO;
        at += n;
        while (i < 6 && (size_t)n >= v[i].iov_len) n -= (ssize_t)v[i++].iov_len;
        if (i < 6) {
            v[i].iov_base = (char *)v[i].iov_base + n;
            v[i].iov_len -= (size_t)n;
        }
    }
    return 0;
}

int aft_run_start(const aft_run_options *o, char *error, size_t error_capacity) {
    if (!o || !o->runs_directory || !o->proc_root || !o->sys_root) {
        aft_run_set_error(error, error_capacity, "aft_run_start", EINVAL);
        return EINVAL;
    }
    /* Started again in the same process: the run so far ended here, cleanly. Without the mark
     * the new run's delivery would take this live process for a dead one. */
    aft_run_mark_clean_exit(0);
    aft_run_stop();

    /* With an updater thread, the OOM baseline is left to it: start reads less. Prepared in
     * the run's own blocks, not in a whole aft_run_file on the stack: 3 KiB there took the
     * stack of start's caller, the app's main thread's, a page deeper for good. */
    aft_file_header header;
    pthread_mutex_lock(&aft_g_run_lock);
    aft_run_prepare_blocks(o, &header, &aft_g_run_info, &aft_g_run_live, o->start_updater != 0);
    pthread_mutex_unlock(&aft_g_run_lock);

    char name[AFT_FILE_NAME_CAPACITY], tmp[AFT_FILE_NAME_CAPACITY];
    aft_async_id_file_name(name, sizeof(name), o->context.run_id, ".run");
    aft_async_id_file_name(tmp, sizeof(tmp), o->context.run_id, ".run.tmp");
    int dir = open(o->runs_directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        int err = errno;
        aft_run_set_error(error, error_capacity, "opening the runs directory", err);
        return err;
    }
    /* The spare an earlier launch made, written under its own name and renamed like the file
     * created here otherwise: no new inode on the caller's thread. */
    int fd = aft_run_take_spare(dir);
    const char *written = fd >= 0 ? AFT_RUN_SPARE_NAME : tmp;
    int err = 0;
    if (fd < 0) {
        fd = openat(dir, tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        err = fd < 0 ? errno : 0;
        if (!err && fchmod(fd, 0600) != 0) err = errno; /* 0600 whatever the umask */
        /* Locked before the file has its final name: an unlocked .run is a run that ended. */
        if (!err && flock(fd, LOCK_EX | LOCK_NB) != 0) err = errno;
    }
    aft_run_copy(aft_g_run_dir, sizeof(aft_g_run_dir), o->runs_directory);

    pthread_mutex_lock(&aft_g_run_lock);
    aft_g_run_live.foreground = (uint32_t)aft_watchdog_is_foreground();
    aft_g_run_live.check = aft_run_check(&aft_g_run_live, offsetof(aft_run_live, check));
    aft_run_copy(aft_g_run_proc, sizeof(aft_g_run_proc), o->proc_root);
    aft_run_copy(aft_g_run_sys, sizeof(aft_g_run_sys), o->sys_root);
    aft_g_run_baseline_pending = o->start_updater != 0;
    aft_g_run_exited = 0;
    if (!err) {
        aft_g_run.fd = fd;
        err = aft_run_write_first(fd, &header);
        if (!err && renameat(dir, written, dir, name) != 0) err = errno;
        if (!err)
            aft_run_join(aft_g_run_path, sizeof(aft_g_run_path), o->runs_directory, name);
        else
            aft_g_run.fd = -1;
    }
    atomic_store(&aft_g_run.term_count, 0);
    memset(&aft_g_run.term, 0, sizeof(aft_g_run.term));
    pthread_mutex_unlock(&aft_g_run_lock);

    if (err) {
        if (fd >= 0) {
            unlinkat(dir, written, 0);
            close(fd);
        }
        close(dir);
        aft_run_set_error(error, error_capacity, "creating the run file", err);
        return err;
    }
    close(dir);

    if (!aft_g_run_hooks_registered) {
        on_exit(aft_run_on_exit, NULL);
        pthread_atfork(NULL, NULL, aft_run_atfork_child);
        aft_g_run_hooks_registered = 1;
    }
    if (o->catch_termination) aft_run_install_handlers();
    if (o->start_updater) aft_run_updater_arm(o->start_updater != AFT_RUN_UPDATER_LATER);
    return 0;
}
