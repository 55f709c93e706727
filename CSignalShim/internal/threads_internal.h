/*
 * threads_internal.h: the capture of every thread at a crash, shared by threads_capture.c
 * (normal time: the signal, the alternate stacks of threads that existed before start) and
 * threads_capture_async.c, threads_park_async.c (crash time: pause, record, release). Not
 * imported by Swift. All the memory the crash path uses is static (BSS): untouched, it costs no
 * resident memory.
 */
#ifndef AFT_THREADS_INTERNAL_H
#define AFT_THREADS_INTERNAL_H

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shim_internal.h"
#include "park_internal.h"
#include "swift_async_internal.h"

/* How long the crashing thread waits for the others' answers, from the first signal. */
#define AFT_THREADS_ANSWER_NS (100ull * 1000 * 1000)
/* How long the first answers are waited for before the silent threads' masks are read. */
#define AFT_THREADS_FIRST_WAIT_NS (300ull * 1000)
/* How long, from the first signal, a thread found in uninterruptible sleep is waited for: a
 * page fault on a file, a lock on the memory map, a vfork parent waiting for its child's exec
 * all take the signal on their way out; one still in it then is listed from /proc. */
#define AFT_THREADS_UNINTERRUPTIBLE_NS (50ull * 1000 * 1000)
/* How long a paused thread waits to be released before it goes on by itself. */
#define AFT_THREADS_PARK_NS (1000ull * 1000 * 1000)
/* libunwind's time for all the other threads together; frame pointers after that. */
#define AFT_THREADS_UNWIND_NS (40ull * 1000 * 1000)
#define AFT_THREADS_UNWIND_EACH_NS (10ull * 1000 * 1000)
/* Writable mappings read from /proc/self/maps, to cut each stack at its mapping's end. */
#define AFT_THREADS_MAPPINGS 4096u
/* Listings of /proc/self/task until no new thread appears. */
#define AFT_THREADS_ROUNDS 4u
/* Threads that crash while the first crash is written, remembered with their context. */
#define AFT_THREADS_ALSO_CRASHED 8u
/* The stack memory of every thread, at the caps of aftermath_format.h. */
#define AFT_THREADS_ARENA                                                                          \
    (AFT_STACK_CAP_CRASHED + (AFT_STACK_EARLY_THREADS - 1u) * AFT_STACK_CAP_EARLY +                \
     (AFT_MAX_THREADS - AFT_STACK_EARLY_THREADS) * AFT_STACK_CAP_LATE)
/* Every thread's frames: the crashing thread's (up to AFT_MAX_FRAMES), then the others'. */
/* The stack bytes the crash file's reserve holds (reserve.c): the crashing thread's whole cap,
 * a quarter of the early cap for each other early thread. */
#define AFT_THREADS_RESERVED_STACK_BYTES                                                           \
    ((uint64_t)AFT_STACK_CAP_CRASHED + (AFT_STACK_EARLY_THREADS - 1) * AFT_STACK_CAP_EARLY / 4)
#define AFT_THREADS_FRAME_CAPACITY (AFT_MAX_FRAMES + AFT_MAX_THREADS * AFT_THREAD_MAX_FRAMES)

/* aft_capture_slot.state */
#define AFT_SLOT_LISTED 0u  /* recorded from /proc only, not signalled */
#define AFT_SLOT_SENT 1u    /* signalled, no answer yet */
#define AFT_SLOT_FILLING 2u /* the thread is writing its record */
#define AFT_SLOT_PARKED 3u  /* answered: registers in the record, ucontext valid, waiting */
#define AFT_SLOT_LATE 4u    /* closed at the deadline: an answer now is ignored */
#define AFT_SLOT_EXITED 5u  /* gone during the capture: not recorded */

typedef struct aft_capture_slot {
    _Atomic uint64_t tid;
    _Atomic uint32_t state;
    int signal;     /* the signal it was sent */
    void *ucontext; /* its signal frame's context, while it waits */
    int unread;     /* signalled before /proc was read for it: it names itself in its answer */
    int waking;     /* found in uninterruptible sleep, its signal pending: waited for a while */
    uint64_t stack_offset; /* its record's stack bytes in the arena */
} aft_capture_slot;

typedef struct aft_also_crashed {
    _Atomic uint64_t tid; /* 0: free */
    _Atomic int ready;    /* ucontext and signo are written */
    void *ucontext;
    int signo;
} aft_also_crashed;

/* Laid out by what a capture touches, since each page a crash touches first costs it a fault
 * (2-3 µs here): every small field first, with the first slots in their page; the first four
 * records in a page of their own; then the arrays, each touched from its start. */
typedef struct aft_thread_capture {
    /* Set by the capturer before it opens the capture. */
    int for_hang;         /* a hang's: leaves threads a handler would wake alone, SIGPROF only
                             where nobody uses it, no stack memory, the capturer not recorded */
    int for_pool;         /* the concurrency pool's hang: its workers' answers are the record */
    uint32_t unwind_slot; /* the unwinding helper's slot (AFT_UNWIND_SLOT_*) */
    uint64_t skip_tid;    /* a thread not to record (a hang's watched thread: its own stack) */
    int spare_sleepers;   /* a crash the app may live through: sleeping threads not signalled */
    int defer_unwinding;  /* a crash whose file takes the stacks: the next launch unwinds them */
    uint64_t pid;         /* the process's id, asked once by the capturer */
    int capture_checked;  /* the capture signal's handler was asked for (info.capture_signal) */
    /* Shared with the paused threads. */
    _Atomic uint32_t generation; /* odd while a capture is open */
    _Atomic uint32_t answered;   /* futex word: answers so far */
    _Atomic uint32_t released;   /* futex word: the generation released */
    _Atomic uint32_t left;       /* futex word: paused threads that have stopped waiting */
    _Atomic uint32_t lived_on;   /* futex word: the generation whose crash was withdrawn */
    _Atomic uint32_t count;      /* slots in use */
    /* Per capture: its counts and flags, its summary. */
    uint32_t frame_count;
    uint32_t mapping_count;
    int mappings_read;  /* read once per capture, when a stack needs them */
    int stack_in_place; /* record 0's stack is not in the arena: the writer writes it from where
                           it is (its extent is the record's, its slot in the arena kept) */
    int sigprof_borrowed;
    int sigprof_left_pending; /* a thread that blocks SIGPROF was sent it: it stays ours */
    uint32_t waking;          /* slots waited for out of uninterruptible sleep */
    aft_threads_info info;
    aft_also_crashed also[AFT_THREADS_ALSO_CRASHED];
    char path[64];
    aft_capture_slot slots[AFT_MAX_THREADS];
    aft_thread records[AFT_MAX_THREADS] __attribute__((aligned(4096)));
    uint64_t frames[AFT_THREADS_FRAME_CAPACITY + AFT_UNWIND_SLACK];
    uint8_t arena[AFT_THREADS_ARENA];
    uint8_t synthetic[AFT_SYNTHETIC_CONTEXT_ROOM] __attribute__((aligned(16)));
    uint64_t mappings[AFT_THREADS_MAPPINGS][2]; /* writable mappings [start, end), in order */
    uint64_t scan[512];                         /* the 4 KiB above a stack pointer */
    aft_stack_window window;                    /* a hang's frame-pointer walks */
    aft_swift_async_store swift_async;          /* the threads' Swift async callers */
    char dirents[4096];
    char proc[4096];
} aft_thread_capture;
_Static_assert(offsetof(aft_thread_capture, slots) + 4 * sizeof(aft_capture_slot) <= 4096,
               "a capture's small fields and its first slots in its first page");
_Static_assert(offsetof(aft_thread_capture, records) % 4096 == 0 && 4 * sizeof(aft_thread) <= 4096,
               "the first four records in one page");

/* Alternate stacks for threads that existed before start: each request names a thread and a
 * stack mapped for it at normal time; the thread installs it from its own signal handler. */
#define AFT_ALTSTACK_REQUESTS 256u
#define AFT_ALTSTACK_PENDING 1u
#define AFT_ALTSTACK_ANSWERING 2u
#define AFT_ALTSTACK_GIVEN 3u
#define AFT_ALTSTACK_HAD_ONE 4u
#define AFT_ALTSTACK_FAILED 5u
#define AFT_ALTSTACK_CANCELLED 6u
typedef struct aft_altstack_request {
    _Atomic uint64_t tid;
    _Atomic uint32_t state; /* futex word: AFT_ALTSTACK_* */
    void *base;             /* the stack, above its guard page */
    size_t size;
    void *mapping; /* the whole mapping, guard page included */
    size_t mapping_length;
} aft_altstack_request;
typedef struct aft_altstack_requests {
    _Atomic int open;
    _Atomic uint32_t count;
    aft_altstack_request requests[AFT_ALTSTACK_REQUESTS];
} aft_altstack_requests;
extern aft_altstack_requests aft_g_altstack_requests;
/* In a signal handler: the stack a request holds for the calling thread goes into the handler's
 * context, which the return from the handler installs; 1 when there was a request. */
int aft_async_threads_altstack_request(void *ucontext);

/* The crash handler's capture, and the hang watchdog's (never the same memory). */
extern aft_thread_capture aft_g_threads;
extern aft_thread_capture aft_g_hang_threads;
/* The signal that pauses a thread (the hang watchdog's capture signal), 0 when none. */
extern _Atomic int aft_g_thread_capture_signal;
/* 1 once a thread has started through the interposed pthread_create (threads.c): then every
 * thread the process starts does, and gets its alternate stack as it starts. */
extern _Atomic int aft_g_pthread_create_seen;
/* The run record's updater thread (runs.c), listed at a crash by its id; 0: none. */
extern _Atomic uint64_t aft_g_run_updater_tid;
/* glibc's static TLS size (its TCB included), read at start; 0: unknown. A thread's stack ends
 * below its static TLS: on x86-64 at its thread pointer less that size. */
extern uint64_t aft_g_static_tls_size;
/* The end of the main thread's stack (the page above the program's name, the last string the
 * kernel put there), read at start; 0: unknown. The process it was read in: a child forked by
 * another thread has that thread's stack for its main thread's. */
extern uint64_t aft_g_main_stack_end;
extern uint64_t aft_g_main_stack_pid;
/* The thread pointers of the threads created after install (threads.c registers each at its
 * start and forgets it at its end): where a thread known only by /proc keeps its stack's top,
 * without a read of /proc/self/maps. */
#define AFT_KNOWN_THREADS 1024u
typedef struct aft_known_thread {
    _Atomic uint64_t tid; /* 0: free */
    _Atomic uint64_t thread_pointer;
} aft_known_thread;
/* In bss_pairs.c, used from its end (aft_known_thread_slot): the slots in use share a page
 * with the watchdog's first fields. */
extern aft_known_thread *const aft_g_known_threads_ref;
static inline aft_known_thread *aft_known_thread_slot(uint32_t i) {
    return &aft_g_known_threads_ref[AFT_KNOWN_THREADS - 1u - i];
}
/* The slots below it have been used: a lookup reads no further (the rest stays untouched). */
extern _Atomic uint32_t aft_g_known_threads_high;
/* The registered thread pointer of tid, 0 when it has none (threads_stack_async.c). */
uint64_t aft_async_known_thread_pointer(uint64_t tid);

/* ---- crash time (threads_capture_async.c, threads_park_async.c) ---- */
/* In the capture signal's handler (and SIGPROF's while it is borrowed): 1 when the signal was a
 * crash capture's or an alternate-stack request and has been handled, 0 when it is not ours. */
int aft_async_threads_on_signal(int signo, siginfo_t *info, void *ucontext);
/* Pauses and records every other thread; the crashing thread's record comes first, from ci,
 * its frames and ucontext. Fills aft_g_threads (records, frames, arena, info). With
 * defer_unwinding, the paused threads whose whole stack the file takes are left to the next
 * launch's unwinder (AFT_UNWINDER_DEFERRED). */
void aft_async_threads_capture(const aft_crash_info *ci, const void *ucontext,
                               const uint64_t *frames, uint32_t frame_count, uint32_t truncated,
                               int spare_sleepers, int defer_unwinding);
/* The steps of the capture (threads_capture_async.c): a thread's registers and floating-point
 * state from a signal context; one listing of /proc/self/task, signalling each new thread that
 * can answer (returns how many were new); the wait for answers, 100 ms at most from
 * first_signal_ns, that closes the rest. */
void aft_async_fill_from_context(aft_thread *r, const void *ucontext, uint32_t source);
/* The remembered crash of thread tid (aft_async_threads_note_crash), or NULL
 * (threads_park_async.c). */
aft_also_crashed *aft_async_also_crashed(uint64_t tid);
/* Aftermath's own threads that run the app's code (an exporter) under the app's name, so that
 * the threads that code creates are the app's: known here by id, with their own name. */
#define AFT_LENT_THREADS 4
typedef struct aft_lent_thread {
    _Atomic uint64_t tid; /* 0: free */
    char name[16];        /* its own name, written before tid */
    aft_park_note note;   /* where it hands the batch to the app's code (park_internal.h) */
} aft_lent_thread;
extern aft_lent_thread aft_g_lent_threads[AFT_LENT_THREADS];
/* Thread tid's own name while it is lent to the app's code, or NULL (threads_park_async.c). */
const char *aft_async_lent_name(uint64_t tid);
aft_park_note *aft_async_lent_note(uint64_t tid);
uint32_t aft_async_threads_list(aft_thread_capture *c, uint64_t *first_signal_ns);
/* The capture signal where our handler still has it (an app may have taken it since), 0 when
 * not: asked once per capture, by the first thread that needs it. */
int aft_async_capture_signal(aft_thread_capture *c);
void aft_async_threads_collect(aft_thread_capture *c, int capture, uint64_t first_signal_ns);
/* "/proc/self/task/<tid>/<leaf>" read into c->proc: its length, or -1; and a record from the
 * kernel's sp and pc of /proc/self/task/<tid>/syscall, with the reason it has no more
 * (threads_capture_async.c). */
ssize_t aft_async_task_file(aft_thread_capture *c, uint64_t tid, const char *leaf);
void aft_async_from_syscall_file(aft_thread_capture *c, aft_thread *r, uint32_t why);
/* Copies record index's stack memory into the arena (threads_stack_async.c); *used counts the
 * arena's bytes taken. The crashing thread's (index 0) is left where it is when its extent is
 * known (stack_in_place): the writer writes it from there, or copies it then with
 * aft_async_copy_stack_late (its bytes, 0 when none could be read; the start they were read
 * from). Whether that thread's frames can be left to the next launch. */
void aft_async_copy_stack(aft_thread_capture *c, uint32_t index, uint64_t *used);
uint64_t aft_async_copy_stack_late(aft_thread_capture *c, uint32_t index, uint64_t *start);
int aft_async_thread_unwind_deferrable(const aft_thread_capture *c, uint32_t index);
/* The signal a thread with this blocked mask can take: the capture signal, else SIGPROF,
 * borrowed for a crash's capture (threads_park_async.c), else 0. */
int aft_async_pick_signal(aft_thread_capture *c, uint64_t blocked, int capture);
/* 1 when SIGPROF's handler is the captures' own; 0 when it has its default action; else -1. */
int aft_async_sigprof_owner(void);
/* SIGPROF while the captures (a crash's, a hang's, which may overlap) borrow it: its owner's
 * action, saved by the capture that took it from the owner; the captures holding it, a bit
 * each; and whether a signal sent with it may still be pending on a thread that never
 * answered, which keeps it the captures' for good (their handler passes on the owner's own
 * ticks, and drops a late answer). */
typedef struct aft_sigprof_loan {
    struct sigaction previous;
    _Atomic uint32_t holders;
    _Atomic int stranded;
} aft_sigprof_loan;
extern aft_sigprof_loan aft_g_sigprof_loan;
/* Capture c lets SIGPROF go (pending: it may have left one on a thread): back to its owner
 * when no other capture holds it and none may be pending, and while still the captures'. */
void aft_async_sigprof_return(aft_thread_capture *c, int pending);
/* Sends slot i's thread signo and marks it sent; 0 when it could not be sent (the record then
 * says why, or the thread is gone). */
int aft_async_threads_send(aft_thread_capture *c, uint32_t i, int signo, uint64_t *first_signal_ns);
/* The same from the hang watchdog's thread while the watched thread is stuck: every thread but
 * the watched one (whose stack the hang holds) and the watchdog, into aft_g_hang_threads.
 * Threads sleeping in a call a handler would cut short (nanosleep, poll, epoll_wait, ...) are
 * not signalled: /proc's sp and pc, so that the app sees no EINTR. */
void aft_async_threads_capture_for_hang(uint64_t watched_tid, int pool);
/* Lets the paused threads of a capture go (aft_async_threads_release is the crash's); with
 * wait, until they have left our handler (20 ms at most). */
void aft_async_threads_release_capture(aft_thread_capture *c, int wait);
/* Lets the paused threads go (before the handler chains). With wait, until they have stopped
 * waiting (20 ms at most): a thread still inside our handler has its signal blocked, and the
 * Swift runtime's backtracer, which reads each thread's mask to pick the signal that pauses it,
 * would find none it can use. Without (nothing of the app's runs next: the default action ends
 * the process), at once. */
void aft_async_threads_release(int wait);
/* A thread that crashed while another's crash is written: remembered with its context, so the
 * capture records it from its own fault. */
void aft_async_threads_note_crash(int signo, void *ucontext);
/* The process lived through its crash: the threads kept from an early wake-up go on. */
void aft_async_threads_lived_on(void);
/* The process lived through its crash: forget the threads that crashed with it. */
void aft_async_threads_forget(void);

/* ---- normal time (threads_capture.c) ---- */
/* Chooses and installs the capture signal once per process (requested: 0 = choose). */
void aft_threads_prepare(int requested_signal);
/* A forked child's own /proc/self/task for its crash's listing (async-signal-safe). */
void aft_threads_after_fork_in_child(void);
/* /proc/self/task, opened at install for a crash's listing, and the process it lists (0: none):
 * small state, not the capture's, whose pages an idle app never touches. */
extern int aft_g_task_fd;
extern uint64_t aft_g_task_pid;
extern int aft_g_task_fd_read; /* read before: its offset is no longer the list's start */
/* At the install's completion: reads glibc's static TLS size (a dlsym, which start need not pay
 * for). */
void aft_threads_read_tls_size(void);
/* Gives every thread that existed before start and has no alternate stack one of its own,
 * through the capture signal; threads in a sleep a handler would cut short are asked later. */
void aft_threads_give_alternate_stacks(void);
/* Remembers the calling thread as the one whose alternate stack the install set up: the pass
 * above does not ask it again (a signal to the app's thread at every launch). Reads the main
 * thread's stack end. */
void aft_threads_note_installer(void);

#endif
