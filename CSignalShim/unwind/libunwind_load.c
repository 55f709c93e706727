/*
 * libunwind_load.c: NORMAL-TIME CODE, but for aft_async_libunwind and
 * aft_async_libunwind_request, which only load, store and wait on a futex word. libunwind's
 * local interface through dlopen at its first use (libunwind_local.h): record(error:) on the
 * caller's thread, the resident helper's start, a hang's first capture by the pinger thread
 * (the watchdog itself never loads: the hung thread may hold the loader's lock).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "CSignalShim.h"
#include "libunwind_local.h"
#include "shim_internal.h"
#include "unwind_internal.h"
#include "watchdog_internal.h"

#define AFT_STR_(x) #x
#define AFT_STR(x) AFT_STR_(x) /* the name after expansion: unw_step -> _ULx86_64_step */

enum { AFT_LIBUNWIND_UNTRIED = 0, AFT_LIBUNWIND_LOADED = 1, AFT_LIBUNWIND_FAILED = 2 };

AFT_SMALL_STATE static aft_libunwind aft_g_libunwind_table;
AFT_SMALL_STATE static _Atomic uint32_t aft_g_libunwind_state; /* futex word: AFT_LIBUNWIND_* */
AFT_SMALL_STATE static pthread_mutex_t aft_g_libunwind_lock = PTHREAD_MUTEX_INITIALIZER;
AFT_SMALL_STATE static pthread_once_t aft_g_libunwind_atfork_once = PTHREAD_ONCE_INIT;

/* A child forked while another thread loaded: that thread is not in the child. */
static void aft_libunwind_after_fork_in_child(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    aft_g_libunwind_lock = fresh;
}

static void aft_libunwind_register_atfork(void) {
    pthread_atfork(NULL, NULL, aft_libunwind_after_fork_in_child);
}

const aft_libunwind *aft_async_libunwind(void) {
    return atomic_load(&aft_g_libunwind_state) == AFT_LIBUNWIND_LOADED ? &aft_g_libunwind_table
                                                                       : NULL;
}

static int aft_libunwind_fill(void *handle, aft_libunwind *t) {
    *(void **)&t->init_local2 = dlsym(handle, AFT_STR(unw_init_local2));
    *(void **)&t->step = dlsym(handle, AFT_STR(unw_step));
    *(void **)&t->get_reg = dlsym(handle, AFT_STR(unw_get_reg));
    int ok = t->init_local2 != NULL && t->step != NULL && t->get_reg != NULL;
#if defined(__x86_64__)
    *(void **)&t->getcontext = dlsym(handle, AFT_STR(unw_tdep_getcontext));
    ok = ok && t->getcontext != NULL;
#endif
    return ok;
}

const aft_libunwind *aft_libunwind_load(void) {
    uint32_t state = atomic_load(&aft_g_libunwind_state);
    if (state != AFT_LIBUNWIND_UNTRIED) return aft_async_libunwind();
    pthread_once(&aft_g_libunwind_atfork_once, aft_libunwind_register_atfork);
    pthread_mutex_lock(&aft_g_libunwind_lock);
    if (atomic_load(&aft_g_libunwind_state) == AFT_LIBUNWIND_UNTRIED) {
        /* The runtime package's name (Debian: libunwind8), else the development link. */
        void *handle = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
        if (handle == NULL) handle = dlopen("libunwind.so", RTLD_NOW | RTLD_LOCAL);
        int ok = handle != NULL && aft_libunwind_fill(handle, &aft_g_libunwind_table);
        if (!ok && handle != NULL) dlclose(handle);
        /* The helpers' answer pages, faulted in by their first user rather than by every app
         * at start: a crash's helper takes the fault itself. */
        if (ok) aft_unwind_helpers_fault_in();
        if (handle != NULL) aft_install_images_changed(); /* read again at the next sample */
        /* Kept open for good when loaded: helpers that share our memory call into it. */
        atomic_store(&aft_g_libunwind_state, ok ? AFT_LIBUNWIND_LOADED : AFT_LIBUNWIND_FAILED);
        aft_async_futex_wake(&aft_g_libunwind_state);
    }
    pthread_mutex_unlock(&aft_g_libunwind_lock);
    return aft_async_libunwind();
}

const aft_libunwind *aft_async_libunwind_request(uint64_t wait_ns) {
    if (atomic_load(&aft_g_libunwind_state) != AFT_LIBUNWIND_UNTRIED) return aft_async_libunwind();
    if (!aft_watchdog_request_libunwind(&aft_g_watchdog)) return NULL; /* no pinger to ask */
    uint64_t deadline = aft_async_now_ns(CLOCK_MONOTONIC) + wait_ns;
    while (atomic_load(&aft_g_libunwind_state) == AFT_LIBUNWIND_UNTRIED &&
           aft_async_now_ns(CLOCK_MONOTONIC) < deadline)
        aft_async_futex_wait_until(&aft_g_libunwind_state, AFT_LIBUNWIND_UNTRIED, deadline);
    return aft_async_libunwind();
}

int aft_libunwind_preload(void) { return aft_libunwind_load() != NULL; }
