/*
 * stack_paint.c: NORMAL-TIME CODE, test-only. How deep a call reaches into its caller's stack:
 * the bytes below the caller's frame are painted with a pattern first, and after the call the
 * lowest byte that no longer holds it marks the deepest point any frame reached.
 */
#include "CHarnessFaults.h"

#include <stdint.h>

#define AFT_TEST_PAINT 0xa5u
#define AFT_TEST_PAINT_MARGIN 1024u /* this function's own frame, and the call's return */

__attribute__((noinline)) uintptr_t aft_test_paint_stack(size_t size) {
    uintptr_t top =
        ((uintptr_t)__builtin_frame_address(0) - AFT_TEST_PAINT_MARGIN) & ~(uintptr_t)15;
    volatile uint8_t *p = (volatile uint8_t *)(top - size);
    for (size_t i = 0; i < size; i++) p[i] = AFT_TEST_PAINT;
    return top;
}

size_t aft_test_stack_reached(uintptr_t top, size_t size) {
    const volatile uint8_t *p = (const volatile uint8_t *)(top - size);
    size_t i = 0;
    while (i < size && p[i] == AFT_TEST_PAINT) i++;
    return size - i;
}
