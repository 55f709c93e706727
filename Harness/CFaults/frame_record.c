/*
 * frame_record.c: NORMAL-TIME CODE, test-only. The first frame record above a stack pointer
 * (CSignalShim/unwind/unwind_walk_async.c) on a stack the test lays out in two adjacent pages,
 * the second standing in for a mapping the kernel placed just above a thread's stack (a malloc
 * arena's heap).
 */
#include "CHarnessFaults.h"
#include "shim_internal.h"
#include "unwind_internal.h"

#include <sys/mman.h>

/* An address just after a call instruction: the return address into its caller. */
static __attribute__((noinline)) uint64_t aft_test_return_address(void) {
    return (uint64_t)(uintptr_t)__builtin_extract_return_addr(__builtin_return_address(0));
}

int aft_test_frame_record_above(int decoy, int64_t *record_offset, uint64_t *frames,
                                uint32_t capacity, uint32_t *count, uint64_t *return_address) {
    if (!record_offset || !frames || !count || !return_address) return -1;
    aft_memory_reader_prepare(); /* what the walk reads through, as start opens it */
    /* The two pages, then the reader's scratch and window: each call its own (tests run at once). */
    size_t size = 8192 + 512 * sizeof(uint64_t) + sizeof(aft_stack_window);
    uint8_t *pages = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED) return -1;
    uint64_t *scratch = (uint64_t *)(void *)(pages + 8192);
    aft_stack_window *window = (aft_stack_window *)(void *)(pages + 8192 + 512 * sizeof(uint64_t));
    uint64_t ret = aft_test_return_address();
    uint64_t *stack = (uint64_t *)(void *)(pages + 0x100),
             *heap = (uint64_t *)(void *)(pages + 4096);
    uint64_t sp = (uint64_t)(uintptr_t)stack;
    if (decoy) {
        /* A pointer into the mapping above, a return address beside it; what it points at is a
         * heap's words, no record. */
        stack[2] = (uint64_t)(uintptr_t)&heap[8];
        stack[3] = ret;
        heap[8] = 0x1234;
        heap[9] = 3;
    }
    stack[8] = (uint64_t)(uintptr_t)&stack[16]; /* the first record, linked to the outermost */
    stack[9] = ret;
    stack[16] = 0;
    stack[17] = ret;
    uint64_t record = aft_async_frame_record_above(sp, scratch);
    *record_offset = record == 0 ? -1 : (int64_t)(record - sp);
    uint32_t truncated = 0;
    *count = aft_async_walk_from_sp_window(window, 0, sp, frames, capacity, &truncated);
    *return_address = ret;
    munmap(pages, size);
    return 0;
}
