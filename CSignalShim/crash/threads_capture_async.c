/*
 * threads_capture_async.c: CRASH-TIME CODE, under the crash-time contract of
 * CSignalShim/README.md (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift;
 * checked by AsyncSafetyTests). Every thread at a crash, in-process, without ptrace or
 * process_vm_readv: the crashing thread lists /proc/self/task with getdents64 and sends each
 * other thread SIGPROF or the capture signal (tgkill) before any read of /proc; each answers
 * from its signal frame (registers, floating-point state, its name) and waits on a futex until
 * the crash is written. A thread that blocks the signal, is stopped or in uninterruptible
 * sleep, or does not answer within AFT_THREADS_ANSWER_NS is still listed, with the stack
 * pointer and pc of /proc/self/task/<tid>/syscall. Then every thread's stack memory is copied
 * through /proc/self/mem, at the caps of aftermath_format.h, and its frames left to the next
 * launch, or unwound here (threads_record_async.c). This file is the crashing thread's
 * side; the paused threads' (their answer and their wait) is threads_park_async.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "threads_internal.h"
#include "watchdog_internal.h"
#include "sys_internal.h"

/* Both zero-initialized, so in .bss (megabytes each, else in every app's binary): the hang's
 * is marked a hang's by aft_async_threads_capture_for_hang. */
aft_thread_capture aft_g_threads;
aft_thread_capture aft_g_hang_threads;
AFT_SMALL_STATE _Atomic int aft_g_thread_capture_signal;
AFT_SMALL_STATE _Atomic uint64_t aft_g_run_updater_tid;
AFT_SMALL_STATE aft_park_note aft_g_park_watchdog, aft_g_park_pinger, aft_g_park_run;

__attribute__((noinline)) void aft_park_note_wait(aft_park_note *note) {
    /* The caller's stack pointer: above this call's frame record and return address. */
    uint64_t sp = (uint64_t)(uintptr_t)__builtin_frame_address(0) + 16u;
    atomic_store(&note->sp, sp);
    atomic_store(&note->pc, (uint64_t)(uintptr_t)__builtin_return_address(0));
}
AFT_SMALL_STATE uint64_t aft_g_static_tls_size;
AFT_SMALL_STATE uint64_t aft_g_main_stack_end;
AFT_SMALL_STATE uint64_t aft_g_main_stack_pid;

/* ---- the crashing thread's side ---- */

/* "/proc/self/task/<tid>/<leaf>" read into c->proc; its length, or -1. */
ssize_t aft_async_task_file(aft_thread_capture *c, uint64_t tid, const char *leaf) {
    static const char prefix[] = "/proc/self/task/";
    size_t n = sizeof(prefix) - 1;
    aft_async_memcpy(c->path, prefix, n);
    n += aft_async_u64_to_dec(tid, c->path + n);
    c->path[n++] = '/';
    size_t leaf_len = aft_async_strlen(leaf, 16);
    aft_async_memcpy(c->path + n, leaf, leaf_len);
    c->path[n + leaf_len] = '\0';
    return aft_async_read_small_file(c->path, c->proc, sizeof(c->proc));
}

/* The name between the first '(' and the last ')' of a stat line. */
static void aft_async_stat_name(const char *text, size_t length, char *out) {
    size_t open = length, close = length;
    for (size_t i = 0; i < length; i++) {
        if (text[i] == '(' && open == length) open = i;
        if (text[i] == ')') close = i;
    }
    if (open < close) aft_async_copy_tail(out, AFT_THREAD_NAME, text + open + 1, close - open - 1);
}

/* The kernel's sp and pc for a thread that cannot answer. */
void aft_async_from_syscall_file(aft_thread_capture *c, aft_thread *r, uint32_t why) {
    r->why = why;
    r->context_source = AFT_THREAD_CONTEXT_NONE;
    ssize_t n = aft_async_task_file(c, r->thread_id, "syscall");
    int64_t nr = -2;
    uint64_t sp = 0, pc = 0;
    if (n > 0 && aft_async_syscall_parse(c->proc, (size_t)n, &nr, &sp, &pc) && sp != 0) {
        r->syscall_number = nr;
        r->sp = sp;
        r->pc = pc;
        r->context_source = AFT_THREAD_CONTEXT_SYSCALL;
    }
}

/* A thread left asleep in system call nr: the kernel's sp and pc. */
static void aft_async_record_asleep(aft_thread *r, int64_t nr, uint64_t sp, uint64_t pc) {
    r->why = AFT_THREAD_WHY_ASLEEP;
    r->syscall_number = nr;
    r->sp = sp;
    r->pc = pc;
    r->context_source = AFT_THREAD_CONTEXT_SYSCALL;
}

static int aft_async_listed(aft_thread_capture *c, uint64_t tid) {
    uint32_t n = atomic_load(&c->count);
    for (uint32_t i = 0; i < n; i++)
        if (atomic_load(&c->slots[i].tid) == tid) return 1;
    return 0;
}

/* Records a newly listed thread and, where it can answer, signals it. */
static void aft_async_threads_add(aft_thread_capture *c, uint64_t tid, uint64_t *first_signal_ns) {
    uint32_t i = atomic_load(&c->count);
    if (i >= AFT_MAX_THREADS) {
        if (c->info.rounds <= 1) c->info.omitted++; /* a later listing finds the same ones */
        return;
    }
    aft_capture_slot *slot = &c->slots[i];
    aft_thread *r = &c->records[i];
    aft_async_memset(r, 0, sizeof(*r));
    r->thread_id = tid;
    r->syscall_number = -2;
    r->state = '?';
    if (tid == c->pid) r->flags |= AFT_THREAD_MAIN;
    slot->ucontext = NULL;
    slot->signal = 0;
    slot->unread = 0;
    slot->waking = 0;
    atomic_store(&slot->state, AFT_SLOT_LISTED);
    atomic_store(&slot->tid, tid);
    atomic_store(&c->count, i + 1); /* published before a signal can look for it */

    /* Aftermath's long-lived threads are known by their ids: listed without a read of /proc. */
    static const char watchdog_name[] = "aftermath.hang", donor_name[] = "aftermath.unw",
                      run_name[] = "aftermath.run", ping_name[] = "aftermath.ping";
    const char *own_name = tid == atomic_load(&aft_g_watchdog.watchdog_tid) ? watchdog_name
                           : (int)tid == aft_g_unwind_resident.donor_tid    ? donor_name
                           : tid == atomic_load(&aft_g_run_updater_tid)     ? run_name
                           : tid == atomic_load(&aft_g_watchdog.pinger_tid)
                               ? ping_name
                               : aft_async_lent_name(tid);
    if (own_name != NULL) {
        aft_async_copy_tail(r->name, AFT_THREAD_NAME, own_name, aft_async_strlen(own_name, 16));
        r->flags |= AFT_THREAD_AFTERMATH;
        r->why = AFT_THREAD_WHY_OWN;
        /* Where it waits, as it noted before the wait (park_internal.h). */
        aft_park_note *note = own_name == watchdog_name ? &aft_g_park_watchdog
                              : own_name == run_name    ? &aft_g_park_run
                              : own_name == ping_name   ? &aft_g_park_pinger
                                                        : aft_async_lent_note(tid);
        uint64_t pc = note != NULL ? atomic_load(&note->pc) : 0;
        uint64_t sp = note != NULL ? atomic_load(&note->sp) : 0;
        if (pc != 0 && sp != 0) {
            r->pc = pc;
            r->sp = sp;
            r->context_source = AFT_THREAD_CONTEXT_PARKED;
        }
        return;
    }
    int capture = aft_async_capture_signal(c);
    /* A crash pauses threads by SIGPROF even where the capture signal is not ours any more
     * (the app took it after start): borrowed here, or 0 where it cannot be. */
    int crash = !c->for_hang && aft_async_also_crashed(tid) == NULL;
    int by_sigprof = crash && capture <= 0 && aft_async_pick_signal(c, 0, 0) == SIGPROF;
    if (crash && (capture > 0 || by_sigprof)) {
        /* A crash: signalled at once, /proc unread (a read costs more than the answer). The
         * thread names itself when it answers; one that stays silent is looked up then
         * (aft_async_threads_collect). SIGPROF first where it can be had: libdispatch's
         * workers, and so the Swift concurrency pool, block every other asynchronous signal; a
         * thread that blocks it gets the capture signal instead. Where the app's own handler
         * comes next, the crash may be withdrawn: its system call first, and a thread asleep
         * in one a handler would cut short (EINTR) is left asleep, with the kernel's sp and pc. */
        if (c->spare_sleepers) {
            ssize_t m = aft_async_task_file(c, tid, "syscall");
            int64_t nr = -2;
            uint64_t sp = 0, pc = 0;
            if (m > 0 && aft_async_syscall_parse(c->proc, (size_t)m, &nr, &sp, &pc) && nr >= 0 &&
                aft_async_syscall_interrupted(nr)) {
                ssize_t n = aft_async_task_file(c, tid, "stat");
                if (n > 0) {
                    r->state = aft_async_stat_state(c->proc, (size_t)n);
                    aft_async_stat_name(c->proc, (size_t)n, r->name);
                }
                aft_async_record_asleep(r, nr, sp, pc);
                return;
            }
        }
        int signo = by_sigprof ? SIGPROF : aft_async_pick_signal(c, 1ull << (capture - 1), 0);
        slot->unread = 1;
        aft_async_threads_send(c, i, signo > 0 ? signo : capture, first_signal_ns);
        return;
    }
    ssize_t n = aft_async_task_file(c, tid, "stat");
    if (n <= 0) { /* gone already */
        atomic_store(&slot->state, AFT_SLOT_EXITED);
        c->info.exited++;
        return;
    }
    r->state = aft_async_stat_state(c->proc, (size_t)n);
    aft_async_stat_name(c->proc, (size_t)n, r->name);
    static const char own[] = "aftermath.";
    int ours = 1;
    for (uint32_t k = 0; k < sizeof(own) - 1 && ours; k++) ours = r->name[k] == own[k];
    if (ours) r->flags |= AFT_THREAD_AFTERMATH;
    if (ours) { /* its stack says nothing of the app's crash: listed, not paused */
        r->why = AFT_THREAD_WHY_OWN;
        return;
    }

    aft_also_crashed *also = aft_async_also_crashed(tid);
    if (also != NULL) { /* crashed too and waits in our handler: its own fault's context */
        aft_async_fill_from_context(r, also->ucontext, AFT_THREAD_CONTEXT_CRASH);
        r->flags |= AFT_THREAD_ALSO_CRASHED;
        r->crash_signal = also->signo;
        slot->ucontext = also->ucontext;
        atomic_store(&slot->state, AFT_SLOT_PARKED);
        return;
    }
    switch (r->state) {
    case 'T':
    case 't':
        aft_async_from_syscall_file(c, r, AFT_THREAD_WHY_STOPPED);
        return;
    case 'D':
        aft_async_from_syscall_file(c, r, AFT_THREAD_WHY_UNINTERRUPTIBLE);
        return;
    case 'Z':
    case 'X':
        r->why = AFT_THREAD_WHY_ZOMBIE;
        return;
    default:
        break;
    }
    if (capture <= 0) {
        aft_async_from_syscall_file(c, r, AFT_THREAD_WHY_NO_SIGNAL);
        return;
    }
    if (c->for_hang) {
        /* A hang: the app lives on after this pause, and must notice nothing. A handler would
         * cut a sleep short (EINTR), or a blocking write (a short count): only running threads
         * and those waiting on a futex (a lock, a condition, a semaphore: the kernel restarts
         * that wait after a handler, SA_RESTART or not) are signalled. The others: the kernel's
         * sp and pc instead, and the stack unwound from them. */
        ssize_t m = aft_async_task_file(c, tid, "syscall");
        int64_t nr = -2;
        uint64_t sp = 0, pc = 0;
        int parsed = m > 0 && aft_async_syscall_parse(c->proc, (size_t)m, &nr, &sp, &pc);
        if (parsed) r->syscall_number = nr; /* -1: running, outside a system call */
        if (parsed && nr >= 0 && (nr != SYS_futex || aft_async_syscall_interrupted(nr))) {
            aft_async_record_asleep(r, nr, sp, pc);
            return;
        }
        /* No hurry in a hang: the mask first, so that no capture signal is left pending on a
         * thread that blocks it (real-time signals queue, and count against RLIMIT_SIGPENDING). */
        uint64_t blocked = 0;
        m = aft_async_task_file(c, tid, "status");
        if (m <= 0 || !aft_async_status_field(c->proc, (size_t)m, "SigBlk", 1, &blocked)) {
            aft_async_from_syscall_file(c, r, AFT_THREAD_WHY_BLOCKS_SIGNAL);
            return;
        }
        if ((blocked >> (capture - 1)) & 1u) {
            /* SIGPROF where it can take that one and nobody else uses it: a libdispatch worker
             * that never ran a probe blocks the capture signal, spinning in a job of the pool's
             * (/proc has no sp or pc for it) or, in the pool's own hang, waiting on a futex (a
             * semaphore of a starved pool). /proc's sp and pc alone would not do for that
             * waiter: the walk from them stops at the first async frame, short of
             * swift_job_run, and its task's async callers are read from its registers and
             * thread pointer, which only its answer gives. Another hang's capture leaves
             * waiters to /proc: pausing every idle worker of a loaded machine for answers would
             * hold the watchdog past the next hang. */
            int signo =
                !(parsed && nr >= 0) || c->for_pool ? aft_async_pick_signal(c, blocked, 0) : 0;
            if (signo <= 0) {
                aft_async_from_syscall_file(c, r, AFT_THREAD_WHY_BLOCKS_SIGNAL);
                return;
            }
            capture = signo;
        }
    }
    aft_async_threads_send(c, i, capture, first_signal_ns);
}

int aft_async_threads_send(aft_thread_capture *c, uint32_t i, int signo,
                           uint64_t *first_signal_ns) {
    aft_capture_slot *slot = &c->slots[i];
    aft_thread *r = &c->records[i];
    slot->signal = signo;
    atomic_store(&slot->state, AFT_SLOT_SENT);
    if (syscall(SYS_tgkill, (long)c->pid, (long)r->thread_id, (long)signo) != 0) {
        int err = errno;
        uint32_t sent = AFT_SLOT_SENT;
        atomic_compare_exchange_strong(&slot->state, &sent, AFT_SLOT_LATE);
        if (err == ESRCH) {
            atomic_store(&slot->state, AFT_SLOT_EXITED);
            c->info.exited++;
        } else {
            aft_async_from_syscall_file(c, r, AFT_THREAD_WHY_SIGNAL_FAILED);
        }
        return 0;
    }
    if (*first_signal_ns == 0) *first_signal_ns = aft_async_now_ns(CLOCK_MONOTONIC);
    c->info.signalled++;
    return 1;
}

/* The dirent at *at of the n bytes of c->dirents, moving *at past it: 1 with its name's number
 * in *tid, 2 for "." or "..", 0 for another name, -1 at the end or a malformed record. */
static int aft_async_next_dirent(const aft_thread_capture *c, long n, long *at, uint64_t *tid) {
    if (*at + 19 >= n) return -1;
    uint16_t reclen;
    aft_async_memcpy(&reclen, c->dirents + *at + 16, sizeof(reclen));
    if (reclen == 0 || *at + reclen > n) return -1;
    const char *name = c->dirents + *at + 19;
    *at += reclen;
    if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) return 2;
    int digits = 0;
    for (*tid = 0; digits < 20 && name[digits] >= '0' && name[digits] <= '9'; digits++)
        *tid = *tid * 10 + (uint64_t)(name[digits] - '0');
    return digits > 0 && name[digits] == '\0';
}

/* Whether the n bytes of c->dirents are a task list's that names thread tid: every name a
 * number but "." and ".." (the directory of processes, /proc, names the main thread's id too). */
static int aft_async_dirents_list_thread(const aft_thread_capture *c, long n, uint64_t tid) {
    int named = 0, kind;
    uint64_t value = 0;
    for (long at = 0; (kind = aft_async_next_dirent(c, n, &at, &value)) >= 0;) {
        if (kind == 0) return 0;
        if (kind == 1) named |= value == tid;
    }
    return named;
}

/* The task list open, its first batch read into c->dirents (*n bytes). A crash's descriptor
 * was opened at install: a lookup of the path costs a cold crash 25-50 µs, most of its
 * listing. It is trusted only where its first batch names the capturer (an app may have closed
 * it and reused the number), and lists threads only; else, and in a hang's capture, the path
 * is opened. */
static int aft_async_task_list_open(aft_thread_capture *c, long *n) {
    uint64_t self = atomic_load(&c->slots[0].tid);
    if (!c->for_hang && aft_g_task_pid != 0 && aft_g_task_pid == c->pid &&
        (!aft_g_task_fd_read || aft_sys_lseek(aft_g_task_fd, 0, SEEK_SET) == 0)) {
        aft_g_task_fd_read = 1; /* a first listing starts where the open left it: no lseek */
        *n = syscall(SYS_getdents64, (long)aft_g_task_fd, c->dirents, (long)sizeof(c->dirents));
        if (*n > 0 && aft_async_dirents_list_thread(c, *n, self)) return aft_g_task_fd;
    }
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) *n = syscall(SYS_getdents64, (long)fd, c->dirents, (long)sizeof(c->dirents));
    return fd;
}

/* One listing of /proc/self/task; the number of threads not seen before. */
uint32_t aft_async_threads_list(aft_thread_capture *c, uint64_t *first_signal) {
    long n = 0;
    int fd = aft_async_task_list_open(c, &n);
    if (fd < 0) {
        c->info.flags |= AFT_THREADS_NO_TASK_LIST;
        return 0;
    }
    uint32_t added = 0;
    for (int batch = 0;; batch++) {
        if (batch > 0) n = syscall(SYS_getdents64, (long)fd, c->dirents, (long)sizeof(c->dirents));
        if (n <= 0) break;
        uint64_t tid = 0;
        int kind;
        for (long at = 0; (kind = aft_async_next_dirent(c, n, &at, &tid)) >= 0;) {
            if (kind != 1 || aft_async_listed(c, tid) || tid == c->skip_tid) continue;
            c->info.seen++;
            added++;
            aft_async_threads_add(c, tid, first_signal);
        }
        /* Room left for another entry (a thread's is 32 bytes at most): the kernel stopped at
         * the list's end, and a second call would only say so. */
        if (n + 64 <= (long)sizeof(c->dirents)) break;
    }
    if (fd != aft_g_task_fd || c->for_hang) close(fd);
    return added;
}
