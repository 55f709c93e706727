/*
 * crc32.c: NORMAL-TIME CODE (never runs in a signal handler). CRC-32 for Swift and the tests, and
 * the one-time check of what crc32_async.c's fast path needs from the processor.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#if defined(__x86_64__)
#if defined(__has_include)
#if __has_include(<sys/platform/x86.h>)
#include <sys/platform/x86.h> /* glibc 2.33 and later */
#define AFT_GLIBC_CPU_FEATURES 1
#endif
#endif
#if !defined(AFT_GLIBC_CPU_FEATURES)
#include <cpuid.h>
#endif
#endif

#include "CSignalShim.h"
#include "shim_internal.h"

void aft_crc32_prepare(void) {
    if (atomic_load_explicit(&aft_g_crc_clmul, memory_order_relaxed) != 0) return;
    int has = 0;
#if defined(AFT_GLIBC_CPU_FEATURES)
    /* What the loader read at exec: the cpuid instruction itself traps to the hypervisor of a
     * virtual machine (about 13 µs each on this project's, twice for leaf 1). */
    has = CPU_FEATURE_ACTIVE(PCLMULQDQ) != 0;
#elif defined(__x86_64__)
    unsigned int eax = 0, ebx = 0, ecx = 0, edx = 0;
    has = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_PCLMUL) != 0;
#endif
    atomic_store_explicit(&aft_g_crc_clmul, has ? 1 : -1, memory_order_relaxed);
}

uint32_t aft_crc32(uint32_t crc, const void *data, size_t size) {
    aft_crc32_prepare();
    return aft_async_crc32(crc, data, size);
}

uint32_t aft_crc32_by_table(uint32_t crc, const void *data, size_t size) {
    return aft_async_crc32_portable(crc, data, size);
}

int aft_crc32_accelerated(void) {
    aft_crc32_prepare();
    return atomic_load_explicit(&aft_g_crc_clmul, memory_order_relaxed) == 1;
}
