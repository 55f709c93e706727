/*
 * faults.c: NORMAL-TIME CODE, test-only, never linked into apps. Real faults that Swift cannot
 * write, for the harnesses, the tests and the benchmark, and the crash writer's fault hook.
 */
#include "CHarnessFaults.h"

/* Overrides the weak reference in CSignalShim's writer (see shim_internal.h). */
volatile uintptr_t aft_g_test_fault_in_writer;

void aft_test_fault_inside_handler(int enabled) { aft_g_test_fault_in_writer = enabled ? 16 : 0; }

int32_t aft_test_divide(int32_t a, int32_t b) {
    /* volatile: the compiler must emit idiv, which raises SIGFPE (FPE_INTDIV) for b == 0. */
    volatile int32_t divisor = b;
    return a / divisor;
}

void aft_test_illegal_instruction(void) {
#if defined(__x86_64__)
    __asm__ volatile("ud2");
#elif defined(__aarch64__)
    __asm__ volatile(".inst 0x00000000"); /* permanently undefined: SIGILL */
#else
    __builtin_trap();
#endif
}

void aft_test_breakpoint(void) {
#if defined(__x86_64__)
    __asm__ volatile("int3");
#elif defined(__aarch64__)
    __asm__ volatile("brk #0");
#else
    __builtin_trap();
#endif
}
