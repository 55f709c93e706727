/*
 * unwind_resident_async.c: CRASH-TIME CODE, under the crash-time contract of
 * CSignalShim/README.md (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift;
 * checked by AsyncSafetyTests). The resident unwinding helper (aftermath.unw): one helper process
 * per process, started by unwind_helpers.c's donor thread, that warms libunwind up, shuts itself
 * in (no new privileges, a seccomp filter) and then serves the requests of unwind_async.c one at a
 * time (aft_async_unwind_serve); the requester's side (aft_async_resident_take: move it to the
 * requester's CPU, wake it), and its end once a crash is written
 * (aft_async_unwind_resident_retire).
 */
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libunwind_local.h"
#include "shim_internal.h"
#include "unwind_internal.h"
#include "sys_internal.h"

AFT_SMALL_STATE aft_unwind_resident aft_g_unwind_resident;

/* The resident's sandbox: it may only compute on the memory it shares with us and wait. Every
 * other system call fails with EPERM (libunwind then finds less, it does not fault). The
 * resident lives as long as the app, which may later drop privileges or sandbox itself; a
 * process that shares its memory must never be more privileged than the app is then. */
#if defined(__x86_64__)
#define AFT_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AFT_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif
#define AFT_ALLOW(nr)                                                                              \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
static int aft_unwind_resident_sandbox(void) {
#ifdef AFT_AUDIT_ARCH
    static const struct sock_filter program[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AFT_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        /* waiting, answering, exiting */
        AFT_ALLOW(__NR_futex),
        AFT_ALLOW(__NR_exit),
        AFT_ALLOW(__NR_exit_group),
        AFT_ALLOW(__NR_rt_sigreturn),
        AFT_ALLOW(__NR_restart_syscall),
        AFT_ALLOW(__NR_getpid),
        AFT_ALLOW(__NR_getppid),
        AFT_ALLOW(__NR_gettid),
        AFT_ALLOW(__NR_sched_yield),
        AFT_ALLOW(__NR_nanosleep),
        AFT_ALLOW(__NR_clock_nanosleep),
        AFT_ALLOW(__NR_clock_gettime),
        AFT_ALLOW(__NR_gettimeofday),
        /* what libunwind calls while it walks: its signal masks around the loader's lock, its
         * memory checks (mincore, msync, a pipe) and pools, and our reads of memory */
        AFT_ALLOW(__NR_rt_sigprocmask),
        AFT_ALLOW(__NR_mincore),
        AFT_ALLOW(__NR_msync),
        AFT_ALLOW(__NR_read),
        AFT_ALLOW(__NR_write),
        AFT_ALLOW(__NR_pread64),
        AFT_ALLOW(__NR_pipe2),
        AFT_ALLOW(__NR_close),
        AFT_ALLOW(__NR_munmap),
        AFT_ALLOW(__NR_madvise),
        /* mmap, never executable */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    };
    struct sock_fprog fprog = {.len = (unsigned short)(sizeof(program) / sizeof(program[0])),
                               .filter = (struct sock_filter *)(uintptr_t)program};
    if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) != 0) return 0;
    return syscall(SYS_prctl, PR_SET_SECCOMP, (long)SECCOMP_MODE_FILTER, &fprog, 0L, 0L) == 0;
#else
    return 0;
#endif
}

/* The resident helper's life: requests, one at a time, until the process ends. Its deadline is
 * the requester's, who kills it then. */
static int aft_unwind_resident_main(void *arg) {
    aft_unwind_resident *r = arg;
    aft_async_unwind_helper_signals(1, AFT_UNWIND_SLOTS);
    /* Dies with the thread that created it, which lives as long as the process image. */
    if (syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0L, 0L, 0L) != 0 ||
        aft_sys_getppid() != r->owner)
        return 0;
    syscall(SYS_prctl, PR_SET_NAME, "aftermath.unw", 0L, 0L, 0L);
    /* libunwind's first walk on this thread-local storage sets up its caches: now, not at a
     * crash. */
    const aft_libunwind *u = aft_async_libunwind(); /* loaded before the spawn */
    unw_context_t context;
    unw_cursor_t cursor;
    if (u != NULL && AFT_UNW_GETCONTEXT(u, &context) == 0 &&
        u->init_local2(&cursor, &context, 0) == 0)
        for (int i = 0; i < 8 && u->step(&cursor) > 0; i++) {
        }
    /* Whether it may be moved (a seccomp filter that kills on sched_setaffinity kills this
     * helper alone, now): a request then moves it to the requester's CPU, where it runs as
     * soon as the requester waits, without waking another CPU. */
    cpu_set_t mask;
    r->last_cpu = -1;
    r->affinity_ok = syscall(SYS_sched_getaffinity, 0, sizeof(mask), &mask) > 0 &&
                     syscall(SYS_sched_setaffinity, 0, sizeof(mask), &mask) == 0;
    /* Unsandboxed, it serves nothing: without its sandbox there is no resident. */
    if (!aft_unwind_resident_sandbox()) return 0;
    atomic_store(&r->ready, 1);
    syscall(SYS_futex, (uint32_t *)&r->ready, FUTEX_WAKE, 1, NULL, NULL, 0);
    uint32_t handled = r->request_at_spawn;
    for (;;) {
        uint32_t now = atomic_load(&r->request);
        if (now == handled) {
            syscall(SYS_futex, (uint32_t *)&r->request, FUTEX_WAIT, handled, NULL, NULL, 0);
            continue;
        }
        handled = now;
        aft_unwind_slot *slot = atomic_load(&r->slot);
        if (slot != NULL) aft_async_unwind_serve(slot);
    }
}

int aft_unwind_resident_spawn(void) {
    aft_unwind_resident *r = &aft_g_unwind_resident;
    if (r->stack_top == NULL) return -1;
    r->owner = (int)getpid();
    r->donor_tid = (int)aft_async_gettid();
    r->request_at_spawn = atomic_load(&r->request);
    atomic_store(&r->ready, 0);
    /* No exit signal: the app sees no SIGCHLD, and its waitpid(-1) does not see the helper. */
    pid_t pid =
        clone(aft_unwind_resident_main, r->stack_top, CLONE_VM | CLONE_FILES | CLONE_UNTRACED, r);
    return pid < 0 ? -1 : pid;
}

void aft_async_unwind_resident_retire(void) {
    aft_unwind_resident *r = &aft_g_unwind_resident;
    if (r->donor_tid <= 0) return; /* none was ever started: no system call */
    pid_t self = getpid();
    if (r->owner != (int)self || atomic_exchange(&r->retire, 1)) return;
    atomic_store(&r->pid, 0);
    syscall(SYS_futex, (uint32_t *)&r->retire, FUTEX_WAKE, 1, NULL, NULL, 0);
    /* Until the donor is gone from /proc/self/task (50 ms at most). */
    struct timespec pause = {.tv_sec = 0, .tv_nsec = 50 * 1000};
    for (int i = 0; i < 1000; i++) {
        if (syscall(SYS_tgkill, (long)self, (long)r->donor_tid, 0L) != 0 && errno == ESRCH) break;
        aft_sys_nanosleep(&pause, NULL);
    }
}

/* Hands slot's request to the resident helper: 1 with its pid when it took it, 0 when there is
 * none for this process, it is busy with another request, or it has died. */
int aft_async_resident_take(aft_unwind_slot *slot, pid_t *pid) {
    aft_unwind_resident *r = &aft_g_unwind_resident;
    pid_t p = (pid_t)atomic_load(&r->pid);
    if (p <= 0 || r->owner != (int)getpid()) return 0; /* none, or the parent's (a fork) */
    int expected = 0;
    if (!atomic_compare_exchange_strong(&r->busy, &expected, 1)) return 0;
    int status = 0;
    if (aft_sys_waitpid(p, &status, __WALL | WNOHANG) !=
        0) { /* it died (reaped now), or is not ours */
        atomic_store(&r->pid, 0);
        atomic_store(&r->busy, 0);
        return 0;
    }
    slot->resident = 1;
    slot->shares_memory = 1;
    unsigned int cpu = 0;
    if (r->affinity_ok && syscall(SYS_getcpu, &cpu, NULL, NULL) == 0 && cpu < CPU_SETSIZE &&
        (int)cpu != r->last_cpu) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (syscall(SYS_sched_setaffinity, p, sizeof(one), &one) == 0) r->last_cpu = (int)cpu;
    }
    atomic_store(&r->slot, slot);
    atomic_fetch_add(&r->request, 1);
    syscall(SYS_futex, (uint32_t *)&r->request, FUTEX_WAKE, 1, NULL, NULL, 0);
    *pid = p;
    return 1;
}
