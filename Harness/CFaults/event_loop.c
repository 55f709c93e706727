/*
 * event_loop.c: NORMAL-TIME CODE, test-only. An event loop as SwiftNIO's is built: a named
 * thread waiting in epoll_wait on an eventfd, with a queue of jobs that any thread adds to
 * (execute writes the eventfd to wake it). The hang harness watches these loops, blocks them,
 * leaves them idle, keeps them busy with short jobs, and counts their wake-ups; the tests shut
 * them down as a group's shutdown does (refused jobs counted, the thread ended). And a ppoll
 * of its own for the main thread, the call its run loop waits in.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "CHarnessFaults.h"

#define AFT_TEST_LOOPS 128
#define AFT_TEST_LOOP_JOBS 1024

typedef struct aft_test_job {
    void (*run)(void *);
    void *context;
} aft_test_job;

typedef struct aft_test_loop {
    pthread_t thread;
    pthread_mutex_t lock;
    int epoll_fd, event_fd;
    aft_test_job jobs[AFT_TEST_LOOP_JOBS];
    uint32_t head, tail;
    uint64_t tid;
    uint64_t woken; /* epoll_wait returns */
    uint64_t ran;   /* jobs run */
    uint64_t late;  /* jobs refused once shut down */
    char name[16];
    int ready;
    int closed; /* under lock */
} aft_test_loop;

static aft_test_loop aft_g_test_loops[AFT_TEST_LOOPS];
static int aft_g_test_loop_count;
static pthread_mutex_t aft_g_test_loops_lock = PTHREAD_MUTEX_INITIALIZER;

static void *aft_test_loop_main(void *arg) {
    aft_test_loop *l = arg;
    prctl(PR_SET_NAME, l->name, 0, 0, 0);
    __atomic_store_n(&l->tid, (uint64_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
    __atomic_store_n(&l->ready, 1, __ATOMIC_RELEASE);
    for (;;) {
        struct epoll_event event;
        int n = epoll_wait(l->epoll_fd, &event, 1, -1);
        if (n < 0 && errno != EINTR) return NULL;
        __atomic_fetch_add(&l->woken, 1, __ATOMIC_RELAXED);
        uint64_t count;
        if (n > 0 && read(l->event_fd, &count, sizeof(count)) < 0 && errno != EAGAIN) return NULL;
        for (;;) {
            pthread_mutex_lock(&l->lock);
            if (l->head == l->tail) {
                int closed = l->closed;
                pthread_mutex_unlock(&l->lock);
                if (closed) return NULL; /* its queue drained: the thread ends */
                break;
            }
            aft_test_job job = l->jobs[l->head % AFT_TEST_LOOP_JOBS];
            l->head++;
            pthread_mutex_unlock(&l->lock);
            job.run(job.context);
            __atomic_fetch_add(&l->ran, 1, __ATOMIC_RELAXED);
        }
    }
}

int aft_test_loop_start(const char *name) {
    pthread_mutex_lock(&aft_g_test_loops_lock);
    if (aft_g_test_loop_count == AFT_TEST_LOOPS) {
        pthread_mutex_unlock(&aft_g_test_loops_lock);
        return -1;
    }
    int index = aft_g_test_loop_count++;
    pthread_mutex_unlock(&aft_g_test_loops_lock);
    aft_test_loop *l = &aft_g_test_loops[index];
    pthread_mutex_init(&l->lock, NULL);
    strncpy(l->name, name, sizeof(l->name) - 1);
    l->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    l->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (l->epoll_fd < 0 || l->event_fd < 0) return -1;
    struct epoll_event event = {.events = EPOLLIN};
    if (epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, l->event_fd, &event) != 0) return -1;
    if (pthread_create(&l->thread, NULL, aft_test_loop_main, l) != 0) return -1;
    while (!__atomic_load_n(&l->ready, __ATOMIC_ACQUIRE)) usleep(1000);
    return index;
}

int aft_test_loop_execute(int loop, void (*run)(void *), void *context) {
    if (loop < 0 || loop >= aft_g_test_loop_count) return EINVAL;
    aft_test_loop *l = &aft_g_test_loops[loop];
    pthread_mutex_lock(&l->lock);
    if (l->closed) { /* as SwiftNIO refuses a job for a loop that has shut down */
        l->late++;
        pthread_mutex_unlock(&l->lock);
        return ESHUTDOWN;
    }
    if (l->tail - l->head == AFT_TEST_LOOP_JOBS) {
        pthread_mutex_unlock(&l->lock);
        return EAGAIN;
    }
    l->jobs[l->tail % AFT_TEST_LOOP_JOBS] = (aft_test_job){run, context};
    l->tail++;
    pthread_mutex_unlock(&l->lock);
    uint64_t one = 1;
    return write(l->event_fd, &one, sizeof(one)) == sizeof(one) ? 0 : errno;
}

uint64_t aft_test_loop_tid(int loop) {
    return loop >= 0 && loop < aft_g_test_loop_count
               ? __atomic_load_n(&aft_g_test_loops[loop].tid, __ATOMIC_ACQUIRE)
               : 0;
}

int aft_test_loop_shutdown(int loop) {
    if (loop < 0 || loop >= aft_g_test_loop_count) return EINVAL;
    aft_test_loop *l = &aft_g_test_loops[loop];
    pthread_mutex_lock(&l->lock);
    int already = l->closed;
    l->closed = 1;
    pthread_mutex_unlock(&l->lock);
    if (already) return 0;
    uint64_t one = 1;
    if (write(l->event_fd, &one, sizeof(one)) != sizeof(one)) return errno;
    return pthread_join(l->thread, NULL);
}

uint64_t aft_test_loop_ran(int loop) {
    return loop >= 0 && loop < aft_g_test_loop_count
               ? __atomic_load_n(&aft_g_test_loops[loop].ran, __ATOMIC_RELAXED)
               : 0;
}

uint64_t aft_test_loop_late(int loop) {
    if (loop < 0 || loop >= aft_g_test_loop_count) return 0;
    aft_test_loop *l = &aft_g_test_loops[loop];
    pthread_mutex_lock(&l->lock);
    uint64_t late = l->late;
    pthread_mutex_unlock(&l->lock);
    return late;
}

uint64_t aft_test_loop_wakeups(int loop) {
    return loop >= 0 && loop < aft_g_test_loop_count
               ? __atomic_load_n(&aft_g_test_loops[loop].woken, __ATOMIC_RELAXED)
               : 0;
}

void aft_test_set_thread_name(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }

void hang_harness_ppoll(uint32_t ms) {
    int ends[2];
    if (pipe(ends) != 0) return;
    struct pollfd entry = {.fd = ends[0], .events = POLLIN};
    struct timespec timeout = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    (void)syscall(SYS_ppoll, &entry, 1, &timeout, NULL, (size_t)8);
    close(ends[0]);
    close(ends[1]);
}
