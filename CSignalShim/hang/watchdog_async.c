/*
 * watchdog_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). Runs while the watched thread is stuck (it may hold the heap's or the
 * loader's lock): the capture signal's handler, /proc reads, the hang file and its live block.
 * The /proc text parsers it uses are in proc_parse_async.c. All memory is aft_g_watchdog's
 * (BSS), prepared at start. A capture signal that arrives late (after the 200 ms budget) or
 * from elsewhere finds no request and returns.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/file.h>
#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "threads_internal.h"
#include "unwind_internal.h"
#include "watchdog_internal.h"
#include "sys_internal.h"

/* ---- the decision ---- */

uint32_t aft_async_hang_decide(const aft_hang_facts *f) {
    if (!f->armed || f->pause_depth > 0 || !f->foreground) return AFT_HANG_VERDICT_OFF;
    if (f->thread_gone) return AFT_HANG_VERDICT_IGNORE; /* its thread ended: nobody's hang */
    if (f->silent_ns <= f->threshold_ns) return AFT_HANG_VERDICT_ALIVE;
    /* The process is crashing (its handlers, ours and the Swift runtime's backtracer, hold the
     * threads), under a debugger, or the thread is stopped: nobody's hang. */
    if (f->crash_in_progress || f->traced || f->thread_state == 'T' || f->thread_state == 't')
        return AFT_HANG_VERDICT_IGNORE;
    return AFT_HANG_VERDICT_HANG;
}

/* ---- reading the watched thread ---- */

static ssize_t aft_async_read_task_file(aft_watchdog *w, uint64_t tid, const char *leaf) {
    _Static_assert(sizeof(w->path_buf) >= 64, "a task file's path fits");
    aft_async_task_path(w->path_buf, tid, leaf);
    return aft_async_read_small_file(w->path_buf, w->proc_buf, sizeof(w->proc_buf));
}

int aft_async_watchdog_traced(aft_watchdog *w) {
    ssize_t n = aft_async_read_small_file("/proc/self/status", w->proc_buf, sizeof(w->proc_buf));
    uint64_t tracer = 0;
    if (n <= 0) return 0;
    return aft_async_status_field(w->proc_buf, (size_t)n, "TracerPid", 0, &tracer) && tracer != 0;
}

char aft_async_watchdog_thread_state(aft_watchdog *w, uint64_t tid) {
    ssize_t n = aft_async_read_task_file(w, tid, "stat");
    return n > 0 ? aft_async_stat_state(w->proc_buf, (size_t)n) : '?';
}

/* Copies a one-line /proc file (comm, wchan) without its newline. */
static void aft_async_read_line(aft_watchdog *w, uint64_t tid, const char *leaf, char *out,
                                size_t capacity) {
    ssize_t n = aft_async_read_task_file(w, tid, leaf);
    if (n <= 0) {
        out[0] = '\0';
        return;
    }
    size_t len = (size_t)n;
    while (len > 0 && (w->proc_buf[len - 1] == '\n' || w->proc_buf[len - 1] == '\0')) len--;
    aft_async_copy_tail(out, capacity, w->proc_buf, len);
}

/* ---- the capture signal ---- */

void aft_async_watchdog_capture_handler(int signo, siginfo_t *info, void *ucontext) {
    int saved_errno = errno;
    aft_watchdog *w = &aft_g_watchdog;
    /* A crash's capture of every thread, or an alternate-stack request, comes first. */
    if (aft_async_threads_on_signal(signo, info, ucontext)) {
        errno = saved_errno;
        return;
    }
    uint32_t state = atomic_load(&w->capture_state);
    int ours = info != NULL && info->si_code == SI_TKILL && info->si_pid == getpid();
    if (!ours) {
        /* Not a capture: behave as the previous action would. SIGURG's default is to ignore;
         * for a signal whose default kills, hand it back to that default. */
        struct sigaction prev = w->previous_action;
        if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_DFL && signo != SIGURG &&
            signo != SIGWINCH && signo != SIGCHLD && signo != SIGCONT) {
            sigaction(signo, &prev, NULL);
            syscall(SYS_tgkill, (long)getpid(), (long)aft_async_gettid(), (long)signo);
        }
        errno = saved_errno;
        return;
    }
    if ((state & 0xffu) != AFT_CAPTURE_REQUESTED ||
        atomic_load(&w->capture_tid) != aft_async_gettid()) {
        errno = saved_errno; /* a late or stray capture signal */
        return;
    }
    uint32_t running = (state & ~0xffu) | AFT_CAPTURE_RUNNING;
    if (!atomic_compare_exchange_strong(&w->capture_state, &state, running)) {
        errno = saved_errno; /* the watchdog gave up waiting */
        return;
    }
    if (&aft_g_test_capture_delay_ns != NULL && aft_g_test_capture_delay_ns != 0) {
        struct timespec d = {(time_t)(aft_g_test_capture_delay_ns / 1000000000u),
                             (long)(aft_g_test_capture_delay_ns % 1000000000u)};
        while (aft_sys_nanosleep(&d, &d) != 0 && errno == EINTR) {
        }
    }
    uint64_t entry = aft_async_now_ns(CLOCK_MONOTONIC);
    uint32_t unwinder = 0, truncated = 0, unwind_status = 0;
    _Static_assert(sizeof(w->capture_frames) >= AFT_MAX_FRAMES * sizeof(uint64_t),
                   "the unwinder writes up to AFT_MAX_FRAMES frames");
    w->capture_frame_count = aft_async_unwind_context(
        ucontext, w->capture_frames, AFT_MAX_FRAMES, AFT_UNWIND_SLOT_CAPTURE,
        AFT_UNWIND_CAPTURE_BUDGET_NS, &unwinder, &truncated, &unwind_status);
    aft_async_watchdog_fill_gaps(w, ucontext, &truncated);
    w->capture_swift_async_count = aft_async_swift_chain_here(
        ucontext, w->capture_swift_async, AFT_SWIFT_ASYNC_MAX_LINKS, w->capture_swift_scratch);
    w->capture_truncated = truncated;
    w->capture_pause_ns = aft_async_now_ns(CLOCK_MONOTONIC) - entry;
    /* Done only if this capture is still the one asked for: a watchdog that gave up on it has
     * not moved on while it ran (it asks no other thread while one is RUNNING), but say so
     * only for this generation. */
    (void)atomic_compare_exchange_strong(&w->capture_state, &running,
                                         (state & ~0xffu) | AFT_CAPTURE_DONE);
    aft_async_futex_wake(&w->capture_state);
    errno = saved_errno;
}

/* Asks the handler on tid for its stack; 1 when it answered within the budget. */
static int aft_async_signal_capture(aft_watchdog *w, uint64_t tid) {
    uint32_t gen = (uint32_t)(w->hang_counter & 0xffffffu) << 8;
    /* An earlier capture's handler that outlived its wait still writes the capture buffers:
     * no second handler beside it, and no request that its end would seem to answer. This
     * hang is read from /proc instead. */
    if ((atomic_load(&w->capture_state) & 0xffu) == AFT_CAPTURE_RUNNING) return 0;
    atomic_store(&w->capture_tid, tid);
    atomic_store(&w->capture_state, gen | AFT_CAPTURE_REQUESTED);
    if (syscall(SYS_tgkill, (long)getpid(), (long)tid, (long)w->capture_signal) != 0) {
        atomic_store(&w->capture_state, gen | AFT_CAPTURE_CANCELLED);
        return 0;
    }
    uint64_t deadline = aft_async_now_ns(CLOCK_MONOTONIC) + AFT_WATCHDOG_CAPTURE_NS;
    int extended = 0;
    for (;;) {
        uint32_t s = atomic_load(&w->capture_state);
        if (s == (gen | AFT_CAPTURE_DONE)) return 1;
        if (aft_async_now_ns(CLOCK_MONOTONIC) >= deadline) {
            uint32_t expected = gen | AFT_CAPTURE_REQUESTED;
            if (atomic_compare_exchange_strong(&w->capture_state, &expected,
                                               gen | AFT_CAPTURE_CANCELLED)) {
                /* Not delivered: the handler will find no request, but must stay in place
                 * for as long as the signal may be pending (a real-time one kills). */
                atomic_store(&w->capture_undelivered, 1);
                return 0;
            }
            if (extended) return 0; /* a handler that runs for a second: leave its buffer */
            extended = 1;           /* it is running now: give it a moment to finish */
            deadline += 1000000000ull;
            continue;
        }
        aft_async_futex_wait_until(&w->capture_state, s, deadline);
    }
}

/* ---- the /proc fallback: pc, then return addresses found on the stack ---- */

static int aft_async_in_image(aft_watchdog *w, uint32_t count, uint64_t address) {
    for (uint32_t i = 0; i < count; i++)
        if (address >= w->images[i].start && address < w->images[i].end) return 1;
    return 0;
}

static uint32_t aft_async_scan_stack(aft_watchdog *w, uint64_t pc, uint64_t sp,
                                     uint32_t *truncated) {
    uint32_t n = 0;
    *truncated = 0;
    if (pc != 0) w->scan_frames[n++] = pc;
    if (sp == 0) return n;
    uint32_t images = 0, images_truncated = 0;
    int maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (maps >= 0) {
        images = aft_async_images_from_fd(&w->scratch, maps, w->images, AFT_MAX_IMAGES, 0,
                                          w->hang_context.executable_path, &images_truncated);
        close(maps);
    }
    uint64_t at = sp & ~7ull;
    for (uint32_t read = 0; read < AFT_WATCHDOG_SCAN_BYTES; read += sizeof(w->stack_chunk)) {
        if (aft_async_read_memory(at + read, w->stack_chunk, sizeof(w->stack_chunk)) != 0) break;
        for (uint32_t i = 0; i < sizeof(w->stack_chunk) / 8; i++) {
            uint64_t word = aft_async_arch_code_address(w->stack_chunk[i]);
            if (!aft_async_in_image(w, images, word) || !aft_async_arch_follows_call(word))
                continue;
            if (n == AFT_WATCHDOG_SCAN_FRAMES) {
                *truncated = 1;
                return n;
            }
            w->scan_frames[n++] = word;
        }
    }
    return n;
}

/* ---- persisting ---- */

static void aft_async_new_hang_id(aft_watchdog *w, uint8_t id[AFT_ID_SIZE]) {
    long got = syscall(SYS_getrandom, id, (long)AFT_ID_SIZE, 1L /* GRND_NONBLOCK */);
    if (got != (long)AFT_ID_SIZE) {
        /* No entropy yet: the run id, the hang's number and the clock make it unique. */
        uint64_t mix =
            aft_async_now_ns(CLOCK_MONOTONIC) ^ (w->hang_counter * 0x9E3779B97F4A7C15ull);
        for (uint32_t i = 0; i < AFT_ID_SIZE; i++)
            id[i] = w->hang_context.run_id[i] ^ (uint8_t)(mix >> ((i % 8) * 8));
    }
    id[6] = (uint8_t)((id[6] & 0x0F) | 0x40); /* UUID version 4 */
    id[8] = (uint8_t)((id[8] & 0x3F) | 0x80); /* RFC 4122 variant */
}

int aft_async_watchdog_begin_hang(aft_watchdog *w, aft_watch_target *t, uint64_t tid,
                                  uint64_t onset_ns, uint64_t now_ns) {
    w->hang_counter++;
    aft_hang_info *h = &w->hang_info;
    aft_async_memset(h, 0, sizeof(*h));
    aft_hang_target *ht = &w->hang_target;
    aft_async_memset(ht, 0, sizeof(*ht));
    const aft_watch_target *named =
        t->parent > 0 && (uint32_t)t->parent < AFT_WATCH_MAX_TARGETS ? &w->targets[t->parent] : t;
    aft_async_memcpy(ht->name, named->name, sizeof(ht->name));
    ht->name[sizeof(ht->name) - 1] = '\0';
    ht->kind = t->kind;
    ht->suppressed = named->suppressed;
    ((aft_watch_target *)named)->suppressed = 0;
    aft_async_memcpy(&w->hang_context, &aft_g_state.context, sizeof(aft_context));
    uint64_t real_now = aft_async_now_ns(CLOCK_REALTIME);
    uint64_t mono_now = aft_async_now_ns(CLOCK_MONOTONIC);
    h->begin_monotonic_ns = onset_ns;
    h->begin_realtime_ns = real_now - (mono_now > onset_ns ? mono_now - onset_ns : 0);
    h->thread_id = tid;
    h->threshold_ms = t->threshold_ms;
    for (uint32_t i = 0; i < AFT_ID_SIZE; i++)
        h->previous_session_id[i] = w->previous_session_id[i];
    h->syscall_number = UINT64_MAX;

    const uint64_t *frames = w->scan_frames;
    uint32_t frame_count = 0, truncated = 0;
    aft_thread_capture *threads = NULL;
    if (t->kind == AFT_HANG_KIND_CONCURRENCY_POOL) {
        frame_count = aft_async_pool_hang(w, h);
        frames = w->pool_frames;
        threads = &aft_g_hang_threads;
        goto persist;
    }

    /* What the kernel says first: the signal would make the thread runnable for a moment. */
    h->thread_state = aft_async_watchdog_thread_state(w, tid);
    int64_t nr = -1;
    uint64_t sp = 0, pc = 0;
    ssize_t n = aft_async_read_task_file(w, tid, "syscall");
    int have_regs = n > 0 && aft_async_syscall_parse(w->proc_buf, (size_t)n, &nr, &sp, &pc);
    if (have_regs && nr >= 0) h->syscall_number = (uint64_t)nr;
    aft_async_read_line(w, tid, "wchan", h->wait_channel, sizeof(h->wait_channel));
    if (h->wait_channel[0] == '0' && h->wait_channel[1] == '\0') h->wait_channel[0] = '\0';
    aft_async_read_line(w, tid, "comm", h->thread_name, sizeof(h->thread_name));

    /* The signal only where it changes nothing for the app: our handler still installed, not
     * blocked by the thread, and not a sleep or poll that a handler would cut short (EINTR). */
    int use_signal = w->signal_usable && h->thread_state != 'T' && h->thread_state != 't' &&
                     h->thread_state != 'Z' && h->thread_state != 'X' &&
                     !(have_regs && nr >= 0 && aft_async_syscall_interrupted(nr));
    if (use_signal) {
        struct sigaction current;
        if (sigaction(w->capture_signal, NULL, &current) != 0 || !(current.sa_flags & SA_SIGINFO) ||
            current.sa_sigaction != aft_async_watchdog_capture_handler)
            use_signal = 0;
    }
    if (use_signal) {
        n = aft_async_read_task_file(w, tid, "status");
        uint64_t blocked = 0;
        if (n > 0 && aft_async_status_field(w->proc_buf, (size_t)n, "SigBlk", 1, &blocked) &&
            (blocked >> (w->capture_signal - 1)) & 1)
            use_signal = 0;
    }
    aft_async_unwind_warm_up(); /* a process's first hang: nothing paused meanwhile */
    if (use_signal && aft_async_signal_capture(w, tid)) {
        h->capture_method = AFT_CAPTURE_SIGNAL;
        h->capture_pause_ns = w->capture_pause_ns;
        frames = w->capture_frames;
        frame_count = w->capture_frame_count;
        truncated = w->capture_truncated;
    } else {
        h->capture_method = AFT_CAPTURE_PROC;
        if (!have_regs) { /* the state may have changed: read again */
            n = aft_async_read_task_file(w, tid, "syscall");
            have_regs = n > 0 && aft_async_syscall_parse(w->proc_buf, (size_t)n, &nr, &sp, &pc);
        }
        if (have_regs) frame_count = aft_async_scan_stack(w, pc, sp, &truncated);
    }

    /* The other threads: a blocked thread waits for another more often than not. */
    if (w->capture_other_threads) {
        /* Only while the watched thread's own capture is over: its handler, should it still
         * run, has the capture slot's helper and window. Released at once: the records are
         * final, and nothing else of theirs is kept. */
        if ((atomic_load(&w->capture_state) & 0xffu) != AFT_CAPTURE_RUNNING) {
            aft_async_threads_capture_for_hang(tid, 0);
            aft_async_threads_release_capture(&aft_g_hang_threads, 1);
            (void)aft_async_pool_classify(w, &aft_g_hang_threads); /* marks Swift jobs */
            threads = &aft_g_hang_threads;
        }
    }

persist:
    /* The hang's own report id; never overwrite an earlier hang's file. */
    for (int attempt = 0; attempt < 4; attempt++) {
        aft_async_new_hang_id(w, w->hang_context.report_id);
        aft_async_id_file_name(w->tmp_name, AFT_FILE_NAME_CAPACITY, w->hang_context.report_id,
                               ".hang.tmp");
        aft_async_id_file_name(w->final_name, AFT_FILE_NAME_CAPACITY, w->hang_context.report_id,
                               ".hang");
        int exists = openat(w->dir_fd, w->final_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (exists < 0) break;
        close(exists);
        w->hang_counter++;
    }
    aft_report_spec spec = {
        .kind = AFT_KIND_HANG,
        .context = &w->hang_context,
        .event_type = AFT_SECTION_HANG,
        .event = h,
        .event_size = sizeof(*h),
        .frames = frames,
        .frame_count = frame_count,
        .frames_truncated = truncated,
        .scratch = &w->scratch,
        .images = w->images,
        .fsync_file = 0,
        .keep_open = 1,
        .threads = threads,
        .swift_async = h->capture_method == AFT_CAPTURE_SIGNAL ? w->capture_swift_async : NULL,
        .swift_async_count = w->capture_swift_async_count,
        .extra_type = AFT_SECTION_HANG_TARGET,
        .extra = ht,
        .extra_size = sizeof(*ht),
    };
    int fd = -1;
    int err = aft_async_write_report(w->dir_fd, w->tmp_name, w->final_name, &spec, &fd);
    t->hang_fd = err == 0 ? fd : -1;
    /* Held until the hang ends (or the process does): a live hang is not a dead run's. */
    if (err == 0) syscall(SYS_flock, (long)fd, (long)(LOCK_EX | LOCK_NB));
    t->hang_onset_ns = onset_ns;
    t->hang_stopped_ns = 0;
    atomic_store(&w->last_capture_method, h->capture_method);
    atomic_store(&w->last_capture_pause_ns, h->capture_pause_ns);
    atomic_store(&w->detection_latency_ns, now_ns > onset_ns ? now_ns - onset_ns : 0);
    atomic_store(&w->detection_ns, now_ns);
    if (err == 0) {
        atomic_fetch_add(&w->hangs, 1);
        aft_async_watchdog_update_hang(w, t, aft_async_now_ns(CLOCK_MONOTONIC), 0);
    }
    return err;
}

void aft_async_watchdog_update_hang(aft_watchdog *w, aft_watch_target *t, uint64_t end_ns,
                                    int finished) {
    (void)w;
    if (t->hang_fd < 0) return;
    uint64_t elapsed = end_ns > t->hang_onset_ns ? end_ns - t->hang_onset_ns : 0;
    elapsed = elapsed > t->hang_stopped_ns ? elapsed - t->hang_stopped_ns : 0;
    struct {
        uint64_t value, updated_ns;
        uint32_t check, flags;
    } live;
    live.value = elapsed / 1000000ull;
    live.updated_ns = aft_async_now_ns(CLOCK_REALTIME);
    live.check = aft_live_check(live.value, live.updated_ns);
    live.flags = finished ? AFT_FLAG_HANG_FINISHED : 0;
    _Static_assert(sizeof(live) == 24, "live block size");
    _Static_assert(offsetof(aft_file_header, live_flags) == 52, "live block layout");
    aft_async_pwrite_all(t->hang_fd, &live, sizeof(live), offsetof(aft_file_header, live_value));
    t->hang_last_live_ns = aft_async_now_ns(CLOCK_MONOTONIC);
    if (finished) {
        close(t->hang_fd);
        t->hang_fd = -1;
    }
}
