/*
 * memory.c: NORMAL-TIME CODE. Gives memory back to the system once start's background work
 * (the delivery of earlier reports) is done: the heap's free pages, the delivery thread's
 * stack below its last frame, and that whole stack once the thread has ended.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "CSignalShim.h"
#include "shim_internal.h"

/* The thread whose memory is to be trimmed again once it has ended, or 0. */
AFT_SMALL_STATE static _Atomic pid_t aft_g_release_after_tid;
/* A stack of its own for start's delivery thread, unmapped once the thread has ended: glibc
 * would keep one it made cached, with the pages the thread touched, for a later thread. In
 * use or not, and the thread on it once that thread's last call has asked for the release. */
AFT_SMALL_STATE static _Atomic int aft_g_own_stack_state;
AFT_SMALL_STATE static _Atomic pid_t aft_g_own_stack_tid;
AFT_SMALL_STATE static void *aft_g_own_stack;
AFT_SMALL_STATE static size_t aft_g_own_stack_size;
/* Whether the thread on that stack has given back the pages below its frame: a scratch at the
 * stack's bottom is handed out only before, when that release will take it back too. */
AFT_SMALL_STATE static _Atomic int aft_g_own_stack_released;

int aft_own_stack_attributes(pthread_attr_t *attributes) {
#ifndef __GLIBC__
    /* Other C libraries unmap an ended detached thread's stack themselves; the release below,
     * which would unmap this one, is glibc's only. */
    (void)attributes;
    return ENOTSUP;
#else
    int expected = 0;
    if (!atomic_compare_exchange_strong(&aft_g_own_stack_state, &expected, 1)) return EBUSY;
    size_t size = 0;
    pthread_attr_t defaults;
    if (pthread_attr_init(&defaults) == 0) {
        (void)pthread_attr_getstacksize(&defaults, &size);
        pthread_attr_destroy(&defaults);
    }
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (size < 256u * 1024u) size = 256u * 1024u;
    size = (size + page - 1) & ~(page - 1);
    /* Reserved, not committed: only what the thread touches is ever memory. The lowest page
     * is the guard glibc would give it. */
    void *low = mmap(NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (low == MAP_FAILED) {
        atomic_store(&aft_g_own_stack_state, 0);
        return errno;
    }
    int err = mprotect(low, page, PROT_NONE) != 0 ? errno : 0;
    if (!err) err = pthread_attr_setstack(attributes, (char *)low + page, size - page);
    if (err) {
        munmap(low, size);
        atomic_store(&aft_g_own_stack_state, 0);
        return err;
    }
    aft_g_own_stack = low;
    aft_g_own_stack_size = size;
    atomic_store(&aft_g_own_stack_released, 0);
    return 0;
#endif
}

/* The stack unmapped and free for the next delivery thread. */
static void aft_own_stack_unmap(void) {
    munmap(aft_g_own_stack, aft_g_own_stack_size);
    aft_g_own_stack = NULL;
    atomic_store(&aft_g_own_stack_state, 0);
}

void aft_own_stack_unused(void) {
    if (atomic_load(&aft_g_own_stack_state) == 1) aft_own_stack_unmap();
}

uintptr_t aft_own_stack_address(void) {
    return atomic_load(&aft_g_own_stack_state) == 1 ? (uintptr_t)aft_g_own_stack : 0;
}

static int aft_on_own_stack(void) {
    uintptr_t here = (uintptr_t)__builtin_frame_address(0), low = (uintptr_t)aft_g_own_stack;
    return atomic_load(&aft_g_own_stack_state) == 1 && here > low &&
           here < low + aft_g_own_stack_size;
}

void *aft_own_stack_scratch(size_t size) {
    if (!aft_on_own_stack() || atomic_load(&aft_g_own_stack_released)) return NULL;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t low = (uintptr_t)aft_g_own_stack + page; /* above the guard */
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    /* The caller's calls below this frame keep 256 KiB of their own: no frame reaches it. */
    if (here < low || here - low < size + 256u * 1024u) return NULL;
    return (void *)low;
}

void aft_release_free_memory(void) {
#ifdef __GLIBC__
    (void)malloc_trim(0); /* every arena, the delivery thread's included */
    /* What this thread freed last sits in its own cache (glibc's tcache) until it ends, after
     * its last call, and pins its pages: the trim is made once more when it is gone. */
    pid_t self = (pid_t)syscall(SYS_gettid);
    if (self == getpid()) return;
    /* On the delivery's own stack: it goes too, with the trim made once this thread is gone. */
    if (aft_on_own_stack()) atomic_store(&aft_g_own_stack_tid, self);
    atomic_store(&aft_g_release_after_tid, self);
#endif
}

/* Signal 0 checks that the thread exists: ESRCH once it has ended. The kernel's last write to
 * its stack (its tid cleared in the control block glibc keeps at the stack's top) came before
 * it left the group. */
static int aft_thread_ended(pid_t tid) {
    return syscall(SYS_tgkill, getpid(), tid, 0) != 0 && errno == ESRCH;
}

static void aft_unmap_ended_own_stack(void) {
    pid_t tid = atomic_load(&aft_g_own_stack_tid);
    if (tid == 0 || !aft_thread_ended(tid)) return;
    if (atomic_compare_exchange_strong(&aft_g_own_stack_tid, &tid, 0)) aft_own_stack_unmap();
}

int aft_release_memory_of_ended_thread(void) {
#ifdef __GLIBC__
    aft_unmap_ended_own_stack();
    pid_t tid = atomic_load(&aft_g_release_after_tid);
    if (tid == 0) return 0;
    /* Its tcache is freed by then, before the kernel clears the thread. */
    if (!aft_thread_ended(tid)) return 0;
    if (!atomic_compare_exchange_strong(&aft_g_release_after_tid, &tid, 0)) return 0;
    (void)malloc_trim(0);
    return 1;
#else
    return 0;
#endif
}

void aft_release_before_role(void) {
#ifdef __GLIBC__
    /* Through its address (bound when the binary was loaded): its first call in a process would
     * have the dynamic linker bind it here, its frames (the vector registers saved) a few KiB
     * deeper on a stack that then stays in use. */
    int (*volatile trim)(size_t) = malloc_trim;
    (void)trim(0);
#endif
    (void)aft_release_thread_stack_below();
}

size_t aft_release_thread_stack_below(void) {
    /* The main thread's stack is the kernel's, grown on demand: pthread_getattr_np would read
     * /proc/self/maps for it, and the app's own calls reach those pages again anyway. */
    if (syscall(SYS_gettid) == getpid()) return 0;
    void *low = NULL;
    size_t size = 0;
    if (aft_on_own_stack()) {
        /* The delivery thread's own: its bounds are known, and pthread_getattr_np's first call
         * (its allocations bound by the dynamic linker, whose frames take a few KiB) would take
         * the stack of a thread that goes on as the pinger a page deeper. */
        low = aft_g_own_stack;
        size = aft_g_own_stack_size;
        atomic_store(&aft_g_own_stack_released, 1);
    } else {
        pthread_attr_t attributes;
        if (pthread_getattr_np(pthread_self(), &attributes) != 0) return 0;
        int known = pthread_attr_getstack(&attributes, &low, &size) == 0;
        pthread_attr_destroy(&attributes);
        if (!known || low == NULL) return 0;
    }
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    /* Live: this function's frame and what is above it, and below it this function's few locals
     * and madvise's call (a few hundred bytes). From 1 KiB below the frame down, all is dead. */
    uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
    uintptr_t start = ((uintptr_t)low + page - 1) & ~(page - 1);
    if (frame < start + 2 * page) return 0;
    uintptr_t end = (frame - 1024) & ~(page - 1);
    if (end <= start || end > (uintptr_t)low + size) return 0;
    /* By system call: madvise's first call in a process would have the dynamic linker bind it
     * here, its frames (the vector registers saved) a few KiB deep. */
    if (syscall(SYS_madvise, (long)start, (long)(end - start), (long)MADV_DONTNEED) != 0) return 0;
    return end - start;
}
