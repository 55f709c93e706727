/*
 * threads_capture.c: NORMAL-TIME CODE. What the capture of every thread at a crash needs
 * before the crash: the capture signal's handler (shared with the hang watchdog), and an
 * alternate signal stack for every thread that existed before start (threads created later get
 * theirs from threads.c), so that a stack overflow on any of them still reaches the crash
 * handler. Each such thread is sent the capture signal and installs, from its own handler, a
 * stack mapped for it here. A thread that blocks the signal gets SIGPROF while nobody uses it,
 * else keeps none; a thread in nanosleep (which a handler cuts short, whatever SA_RESTART
 * says), stopped or in uninterruptible sleep is asked again later, for half a second.
 */
#include <signal.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define AFT_HAS_SINGLE_THREADED 1
#endif

#include "dir_internal.h"
#include "threads_internal.h"
#include "watchdog_internal.h"

#define AFT_ALTSTACK_SIZE (64u * 1024u)
#define AFT_ALTSTACK_ROUNDS 5
#define AFT_ALTSTACK_ROUND_NS (100ull * 1000 * 1000)
#define AFT_ALTSTACK_FIRST_ROUND_NS (2ull * 1000 * 1000)

/* glibc's static TLS size, for the stack cut (a dlsym, off start's path). The capture's pages
 * are not faulted in ahead: a crash pays a few page faults (zero pages, about a microsecond
 * each), where every idle app would keep 28 KiB dirty for them. */
void aft_threads_read_tls_size(void) {
    /* glibc's own answer (the one its sanitizers use), found at run time: another libc has
     * none, and stacks are then cut at their mapping's end only. */
    typedef void (*tls_info_fn)(size_t *, size_t *);
    tls_info_fn info = (tls_info_fn)dlsym(RTLD_DEFAULT, "_dl_get_tls_static_info");
    if (info != NULL) {
        size_t size = 0, align = 0;
        info(&size, &align);
        aft_g_static_tls_size = size;
    }
}

/* The crash's listing of its threads reads a descriptor opened here, not the path (see
 * aft_async_threads_list): one descriptor, kept for the process's life. */
AFT_SMALL_STATE int aft_g_task_fd = -1;
AFT_SMALL_STATE uint64_t aft_g_task_pid;
AFT_SMALL_STATE int aft_g_task_fd_read;

static void aft_threads_open_task_list(void) {
    uint64_t pid = (uint64_t)getpid();
    if (aft_g_task_pid == pid) return;
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    aft_g_task_fd = fd;
    aft_g_task_fd_read = 0;
    aft_g_task_pid = fd >= 0 ? pid : 0;
}

void aft_threads_prepare(int requested_signal) {
    int signo = aft_watchdog_prepare_capture_signal(requested_signal);
    atomic_store(&aft_g_thread_capture_signal, signo);
    aft_threads_open_task_list();
}

void aft_threads_after_fork_in_child(void) {
    if (aft_g_task_pid == 0) return;
    close(aft_g_task_fd); /* the parent's threads */
    aft_g_task_pid = 0;
    aft_threads_open_task_list();
}

/* tid's status file into buf: its length, 0 when it cannot be read. */
static size_t aft_thread_status(uint64_t tid, char *buf, size_t capacity) {
    char path[64];
    aft_async_task_path(path, tid, "status");
    ssize_t n = aft_async_read_small_file(path, buf, capacity);
    return n > 0 ? (size_t)n : 0;
}

/* 1 when signo is blocked in the status's mask, or the status has none. */
static int aft_status_blocks(const char *status, size_t n, int signo) {
    uint64_t blocked = 0;
    if (n == 0 || !aft_async_status_field(status, n, "SigBlk", 1, &blocked)) return 1;
    return (blocked >> (signo - 1)) & 1u;
}

/* 1 when the status names one of Aftermath's threads: "aftermath.*", or still its creator's
 * name (a new thread has it until it names itself), which is then Aftermath's too. */
static int aft_status_ours(const char *status, size_t n) {
    static const char prefix[] = "Name:\taftermath.";
    return n >= sizeof(prefix) - 1 && memcmp(status, prefix, sizeof(prefix) - 1) == 0;
}

/* 1 when tid is not to be signalled now: stopped, in uninterruptible sleep, or in a sleep a
 * handler would cut short. Asked again later. */
static int aft_thread_sleeps(uint64_t tid, char *buf, size_t capacity) {
    char path[64];
    aft_async_task_path(path, tid, "stat");
    ssize_t n = aft_async_read_small_file(path, buf, capacity);
    char state = n > 0 ? aft_async_stat_state(buf, (size_t)n) : '?';
    if (state == 'T' || state == 't' || state == 'D' || state == 'Z')
        return 1; /* would not answer */
    aft_async_task_path(path, tid, "syscall");
    n = aft_async_read_small_file(path, buf, capacity);
    int64_t nr = -1;
    uint64_t sp = 0, pc = 0;
    if (n <= 0 || !aft_async_syscall_parse(buf, (size_t)n, &nr, &sp, &pc)) return 0;
        /* A sleep a handler would cut short (sleep() and usleep() then return early, and callers
     * rarely loop): asked again later. An event loop's poll or epoll_wait is signalled: any
     * signal of the process may cut those short, and every loop retries them on EINTR. */
#ifdef SYS_nanosleep
    if (nr == SYS_nanosleep) return 1;
#endif
    return nr == SYS_clock_nanosleep;
}

static aft_altstack_request *aft_request_for(uint64_t tid) {
    aft_altstack_requests *q = &aft_g_altstack_requests;
    uint32_t n = atomic_load(&q->count);
    for (uint32_t i = 0; i < n; i++)
        if (atomic_load(&q->requests[i].tid) == tid) return &q->requests[i];
    return NULL;
}

/* Asks tid to install a stack of its own, in the slot of its earlier request that went
 * unanswered (again) or in a new one; the request, or NULL when none was sent. */
static aft_altstack_request *aft_request_altstack(uint64_t tid, int signo,
                                                  aft_altstack_request *again) {
    aft_altstack_requests *q = &aft_g_altstack_requests;
    uint32_t index = atomic_load(&q->count);
    if (again != NULL)
        index = (uint32_t)(again - q->requests);
    else if (index >= AFT_ALTSTACK_REQUESTS)
        return NULL;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) page = 4096;
    size_t length = AFT_ALTSTACK_SIZE + (size_t)page;
    uint8_t *mem = mmap(NULL, length, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) return NULL;
    if (mprotect(mem, (size_t)page, PROT_NONE) != 0) { /* the guard page below the stack */
        munmap(mem, length);
        return NULL;
    }
    aft_altstack_request *r = &q->requests[index];
    r->mapping = mem;
    r->mapping_length = length;
    r->base = mem + page;
    r->size = AFT_ALTSTACK_SIZE;
    atomic_store(&r->state, AFT_ALTSTACK_PENDING);
    atomic_store(&r->tid, tid);
    if (again == NULL) atomic_store(&q->count, index + 1);
    /* An earlier signal still pending on the thread answers this request, and the new one
     * then finds it answered. */
    if (syscall(SYS_tgkill, (long)getpid(), (long)tid, (long)signo) != 0) {
        uint32_t pending = AFT_ALTSTACK_PENDING;
        if (atomic_compare_exchange_strong(&r->state, &pending, AFT_ALTSTACK_CANCELLED)) {
            munmap(mem, length);
            r->mapping = NULL;
        }
        return NULL;
    }
    return r;
}

/* Waits for an answer (100 ms at most); a stack that was not taken is unmapped. */
static void aft_await_altstack(aft_altstack_request *r) {
    uint64_t deadline = aft_async_now_ns(CLOCK_MONOTONIC) + 100ull * 1000 * 1000;
    for (;;) {
        uint32_t s = atomic_load(&r->state);
        if (s == AFT_ALTSTACK_PENDING || s == AFT_ALTSTACK_ANSWERING) {
            if (aft_async_now_ns(CLOCK_MONOTONIC) >= deadline) {
                uint32_t pending = AFT_ALTSTACK_PENDING;
                if (!atomic_compare_exchange_strong(&r->state, &pending, AFT_ALTSTACK_CANCELLED))
                    continue; /* answering right now */
                s = AFT_ALTSTACK_CANCELLED;
            } else {
                aft_async_futex_wait_until(&r->state, s, deadline);
                continue;
            }
        }
        if (s != AFT_ALTSTACK_GIVEN && r->mapping != NULL) {
            munmap(r->mapping, r->mapping_length);
            r->mapping = NULL;
        }
        return;
    }
}

AFT_SMALL_STATE static int aft_g_sigprof_borrowed;

static void aft_sigprof_for_requests(int signo, siginfo_t *info, void *ucontext) {
    int saved = errno;
    (void)aft_async_threads_on_signal(signo, info, ucontext); /* anything else: ignored */
    errno = saved;
}

/* Our handler on SIGPROF for the requests, when nobody handles or ignores it. */
static int aft_borrow_sigprof(void) {
    if (aft_g_sigprof_borrowed) return 1;
    struct sigaction current;
    if (sigaction(SIGPROF, NULL, &current) != 0 || (current.sa_flags & SA_SIGINFO) ||
        current.sa_handler != SIG_DFL)
        return 0;
    struct sigaction ours;
    memset(&ours, 0, sizeof(ours));
    ours.sa_sigaction = aft_sigprof_for_requests;
    ours.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&ours.sa_mask);
    if (sigaction(SIGPROF, &ours, NULL) != 0) return 0;
    aft_g_sigprof_borrowed = 1;
    return 1;
}

/* The thread that installed: aft_install gave it its alternate stack. */
AFT_SMALL_STATE static _Atomic uint64_t aft_g_installer_tid;

/* The installing thread's name: the app's code Aftermath's threads run goes under it. */
AFT_SMALL_STATE static char aft_g_installer_name[16];

/* Start's caller was the process's only thread at install: glibc's flag, cleared at the first
 * pthread_create and never set again (0 where the C library has none). */
AFT_SMALL_STATE static _Atomic int aft_g_installer_alone;

void aft_threads_note_installer(void) {
#if defined(AFT_HAS_SINGLE_THREADED)
    atomic_store(&aft_g_installer_alone, __libc_single_threaded ? 1 : 0);
#endif
    atomic_store(&aft_g_installer_tid, aft_async_gettid());
    if (prctl(PR_GET_NAME, aft_g_installer_name, 0, 0, 0) != 0) aft_g_installer_name[0] = '\0';
    aft_g_installer_name[sizeof(aft_g_installer_name) - 1] = '\0';
    /* The kernel puts the program's name last on the main thread's stack, followed by a null
     * pointer: the stack ends at the page boundary above. */
    const char *name = (const char *)(uintptr_t)getauxval(AT_EXECFN);
    if (name != NULL && aft_g_main_stack_end == 0) {
        uint64_t top = (uint64_t)(uintptr_t)name + strlen(name) + 1 + sizeof(void *);
        aft_g_main_stack_end = (top + 4095u) & ~(uint64_t)4095u;
        aft_g_main_stack_pid = (uint64_t)getpid();
    }
}

int aft_thread_take_app_name(char saved[16]) {
    static const char own[] = "aftermath.";
    if (aft_g_installer_name[0] == '\0' || prctl(PR_GET_NAME, saved, 0, 0, 0) != 0 ||
        strncmp(saved, own, sizeof(own) - 1) != 0)
        return 0;
    saved[15] = '\0';
    uint64_t tid = aft_async_gettid();
    /* Known by its id before it has the app's name: a crash's capture never pauses it (its
     * exports go on, and are acknowledged, while a crash is written). */
    for (uint32_t i = 0; i < AFT_LENT_THREADS; i++) {
        aft_lent_thread *l = &aft_g_lent_threads[i];
        uint64_t free_slot = 0; /* claimed (no thread's id), named, then published */
        if (!atomic_compare_exchange_strong(&l->tid, &free_slot, UINT64_MAX)) continue;
        memcpy(l->name, saved, sizeof(l->name));
        atomic_store(&l->tid, tid);
        if (prctl(PR_SET_NAME, aft_g_installer_name, 0, 0, 0) == 0) return 1;
        atomic_store(&l->tid, 0);
        return 0;
    }
    return 0; /* every entry taken: it keeps its own name */
}

__attribute__((noinline)) void aft_thread_note_handing_off(void) {
    aft_park_note *note = aft_async_lent_note(aft_async_gettid());
    if (note == NULL) return;
    /* The caller's stack pointer and the pc after this call: as aft_park_note_wait notes them. */
    atomic_store(&note->sp, (uint64_t)(uintptr_t)__builtin_frame_address(0) + 16u);
    atomic_store(&note->pc, (uint64_t)(uintptr_t)__builtin_return_address(0));
}

void aft_thread_restore_name(const char saved[16]) {
    prctl(PR_SET_NAME, saved, 0, 0, 0);
    uint64_t tid = aft_async_gettid();
    for (uint32_t i = 0; i < AFT_LENT_THREADS; i++) {
        if (atomic_load(&aft_g_lent_threads[i].tid) != tid) continue;
        aft_park_note_awake(&aft_g_lent_threads[i].note);
        atomic_store(&aft_g_lent_threads[i].tid, 0);
    }
}

/* The passes over the threads the last aft_threads_give_alternate_stacks made. */
AFT_SMALL_STATE static _Atomic int aft_g_altstack_rounds;

int aft_threads_alternate_stack_rounds(void) { return atomic_load(&aft_g_altstack_rounds); }

int aft_threads_alternate_stack_asked(uint64_t tid) {
    const aft_altstack_requests *q = &aft_g_altstack_requests;
    uint32_t n = atomic_load(&q->count);
    for (uint32_t i = 0; i < n && i < AFT_ALTSTACK_REQUESTS; i++)
        if (atomic_load(&q->requests[i].tid) == tid) return 1;
    return 0;
}

void aft_threads_give_alternate_stacks(void) {
    int signo = atomic_load(&aft_g_thread_capture_signal);
    int sigprof_unanswered = 0;
    if (signo <= 0) return;
    /* No thread before start's caller's install, and every one since came through the
     * interposed pthread_create (this one did), whose start gave it its stack: none to look
     * for, and /proc/self/task, the tasks' status files, not read at every launch. */
    if (atomic_load(&aft_g_installer_alone) && atomic_load(&aft_g_pthread_create_seen)) return;
    aft_altstack_requests *q = &aft_g_altstack_requests;
    /* Opened at the first request: an app whose only thread at start is start's caller never
     * touches the requests' page, which would stay dirty for good. */
    int opened = 0;
    uint64_t self = aft_async_gettid();
    char buf[4096];
    _Alignas(8) unsigned char task_buf[1024]; /* getdents64's: no DIR, no heap */
    for (int round = 0; round < AFT_ALTSTACK_ROUNDS; round++) {
        int deferred = 0;
        aft_dir_cursor tasks = {.fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC),
                                .capacity = sizeof(task_buf),
                                .buf = task_buf};
        if (tasks.fd < 0) break;
        const char *entry;
        uint64_t inode;
        uint8_t type;
        while ((entry = aft_dir_cursor_next(&tasks, &inode, &type)) != NULL) {
            char *end = NULL;
            unsigned long long tid = strtoull(entry, &end, 10);
            if (end == entry || *end != '\0' || tid == self ||
                tid == atomic_load(&aft_g_installer_tid))
                continue;
            /* Created since install: its start (threads.c) gave it one. */
            if (aft_async_known_thread_pointer(tid) != 0) continue;
            aft_altstack_request *known = aft_request_for(tid);
            if (known != NULL && atomic_load(&known->state) != AFT_ALTSTACK_CANCELLED) continue;
            /* Aftermath's own get theirs from threads.c as they start. The ones start's delivery
             * has just made, not yet run, are known by their creator's name alone: not
             * deferred, which would hold this pass a first pause for each of them. */
            size_t n = aft_thread_status(tid, buf, sizeof(buf));
            if (aft_status_ours(buf, n) || aft_async_lent_name(tid) != NULL) continue;
            int use = signo;
            if (aft_status_blocks(buf, n, signo)) {
                /* A thread created by one that blocks every asynchronous signal (a libdispatch
                 * worker) blocks ours too, but lets SIGPROF through: that one, while nobody
                 * else uses it. A thread that blocks both may be one still starting (glibc
                 * blocks every signal until its start routine runs): asked again later. */
                if (aft_status_blocks(buf, n, SIGPROF)) {
                    deferred++;
                    continue;
                }
                if (!aft_borrow_sigprof()) continue;
                use = SIGPROF;
            }
            if (aft_thread_sleeps(tid, buf, sizeof(buf))) {
                deferred++;
                continue;
            }
            /* Not answered in time (not run for 100 ms on a loaded machine): asked again. */
            if (!opened) atomic_store(&q->open, opened = 1);
            aft_altstack_request *r = aft_request_altstack(tid, use, known);
            if (r == NULL) continue;
            aft_await_altstack(r);
            if (atomic_load(&r->state) == AFT_ALTSTACK_CANCELLED) {
                deferred++;
                if (use == SIGPROF) sigprof_unanswered = 1;
            }
        }
        close(tasks.fd);
        atomic_store(&aft_g_altstack_rounds, round + 1);
        if (deferred == 0) break;
        /* A thread still starting (an app's just made: glibc blocks every signal until its
         * start routine runs) runs within the first, short pause, while this one leaves its
         * core; one asleep is asked again after the longer ones. */
        struct timespec pause = {.tv_sec = 0,
                                 .tv_nsec = round == 0 ? (long)AFT_ALTSTACK_FIRST_ROUND_NS
                                                       : (long)AFT_ALTSTACK_ROUND_NS};
        nanosleep(&pause, NULL);
    }
    if (opened) atomic_store(&q->open, 0);
    /* SIGPROF back to its default, unless a request may still be pending on a thread that
     * never answered: its default action would end the process. Ours ignores it. */
    struct sigaction now;
    if (aft_g_sigprof_borrowed && !sigprof_unanswered && sigaction(SIGPROF, NULL, &now) == 0 &&
        (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == aft_sigprof_for_requests) {
        /* Still ours: a profiler that took SIGPROF meanwhile keeps it. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGPROF, &dfl, NULL);
    }
    aft_g_sigprof_borrowed = 0;
}
