/*
 * faults.c: NORMAL-TIME CODE, test-only, never linked into apps. Real faults that Swift cannot
 * write, for the harnesses, the tests and the benchmark, and the crash writer's fault hook.
 */
#include "CHarnessFaults.h"
#include "CSignalShim.h"
#include "shim_internal.h"

/* Overrides the weak reference in CSignalShim's writer (see shim_internal.h). */
volatile uintptr_t aft_g_test_fault_in_writer;

volatile int aft_g_test_unwind_in_handler;
void aft_test_unwind_in_handler(int enabled) {
    /* The handler's libunwind: loaded first, as in a process that recorded an error or hung. */
    if (enabled) (void)aft_libunwind_preload();
    aft_g_test_unwind_in_handler = enabled;
}
void aft_test_fault_inside_handler(int enabled) { aft_g_test_fault_in_writer = enabled ? 16 : 0; }

/* Overrides the weak reference in CSignalShim's unwinding helpers (see shim_internal.h). */
volatile uintptr_t aft_g_test_fault_in_helper;

void aft_test_fault_in_unwinding_helper(int enabled) {
    aft_g_test_fault_in_helper = enabled ? 16 : 0;
}

int32_t aft_test_last_unwinding_helper_status(void) {
    return atomic_load(&aft_g_unwind_last_status);
}

int32_t aft_test_unwinding_helper_fault_exit(int32_t signo) {
    return AFT_UNWIND_HELPER_FAULT_EXIT + signo;
}

int32_t aft_test_divide(int32_t a, int32_t b) {
    /* volatile: the compiler must emit idiv, which raises SIGFPE (FPE_INTDIV) for b == 0. */
    volatile int32_t divisor = b;
    return a / divisor;
}

void aft_test_illegal_instruction(void) {
#if defined(__x86_64__)
    __asm__ volatile("ud2");
#elif defined(__aarch64__)
    __asm__ volatile(".inst 0x00000000"); /* permanently undefined: SIGILL */
#else
    __builtin_trap();
#endif
}

void aft_test_breakpoint(void) {
#if defined(__x86_64__)
    __asm__ volatile("int3");
#elif defined(__aarch64__)
    __asm__ volatile("brk #0");
#else
    __builtin_trap();
#endif
}

/* ---- hostile environments for tests and the harness ---- */
#include <errno.h>
#include <stddef.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int aft_test_signal_main_thread(int signo) {
    return (int)syscall(SYS_tgkill, (long)getpid(), (long)getpid(), (long)signo);
}

int aft_test_refuse_process_vm_readv(int kill) {
#if defined(__x86_64__)
    const uint32_t arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
    const uint32_t arch = AUDIT_ARCH_AARCH64;
#else
    return ENOSYS;
#endif
    const uint32_t refuse =
        kill ? SECCOMP_RET_KILL_PROCESS : (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ptrace, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, refuse),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {.len = (unsigned short)(sizeof(code) / sizeof(code[0])),
                                 .filter = code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0) return errno;
    return 0;
}

#include <sched.h>
#include <sys/mount.h>

int aft_test_hide_proc(void) {
    if (unshare(CLONE_NEWNS) != 0) return errno;
    if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return errno;
    if (mount("tmpfs", "/proc", "tmpfs", 0, NULL) != 0) return errno;
    return 0;
}

/* ---- an app's own crash handlers that chain to the previous one ---- */
#include <signal.h>
#include <string.h>

#define AFT_TEST_CHAIN_SLOTS 3
static struct sigaction aft_test_chain_previous[AFT_TEST_CHAIN_SLOTS];
static int aft_test_chain_null_arguments[AFT_TEST_CHAIN_SLOTS];

/* What such a handler does: call the previous handler, or restore the default and return so
 * the fault fires again. */
static void aft_test_chain_to(int slot, int signo, siginfo_t *info, void *context) {
    struct sigaction *previous = &aft_test_chain_previous[slot];
    int null_arguments = aft_test_chain_null_arguments[slot];
    if (previous->sa_flags & SA_SIGINFO) {
        if (previous->sa_sigaction)
            previous->sa_sigaction(signo, null_arguments ? NULL : info,
                                   null_arguments ? NULL : context);
        return;
    }
    if (previous->sa_handler == SIG_IGN) return;
    if (previous->sa_handler == SIG_DFL) {
        signal(signo, SIG_DFL);
        return;
    }
    previous->sa_handler(signo);
}

static void aft_test_chain_handler_0(int signo, siginfo_t *info, void *context) {
    aft_test_chain_to(0, signo, info, context);
}
static void aft_test_chain_handler_1(int signo, siginfo_t *info, void *context) {
    aft_test_chain_to(1, signo, info, context);
}
static void aft_test_chain_handler_2(int signo, siginfo_t *info, void *context) {
    aft_test_chain_to(2, signo, info, context);
}

int aft_test_install_chaining_handler(int slot, int signo, int null_arguments) {
    static void (*const handlers[AFT_TEST_CHAIN_SLOTS])(int, siginfo_t *, void *) = {
        aft_test_chain_handler_0, aft_test_chain_handler_1, aft_test_chain_handler_2};
    if (slot < 0 || slot >= AFT_TEST_CHAIN_SLOTS) return EINVAL;
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = handlers[slot];
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    aft_test_chain_null_arguments[slot] = null_arguments;
    if (sigaction(signo, &action, &aft_test_chain_previous[slot]) != 0) return errno;
    return 0;
}

/* ---- a thread holding the loader's lock ---- */
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

static _Atomic int aft_g_loader_lock_held;
static uint32_t aft_g_loader_lock_ms; /* 0: for good */

static int aft_hold_in_callback(struct dl_phdr_info *info, size_t size, void *data) {
    (void)info;
    (void)size;
    (void)data;
    atomic_store(&aft_g_loader_lock_held, 1);
    /* dl_iterate_phdr holds the loader's lock around every callback */
    if (aft_g_loader_lock_ms == 0)
        for (;;) pause();
    struct timespec hold = {.tv_sec = aft_g_loader_lock_ms / 1000,
                            .tv_nsec = (long)(aft_g_loader_lock_ms % 1000) * 1000000L};
    while (nanosleep(&hold, &hold) != 0) {
    }
    return 1;
}

static void *aft_hold_loader_lock_thread(void *arg) {
    (void)arg;
    dl_iterate_phdr(aft_hold_in_callback, NULL);
    return NULL;
}

int aft_test_hold_loader_lock_for(uint32_t ms) {
    atomic_store(&aft_g_loader_lock_held, 0);
    aft_g_loader_lock_ms = ms;
    return aft_test_hold_loader_lock();
}

int aft_test_hold_loader_lock(void) {
    pthread_t thread;
    int err = pthread_create(&thread, NULL, aft_hold_loader_lock_thread, NULL);
    if (err != 0) return err;
    pthread_detach(thread);
    struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000 * 1000};
    for (int i = 0; i < 5000 && !atomic_load(&aft_g_loader_lock_held); i++) nanosleep(&ms, NULL);
    return atomic_load(&aft_g_loader_lock_held) ? 0 : ETIMEDOUT;
}

/* ---- a hang inside the loader's lock ---- */

static uint32_t hang_harness_loader_lock_ms;

/* dl_iterate_phdr's callback: sleeps with the loader's lock held (restarted after a signal). */
int hang_harness_loader_lock_callback(struct dl_phdr_info *info, size_t size, void *data) {
    (void)info;
    (void)size;
    (void)data;
    struct timespec hold = {.tv_sec = hang_harness_loader_lock_ms / 1000,
                            .tv_nsec = (long)(hang_harness_loader_lock_ms % 1000) * 1000000L};
    while (nanosleep(&hold, &hold) != 0) {
    }
    return 1;
}

void hang_harness_in_loader_lock(uint32_t ms) {
    hang_harness_loader_lock_ms = ms;
    dl_iterate_phdr(hang_harness_loader_lock_callback, NULL);
}

/* ---- a child that inherits every descriptor ---- */
#include <sys/types.h>
#include <unistd.h>

int aft_test_fork_sleeper(uint32_t ms) {
    pid_t pid = fork();
    if (pid == 0) {
        struct timespec left = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
        while (nanosleep(&left, &left) != 0) {
        }
        _exit(0);
    }
    return (int)pid;
}
