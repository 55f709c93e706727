/*
 * threads.c: NORMAL-TIME CODE. Gives every thread created after aft_install an alternate
 * signal stack, so a stack overflow on any thread still reaches the crash handler (without one
 * the kernel cannot deliver SIGSEGV on the exhausted stack and the process dies unreported).
 * pthread_create is interposed: this definition lands in the executable's dynamic symbol table,
 * so libdispatch, Foundation and the app's own threads all come through here. The real
 * function is found with dlsym(RTLD_NEXT), or ThreadSanitizer's interceptor when present.
 * The stack is unmapped by a thread-specific-data destructor when the thread ends.
 */
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "CSignalShim.h"
#include "shim_internal.h"
#include "threads_internal.h"

AFT_SMALL_STATE _Atomic uint32_t aft_g_known_threads_high;

typedef int (*aft_pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                                     void *);

/* ThreadSanitizer's own interceptor, when the process runs under TSan. */
extern int __interceptor_pthread_create(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                                        void *) __attribute__((weak));

AFT_SMALL_STATE _Atomic int aft_g_thread_stacks_enabled;
AFT_SMALL_STATE static _Atomic(aft_pthread_create_fn) aft_real_pthread_create;
AFT_SMALL_STATE static pthread_key_t aft_stack_key;
AFT_SMALL_STATE static pthread_once_t aft_stack_key_once = PTHREAD_ONCE_INIT;

typedef struct aft_thread_start {
    void *(*start)(void *);
    void *arg;
} aft_thread_start;

typedef struct aft_owned_stack {
    void *mapping;
    size_t length;
    aft_known_thread *known; /* this thread's entry, or NULL */
} aft_owned_stack;

/* The calling thread's entry in aft_g_known_threads, or NULL when the table is full. */
static aft_known_thread *aft_register_thread(void) {
    uint64_t tid = (uint64_t)aft_async_gettid(), tp = aft_async_arch_thread_pointer();
    if (tp == 0) return NULL;
    for (uint32_t i = 0; i < AFT_KNOWN_THREADS; i++) {
        uint64_t free_slot = 0;
        aft_known_thread *k = aft_known_thread_slot(i);
        if (atomic_load(&k->tid) != 0) continue;
        /* Raised first: a lookup scans below it, and may pass a slot that stays free. */
        uint32_t high = atomic_load(&aft_g_known_threads_high);
        while (high < i + 1 &&
               !atomic_compare_exchange_weak(&aft_g_known_threads_high, &high, i + 1)) {
        }
        atomic_store(&k->thread_pointer, tp);
        if (atomic_compare_exchange_strong(&k->tid, &free_slot, tid)) return k;
    }
    return NULL;
}

/* The thread's own, in its thread-local storage: no malloc in the new thread, whose first one
 * would give it a malloc arena of its own (Aftermath's C threads never allocate otherwise). */
static _Thread_local aft_owned_stack aft_t_owned;

static void aft_release_stack(void *value) {
    aft_owned_stack *owned = value;
    if (!owned) return;
    if (owned->known != NULL) atomic_store(&owned->known->tid, 0);
    stack_t current;
    if (sigaltstack(NULL, &current) == 0 && !(current.ss_flags & SS_ONSTACK)) {
        stack_t off = {.ss_flags = SS_DISABLE};
        sigaltstack(&off, NULL);
        munmap(owned->mapping, owned->length);
    }
    owned->mapping = NULL;
}

static void aft_make_stack_key(void) { pthread_key_create(&aft_stack_key, aft_release_stack); }

/* A new thread's start routine and argument, handed over in one of these slots: the new thread
 * frees nothing (its first free or malloc would give it a malloc arena of its own, 4 KiB dirty
 * and a 128 MiB reservation, which Aftermath's C threads never need). malloc past them. */
#define AFT_START_SLOTS 64u
AFT_SMALL_STATE static aft_thread_start aft_g_start_slots[AFT_START_SLOTS];
AFT_SMALL_STATE static _Atomic int aft_g_start_slot_used[AFT_START_SLOTS];

static aft_thread_start *aft_start_box(void) {
    for (uint32_t i = 0; i < AFT_START_SLOTS; i++) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&aft_g_start_slot_used[i], &expected, 1))
            return &aft_g_start_slots[i];
    }
    return malloc(sizeof(aft_thread_start));
}

static void aft_start_unbox(aft_thread_start *box) {
    if (box >= aft_g_start_slots && box < aft_g_start_slots + AFT_START_SLOTS)
        atomic_store(&aft_g_start_slot_used[box - aft_g_start_slots], 0);
    else
        free(box);
}

/* Defined in install.c: maps and installs an alternate stack; reports the mapping it made. */
int aft_prepare_thread_mapping(void **mapping, size_t *length);

static void *aft_thread_trampoline(void *p) {
    aft_thread_start start = *(aft_thread_start *)p;
    aft_start_unbox(p);
    void *mapping = NULL;
    size_t length = 0;
    if (aft_prepare_thread_mapping(&mapping, &length) == 0 && mapping != NULL) {
        aft_owned_stack *owned = &aft_t_owned;
        owned->mapping = mapping;
        owned->length = length;
        owned->known = aft_register_thread();
        pthread_once(&aft_stack_key_once, aft_make_stack_key);
        if (pthread_setspecific(aft_stack_key, owned) != 0 && owned->known != NULL)
            atomic_store(&owned->known->tid, 0);
    }
    return start.start(start.arg);
}

static aft_pthread_create_fn aft_resolve_pthread_create(void) {
    aft_pthread_create_fn real = atomic_load(&aft_real_pthread_create);
    if (real) return real;
    if (__interceptor_pthread_create) {
        real = __interceptor_pthread_create;
    } else {
        real = (aft_pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
    }
    atomic_store(&aft_real_pthread_create, real);
    return real;
}

AFT_SMALL_STATE _Atomic int aft_g_pthread_create_seen;
AFT_SMALL_STATE _Atomic int aft_g_dispatch_thread_seen;

/* The path of the loaded object address is in ("" for the executable), or NULL. glibc 2.35's
 * _dl_find_object finds it in the loader's sorted table; dladdr would also scan the object's
 * whole symbol table for the nearest symbol (a Swift executable's hundreds, at every thread
 * the app starts until libdispatch's first). */
static const char *aft_object_path(void *address) {
#if defined(DLFO_STRUCT_HAS_EH_DBASE)
    struct dl_find_object found;
    if (_dl_find_object(address, &found) == 0 && found.dlfo_link_map != NULL)
        return found.dlfo_link_map->l_name;
    return NULL;
#else
    Dl_info info;
    return dladdr(address, &info) != 0 ? info.dli_fname : NULL;
#endif
}

/* Notes the first thread libdispatch starts (a worker of its root queues, which the Swift
 * concurrency pool runs on): until one exists there is no pool to watch, and its probe waits.
 * Then the probe goes at once, before the work that started the thread can starve the pool. */
static void aft_note_thread_start(void *(*start)(void *)) {
    atomic_store(&aft_g_pthread_create_seen, 1);
    if (atomic_load(&aft_g_dispatch_thread_seen)) return;
    void *address;
    memcpy(&address, &start, sizeof(address)); /* a function's address, as the loader takes it */
    const char *path = aft_object_path(address);
    if (path == NULL) return;
    const char *base = strrchr(path, '/');
    base = base != NULL ? base + 1 : path;
    if (strncmp(base, "libdispatch.so", 14) != 0) return;
    if (!atomic_exchange(&aft_g_dispatch_thread_seen, 1)) aft_watch_pool_appeared();
}

int aft_concurrency_pool_in_use(void) {
    /* Without this interposer in the path (no thread of Aftermath's came through it), the
     * starts cannot be seen: in use, as far as anyone can tell. */
    return atomic_load(&aft_g_dispatch_thread_seen) || !atomic_load(&aft_g_pthread_create_seen);
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                   void *arg) {
    aft_pthread_create_fn real = aft_resolve_pthread_create();
    if (!real) return EAGAIN;
    aft_note_thread_start(start);
    if (!atomic_load(&aft_g_thread_stacks_enabled)) return real(thread, attr, start, arg);
    aft_thread_start *boxed = aft_start_box();
    if (!boxed) return real(thread, attr, start, arg);
    boxed->start = start;
    boxed->arg = arg;
    int rc = real(thread, attr, aft_thread_trampoline, boxed);
    if (rc != 0) aft_start_unbox(boxed);
    return rc;
}

void aft_set_thread_name(const char *name) {
    char buf[16];
    size_t n = name ? strnlen(name, sizeof(buf) - 1) : 0;
    memcpy(buf, name ? name : "", n);
    buf[n] = '\0';
    prctl(PR_SET_NAME, buf, 0, 0, 0);
}
