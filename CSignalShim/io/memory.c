/*
 * memory.c: NORMAL-TIME CODE. Gives the heap's free memory back to the system once start's
 * background work (the delivery of earlier reports) is done.
 */
#include <malloc.h>

#include "CSignalShim.h"

void aft_release_free_memory(void) {
#ifdef __GLIBC__
    (void)malloc_trim(0); /* every arena, the delivery thread's included */
#endif
}
