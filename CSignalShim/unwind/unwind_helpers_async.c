/*
 * unwind_helpers_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). The unwinding helpers' stacks and answer buffers, mapped by their first
 * user: a crash's handler, a hang's capture, or libunwind's load (unwind_async.c, unwind_helpers.c).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim_internal.h"
#include "unwind_internal.h"

AFT_SMALL_STATE _Atomic int aft_g_unwind_helpers_state;
AFT_SMALL_STATE size_t aft_g_helper_page_size;

/* One mapping for every slot's stack, a guard page below each, and one shared mapping for their
 * answers, made by the first user: a start no longer pays their four system calls and shared
 * memory object (16-31 µs here), and an app that never crashes, hangs or records an error never
 * has them. By raw system calls (no binding, no errno left changed): a crash's handler may be
 * the first user. */
int aft_async_unwind_helpers_ready(void) {
    int state = atomic_load(&aft_g_unwind_helpers_state);
    if (state == AFT_HELPERS_MAPPED) return 1;
    int expected = AFT_HELPERS_UNMAPPED;
    if (state != AFT_HELPERS_UNMAPPED ||
        !atomic_compare_exchange_strong(&aft_g_unwind_helpers_state, &expected,
                                        AFT_HELPERS_MAPPING))
        return atomic_load(&aft_g_unwind_helpers_state) == AFT_HELPERS_MAPPED;
    int saved_errno = errno;
    size_t page = aft_g_helper_page_size ? aft_g_helper_page_size : 4096;
    size_t shared_size = (sizeof(aft_unwind_shared) + page - 1) & ~(page - 1);
    size_t one_stack = AFT_UNWIND_HELPER_STACK + page;
    size_t stacks_size = one_stack * AFT_UNWIND_SLOTS;
    long stacks = syscall(SYS_mmap, NULL, stacks_size, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    long shared = -1;
    int ok = stacks != -1;
    for (uint32_t i = 0; ok && i < AFT_UNWIND_SLOTS; i++)
        ok = syscall(SYS_mprotect, (uint8_t *)stacks + one_stack * i, page, PROT_NONE) == 0;
    if (ok) {
        shared = syscall(SYS_mmap, NULL, shared_size * AFT_UNWIND_SLOTS, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        ok = shared != -1;
    }
    if (!ok) {
        if (stacks != -1) syscall(SYS_munmap, stacks, stacks_size);
        errno = saved_errno;
        atomic_store(&aft_g_unwind_helpers_state, AFT_HELPERS_UNMAPPED); /* the next use tries */
        return 0;
    }
    for (uint32_t i = 0; i < AFT_UNWIND_SLOTS; i++) {
        aft_unwind_slot *slot = &aft_g_unwind_slots[i];
        /* The stack grows down from its top, 16-byte aligned; the top first: a helper checks
         * its slot's stack, then its buffer. */
        slot->stack_top = (uint8_t *)stacks + one_stack * i + one_stack;
        slot->shared = (aft_unwind_shared *)(void *)((uint8_t *)shared + shared_size * i);
    }
    errno = saved_errno;
    atomic_store(&aft_g_unwind_helpers_state, AFT_HELPERS_MAPPED);
    return 1;
}
