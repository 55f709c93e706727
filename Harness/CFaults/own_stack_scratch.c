/*
 * own_stack_scratch.c: NORMAL-TIME CODE, test-only. The scratch at the bottom of start's
 * delivery thread's own stack (aft_own_stack_scratch): handed out only on that stack with room
 * below the caller and before the stack's release, and given back with the stack's pages below
 * the frame.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "CHarnessFaults.h"
#include "shim_internal.h"

#define SCRATCH_BYTES (200u * 1024u)

typedef struct scratch_check {
    int result;
} scratch_check;

/* Pages of [start, start + size) resident now. */
static int resident_pages(uintptr_t start, size_t size) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char vec[64];
    size_t pages = size / page;
    if (pages > sizeof(vec)) pages = sizeof(vec);
    if (mincore((void *)start, pages * page, vec) != 0) return -1;
    int n = 0;
    for (size_t i = 0; i < pages; i++) n += vec[i] & 1;
    return n;
}

static void *on_own_stack(void *argument) {
    scratch_check *check = argument;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t low = aft_own_stack_address();
    uint8_t *scratch = aft_own_stack_scratch(SCRATCH_BYTES);
    if (low == 0 || scratch == NULL) return (check->result = 2, NULL);
    if ((uintptr_t)scratch != low + page) return (check->result = 3, NULL);
    if (aft_own_stack_scratch(64u * 1024u * 1024u) != NULL) return (check->result = 4, NULL);
    memset(scratch, 0xa5, 16 * page); /* what a read of the images leaves */
    if (resident_pages((uintptr_t)scratch, 16 * page) != 16) return (check->result = 5, NULL);
    if (aft_release_thread_stack_below() < 16 * page) return (check->result = 6, NULL);
    if (resident_pages((uintptr_t)scratch, 16 * page) != 0) return (check->result = 7, NULL);
    /* Given back once: a later scratch (a role's images read again) would stay dirty for good. */
    if (aft_own_stack_scratch(SCRATCH_BYTES) != NULL) return (check->result = 12, NULL);
    check->result = 0;
    return NULL;
}

int aft_test_own_stack_scratch(void) {
    if (aft_own_stack_scratch(SCRATCH_BYTES) != NULL) return 1; /* not on the own stack */
    pthread_attr_t attributes;
    if (pthread_attr_init(&attributes) != 0) return 8;
    /* One own stack at a time in a process: another test's delivery thread may hold it. */
    int made = EBUSY;
    for (int i = 0; i < 500 && made == EBUSY; i++) {
        made = aft_own_stack_attributes(&attributes);
        if (made == EBUSY) usleep(10000);
    }
    if (made != 0) {
        pthread_attr_destroy(&attributes);
        return made == ENOTSUP ? -1 : 9;
    }
    scratch_check check = {.result = 10};
    pthread_t thread;
    int status = pthread_create(&thread, &attributes, on_own_stack, &check);
    pthread_attr_destroy(&attributes);
    if (status != 0) {
        aft_own_stack_unused();
        return 11;
    }
    pthread_join(thread, NULL);
    aft_own_stack_unused(); /* joined, not released: this test's, unmapped here */
    return check.result;
}
