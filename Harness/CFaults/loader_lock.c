/*
 * loader_lock.c: NORMAL-TIME CODE, test-only, never linked into apps. An unwinding helper cut
 * short at its deadline, and whether the loader's lock is free afterwards.
 */
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "CHarnessFaults.h"
#include "CSignalShim.h"
#include "shim_internal.h"

uint32_t aft_test_unwind_briefly(uint64_t budget_ns) {
    uint64_t frames[64];
    uint32_t unwinder = 0, truncated = 0, status = 0;
    (void)aft_async_unwind_context(NULL, frames, 64, AFT_UNWIND_SLOT_CAPTURE, budget_ns, &unwinder,
                                   &truncated, &status);
    return status;
}

static int aft_test_phdr_noop(struct dl_phdr_info *info, size_t size, void *data) {
    (void)info;
    (void)size;
    (void)data;
    return 0;
}

static atomic_int aft_g_test_phdr_done;

static void *aft_test_phdr_thread(void *arg) {
    (void)arg;
    dl_iterate_phdr(aft_test_phdr_noop, NULL);
    atomic_store(&aft_g_test_phdr_done, 1);
    return NULL;
}

int aft_test_loader_lock_free(uint32_t timeout_ms) {
    atomic_store(&aft_g_test_phdr_done, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, aft_test_phdr_thread, NULL) != 0) return -1;
    pthread_detach(t);
    for (uint32_t i = 0; i < timeout_ms; i++) {
        if (atomic_load(&aft_g_test_phdr_done)) return 1;
        usleep(1000);
    }
    return atomic_load(&aft_g_test_phdr_done);
}
