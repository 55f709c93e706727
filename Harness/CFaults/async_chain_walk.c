/*
 * async_chain_walk.c: NORMAL-TIME CODE, test-only. Entry points to the walk of a thread's Swift async callers
 * (CSignalShim/unwind/swift_chain_async.c) on values a test lays out, and a fault whose context
 * register and async chain are hostile.
 */
#include "CHarnessFaults.h"
#include "shim_internal.h"
#include "swift_async_internal.h"

uint64_t aft_test_swift_task_metadata(void) {
    aft_swift_async_prepare();
    return atomic_load(&aft_g_swift_async.ready) ? aft_g_swift_async.task_metadata : 0;
}

uint64_t aft_test_swift_code_address(void) {
    return (uint64_t)(uintptr_t)aft_test_swift_code_address;
}

uint32_t aft_test_swift_chain(const uint64_t *task_word, uint64_t context_register, uint64_t fp,
                              aft_swift_async_link *out, uint32_t room) {
    static uint64_t scratch[AFT_SWIFT_ASYNC_MAX_LINKS][2];
    aft_memory_reader_prepare(); /* what the walk reads through, as start opens it */
    aft_swift_async_prepare();
    if (!atomic_load(&aft_g_swift_async.ready)) return 0;
    /* The thread pointer that leads the walk to task_word. */
    uint64_t tp = (uint64_t)(uintptr_t)task_word - (uint64_t)aft_g_swift_async.tls_offset;
    return aft_async_swift_chain(
        1, tp, context_register, fp, out,
        room < AFT_SWIFT_ASYNC_MAX_LINKS ? room : AFT_SWIFT_ASYNC_MAX_LINKS, scratch);
}

/* Two contexts that lead to each other, each resuming in code: a chain that never ends. */
static uint64_t aft_g_hostile_contexts[4] __attribute__((aligned(16)));

void aft_test_hostile_async_fault(void) {
    uint64_t *c = aft_g_hostile_contexts;
    c[0] = (uint64_t)(uintptr_t)&c[2];
    c[1] = (uint64_t)(uintptr_t)aft_test_hostile_async_fault;
    c[2] = (uint64_t)(uintptr_t)&c[0];
    c[3] = (uint64_t)(uintptr_t)aft_test_hostile_async_fault;
#if defined(__x86_64__)
    __asm__ volatile("mov %0, %%r14\n\tmovq $0, (%1)"
                     :
                     : "r"(c), "r"((uint64_t)0)
                     : "r14", "memory");
#elif defined(__aarch64__)
    __asm__ volatile("mov x22, %0\n\tstr xzr, [%1]" : : "r"(c), "r"((uint64_t)0) : "x22", "memory");
#else
    *(volatile uint64_t *)(uintptr_t)0 = 0;
#endif
}
