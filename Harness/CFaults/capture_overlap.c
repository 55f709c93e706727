/*
 * capture_overlap.c: NORMAL-TIME CODE, test-only, never linked into apps. A hang capture whose
 * handler is slow (the watchdog's hook), and two functions a thread stalls in, whose names a
 * hang's stack shows, spinning.
 */
#include <errno.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "CHarnessFaults.h"

/* Overrides the weak reference in CSignalShim's hang capture handler (watchdog_internal.h). */
volatile uint64_t aft_g_test_capture_delay_ns;

void aft_test_slow_hang_captures(uint64_t delay_ns) { aft_g_test_capture_delay_ns = delay_ns; }

/* Spins in user code (a thread asleep in a system call is read from /proc, not signalled);
 * inlined, so that the pc is in the named function. */
static inline __attribute__((always_inline)) void aft_test_stall(uint32_t ms) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t end =
        (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec + (uint64_t)ms * 1000000u;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec >= end) break;
        __asm__ volatile("" ::: "memory");
    }
}

__attribute__((noinline)) void aft_test_stall_in_main_function(uint32_t ms) {
    aft_test_stall(ms);
    __asm__ volatile(""); /* a frame of its own, not a tail call */
}

/* Blocks in read(2) of a timer that fires after ms: a call a handler does not cut short (it is
 * restarted), from which /proc gives the stack pointer and pc. */
__attribute__((noinline)) void aft_test_stall_in_worker_function(uint32_t ms) {
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (fd < 0) return;
    struct itimerspec when = {.it_value = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L}};
    uint64_t expirations = 0;
    if (timerfd_settime(fd, 0, &when, NULL) == 0) {
        while (read(fd, &expirations, sizeof(expirations)) < 0 && errno == EINTR) {
        }
    }
    close(fd);
    __asm__ volatile("");
}
