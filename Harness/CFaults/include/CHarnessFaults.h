/*
 * CHarnessFaults: real faults for the harnesses, the tests and the benchmark, and entry points
 * into CSignalShim's internals for the tests. Test-only: no product links this target.
 */
#ifndef CHARNESSFAULTS_H
#define CHARNESSFAULTS_H

#include <stddef.h>
#include <stdint.h>

/* Integer division through the CPU's divide instruction: SIGFPE (FPE_INTDIV) when b == 0. */
int32_t aft_test_divide(int32_t a, int32_t b);
/* Executes an undefined instruction: SIGILL (ILL_ILLOPN). */
void aft_test_illegal_instruction(void);
/* Executes a breakpoint instruction: SIGTRAP. */
void aft_test_breakpoint(void);
/* Sends signo to the process's main thread (tgkill), whichever thread calls: 0 or -1. */
int aft_test_signal_main_thread(int signo);
/* Unwinds the caller through an unwinding helper given budget_ns: its AFT_UNWIND_STATUS_*. */
uint32_t aft_test_unwind_briefly(uint64_t budget_ns);
/* 1 when another thread gets through dl_iterate_phdr (the loader's lock) within timeout_ms. */
int aft_test_loader_lock_free(uint32_t timeout_ms);
/* Makes every later hang capture's handler sleep delay_ns once it has taken the request (0:
 * none): a handler still running when the watchdog has moved on. */
void aft_test_slow_hang_captures(uint64_t delay_ns);
/* Stall the calling thread for ms milliseconds in functions whose names a hang's stack shows:
 * spinning in user code (main), or blocked in read(2) of a timer (worker). */
void aft_test_stall_in_main_function(uint32_t ms);
void aft_test_stall_in_worker_function(uint32_t ms);
/* Makes the crash writer itself fault (a store to address 16) after its first flush. */
void aft_test_fault_inside_handler(int enabled);
/* Non-zero: the crash handler unwinds the crashing thread itself instead of leaving it to the
 * next launch. */
void aft_test_unwind_in_handler(int enabled);
/* Makes every unwinding helper (the resident one included) fault (a store to address 16) at the
 * start of its next request. */
void aft_test_fault_in_unwinding_helper(int enabled);
/* How the last unwinding helper that was reaped ended: its waitpid status, -1 when none was. */
int32_t aft_test_last_unwinding_helper_status(void);
/* The exit status of a helper that faulted with signo (its handler's _exit). */
int32_t aft_test_unwinding_helper_fault_exit(int32_t signo);
/* Installs a seccomp filter on the calling process that refuses process_vm_readv and ptrace, as
 * hardened services and containers do: kill != 0 kills the process (SECCOMP_RET_KILL_PROCESS),
 * else EPERM. Other system calls are allowed. Irreversible; for child processes of tests. Returns 0 or errno. */
int aft_test_refuse_process_vm_readv(int kill);
/* Moves the calling process into its own mount namespace with an empty tmpfs on /proc, as in
 * sandboxes without /proc. Needs root; for child processes of tests. Returns 0 or errno. */
int aft_test_hide_proc(void);
/* Installs an app's handler for signo (slot 0-2: three distinct functions) that calls the
 * handler it replaced, with NULL siginfo and context when null_arguments is non-zero, or
 * restores the default action and returns. Returns 0 or errno. */
int aft_test_install_chaining_handler(int slot, int signo, int null_arguments);

/* Starts a thread that stays inside a dl_iterate_phdr callback for good, holding the loader's
 * lock, as a thread does that is stopped there when another crashes. Returns once the lock is
 * held: 0, or errno. */
int aft_test_hold_loader_lock(void);
/* The same for ms milliseconds only, then the lock is released and the thread ends. */
int aft_test_hold_loader_lock_for(uint32_t ms);

/* Workers for the all-thread scenarios (workers.c). */
#define AFT_TEST_WORKER_PARKED 1 /* "worker-<i>", blocked in aft_test_worker_parked_<i % 8> */
#define AFT_TEST_WORKER_BLOCKS_SIGNALS 2 /* "blocker": every signal blocked, then blocked in read */
#define AFT_TEST_WORKER_SPINNING 3       /* "spinner": a busy loop in user code */
#define AFT_TEST_WORKER_TRACED 4         /* "traced" */
#define AFT_TEST_WORKER_SIGPROF_ONLY 5   /* "dispatch-like": every signal blocked but SIGPROF */
/* Starts count workers of a kind; returns once each is in its function: 0, or errno. */
int aft_test_start_workers(int kind, int count);
/* Starts a worker ("traced") and a tracer process that holds it until this process dies: with
 * swallow == 0 stopped (ptrace, state 't'); else running, until a signal stops it for good (the
 * tracer never lets a signal through): a thread that never answers. 0, or errno. */
int aft_test_start_traced_worker(int swallow);
/* Starts a worker ("vforker") that vforks in a loop, each child asleep child_ms before it
 * exits, and returns once the worker waits for a child in uninterruptible sleep ('D'): 0, or
 * errno. */
int aft_test_start_vforking_worker(uint32_t child_ms);
/* Starts a second thread ("crasher-2") that waits at a gate; once aft_test_open_crash_gate is
 * called it faults (a store through address 8) as soon as the first crash handler has begun.
 * 0, or errno. */
int aft_test_arm_second_crasher(void);
void aft_test_open_crash_gate(void);
/* A worker ("overflower") that waits; once released it recurses until its stack overflows. */
int aft_test_start_overflow_worker(int masked_ms);
void aft_test_release_overflow_worker(void);
/* A thread made by one named "aftermath.deliver", whose name it keeps, blocking every signal
 * and waiting in read(2) for good: as one of Aftermath's own threads just made, before it runs
 * and names itself. Its id, or 0. */
uint64_t aft_test_start_thread_as_aftermaths(void);
/* Recurses without end (512 bytes a frame). */
int aft_test_overflow(int depth);

/* The watchdog's /proc parsers (proc_parse_async.c), for the tests (proc_parse.c). */
/* Parses the state letter of a /proc/<pid>/task/<tid>/stat text ('?' when malformed). */
char aft_proc_stat_state(const char *text, size_t length);
/* Parses a /proc/.../syscall text: returns 1 and sets nr (-1 = blocked outside a syscall),
 * sp and pc; returns 0 for "running" or malformed text. */
int aft_proc_syscall_parse(const char *text, size_t length, int64_t *nr, uint64_t *sp,
                           uint64_t *pc);
/* 1 when a thread blocked in syscall nr would see EINTR if a signal handler ran. */
int aft_syscall_interrupted_by_handler(int64_t nr);
/* The TracerPid value of a /proc/<pid>/status text (0 when absent or malformed). */
int64_t aft_proc_status_tracer(const char *text, size_t length);
/* Whether signal signo is set in the SigBlk mask of a /proc/.../status text (-1: no SigBlk). */
int aft_proc_status_blocks(const char *text, size_t length, int signo);

/* The watchdog's hang decision (aft_async_hang_decide), for the tests (hang_decide.c). */
#define AFT_TEST_HANG_OFF 0u    /* detection off: not armed, paused or in the background */
#define AFT_TEST_HANG_ALIVE 1u  /* silent for less than the threshold */
#define AFT_TEST_HANG_IGNORE 2u /* silent past it, but held by a crash, debugger or SIGSTOP */
#define AFT_TEST_HANG_HANG 3u   /* hung */
/* The verdict for these facts: silence since the last sign of life, the threshold, whether
 * detection is armed, the pause depth, foreground, a crash in progress, a tracer, and the
 * watched thread's /proc state letter. */
uint32_t aft_hang_decide(uint64_t silent_ns, uint64_t threshold_ns, int32_t armed,
                         int32_t pause_depth, int32_t foreground, int32_t crash_in_progress,
                         int32_t traced, char thread_state);

/* A real snapshot of live threads for the minidump tests (thread_snapshot.c). */
#define AFT_TEST_SNAPSHOT_STACK (64u * 1024u) /* stack bytes kept per thread */
typedef struct {
    int32_t signal;
    int32_t code;
    uint64_t address;
    uint64_t thread_id;
} aft_test_snapshot_fault;
/* Starts `parked` threads named "md-alpha" and "md-beta" by turns, parked in
 * aft_test_parked_in_alpha or aft_test_parked_in_beta, records each from its own signal frame
 * (a real-time signal no one handles); one more, "md-blocked", blocks every signal and is
 * recorded from /proc/self/task/<tid>/syscall (sp and pc); one more "md-alpha"/"md-beta" thread
 * is listed without a context; then "md-crasher" writes to address 0x18 in
 * aft_test_crash_in_named_function (SIGSEGV, SEGV_MAPERR) and is recorded from its fault's
 * signal frame. records: an aft_thread array of capacity (>= parked + 3), the crasher first;
 * stacks: capacity * AFT_TEST_SNAPSHOT_STACK bytes, record i's stack at i * that. All threads
 * have ended on return. Returns the number of records, or -errno. */
int aft_test_thread_snapshot(uint32_t parked, void *records, uint32_t capacity, uint8_t *stacks,
                             aft_test_snapshot_fault *fault);

/* An event loop as SwiftNIO's (event_loop.c): a thread named name (at most 15 bytes) in
 * epoll_wait on an eventfd, running the jobs execute queues. Returns the loop, or -1. */
int aft_test_loop_start(const char *name);
/* Queues one job on the loop and wakes it: 0, or an errno value. */
int aft_test_loop_execute(int loop, void (*run)(void *), void *context);
/* The loop thread's kernel tid, and how often its epoll_wait returned. */
uint64_t aft_test_loop_tid(int loop);
uint64_t aft_test_loop_wakeups(int loop);
/* Shuts the loop down as a group's shutdown does: later jobs are refused (ESHUTDOWN, counted),
 * the queued ones run, and the thread ends; returns once it has (0), or an errno value. */
int aft_test_loop_shutdown(int loop);
/* Jobs the loop ran, and jobs refused after its shutdown. */
uint64_t aft_test_loop_ran(int loop);
uint64_t aft_test_loop_late(int loop);
/* Names the calling thread (at most 15 bytes), as /proc shows it. */
void aft_test_set_thread_name(const char *name);

/* The Swift async chain walk (tests): the metadata a fake AsyncTask's first word must hold (0:
 * no Swift concurrency runtime); an address in code; the walk for a thread whose current-task
 * word is *task_word, with its context register and frame pointer. */
uint64_t aft_test_swift_task_metadata(void);
uint64_t aft_test_swift_code_address(void);
struct aft_swift_async_link;
uint32_t aft_test_swift_chain(const uint64_t *task_word, uint64_t context_register, uint64_t fp,
                              struct aft_swift_async_link *out, uint32_t room);
/* Sets the async context register to a context in a two-link cycle, then stores to address 0. */
void aft_test_hostile_async_fault(void);

/* The process's malloc arenas (glibc's malloc_info), -1 when they cannot be read. */
int aft_test_malloc_arenas(void);

/* The calling thread blocks ms inside dl_iterate_phdr's callback, holding the loader's lock
 * (a first hang's capture cannot load libunwind meanwhile). */
void hang_harness_in_loader_lock(uint32_t ms);

/* The calling thread waits ms in the ppoll system call (on a pipe nobody writes to), the call
 * the main run loop waits in between jobs. */
void hang_harness_ppoll(uint32_t ms);

/* Forks a child that only sleeps ms (holding a copy of every descriptor), then exits; its pid,
 * or -1. */
int aft_test_fork_sleeper(uint32_t ms);
/* The number of this process's shared anonymous mappings (the unwinding helpers' answers). */
int aft_test_shared_anonymous_mappings(void);
/* Forks; the child checks that it has as many shared anonymous mappings as the parent had (one,
 * or none), none of them the parent's. 0, or what differed (helper_fork.c). */
int aft_test_fork_helper_buffers(void);
/* The scratch at the bottom of the delivery thread's own stack: NULL off that stack and where
 * it has no room, its pages given back by aft_release_thread_stack_below. 0, -1 where there is
 * no own stack (not glibc), or which check failed (own_stack_scratch.c). */
int aft_test_own_stack_scratch(void);

/* The first frame record above sp on a stack laid out in two adjacent pages (frame_record.c):
 * a record at sp + 64 linked to the outermost at sp + 128, each returning to *return_address;
 * with decoy, a pointer into the second page beside a return address at sp + 16 first. Its
 * offset from sp (-1: none), and the walk from sp of the hang's capture into frames. 0, or -1
 * when the pages cannot be mapped. */
int aft_test_frame_record_above(int decoy, int64_t *record_offset, uint64_t *frames,
                                uint32_t capacity, uint32_t *count, uint64_t *return_address);

/* Starts a thread named "stale-reader" that calls aft_test_stale_depth (frame records left on
 * the stack), then asleep in read(2) of a pipe no one writes, from
 * aft_test_stale_blocked_read, whose unset locals cover those records, or with
 * AFT_TEST_STALE_VLA from aft_test_stale_vla_read, whose locals are sized at run time
 * (stale_records.c); with AFT_TEST_STALE_BLOCK_SIGNALS, every signal blocked first. 0, or -1. */
#define AFT_TEST_STALE_BLOCK_SIGNALS 1
#define AFT_TEST_STALE_VLA 2
int aft_test_start_stale_reader(int mode);
void aft_test_stale_depth(int depth);
void aft_test_stale_blocked_read(int fd);
void aft_test_stale_vla_read(int fd, int size);

/* Installs an app's SIGSEGV handler (crash_at_start.c) that, called once Aftermath's handler has
 * written the crash and chained to it, waits wait_ms, then ends the process with 20 plus the
 * number of threads Aftermath started besides its delivery thread (99: /proc unreadable).
 * Returns 0 or errno. */
int aft_test_install_thread_counting_handler(uint32_t wait_ms);
/* Restricts the calling thread, and the threads it starts, to one of the CPUs it may use, so a
 * new thread runs only when this one blocks (first-in-first-out scheduling where the process
 * may use it). 0 or errno. */
int aft_test_run_on_one_cpu(void);

/* Paints the size bytes below the caller's frame (less a 1 KiB margin) and returns the top of
 * the paint (stack_paint.c); aft_test_stack_reached then gives how many bytes below that top a
 * call made since has written: the depth its frames reached. */
uintptr_t aft_test_paint_stack(size_t size);
size_t aft_test_stack_reached(uintptr_t top, size_t size);

/* Calls visit with each thread's name (thread_named.c) until it returns nonzero: 1 when one
 * did, 0 when none did, -1 when /proc cannot be listed. aft_test_thread_named: whether a
 * thread of this process is named name, the same way. */
int aft_test_each_thread_name(int (*visit)(const char *name, void *context), void *context);
int aft_test_thread_named(const char *name);

/* Whether the main program's call slot for the function name is still unbound, its first call
 * still ahead (plt_binding.c): 1 unbound, 0 bound, -1 no such slot (the program does not call
 * it through one). */
int aft_test_call_slot_unbound(const char *name);

/* A busy thread masked as libdispatch's workers are, "dispatch-spin" (0 or an error); a hang's
 * capture of every thread but watched_tid and the caller, left open with its threads paused
 * until aft_test_hang_capture_release (sigprof_loan.c); whether it borrowed SIGPROF;
 * SIGPROF's handler: 1 the captures', 0 its default action, -1 someone else's; and whether a
 * signal a capture sent with it may still be pending (it then stays the captures'). */
int aft_test_start_sigprof_spinner(void);
/* Blocks every signal of the calling thread but SIGPROF and the synchronous ones, as
 * libdispatch's workers (and so the Swift concurrency pool) do. */
void aft_test_block_all_but_sigprof(void);
void aft_test_hang_capture_hold(uint64_t watched_tid);
void aft_test_hang_capture_release(void);
int aft_test_hang_capture_borrowed_sigprof(void);
int aft_test_sigprof_owner(void);
int aft_test_sigprof_stranded(void);

#endif /* CHARNESSFAULTS_H */
