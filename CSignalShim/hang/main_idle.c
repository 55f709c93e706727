/*
 * main_idle.c: NORMAL-TIME CODE, run on the watchdog thread. The main thread idle in its run
 * loop needs no ping. Where the loop waits between jobs (the system call, its stack pointer and
 * pc in /proc/self/task/<tid>/syscall) is learned from the pings themselves: each time one is
 * asked for, the watchdog notes where the main thread waits; a ping that then runs at once
 * woke it from the loop's own wait. Three alike make that the loop's wait site. From then on a
 * main thread found waiting there is idle, as an event loop in epoll_wait is: alive without a
 * ping, asked again every AFT_WATCH_IDLE_PING_MS all the same. A wait anywhere else (a poll of
 * its own deeper in the stack, a sleep, a lock) or a running thread gets its ping as before.
 * While the thread's CPU time stands still it cannot have left the wait it was found in: the
 * check is then one clock_gettime on its CPU clock, no /proc read, no descriptor kept.
 */
#include <time.h>
#include <unistd.h>

#include "CSignalShim.h"
#include "watchdog_internal.h"

#define AFT_LOOP_WAIT_CONFIRMATIONS 3u
#define AFT_LOOP_WAIT_QUIET_PINGS 5u          /* pings before the first look at the wait */
#define AFT_LOOP_WAKE_NS (5ull * 1000 * 1000) /* a ping that ran this soon woke the loop */

/* Where tid waits now: its system call, in a wait an idle loop makes. 0 otherwise. */
static int aft_read_wait_site(uint64_t tid, aft_wait_site *out) {
    out->nr = -1;
    /* On this stack, not in the watchdog's /proc buffer: a page of it written for this alone
     * would stay dirty in an app that never hangs. The line is about 170 bytes. */
    char text[256];
    int fd = aft_watchdog_open_task_leaf(tid, "syscall");
    if (fd < 0) return 0;
    ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
    close(fd);
    int64_t nr = -1;
    uint64_t sp = 0, pc = 0;
    if (n <= 0 || !aft_async_syscall_parse(text, (size_t)n, &nr, &sp, &pc) || nr < 0 ||
        !aft_async_syscall_idle_wait(nr))
        return 0;
    *out = (aft_wait_site){.tid = tid, .sp = sp, .pc = pc, .nr = nr};
    return 1;
}

static int aft_same_site(const aft_wait_site *a, const aft_wait_site *b) {
    return a->nr >= 0 && a->nr == b->nr && a->tid == b->tid && a->sp == b->sp && a->pc == b->pc;
}

/* The thread's CPU clock, as pthread_getcpuclockid makes it from the tid. */
uint64_t aft_thread_cpu_ns(uint64_t tid) {
    clockid_t clock = (clockid_t)((~(unsigned int)tid << 3) | 6u); /* per thread, scheduler */
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0) return UINT64_MAX;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int aft_main_loop_idle(aft_watch_target *t, uint64_t tid) {
    if (t->loop_wait_seen < AFT_LOOP_WAIT_CONFIRMATIONS || t->loop_wait.tid != tid) return 0;
    uint64_t cpu = aft_thread_cpu_ns(tid);
    if (cpu != UINT64_MAX && cpu == t->loop_wait_cpu_ns) return 1; /* not run since */
    aft_wait_site now;
    int idle = aft_read_wait_site(tid, &now) && aft_same_site(&now, &t->loop_wait);
    t->loop_wait_cpu_ns = idle ? cpu : UINT64_MAX;
    return idle;
}

void aft_main_note_ping(aft_watch_target *t, uint64_t tid) {
    /* Not in a launch's first half second (its first pings), whose CPU a short-lived process
     * would pay for nothing; learned over the next ones. */
    if (t->loop_wait_asks < AFT_LOOP_WAIT_QUIET_PINGS) {
        t->loop_wait_asks++;
        t->asked_wait.nr = -1;
        return;
    }
    if (!aft_read_wait_site(tid, &t->asked_wait)) t->asked_wait.nr = -1;
}

void aft_main_note_answer(aft_watch_target *t) {
    if (t->asked_wait.nr < 0) return;
    uint64_t posted = atomic_load(&t->ping_posted_ns), ran = atomic_load(&t->ping_ran_ns);
    /* Run at once, on the thread that waited: it woke from that wait for the ping. */
    if (ran >= posted && ran - posted <= AFT_LOOP_WAKE_NS &&
        atomic_load(&t->tid) == t->asked_wait.tid) {
        if (aft_same_site(&t->asked_wait, &t->loop_wait)) {
            if (t->loop_wait_seen < AFT_LOOP_WAIT_CONFIRMATIONS) t->loop_wait_seen++;
        } else {
            t->loop_wait = t->asked_wait;
            t->loop_wait_seen = 1;
            t->loop_wait_cpu_ns = UINT64_MAX;
        }
    }
    t->asked_wait.nr = -1; /* one answer per ping */
}
