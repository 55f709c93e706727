/*
 * delivery.c: NORMAL-TIME CODE. One delivery of pending reports at a time in this process. A
 * lock in CSignalShim's small state, whose page start dirties anyway: a lock in a Swift global
 * dirtied a page of its own in every app, at the first delivery.
 */
#include <pthread.h>

#include "CSignalShim.h"
#include "shim_internal.h"

AFT_SMALL_STATE static pthread_mutex_t aft_g_delivery_lock = PTHREAD_MUTEX_INITIALIZER;

void aft_delivery_lock(void) { pthread_mutex_lock(&aft_g_delivery_lock); }

void aft_delivery_unlock(void) { pthread_mutex_unlock(&aft_g_delivery_lock); }
