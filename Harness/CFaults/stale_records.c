/*
 * stale_records.c: NORMAL-TIME CODE, test-only. A thread asleep in read(2) whose caller's
 * unset locals hold the frame records a deeper call chain left there a moment before: the
 * stack a thread known only by sp and pc (a hang's other threads, from /proc) shows, where the
 * first record above sp is a stale one.
 */
#include "CHarnessFaults.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <unistd.h>

static int aft_g_stale_pipe[2] = {-1, -1};

/* Calls itself depth times, each frame with a frame record and some locals: the records are
 * still on the stack, below the caller's sp, once it has returned. */
__attribute__((noinline)) void aft_test_stale_depth(int depth) {
    volatile uint8_t pad[48];
    pad[0] = (uint8_t)depth;
    if (depth > 0) aft_test_stale_depth(depth - 1);
    __asm__ volatile("" : : "r"(pad) : "memory"); /* no tail call: a frame per level */
}

/* Its locals, never written before the read, cover the records aft_test_stale_depth left. */
__attribute__((noinline)) void aft_test_stale_blocked_read(int fd) {
    volatile uint8_t locals[1024];
    uint8_t byte = 0;
    ssize_t n = read(fd, &byte, 1);
    locals[0] = (uint8_t)n;
    __asm__ volatile("" : : "r"(locals) : "memory");
}

/* The same with its locals in an array sized at run time: it moves sp after its prologue, so
 * the prologue does not say where its frame record is. */
__attribute__((noinline)) void aft_test_stale_vla_read(int fd, int size) {
    volatile uint8_t locals[size];
    uint8_t byte = 0;
    ssize_t n = read(fd, &byte, 1);
    locals[0] = (uint8_t)n;
    __asm__ volatile("" : : "r"(locals) : "memory");
}

static int aft_g_stale_mode; /* AFT_TEST_STALE_* */

__attribute__((noinline)) static void *aft_test_stale_reader_main(void *arg) {
    (void)arg;
    if (aft_g_stale_mode & AFT_TEST_STALE_BLOCK_SIGNALS) {
        sigset_t all; /* every signal blocked: a crash's capture knows it by /proc alone */
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, NULL);
    }
    prctl(PR_SET_NAME, "stale-reader");
    aft_test_stale_depth(6);
    if (aft_g_stale_mode & AFT_TEST_STALE_VLA)
        aft_test_stale_vla_read(aft_g_stale_pipe[0], 1024);
    else
        aft_test_stale_blocked_read(aft_g_stale_pipe[0]);
    __asm__ volatile("" ::: "memory");
    return NULL;
}

int aft_test_start_stale_reader(int mode) {
    if (pipe(aft_g_stale_pipe) != 0) return -1;
    aft_g_stale_mode = mode;
    pthread_t thread;
    if (pthread_create(&thread, NULL, aft_test_stale_reader_main, NULL) != 0) return -1;
    return pthread_detach(thread);
}
