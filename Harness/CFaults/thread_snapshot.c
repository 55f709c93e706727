/*
 * thread_snapshot.c: NORMAL-TIME CODE, test-only, never linked into apps. A real snapshot of
 * live threads as the crash handler records them (aft_thread records and stack memory), for
 * the minidump tests: threads parked in named functions answer a real-time signal from their
 * own signal frame, one that blocks every signal is read from /proc/self/task/<tid>/syscall,
 * one is left without a context, and one faults for real (SIGSEGV, SEGV_MAPERR) in a named
 * function and leaves its handler by siglongjmp.
 */
#include "CHarnessFaults.h"
#include "aftermath_format.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <time.h>
#include <unistd.h>

#define MAX_SLOTS 16u

typedef struct {
    _Atomic uint64_t tid;
    uint64_t stack_top; /* the end of the thread's stack (pthread_getattr_np) */
    _Atomic int answered;
    uint32_t index;
} slot;

static slot g_slots[MAX_SLOTS];
static uint32_t g_slot_count;
static aft_thread *g_records;
static uint8_t *g_stacks;
static _Atomic uint32_t g_parked;
static _Atomic uint32_t g_release;
static sigjmp_buf g_crash_jump;
static aft_test_snapshot_fault *g_fault;
static struct sigaction g_old_segv;
static int g_capture_signal;

static long futex(_Atomic uint32_t *word, int op, uint32_t value) {
    return syscall(SYS_futex, (uint32_t *)word, op, value, NULL, NULL, 0);
}

static void wait_for_release(void) {
    while (atomic_load(&g_release) == 0) futex(&g_release, FUTEX_WAIT, 0);
}

/* Copies the stack from (sp - red zone) & ~15 up to the cap or the end of the stack. */
static void copy_stack(aft_thread *r, uint8_t *dest, uint64_t top) {
    uint64_t low = (r->sp - AFT_STACK_RED_ZONE) & ~(uint64_t)15;
    uint64_t size = top > low ? top - low : 0;
    if (size > AFT_TEST_SNAPSHOT_STACK) size = AFT_TEST_SNAPSHOT_STACK;
    memcpy(dest, (const void *)(uintptr_t)low, (size_t)size);
    r->stack_start = low;
    r->stack_size = size;
}

/* Fills r from a signal frame: every register, the FP state, pc and sp. */
static void record_context(aft_thread *r, const ucontext_t *uc) {
#if defined(__x86_64__)
    for (int i = 0; i < NGREG; i++) r->registers[i] = (uint64_t)uc->uc_mcontext.gregs[i];
    r->register_count = NGREG;
    r->pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    r->sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
    if (uc->uc_mcontext.fpregs != NULL) {
        memcpy(r->fp_state, uc->uc_mcontext.fpregs, 512);
        r->fp_state_size = 512;
    }
#elif defined(__aarch64__)
    for (int i = 0; i < 31; i++) r->registers[i] = uc->uc_mcontext.regs[i];
    r->registers[31] = uc->uc_mcontext.sp;
    r->registers[32] = uc->uc_mcontext.pc;
    r->registers[33] = uc->uc_mcontext.pstate;
    r->register_count = 34;
    r->pc = uc->uc_mcontext.pc;
    r->sp = uc->uc_mcontext.sp;
    /* The first record in __reserved: {u32 magic, u32 size}; the FPSIMD record (magic
     * 0x46508001) then has u32 fpsr, u32 fpcr and v0-v31 from offset 16. */
    const uint8_t *rec = (const uint8_t *)uc->uc_mcontext.__reserved;
    uint32_t magic;
    memcpy(&magic, rec, 4);
    if (magic == 0x46508001u) {
        memcpy(r->fp_state, rec + 8, 8);
        memcpy(r->fp_state + 8, rec + 16, 512);
        r->fp_state_size = 520;
    }
#else
    (void)r;
    (void)uc;
#endif
}

static slot *own_slot(void) {
    uint64_t tid = (uint64_t)syscall(SYS_gettid);
    for (uint32_t i = 0; i < g_slot_count; i++) {
        if (atomic_load(&g_slots[i].tid) == tid) return &g_slots[i];
    }
    return NULL;
}

static void capture_handler(int sig, siginfo_t *info, void *context) {
    (void)sig;
    (void)info;
    slot *s = own_slot();
    if (s == NULL) return;
    aft_thread *r = &g_records[s->index];
    record_context(r, (const ucontext_t *)context);
    r->context_source = AFT_THREAD_CONTEXT_SIGNAL;
    copy_stack(r, g_stacks + (size_t)s->index * AFT_TEST_SNAPSHOT_STACK, s->stack_top);
    atomic_store(&s->answered, 1);
}

static void crash_handler(int sig, siginfo_t *info, void *context) {
    slot *s = own_slot();
    if (s == NULL || s->index != 0) {
        /* Not the planned fault: the previous action takes it when the fault repeats. */
        sigaction(SIGSEGV, &g_old_segv, NULL);
        return;
    }
    aft_thread *r = &g_records[0];
    record_context(r, (const ucontext_t *)context);
    r->context_source = AFT_THREAD_CONTEXT_CRASH;
    r->flags |= AFT_THREAD_CRASHED;
    copy_stack(r, g_stacks, s->stack_top);
    g_fault->signal = sig;
    g_fault->code = info->si_code;
    g_fault->address = (uint64_t)(uintptr_t)info->si_addr;
    g_fault->thread_id = atomic_load(&s->tid);
    siglongjmp(g_crash_jump, 1);
}

/* The named functions the parked threads wait in; noinline and with work after the wait, so
 * that each stays a frame of its own. */
__attribute__((noinline)) void aft_test_parked_in_alpha(void) {
    wait_for_release();
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void aft_test_parked_in_beta(void) {
    wait_for_release();
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void aft_test_parked_blocking_signals(void) {
    wait_for_release();
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void aft_test_crash_in_named_function(volatile int *address) {
    *address = 1;
    __asm__ volatile("" ::: "memory");
}

static void start_slot(slot *s, const char *name) {
    pthread_setname_np(pthread_self(), name);
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        void *base;
        size_t size;
        pthread_attr_getstack(&attr, &base, &size);
        s->stack_top = (uint64_t)(uintptr_t)base + size;
        pthread_attr_destroy(&attr);
    }
    aft_thread *r = &g_records[s->index];
    r->thread_id = (uint64_t)syscall(SYS_gettid);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->state = 'S';
    r->syscall_number = -2;
    atomic_store(&s->tid, r->thread_id);
}

/* Threads inherit their creator's signal mask, which may block signo. */
static void unblock(int signo) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signo);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

static void *parked_main(void *arg) {
    slot *s = arg;
    unblock(g_capture_signal);
    start_slot(s, s->index % 2 ? "md-alpha" : "md-beta");
    atomic_fetch_add(&g_parked, 1);
    if (s->index % 2)
        aft_test_parked_in_alpha();
    else
        aft_test_parked_in_beta();
    return NULL;
}

static void *blocked_main(void *arg) {
    slot *s = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    start_slot(s, "md-blocked");
    atomic_fetch_add(&g_parked, 1);
    aft_test_parked_blocking_signals();
    return NULL;
}

static void *crasher_main(void *arg) {
    slot *s = arg;
    unblock(SIGSEGV);
    start_slot(s, "md-crasher");
    g_records[0].state = 'R';
    if (sigsetjmp(g_crash_jump, 1) == 0) aft_test_crash_in_named_function((volatile int *)0x18);
    return NULL;
}

/* sp and pc of a thread blocked in a syscall, from /proc/self/task/<tid>/syscall. */
static int read_syscall_file(aft_thread *r) {
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/self/task/%llu/syscall", (unsigned long long)r->thread_id);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return 0;
    return aft_proc_syscall_parse(text, (size_t)n, &r->syscall_number, &r->sp, &r->pc);
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int aft_test_thread_snapshot(uint32_t parked, void *records, uint32_t capacity, uint8_t *stacks,
                             aft_test_snapshot_fault *fault) {
    /* Slots: 0 the crasher, 1..parked the parked threads, then the blocker and the one left
     * without a context. */
    uint32_t count = parked + 3;
    if (count > capacity || count > MAX_SLOTS) return -EINVAL;
    memset(g_slots, 0, sizeof g_slots);
    memset(records, 0, sizeof(aft_thread) * count);
    g_records = records;
    g_stacks = stacks;
    g_fault = fault;
    g_slot_count = count;
    atomic_store(&g_parked, 0);
    atomic_store(&g_release, 0);
    for (uint32_t i = 0; i < count; i++) g_slots[i].index = i;

    int sig = 0;
    struct sigaction old_capture, action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = capture_handler;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    for (int s = SIGRTMIN + 4; s <= SIGRTMAX - 8 && sig == 0; s++) {
        if (sigaction(s, NULL, &old_capture) == 0 && old_capture.sa_handler == SIG_DFL &&
            sigaction(s, &action, NULL) == 0)
            sig = s;
    }
    if (sig == 0) return -EBUSY;
    g_capture_signal = sig;

    pthread_t threads[MAX_SLOTS];
    int started = 0, result = 0;
    for (uint32_t i = 1; i <= parked; i++) {
        if (pthread_create(&threads[i], NULL, parked_main, &g_slots[i]) != 0) break;
        started = (int)i;
    }
    uint32_t blocked = parked + 1, silent = parked + 2;
    pthread_create(&threads[blocked], NULL, blocked_main, &g_slots[blocked]);
    pthread_create(&threads[silent], NULL, parked_main, &g_slots[silent]);
    for (int i = 0; i < 5000 && atomic_load(&g_parked) < parked + 2; i++) sleep_ms(1);
    sleep_ms(50); /* into their futex waits */

    for (uint32_t i = 1; i <= parked; i++) {
        syscall(SYS_tgkill, getpid(), (pid_t)atomic_load(&g_slots[i].tid), sig);
        for (int w = 0; w < 2000 && !atomic_load(&g_slots[i].answered); w++) sleep_ms(1);
        if (!atomic_load(&g_slots[i].answered)) result = -ETIMEDOUT;
    }
    aft_thread *b = &g_records[blocked];
    b->context_source = AFT_THREAD_CONTEXT_SYSCALL;
    b->why = AFT_THREAD_WHY_BLOCKS_SIGNAL;
    if (read_syscall_file(b)) {
        /* Its stack, read from here while it waits (the capture reads /proc/self/mem). */
        copy_stack(b, g_stacks + (size_t)blocked * AFT_TEST_SNAPSHOT_STACK,
                   g_slots[blocked].stack_top);
    } else {
        result = result ? result : -ENODATA;
    }
    aft_thread *n = &g_records[silent];
    n->context_source = AFT_THREAD_CONTEXT_NONE;
    n->why = AFT_THREAD_WHY_NO_ANSWER;

    memset(&action, 0, sizeof action);
    action.sa_sigaction = crash_handler;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_old_segv);
    pthread_t crasher;
    if (pthread_create(&crasher, NULL, crasher_main, &g_slots[0]) == 0) pthread_join(crasher, NULL);
    sigaction(SIGSEGV, &g_old_segv, NULL);
    if (fault->signal != SIGSEGV) result = result ? result : -ENOEXEC;

    atomic_store(&g_release, 1);
    futex(&g_release, FUTEX_WAKE, 1 << 30);
    for (int i = 1; i <= started; i++) pthread_join(threads[i], NULL);
    pthread_join(threads[blocked], NULL);
    pthread_join(threads[silent], NULL);
    sigaction(sig, &old_capture, NULL);
    return result ? result : (int)count;
}
