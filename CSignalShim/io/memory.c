/*
 * memory.c: NORMAL-TIME CODE. Gives memory back to the system once start's background work
 * (the delivery of earlier reports) is done: the heap's free pages, and the delivery thread's
 * stack below its last frame.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "CSignalShim.h"

void aft_release_free_memory(void) {
#ifdef __GLIBC__
    (void)malloc_trim(0); /* every arena, the delivery thread's included */
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
