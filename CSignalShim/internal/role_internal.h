/*
 * role_internal.h: NORMAL-TIME CODE. A role one of Aftermath's threads plays (the hang
 * watchdog's pinger, the run record's updater) that start leaves for later, to its delivery
 * thread: the thread takes it on once its delivery found nothing to send (one thread's
 * creation and end less at each launch), or makes the role's thread before a delivery that
 * may take long. A role's state word: 0 for none or a thread made for it (joined at the stop),
 * else pending, being taken, taken. Its done word is a futex the stop waits on: a taken role's
 * thread is detached and cannot be joined.
 */
#ifndef AFTERMATH_ROLE_INTERNAL_H
#define AFTERMATH_ROLE_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/prctl.h>

#include "shim_internal.h"

enum { AFT_ROLE_MADE = 0, AFT_ROLE_PENDING, AFT_ROLE_TAKING, AFT_ROLE_TAKEN };

/* The calling thread takes the pending role and runs loop until it returns (the role's stop).
 * 1 when the role was pending, 0 at once otherwise. */
static inline int aft_role_take(_Atomic uint32_t *state, _Atomic uint32_t *done,
                                void (*loop)(void)) {
    uint32_t expected = AFT_ROLE_PENDING;
    if (!atomic_compare_exchange_strong(state, &expected, AFT_ROLE_TAKING)) return 0;
    /* Cleared before the role is taken: a stop that sees it taken waits for the loop's end; one
     * that came meanwhile (the swap below fails) finds no loop to wait for. */
    atomic_store(done, 0);
    expected = AFT_ROLE_TAKING;
    if (atomic_compare_exchange_strong(state, &expected, AFT_ROLE_TAKEN)) {
        char name[16] = {0};
        (void)prctl(PR_GET_NAME, name, 0, 0, 0);
        aft_release_before_role(); /* the delivery's heap and deeper stack go back */
        loop();                    /* under the role's name */
        /* Left under its own name: the stop returns once done is set, and the thread then ends
         * a moment later, never seen as the role it no longer plays. */
        (void)prctl(PR_SET_NAME, name, 0, 0, 0);
    }
    atomic_store(done, 1);
    aft_async_futex_wake(done);
    return 1;
}

/* At the role's stop, once its loop was told to end: a pending role is cancelled, a taken one's
 * loop waited for (unless it is the caller's own). The state before: AFT_ROLE_MADE where the
 * role has a thread of its own, for the caller to join. */
static inline uint32_t aft_role_stop(_Atomic uint32_t *state, _Atomic uint32_t *done,
                                     int callers_own) {
    uint32_t before = atomic_exchange(state, AFT_ROLE_MADE);
    if ((before == AFT_ROLE_TAKING || before == AFT_ROLE_TAKEN) && !callers_own) {
        while (atomic_load(done) == 0) aft_async_futex_wait_until(done, 0, 0);
    }
    return before;
}

#endif
