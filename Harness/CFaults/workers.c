/*
 * workers.c: NORMAL-TIME CODE, test-only. Threads for the all-thread crash scenarios, each
 * parked or busy in a function of its own name, so that a report can be checked for every
 * thread's function: named workers blocked in read(2), one that blocks every signal, one that
 * spins in user code, one stopped by a tracer, many at once, two threads that fault together,
 * and a stack overflow.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "CHarnessFaults.h"
#include "shim_internal.h"

static int aft_g_never_fd[2] = {-1, -1};
static _Atomic int aft_g_workers_ready;
static _Atomic uint64_t aft_g_last_tid;

static void aft_name_self(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }

/* Blocks for good in read(2) on a pipe nobody writes. */
__attribute__((noinline)) static void aft_block_forever(void) {
    char c;
    for (;;) {
        ssize_t n = read(aft_g_never_fd[0], &c, 1);
        if (n < 0 && errno != EINTR) pause();
    }
}

#define AFT_PARKED_FUNCTION(n)                                                                     \
    __attribute__((noinline)) void aft_test_worker_parked_##n(void) {                              \
        atomic_fetch_add(&aft_g_workers_ready, 1);                                                 \
        aft_block_forever();                                                                       \
        __asm__ volatile("" ::: "memory"); /* not a tail call: this frame stays */                 \
    }
AFT_PARKED_FUNCTION(0)
AFT_PARKED_FUNCTION(1)
AFT_PARKED_FUNCTION(2)
AFT_PARKED_FUNCTION(3)
AFT_PARKED_FUNCTION(4)
AFT_PARKED_FUNCTION(5)
AFT_PARKED_FUNCTION(6)
AFT_PARKED_FUNCTION(7)

static void (*const aft_parked[8])(void) = {
    aft_test_worker_parked_0, aft_test_worker_parked_1, aft_test_worker_parked_2,
    aft_test_worker_parked_3, aft_test_worker_parked_4, aft_test_worker_parked_5,
    aft_test_worker_parked_6, aft_test_worker_parked_7,
};

__attribute__((noinline)) void aft_test_worker_blocking_signals(void) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    atomic_fetch_add(&aft_g_workers_ready, 1);
    aft_block_forever();
    __asm__ volatile("" ::: "memory");
}

/* As libdispatch's workers (and so the Swift concurrency pool) mask themselves: every signal
 * blocked but SIGPROF and the synchronous ones. */
__attribute__((noinline)) void aft_test_worker_sigprof_only(void) {
    aft_test_block_all_but_sigprof();
    atomic_fetch_add(&aft_g_workers_ready, 1);
    aft_block_forever();
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void aft_test_worker_spinning(void) {
    atomic_fetch_add(&aft_g_workers_ready, 1);
    volatile uint64_t spins = 0;
    for (;;) spins++;
}

/* The tracer's target: parked until the tracer has stopped it. */
__attribute__((noinline)) void aft_test_worker_traced(void) {
    atomic_store(&aft_g_last_tid, (uint64_t)syscall(SYS_gettid));
    atomic_fetch_add(&aft_g_workers_ready, 1);
    aft_block_forever();
    __asm__ volatile("" ::: "memory");
}

typedef struct aft_worker_start {
    int kind;
    int index;
} aft_worker_start;
static aft_worker_start aft_g_starts[1024];

static void *aft_worker_main(void *arg) {
    aft_worker_start *s = arg;
    char name[16];
    switch (s->kind) {
    case AFT_TEST_WORKER_PARKED:
        snprintf(name, sizeof(name), "worker-%d", s->index);
        aft_name_self(name);
        aft_parked[s->index % 8]();
        break;
    case AFT_TEST_WORKER_BLOCKS_SIGNALS:
        aft_name_self("blocker");
        aft_test_worker_blocking_signals();
        break;
    case AFT_TEST_WORKER_SIGPROF_ONLY:
        aft_name_self("dispatch-like");
        aft_test_worker_sigprof_only();
        break;
    case AFT_TEST_WORKER_SPINNING:
        aft_name_self("spinner");
        aft_test_worker_spinning();
        break;
    case AFT_TEST_WORKER_TRACED:
        aft_name_self("traced");
        aft_test_worker_traced();
        break;
    default:
        break;
    }
    return NULL;
}

int aft_test_start_workers(int kind, int count) {
    if (aft_g_never_fd[0] < 0 && pipe(aft_g_never_fd) != 0) return errno;
    static int used;
    if (count < 0 || used + count > (int)(sizeof(aft_g_starts) / sizeof(aft_g_starts[0])))
        return EINVAL;
    int target = atomic_load(&aft_g_workers_ready) + count;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (int i = 0; i < count; i++) {
        aft_worker_start *s = &aft_g_starts[used++];
        s->kind = kind;
        s->index = i;
        pthread_t t;
        int err = pthread_create(&t, &attr, aft_worker_main, s);
        if (err != 0) {
            pthread_attr_destroy(&attr);
            return err;
        }
    }
    pthread_attr_destroy(&attr);
    struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000 * 1000};
    for (int waited = 0; atomic_load(&aft_g_workers_ready) < target; waited++) {
        if (waited > 5000) return ETIMEDOUT;
        nanosleep(&ms, NULL);
    }
    nanosleep(&ms, NULL); /* into their blocking call */
    return 0;
}

/* ---- a thread in uninterruptible sleep ---- */

static _Atomic uint32_t aft_g_vfork_child_ms;

/* vfork(2) in a loop, each child asleep child_ms before it exits: the parent waits for it in
 * uninterruptible sleep ('D'), a signal pending until the child is gone, as a thread of
 * posix_spawn(3) waits for its child's exec. */
__attribute__((noinline)) void aft_test_worker_vforking(void) {
    atomic_store(&aft_g_last_tid, (uint64_t)syscall(SYS_gettid));
    atomic_fetch_add(&aft_g_workers_ready, 1);
    for (;;) {
        uint32_t ms = atomic_load(&aft_g_vfork_child_ms);
        pid_t child = vfork();
        if (child == 0) {
            struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
            syscall(SYS_nanosleep, &t, NULL);
            _exit(0);
        }
        if (child < 0) pause();
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void *aft_vforking_main(void *arg) {
    (void)arg;
    aft_name_self("vforker");
    aft_test_worker_vforking();
    return NULL;
}

static int aft_g_tracer_ready[2] = {-1, -1};

static char aft_task_state(uint64_t tid) {
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/self/task/%llu/stat", (unsigned long long)tid);
    FILE *f = fopen(path, "r");
    if (!f) return '?';
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *close = strrchr(buf, ')');
    return close && close[1] == ' ' ? close[2] : '?';
}

int aft_test_start_traced_worker(int swallow) {
    int err = aft_test_start_workers(AFT_TEST_WORKER_TRACED, 1);
    if (err != 0) return err;
    uint64_t tid = atomic_load(&aft_g_last_tid);
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* Yama: a child may trace us */
    /* A pipe per call: the tracer says it holds the thread, or dies (its end closes). */
    if (swallow && pipe(aft_g_tracer_ready) != 0) return errno;
    pid_t parent = getpid();
    pid_t tracer = fork();
    if (tracer < 0) return errno;
    if (tracer == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != parent) _exit(1);
        if (ptrace(PTRACE_SEIZE, (pid_t)tid, NULL, NULL) != 0) _exit(2);
        if (swallow) { /* runs on; a signal stops it for good (signal-delivery-stop) */
            char ok = 1;
            (void)!write(aft_g_tracer_ready[1], &ok, 1);
            for (;;) pause();
        }
        if (ptrace(PTRACE_INTERRUPT, (pid_t)tid, NULL, NULL) != 0) _exit(3);
        int status;
        waitpid((pid_t)tid, &status, __WALL);
        for (;;) pause(); /* holds it stopped until the traced process dies */
    }
    struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000 * 1000};
    if (swallow) {
        close(aft_g_tracer_ready[1]); /* a tracer that ends before it answers: read gives 0 */
        char ok = 0;
        ssize_t n = read(aft_g_tracer_ready[0], &ok, 1);
        close(aft_g_tracer_ready[0]);
        return n == 1 ? 0 : ECHILD;
    }
    for (int waited = 0; aft_task_state(tid) != 't'; waited++) {
        int status;
        if (waitpid(tracer, &status, WNOHANG) == tracer) return ECHILD;
        if (waited > 5000) return ETIMEDOUT;
        nanosleep(&ms, NULL);
    }
    return 0;
}

int aft_test_start_vforking_worker(uint32_t child_ms) {
    atomic_store(&aft_g_vfork_child_ms, child_ms);
    int target = atomic_load(&aft_g_workers_ready) + 1;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int err = pthread_create(&t, &attr, aft_vforking_main, NULL);
    pthread_attr_destroy(&attr);
    if (err != 0) return err;
    struct timespec us = {.tv_sec = 0, .tv_nsec = 50 * 1000};
    for (int waited = 0; atomic_load(&aft_g_workers_ready) < target; waited++) {
        if (waited > 100000) return ETIMEDOUT;
        nanosleep(&us, NULL);
    }
    uint64_t tid = atomic_load(&aft_g_last_tid);
    for (int waited = 0; aft_task_state(tid) != 'D'; waited++) {
        if (waited > 100000) return ETIMEDOUT;
        nanosleep(&us, NULL);
    }
    return 0;
}

/* ---- faults ---- */

static _Atomic int aft_g_fault_gate;

__attribute__((noinline)) static void aft_fault_now(void) { *(volatile int *)(uintptr_t)8 = 1; }

static _Atomic int aft_g_second_ready;

/* Waits at the gate, then until the first thread's crash handler has begun, and faults at
 * once: while that crash is being written, before the other threads are paused. */
__attribute__((noinline)) void aft_test_second_crasher(void) {
    atomic_store(&aft_g_second_ready, 1);
    while (!atomic_load(&aft_g_fault_gate)) {
    }
    while (!aft_async_crash_in_progress()) {
    }
    aft_fault_now();
}

static void *aft_second_crasher_main(void *arg) {
    (void)arg;
    aft_name_self("crasher-2");
    aft_test_second_crasher();
    return NULL;
}

/* The gate opens at the first fault of this process: a SIGSEGV handler installed before the
 * crash handler would run too late, so the first thread opens it itself just before. */
int aft_test_arm_second_crasher(void) {
    pthread_t t;
    int err = pthread_create(&t, NULL, aft_second_crasher_main, NULL);
    if (err != 0) return err;
    struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000 * 1000};
    for (int waited = 0; !atomic_load(&aft_g_second_ready); waited++) {
        if (waited > 5000) return ETIMEDOUT;
        nanosleep(&ms, NULL);
    }
    return 0;
}

void aft_test_open_crash_gate(void) { atomic_store(&aft_g_fault_gate, 1); }

__attribute__((noinline)) int aft_test_overflow(int depth) {
    volatile char pad[512];
    pad[0] = (char)depth;
    if (depth < 0) return 0; /* never: depth only grows */
    return aft_test_overflow(depth + 1) + pad[0];
}

static int aft_g_overflow_go[2] = {-1, -1};
static int aft_g_overflow_masked_ms;

/* Waits in read(2) (restarted after a handler, so it can be given an alternate stack) until
 * released, then recurses until its stack is gone. With a masked time it first blocks every
 * signal that long, as a thread does that is still starting on a loaded machine. */
static void *aft_overflow_main(void *arg) {
    (void)arg;
    aft_name_self("overflower");
    if (aft_g_overflow_masked_ms > 0) {
        sigset_t all, before;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &before);
        struct timespec t = {.tv_sec = aft_g_overflow_masked_ms / 1000,
                             .tv_nsec = (long)(aft_g_overflow_masked_ms % 1000) * 1000000L};
        while (nanosleep(&t, &t) != 0 && errno == EINTR) {
        }
        pthread_sigmask(SIG_SETMASK, &before, NULL);
    }
    char c;
    while (read(aft_g_overflow_go[0], &c, 1) < 0 && errno == EINTR) {
    }
    return (void *)(intptr_t)aft_test_overflow(0);
}

int aft_test_start_overflow_worker(int masked_ms) {
    aft_g_overflow_masked_ms = masked_ms;
    if (aft_g_overflow_go[0] < 0 && pipe(aft_g_overflow_go) != 0) return errno;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int err = pthread_create(&t, &attr, aft_overflow_main, NULL);
    pthread_attr_destroy(&attr);
    return err;
}

void aft_test_release_overflow_worker(void) {
    char c = 1;
    (void)!write(aft_g_overflow_go[1], &c, 1);
}

static void *aft_as_own_main(void *arg) {
    (void)arg; /* its mask from its first instruction: every signal blocked */
    atomic_store(&aft_g_last_tid, (uint64_t)syscall(SYS_gettid));
    char c;
    while (read(aft_g_never_fd[0], &c, 1) < 0 && errno == EINTR) {
    }
    return NULL;
}

uint64_t aft_test_start_thread_as_aftermaths(void) {
    if (aft_g_never_fd[0] < 0 && pipe(aft_g_never_fd) != 0) return 0;
    char name[16] = {0};
    prctl(PR_GET_NAME, name, 0, 0, 0);
    aft_name_self("aftermath.deliver");
    atomic_store(&aft_g_last_tid, 0);
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &before);
    pthread_t t;
    int err = pthread_create(&t, NULL, aft_as_own_main, NULL);
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    aft_name_self(name);
    if (err != 0) return 0;
    for (int i = 0; i < 2000 && atomic_load(&aft_g_last_tid) == 0; i++) usleep(1000);
    return atomic_load(&aft_g_last_tid);
}
