/*
 * unwind_helpers.c: NORMAL-TIME CODE (never runs in a signal handler). What the unwinding
 * helpers of unwind_async.c need besides the stacks and answer buffers their first user maps
 * (aft_async_unwind_helpers_ready): the answers' first pages faulted in once libunwind is
 * loaded, and the resident helper (unwind_resident_async.c), started from a donor thread of
 * ours that then only sleeps; in a forked child, fresh buffers and no resident helper.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "CSignalShim.h"
#include "libunwind_local.h"
#include "shim_internal.h"
#include "unwind_internal.h"

#ifdef MADV_POPULATE_WRITE
#define AFT_MADV_POPULATE_WRITE MADV_POPULATE_WRITE
#else
#define AFT_MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

AFT_SMALL_STATE aft_unwind_slot aft_g_unwind_slots[AFT_UNWIND_SLOTS];

void aft_unwind_helpers_after_fork_in_child(void) {
    if (atomic_load(&aft_g_unwind_helpers_state) != AFT_HELPERS_MAPPED) {
        /* None mapped, or a thread of the parent's was mapping them: the child's first user
         * maps its own. */
        for (uint32_t i = 0; i < AFT_UNWIND_SLOTS; i++) {
            aft_g_unwind_slots[i].shared = NULL;
            aft_g_unwind_slots[i].stack_top = NULL;
        }
        atomic_store(&aft_g_unwind_helpers_state, AFT_HELPERS_UNMAPPED);
        return;
    }
    size_t page = aft_g_helper_page_size ? aft_g_helper_page_size : 4096;
    size_t shared_size = (sizeof(aft_unwind_shared) + page - 1) & ~(page - 1);
    aft_unwind_slot *first = &aft_g_unwind_slots[0];
    /* fork(2) shares a MAP_SHARED mapping with the parent: replace it in place. */
    void *fresh = mmap(first->shared, shared_size * AFT_UNWIND_SLOTS, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (fresh == MAP_FAILED) /* the frame-pointer stack only */
        for (uint32_t i = 0; i < AFT_UNWIND_SLOTS; i++) aft_g_unwind_slots[i].shared = NULL;
}

void aft_unwind_helpers_fault_in(void) {
    if (!aft_async_unwind_helpers_ready()) return;
    long page = sysconf(_SC_PAGESIZE);
    for (uint32_t i = 0; i < AFT_UNWIND_SLOTS; i++) {
        aft_unwind_slot *slot = &aft_g_unwind_slots[i];
        if (slot->shared == NULL) continue;
        /* The answer's page faulted in now (MADV_POPULATE_WRITE leaves the bytes as they are:
         * a crash's helper may already be running on them; kernels before 5.14 refuse it).
         * Not the stack: its helper serves only what the next launch cannot unwind (the
         * resident, when there is one, serves the rest), so an idle app keeps 64 KiB less for
         * a few page faults at such a crash. */
        (void)madvise(slot->shared, page > 0 ? (size_t)page : 4096, AFT_MADV_POPULATE_WRITE);
    }
}

/* ---- the resident unwinding helper and its donor thread ---- */
/* once per process (again in a forked child) */
AFT_SMALL_STATE static _Atomic int aft_g_resident_started;
AFT_SMALL_STATE static _Atomic uint32_t aft_g_resident_ready; /* futex word: the donor has tried */

/* Waits until *word is non-zero, 1 s at most; returns it. */
static uint32_t aft_wait_until_set(_Atomic uint32_t *word) {
    for (int i = 0; i < 100 && !atomic_load(word); i++) {
        struct timespec ten_ms = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};
        syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, 0u, &ten_ms, NULL, 0);
    }
    return atomic_load(word);
}

static void *aft_unwind_donor_main(void *arg) {
    (void)arg;
    /* Every signal blocked: no handler of the app's may run on the thread-local storage the
     * helper uses (the loader's recursive lock, for one, knows its owner by it). The Swift
     * backtracer, which pauses threads with signals, never meets this thread: a crash ends it
     * first (aft_async_unwind_resident_retire). */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, NULL);
    prctl(PR_SET_NAME, "aftermath.unw", 0, 0, 0);
    aft_unwind_resident *r = &aft_g_unwind_resident;
    atomic_store(&r->retire, 0);
    int pid = aft_unwind_resident_spawn();
    /* Served only once it runs in its sandbox (its warm-up first); a helper that never gets
     * there is ended. */
    if (pid > 0 && !aft_wait_until_set(&r->ready)) {
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR) {
        }
        pid = -1;
    }
    if (pid > 0) atomic_store(&r->pid, pid);
    atomic_store(&aft_g_resident_ready, 1);
    syscall(SYS_futex, (uint32_t *)&aft_g_resident_ready, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    if (pid <= 0) return NULL;
    /* From here on this thread only sleeps: its thread-local storage is the helper's, and its
     * end (the process's exit, an exec, a crash) ends the helper. */
    for (;;) {
        syscall(SYS_futex, (uint32_t *)&r->retire, FUTEX_WAIT, 0u, NULL, NULL, 0);
        if (atomic_load(&r->retire)) syscall(SYS_exit, 0L); /* raw: no cleanup on its storage */
    }
    return NULL;
}

/* Starts the resident helper (once per process) and waits, bounded, until it runs. Without it
 * (no stack, no thread, clone refused: an emulator) each request starts a helper of its own. */
void aft_unwind_resident_start(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&aft_g_resident_started, &expected, 1)) return;
    if (aft_libunwind_load() == NULL) return; /* it serves libunwind's stacks only */
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) page = 4096;
    aft_unwind_resident *r = &aft_g_unwind_resident;
    if (r->stack_top == NULL) {
        /* Its stack, above a guard page. */
        size_t one = AFT_UNWIND_HELPER_STACK + (size_t)page;
        uint8_t *stack = mmap(NULL, one, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (stack == MAP_FAILED) return;
        if (mprotect(stack, (size_t)page, PROT_NONE) != 0) {
            munmap(stack, one);
            return;
        }
        r->stack_top = stack + one; /* faulted in by its warm-up, as deep as that goes */
    }
    pthread_t donor;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    int err = aft_thread_create(&donor, &attr, aft_unwind_donor_main, NULL);
    pthread_attr_destroy(&attr);
    if (err == 0) (void)aft_wait_until_set(&aft_g_resident_ready);
}

/* In a forked child: the parent's resident helper serves the parent; the child has none. */
void aft_unwind_resident_after_fork_in_child(void) {
    atomic_store(&aft_g_unwind_resident.pid, 0);
    atomic_store(&aft_g_unwind_resident.busy, 0);
    atomic_store(&aft_g_resident_ready, 0);
    atomic_store(&aft_g_resident_started, 0);
}

/* The caller's stack at normal time: libunwind, or frame pointers once it is abandoned. */
int aft_libunwind_used(void) { return atomic_load(&aft_g_libunwind_warm) != 0; }

uint32_t aft_current_stack(uint64_t *frames, uint32_t capacity, uint32_t skip) {
    uint64_t scratch[AFT_MAX_FRAMES + AFT_UNWIND_SLACK];
    int n = 0;
    const aft_libunwind *u = atomic_load(&aft_g_libunwind_abandoned) ? NULL : aft_libunwind_load();
    unw_context_t context;
    unw_cursor_t cursor;
    if (u != NULL && AFT_UNW_GETCONTEXT(u, &context) == 0 &&
        u->init_local2(&cursor, &context, 0) == 0) {
        /* unw_step, not unw_backtrace: its tracer keeps a 256 KiB cache for every thread that
         * calls it (each thread that records a handled error), dirty until the thread ends. */
        do {
            unw_word_t ip = 0;
            if (u->get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
            scratch[n++] = (uint64_t)ip;
        } while (n < (int)(AFT_MAX_FRAMES + AFT_UNWIND_SLACK) && u->step(&cursor) > 0);
        atomic_store(&aft_g_libunwind_warm, 1);
    } else {
        /* No libunwind (not installed), or one that may hold a lock for good (a helper killed
         * at its deadline): frame pointers, frame 0 this function's own as libunwind's would
         * be. */
        aft_stack_window window;
        uint32_t truncated = 0;
        n = (int)aft_async_frame_pointer_walk(&window, (uint64_t)(uintptr_t)aft_current_stack,
                                              (uint64_t)(uintptr_t)__builtin_frame_address(0),
                                              scratch, AFT_MAX_FRAMES + AFT_UNWIND_SLACK,
                                              &truncated);
    }
    /* Frame 0 is this function: skip it too. */
    uint32_t out = 0;
    for (int i = (int)skip + 1; i < n && out < capacity; i++) frames[out++] = scratch[i];
    return out;
}
