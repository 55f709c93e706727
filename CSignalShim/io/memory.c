/*
 * memory.c: NORMAL-TIME CODE. Gives memory back to the system once start's background work
 * (the delivery of earlier reports) is done: the heap's free pages, and the delivery thread's
 * stack below its last frame.
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

void aft_release_free_memory(void) {
#ifdef __GLIBC__
    (void)malloc_trim(0); /* every arena, the delivery thread's included */
    /* What this thread freed last sits in its own cache (glibc's tcache) until it ends, after
     * its last call, and pins its pages: the trim is made once more when it is gone. */
    pid_t self = (pid_t)syscall(SYS_gettid);
    if (self != getpid()) atomic_store(&aft_g_release_after_tid, self);
#endif
}

int aft_release_memory_of_ended_thread(void) {
#ifdef __GLIBC__
    pid_t tid = atomic_load(&aft_g_release_after_tid);
    if (tid == 0) return 0;
    /* Signal 0 checks that the thread exists: ESRCH once it has ended (its tcache is freed by
     * then, before the kernel clears the thread). */
    if (syscall(SYS_tgkill, getpid(), tid, 0) == 0 || errno != ESRCH) return 0;
    if (!atomic_compare_exchange_strong(&aft_g_release_after_tid, &tid, 0)) return 0;
    (void)malloc_trim(0);
    return 1;
#else
    return 0;
#endif
}

size_t aft_release_thread_stack_below(void) {
    /* The main thread's stack is the kernel's, grown on demand: pthread_getattr_np would read
     * /proc/self/maps for it, and the app's own calls reach those pages again anyway. */
    if (syscall(SYS_gettid) == getpid()) return 0;
    pthread_attr_t attributes;
    if (pthread_getattr_np(pthread_self(), &attributes) != 0) return 0;
    void *low = NULL;
    size_t size = 0;
    int known = pthread_attr_getstack(&attributes, &low, &size) == 0;
    pthread_attr_destroy(&attributes);
    if (!known || low == NULL) return 0;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    /* Live: this function's frame and what is above it, and below it this function's few locals
     * and madvise's call (a few hundred bytes). From 1 KiB below the frame down, all is dead. */
    uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
    uintptr_t start = ((uintptr_t)low + page - 1) & ~(page - 1);
    if (frame < start + 2 * page) return 0;
    uintptr_t end = (frame - 1024) & ~(page - 1);
    if (end <= start || end > (uintptr_t)low + size) return 0;
    if (madvise((void *)start, end - start, MADV_DONTNEED) != 0) return 0;
    return end - start;
}
