/*
 * handler_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). The signal handler: record the crash, then let the process die exactly as
 * it would have without Aftermath, from what aft_install prepared. The first crashing thread
 * wins (an atomic tid), a second waits, bounded; a fault inside the writer jumps back and the
 * original crash is chained; a 10 s timer bounds the write, then an export in progress ends.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "shim_internal.h"
#include "runs_internal.h"
#include "threads_internal.h"
#include "sys_internal.h"

/* The crash: its thread, written and by whom (aft_g_writing), its signal, its returns to this
 * handler, where a fault in the writer or in the other threads' capture comes back to. */
AFT_SMALL_STATE static _Atomic uint64_t aft_g_crashing_tid;
AFT_SMALL_STATE static _Atomic int aft_g_crash_written, aft_g_writing, aft_g_crash_signal,
    aft_g_crash_rounds, aft_g_capturing;
AFT_SMALL_STATE static sigjmp_buf aft_g_writer_jump, aft_g_capture_jump;
AFT_SMALL_STATE static sigset_t aft_g_writer_mask; /* asked once, given back after a jump */
/* Asked once at the handler's entry for the whole write: its process, thread, file-size limit. */
AFT_SMALL_STATE static uint64_t aft_g_crash_pid, aft_g_crash_tid, aft_g_crash_file_size_limit;

static int aft_async_is_function(const struct sigaction *a);
static struct sigaction aft_async_previous(int signo, int original);
#define AFT_HANDLER_DEADLINE_SECONDS 10u

int aft_async_crash_in_progress(void) { return atomic_load(&aft_g_crashing_tid) != 0; }
int aft_crash_in_progress(void) { return aft_async_crash_in_progress(); }

static volatile int aft_g_release_waits = 1; /* see aft_async_write_crash */
AFT_SMALL_STATE static aft_crash_info aft_g_crash_info;
static aft_maps_scratch aft_g_crash_scratch;
static aft_swift_async_link aft_g_crash_swift_async[AFT_SWIFT_ASYNC_MAX_LINKS];

static int aft_async_signal_index(int signo) {
    for (int i = 0; i < AFT_SIGNAL_COUNT; i++)
        if (aft_g_signals[i] == signo) return i;
    return -1;
}

int aft_async_crash_stacks_fit(uint64_t file_size_limit) {
    return aft_g_state.reserved_fd >= 0 && aft_g_state.reserve_holds_stacks &&
           file_size_limit >= aft_g_state.reserved_bytes;
}

int aft_async_write_crash(int signo, siginfo_t *info, void *ucontext, uint64_t entry_ns,
                          int reserved_fd, const char *tmp_name) {
    aft_crash_info *ci = &aft_g_crash_info;
    aft_async_memset(ci, 0, sizeof(*ci));
    ci->time_realtime_ns = aft_async_now_ns(CLOCK_REALTIME);
    ci->handler_entry_monotonic_ns = entry_ns;
    ci->signal = signo;
    ci->code = info ? info->si_code : 0;
    ci->error_number = info ? info->si_errno : 0;
    ci->fault_address = info ? (uint64_t)(uintptr_t)info->si_addr : 0;
    ci->sender_pid = -1;
    ci->sender_uid = -1;
    if (info && info->si_code <= 0) { /* SI_USER, SI_TKILL, SI_QUEUE: sent, not a fault */
        ci->sender_pid = info->si_pid;
        ci->sender_uid = info->si_uid;
        ci->fault_address = 0;
    }
    ci->thread_id = aft_g_crash_tid;
    ci->is_main_thread = ci->thread_id == aft_g_crash_pid;
    aft_async_thread_name(ci->thread_name);
    aft_async_process_cpu(ci);
    if (ucontext != NULL)
        aft_async_arch_registers(ucontext, ci); /* NULL: a handler that chained to us without it */

    /* The crashing thread's frames: left to the next launch where its stack memory will be in
     * the file (the reserve holds it, no file-size limit cuts it), which unwinds them from the
     * registers and those bytes as a crash server would (its pc alone here, in this frame, not
     * in a page of the frames' buffer touched for one word); else unwound here. */
    uint32_t unwinder = AFT_UNWINDER_NONE, truncated = 0, unwind_status = 0, frames = 0;
    uint64_t pc_frame = aft_async_arch_code_address(ci->pc), *frame_buffer = aft_g_frames;
    /* A crash right after start, before the install's completion read the images: read them
     * now, once, so that its threads are still left to the next launch (a helper's libunwind,
     * cold then, costs a millisecond or more) and the writer does not read them again. */
    uint32_t images_read = 0, images_truncated = 0;
    if (!aft_g_known_link_map.valid)
        images_read = aft_async_crash_read_images(
            &aft_g_crash_scratch, aft_g_state.context.executable_path, &images_truncated);
    int stacks_in_file = aft_async_crash_stacks_fit(aft_g_crash_file_size_limit) &&
                         !(&aft_g_test_unwind_in_handler != NULL && aft_g_test_unwind_in_handler);
    int deferred = ucontext != NULL && stacks_in_file && aft_async_pc_in_known_image(pc_frame);
    if (deferred) {
        frame_buffer = &pc_frame;
        frames = 1;
        unwinder = AFT_UNWINDER_DEFERRED;
        unwind_status = AFT_UNWIND_STATUS_COMPLETE;
    } else {
        frames = aft_async_unwind_context(ucontext, aft_g_frames, AFT_MAX_FRAMES,
                                          AFT_UNWIND_SLOT_CRASH, AFT_UNWIND_CRASH_BUDGET_NS,
                                          &unwinder, &truncated, &unwind_status);
    }
    ci->unwinder = unwinder;
    ci->unwind_status = unwind_status;
    /* Its Swift async callers: in the task's memory, which the next launch will not have. */
    uint32_t swift_async =
        aft_async_swift_chain_here(ucontext, aft_g_crash_swift_async, AFT_SWIFT_ASYNC_MAX_LINKS,
                                   aft_g_threads.swift_async.scratch);
    uint64_t link_count = 0, link_hash = 0;
    /* The link map's signature from the helper that walked this thread's stack: the helpers of
     * the other threads' stacks (the same slot) would replace it. */
    int has_link_map =
        images_read > 0 ? 0 /* not compared: the images are this crash's own */
        : deferred      ? aft_async_link_map_signature_known(&link_count, &link_hash) ||
                         aft_async_unwind_link_map_only(ucontext, AFT_UNWIND_LINK_MAP_BUDGET_NS,
                                                        &link_count, &link_hash)
                   : aft_async_unwind_link_map(AFT_UNWIND_SLOT_CRASH, &link_count, &link_hash);
    /* Every other thread: paused here until the report is written (aft_async_threads_release).
     * Where a handler of the app's comes next, the process may live on: no sleep is cut short.
     * A fault in the capture costs only the other threads, never the report. */
    struct sigaction next = aft_async_previous(signo, 0);
    /* Only the app's handler, or an action that keeps the process, needs the paused threads
     * gone before it runs: the default action's death does not wait for them. */
    aft_g_release_waits = aft_async_is_function(&next) || next.sa_handler != SIG_DFL;
    atomic_store(&aft_g_capturing, 1);
    aft_g_threads.pid = aft_g_crash_pid;
    if (sigsetjmp(aft_g_capture_jump, 0) == 0) {
        aft_async_threads_capture(ci, ucontext, frame_buffer, frames, truncated,
                                  aft_async_is_function(&next), stacks_in_file);
    } else {
        sigprocmask(SIG_SETMASK, &aft_g_writer_mask, NULL);
        aft_g_threads.info.recorded = 0; /* the sections are left out */
    }
    atomic_store(&aft_g_capturing, 0);
    if (deferred &&
        (aft_g_threads.info.recorded == 0 || aft_g_threads.records[0].stack_size == 0)) {
        /* Its stack could not be read after all: unwound here, into the FRAMES section. */
        frame_buffer = aft_g_frames;
        frames = aft_async_unwind_context(ucontext, aft_g_frames, AFT_MAX_FRAMES,
                                          AFT_UNWIND_SLOT_CRASH, AFT_UNWIND_CRASH_BUDGET_NS,
                                          &unwinder, &truncated, &unwind_status);
        ci->unwinder = unwinder;
        ci->unwind_status = unwind_status;
        if (aft_g_threads.info.recorded > 0) aft_g_threads.records[0].unwinder = unwinder;
        if (images_read == 0)
            has_link_map =
                aft_async_unwind_link_map(AFT_UNWIND_SLOT_CRASH, &link_count, &link_hash);
    }

    aft_report_spec spec = {
        .kind = AFT_KIND_CRASH,
        .context = &aft_g_state.context,
        .system = atomic_load(&aft_g_system_ready) ? &aft_g_system : NULL,
        .event_type = AFT_SECTION_CRASH,
        .event = ci,
        .event_size = sizeof(*ci),
        .frames = frame_buffer,
        .frame_count = frames,
        .frames_truncated = truncated,
        .scratch = &aft_g_crash_scratch,
        .images = aft_g_images,
        .images_read = images_read,
        .images_truncated = images_truncated,
        .fsync_file = aft_g_state.fsync_reports,
        .has_reserved_fd = reserved_fd >= 0,
        .reserved_fd = reserved_fd,
        .threads = &aft_g_threads,
        .swift_async = aft_g_crash_swift_async,
        .swift_async_count = swift_async,
        .has_link_map = has_link_map,
        .link_count = link_count,
        .link_hash = link_hash,
        .file_size_limit_known = 1,
        .file_size_limit = aft_g_crash_file_size_limit,
    };
    int err = aft_async_write_report(aft_g_state.crash_dir_fd, tmp_name, aft_g_state.final_name,
                                     &spec, NULL);
    if (aft_g_state.timing_fd >= 0) {
        uint64_t elapsed = aft_async_now_ns(CLOCK_MONOTONIC) - entry_ns;
        aft_async_write_all(aft_g_state.timing_fd, &elapsed, sizeof(elapsed));
    }
    return err;
}

/* A hardware fault re-executes the faulting instruction when the handler returns, so it fires
 * again under the restored handler, with the kernel's own siginfo. */
static int aft_async_fault_refires(int signo, const siginfo_t *info) {
    if (!info || info->si_code <= 0) return 0; /* sent with kill/tgkill/sigqueue */
    switch (signo) {
    case SIGSEGV:
    case SIGBUS:
    case SIGILL:
    case SIGFPE:
        return 1;
    case SIGTRAP: /* arm64 brk leaves the pc on the instruction; x86 int3 has advanced it */
        return aft_async_arch_trap_refires();
    default: /* SIGSYS resumes after the syscall */
        return 0;
    }
}

static int aft_async_is_function(const struct sigaction *a) {
    if (a->sa_flags & SA_SIGINFO) return a->sa_sigaction != NULL;
    return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

static struct sigaction aft_async_previous(int signo, int original) {
    int index = aft_async_signal_index(signo);
    struct sigaction previous;
    if (index >= 0 && aft_g_state.installed)
        return original && aft_g_state.has_original[index] ? aft_g_state.original[index]
                                                           : aft_g_state.previous[index];
    aft_async_memset(&previous, 0, sizeof(previous));
    previous.sa_handler = SIG_DFL;
    return previous;
}

/* Hands the signal to what was there before, so the process ends exactly as it would have.
 * Returns 1 when the process is known to live on (a previous handler returned, or the kernel
 * dropped the signal), 0 when the signal is still to take effect (a fault re-fires). */
static int aft_async_chain(int signo, siginfo_t *info, void *ucontext, int original) {
    struct sigaction previous = aft_async_previous(signo, original);
    int kernel = info != NULL && info->si_code > 0;
    if (kernel && !aft_async_is_function(&previous) && previous.sa_handler == SIG_IGN) {
        /* The kernel forces the default action of a synchronous signal the process ignores. */
        aft_async_memset(&previous, 0, sizeof(previous));
        previous.sa_handler = SIG_DFL;
    }
    sigaction(signo, &previous, NULL);
    if (aft_async_fault_refires(signo, info)) return 0;

    if (kernel && aft_async_is_function(&previous)) {
        /* A kernel signal that does not fire again (x86 int3, seccomp's SIGSYS): the previous
         * handler gets exactly what the kernel gave us, the original siginfo and context. */
        if (previous.sa_flags & SA_RESETHAND) {
            struct sigaction dfl;
            aft_async_memset(&dfl, 0, sizeof(dfl));
            dfl.sa_handler = SIG_DFL;
            sigaction(signo, &dfl, NULL);
        }
        sigset_t saved;
        sigprocmask(SIG_BLOCK, &previous.sa_mask, &saved);
        if (previous.sa_flags & SA_SIGINFO) {
            previous.sa_sigaction(signo, info, ucontext);
        } else {
            previous.sa_handler(signo);
        }
        sigprocmask(SIG_SETMASK, &saved, NULL);
        return 1;
    }

    /* Re-raise on this thread with the original siginfo (sender pid/uid kept), then unblock
     * it so it is delivered now, to the previous handler or the default action. */
    aft_async_reraise(signo, info);

    /* Still alive. With a default disposition the kernel dropped the signal: PID 1 of a PID
     * namespace ignores default-action signals it sends itself. A signal the process raised
     * itself (abort, raise) or the kernel's would have ended it: end it the same way. One
     * sent by another process is ignored there with or without Aftermath. A previous handler
     * that returned is the app's choice: return to it. */
    if (!aft_async_is_function(&previous) && previous.sa_handler == SIG_DFL &&
        (kernel || info == NULL || info->si_pid == getpid()))
        _exit(128 + signo);
    return 1;
}

/* The process lived through a signal it had a crash report written for: it was no crash.
 * Withdraw the report and listen again, so a later real crash is reported. SIGABRT keeps its
 * report: abort() goes on to end the process with the default action after a handler
 * returns, and our handler is not asked again. */
static void aft_async_survived(int signo) {
    if (signo != SIGABRT) {
        int reserved = aft_g_state.reserved_fd;
        if (aft_g_state.crash_dir_fd >= 0) /* the reserve keeps its name, a created file not */
            aft_sys_unlinkat(aft_g_state.crash_dir_fd,
                             reserved >= 0 ? aft_g_state.tmp_name : aft_g_state.final_name, 0);
        aft_g_state.reserved_fd = -1; /* consumed: a later crash creates its file by name */
        if (reserved >= 0) close(reserved);
    }
    struct sigaction ours;
    aft_async_memset(&ours, 0, sizeof(ours));
    ours.sa_sigaction = aft_async_handler;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    sigaction(signo, &ours, NULL);
    aft_async_threads_forget();
    aft_async_threads_lived_on();
    atomic_store(&aft_g_crash_written, 0);
    atomic_store(&aft_g_crash_signal, 0);
    atomic_store(&aft_g_crashing_tid, 0);
}

void aft_async_handler(int signo, siginfo_t *info, void *ucontext) {
    int saved_errno = errno;
    uint64_t entry_ns = aft_async_now_ns(CLOCK_MONOTONIC);
    struct sigaction previous = aft_async_previous(signo, 0);
    if (info != NULL && info->si_code <= 0 && !aft_async_is_function(&previous) &&
        previous.sa_handler == SIG_IGN) {
        /* A sent signal the process ignored before Aftermath: ignored now, not a crash. */
        errno = saved_errno;
        return;
    }
    uint64_t tid = aft_async_gettid();
    uint64_t expected = 0;
    if (atomic_compare_exchange_strong(&aft_g_crashing_tid, &expected, tid)) {
        /* A deadline for the whole write: should the unwinder wait forever on a lock the
         * crashed program holds (the loader's), SIGALRM's default action ends the process. */
        struct sigaction alarm_default, alarm_previous;
        aft_async_memset(&alarm_default, 0, sizeof(alarm_default));
        alarm_default.sa_handler = SIG_DFL;
        sigaction(SIGALRM, &alarm_default, &alarm_previous);
        /* alarm(2) as setitimer: the app's timer, interval and all, is given back as it was. */
        struct itimerval deadline = {.it_value = {.tv_sec = AFT_HANDLER_DEADLINE_SECONDS}};
        struct itimerval timer_previous = {{0, 0}, {0, 0}};
        (void)syscall(SYS_setitimer, (long)ITIMER_REAL, &deadline, &timer_previous);
        aft_g_crash_tid = tid;
        aft_g_crash_pid = (uint64_t)getpid();
        aft_g_crash_file_size_limit = aft_async_file_size_limit();
        aft_async_memory_reader_refresh_for((pid_t)aft_g_crash_pid); /* a fork without atfork */
        /* Under a file-size limit our write must fail with EFBIG, not end the process by
         * SIGXFSZ: held before sigsetjmp, whose saved mask a fault restores. */
        aft_file_size_hold file_size_hold;
        int file_size_limited = aft_g_crash_file_size_limit != UINT64_MAX;
        if (file_size_limited) aft_async_hold_file_size_signal(&file_size_hold);
        atomic_store(&aft_g_writing, 1);
        aft_g_release_waits = 1; /* until the writer knows what comes next */
        sigprocmask(SIG_BLOCK, NULL, &aft_g_writer_mask); /* for both jumps: one system call */
        if (sigsetjmp(aft_g_writer_jump, 0) == 0) {
            aft_async_write_crash(signo, info, ucontext, entry_ns, aft_g_state.reserved_fd,
                                  aft_g_state.tmp_name);
        } else { /* back here from a fault inside the writer */
            sigprocmask(SIG_SETMASK, &aft_g_writer_mask, NULL);
            aft_async_mark_handler_fault();
        }
        atomic_store(&aft_g_writing, 0);
        /* Aftermath's own threads are not paused: a hand-off to the exporter that another of
         * them is in finishes first (bounded), its files deleted once acknowledged, so the
         * next launch does not send it again; new ones are refused from the crash's start. */
        aft_async_await_exports();
        aft_async_threads_release(aft_g_release_waits); /* before what comes next */
        if (file_size_limited) aft_async_release_file_size_signal(&file_size_hold);
        syscall(SYS_setitimer, (long)ITIMER_REAL, &timer_previous, NULL);
        sigaction(SIGALRM, &alarm_previous, NULL);
        atomic_store(&aft_g_crash_written, 1);
        atomic_store(&aft_g_crash_rounds, 0);
        atomic_store(&aft_g_crash_signal, signo);
        /* Before what comes next (the Swift runtime's backtracer pauses every thread). */
        aft_async_unwind_resident_retire();
    } else if (expected == tid) {
        if (atomic_load(&aft_g_writing)) {
            /* A fault inside our own writer (another signal than the crash's): abandon the
             * write and chain the ORIGINAL crash, so the process dies of what killed it. A
             * fault of the same signal cannot get here: it is blocked, and the kernel ends
             * the process with it, which is the same death. */
            if (atomic_load(&aft_g_capturing)) {
                atomic_store(&aft_g_capturing, 0);
                siglongjmp(aft_g_capture_jump, 1);
            }
            siglongjmp(aft_g_writer_jump, 1);
        }
        /* The same crash back again: the handler we chained to called us (an app handler
         * that chains to the one it replaced, installed between two starts). Chaining to it
         * again would loop forever: end the chain where it began, at what was there before
         * our first install; a second time round, at the default action. A different later
         * signal on this thread is handed on like any other. */
        if (signo == atomic_load(&aft_g_crash_signal)) {
            int round = atomic_fetch_add(&aft_g_crash_rounds, 1);
            if (round >= 1) {
                struct sigaction dfl;
                aft_async_memset(&dfl, 0, sizeof(dfl));
                dfl.sa_handler = SIG_DFL;
                sigaction(signo, &dfl, NULL);
                if (!aft_async_fault_refires(signo, info)) aft_async_reraise(signo, info);
                errno = saved_errno;
                return;
            }
            aft_async_chain(signo, info, ucontext, 1);
            errno = saved_errno;
            return;
        }
    } else {
        /* Another thread is handling its crash: be recorded with this fault's context, wait,
         * then fall through so this thread dies as it would have. */
        aft_async_threads_note_crash(signo, ucontext);
        /* After the write the first crash is chained, and the process normally dies of it:
         * this thread waits for that too (10 s at most), as a second crashing thread waits in
         * the Swift runtime's handler, so that what comes after us handles one crash at a time.
         * Should the process live through the first (it is withdrawn), this one goes on. */
        struct timespec ten_ms = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};
        for (int i = 0; i < 1000 && atomic_load(&aft_g_crashing_tid) == expected; i++)
            aft_sys_nanosleep(&ten_ms, NULL);
    }
    int first = expected == 0;
    if (aft_async_chain(signo, info, ucontext, 0) && first) aft_async_survived(signo);
    errno = saved_errno;
}
