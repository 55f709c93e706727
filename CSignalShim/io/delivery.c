/*
 * delivery.c: NORMAL-TIME CODE. One delivery of pending reports at a time in this process. A
 * lock in CSignalShim's small state, whose page start dirties anyway: a lock in a Swift global
 * dirtied a page of its own in every app, at the first delivery.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "CSignalShim.h"
#include "shim_internal.h"

AFT_SMALL_STATE static pthread_mutex_t aft_g_delivery_lock = PTHREAD_MUTEX_INITIALIZER;
/* The thread that holds it, 0 when none: a delivery asked for again from inside one (an
 * exporter that calls deliverPendingReports) is refused, where the lock would never return. */
AFT_SMALL_STATE static _Atomic pid_t aft_g_delivery_owner;

int aft_delivery_lock(void) {
    pid_t self = (pid_t)syscall(SYS_gettid);
    if (atomic_load(&aft_g_delivery_owner) == self) return EDEADLK;
    pthread_mutex_lock(&aft_g_delivery_lock);
    atomic_store(&aft_g_delivery_owner, self);
    return 0;
}

void aft_delivery_unlock(void) {
    atomic_store(&aft_g_delivery_owner, 0);
    pthread_mutex_unlock(&aft_g_delivery_lock);
}
