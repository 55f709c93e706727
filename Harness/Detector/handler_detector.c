/*
 * handler_detector.c: NORMAL-TIME CODE, test-only, never linked into apps. An LD_PRELOAD
 * library for the crash harness: it stands in front of malloc, calloc, realloc, free, the
 * pthread mutex and rwlock calls and dl_iterate_phdr, and records every call made while the
 * calling thread runs on its alternate signal stack (sigaltstack reports SS_ONSTACK), which is
 * where the crash handler runs. A crash handler must make none of them: each can wait forever
 * on a lock a stopped thread holds. Built by scripts/harness.sh:
 *
 *   cc -shared -fPIC -o handler-detector.so Harness/Detector/handler_detector.c -ldl
 *
 * AFTERMATH_DETECTOR_LOG names the file the findings are appended to (standard error when
 * unset): one "loaded" line per process, then one line per call on the signal stack.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void __libc_free(void *ptr);

typedef int (*mutex_fn)(pthread_mutex_t *);
typedef int (*rwlock_fn)(pthread_rwlock_t *);
typedef int (*iterate_fn)(int (*)(struct dl_phdr_info *, size_t, void *), void *);

static mutex_fn real_mutex_lock, real_mutex_trylock;
static rwlock_fn real_rdlock, real_wrlock;
static iterate_fn real_dl_iterate_phdr;

static size_t detector_hex(uint64_t v, char *out) {
    static const char digits[] = "0123456789abcdef";
    char tmp[16];
    size_t n = 0;
    do {
        tmp[n++] = digits[v & 15];
        v >>= 4;
    } while (v != 0);
    out[0] = '0';
    out[1] = 'x';
    for (size_t i = 0; i < n; i++) out[2 + i] = tmp[n - 1 - i];
    return n + 2;
}

static size_t detector_dec(uint64_t v, char *out) {
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    return n;
}

/* One line to the log, with system calls only (no malloc, no stdio). */
static void detector_log(const char *what, const char *name, uint64_t caller) {
    char line[256];
    size_t n = 0;
    const char *prefix = "handler-detector: pid ";
    for (size_t i = 0; prefix[i]; i++) line[n++] = prefix[i];
    n += detector_dec((uint64_t)syscall(SYS_getpid), line + n);
    line[n++] = ' ';
    for (size_t i = 0; what[i] && n < 180; i++) line[n++] = what[i];
    if (name != NULL) {
        line[n++] = ' ';
        for (size_t i = 0; name[i] && n < 210; i++) line[n++] = name[i];
        const char *from = " from ";
        for (size_t i = 0; from[i]; i++) line[n++] = from[i];
        n += detector_hex(caller, line + n);
    }
    line[n++] = '\n';
    const char *path = getenv("AFTERMATH_DETECTOR_LOG");
    int fd = 2, opened = 0;
    if (path != NULL && path[0] != '\0') {
        fd = (int)syscall(SYS_openat, AT_FDCWD, path,
                          O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        opened = fd >= 0;
        if (!opened) fd = 2;
    }
    (void)syscall(SYS_write, fd, line, n);
    if (opened) syscall(SYS_close, fd);
}

static int on_signal_stack(void) {
    stack_t ss;
    if (syscall(SYS_sigaltstack, NULL, &ss) != 0) return 0;
    return (ss.ss_flags & SS_ONSTACK) != 0;
}

#define CHECK(name)                                                                                \
    do {                                                                                           \
        if (on_signal_stack())                                                                     \
            detector_log("called on the signal stack:", name,                                      \
                         (uint64_t)(uintptr_t)__builtin_return_address(0));                        \
    } while (0)

__attribute__((constructor)) static void detector_load(void) {
    real_mutex_lock = (mutex_fn)dlsym(RTLD_NEXT, "pthread_mutex_lock");
    real_mutex_trylock = (mutex_fn)dlsym(RTLD_NEXT, "pthread_mutex_trylock");
    real_rdlock = (rwlock_fn)dlsym(RTLD_NEXT, "pthread_rwlock_rdlock");
    real_wrlock = (rwlock_fn)dlsym(RTLD_NEXT, "pthread_rwlock_wrlock");
    real_dl_iterate_phdr = (iterate_fn)dlsym(RTLD_NEXT, "dl_iterate_phdr");
    detector_log("loaded", NULL, 0);
}

void *malloc(size_t size) {
    CHECK("malloc");
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    CHECK("calloc");
    return __libc_calloc(count, size);
}

void *realloc(void *ptr, size_t size) {
    CHECK("realloc");
    return __libc_realloc(ptr, size);
}

void free(void *ptr) {
    CHECK("free");
    __libc_free(ptr);
}

int pthread_mutex_lock(pthread_mutex_t *mutex) {
    CHECK("pthread_mutex_lock");
    if (real_mutex_lock == NULL) real_mutex_lock = (mutex_fn)dlsym(RTLD_NEXT, "pthread_mutex_lock");
    return real_mutex_lock(mutex);
}

int pthread_mutex_trylock(pthread_mutex_t *mutex) {
    CHECK("pthread_mutex_trylock");
    if (real_mutex_trylock == NULL)
        real_mutex_trylock = (mutex_fn)dlsym(RTLD_NEXT, "pthread_mutex_trylock");
    return real_mutex_trylock(mutex);
}

int pthread_rwlock_rdlock(pthread_rwlock_t *lock) {
    CHECK("pthread_rwlock_rdlock");
    if (real_rdlock == NULL) real_rdlock = (rwlock_fn)dlsym(RTLD_NEXT, "pthread_rwlock_rdlock");
    return real_rdlock(lock);
}

int pthread_rwlock_wrlock(pthread_rwlock_t *lock) {
    CHECK("pthread_rwlock_wrlock");
    if (real_wrlock == NULL) real_wrlock = (rwlock_fn)dlsym(RTLD_NEXT, "pthread_rwlock_wrlock");
    return real_wrlock(lock);
}

int dl_iterate_phdr(int (*callback)(struct dl_phdr_info *, size_t, void *), void *data) {
    CHECK("dl_iterate_phdr");
    if (real_dl_iterate_phdr == NULL)
        real_dl_iterate_phdr = (iterate_fn)dlsym(RTLD_NEXT, "dl_iterate_phdr");
    return real_dl_iterate_phdr(callback, data);
}
