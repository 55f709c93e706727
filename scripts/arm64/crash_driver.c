/*
 * crash_driver.c: a small C program that links CSignalShim's objects directly (no Swift) and
 * dies one chosen way, so the crash handler and the hang watchdog can be run on an
 * architecture where the Swift toolchain is not at hand (arm64 under qemu-user, built with
 * gcc-aarch64-linux-gnu). scripts/arm64.sh --quick runs it and decodes what it leaves with the
 * host's Swift decoder.
 *
 *   crash_driver MODE REPORTS_DIR
 *   MODE: null | brk | abort | overflow-main | overflow-thread | threads | hang
 *
 * threads: a second thread, "parked", spins in driver_parked with known floating-point state
 * (fpcr DN and FZ set, every byte of vN equal to 0x40 + N) while the main thread dies of the
 * null store; the report must list both, the parked one with its own signal frame.
 *
 * Every fault happens at the end of a fixed chain driver_level1 -> driver_level2 ->
 * driver_level3 called from main, so the decoded stack can be checked for the whole chain
 * below the signal frame. The reports directory gets crashes/ and hangs/ (0700).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "CHarnessFaults.h"
#include "CSignalShim.h"

static volatile int driver_sink;
static volatile unsigned driver_depth_limit = 1u << 30; /* never reached: the stack ends first */

static void driver_random_id(uint8_t id[AFT_ID_SIZE]) {
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, id, AFT_ID_SIZE) != AFT_ID_SIZE) {
        perror("crash_driver: /dev/urandom");
        exit(2);
    }
    close(fd);
    id[6] = (uint8_t)((id[6] & 0x0f) | 0x40); /* a version 4 UUID */
    id[8] = (uint8_t)((id[8] & 0x3f) | 0x80);
}

static void driver_copy(char *out, size_t capacity, const char *text) {
    size_t n = strnlen(text, capacity - 1);
    memcpy(out, text, n);
    out[n] = '\0';
}

static uint64_t driver_now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void driver_mkdir(const char *path) {
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "crash_driver: mkdir %s: %s\n", path, strerror(errno));
        exit(2);
    }
}

/* The context the Swift library would prepare at start. */
static void driver_install(const char *reports) {
    char crashes[4096], self[AFT_PATH_CAPACITY];
    snprintf(crashes, sizeof(crashes), "%s/crashes", reports);
    driver_mkdir(reports);
    driver_mkdir(crashes);

    aft_install_options options;
    memset(&options, 0, sizeof(options));
    options.crash_directory = crashes;
    options.timing_fd = -1;
    aft_context *c = &options.context;
    driver_random_id(c->report_id);
    driver_random_id(c->session_id);
    driver_random_id(c->run_id);
    c->pid = (uint64_t)getpid();
    c->start_realtime_ns = driver_now_ns(CLOCK_REALTIME);
    driver_copy(c->service_name, sizeof(c->service_name), "crash-driver");
    driver_copy(c->service_version, sizeof(c->service_version), "1.0");
    driver_copy(c->os_name, sizeof(c->os_name), "Linux");
    struct utsname u;
    if (uname(&u) == 0) driver_copy(c->kernel_release, sizeof(c->kernel_release), u.release);
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    driver_copy(c->executable_path, sizeof(c->executable_path), self);
    char *slash = strrchr(self, '/');
    if (slash) *slash = '\0';
    driver_copy(c->app_root, sizeof(c->app_root), self);
#if defined(__x86_64__)
    c->arch = AFT_ARCH_X86_64;
#elif defined(__aarch64__)
    c->arch = AFT_ARCH_ARM64;
#endif
    char error[256];
    if (aft_install(&options, error, sizeof(error)) != 0) {
        fprintf(stderr, "crash_driver: aft_install: %s\n", error);
        exit(2);
    }
    /* Crash as an app does past its first moments: after install's own thread has read the
     * images. Under qemu-user the unwinding helper is a copy of the process, and a lock that
     * thread holds at the crash (the loader's, libunwind's) stays locked in the copy: the
     * helper then times out and the frame-pointer stack stands, which is not what this checks. */
    aft_install_complete();
    /* The handler unwinds the crashing thread itself, with arm64's libunwind, which is what
     * this checks: the host's decoder (x86-64) could not unwind an arm64 stack at its launch.
     * The next launch's unwinding on arm64 is checked by the Swift tests of the full run. */
    aft_test_unwind_in_handler(1);
}

/* ---- the faults ---- */

__attribute__((noinline)) static void driver_null(void) {
    volatile int *p = (volatile int *)(uintptr_t)8;
#if defined(__aarch64__)
    /* Known bytes in the last vector register: the crash's floating-point state shows them. */
    __asm__ volatile("movi v31.16b, #0x7f" ::: "v31");
#endif
    *p = 1;
}

__attribute__((noinline)) static unsigned driver_overflow(unsigned depth) {
    volatile char frame[512];
    frame[0] = (char)depth;
    if (depth >= driver_depth_limit) return 0;
    unsigned below = driver_overflow(depth + 1);
    return below + (unsigned)frame[0]; /* no tail call: every level keeps its frame */
}

static void *driver_overflow_thread(void *unused) {
    (void)unused;
    pthread_setname_np(pthread_self(), "overflower");
    driver_sink = (int)driver_overflow(0);
    return NULL;
}

__attribute__((noinline)) static void driver_spin_ms(uint64_t ms) {
    /* Pure computation between rare clock reads: the thread is seen running, not in a call. */
    uint64_t end = driver_now_ns(CLOCK_MONOTONIC) + ms * 1000000ull;
    do {
        for (int i = 0; i < 1000000; i++) driver_sink++;
    } while (driver_now_ns(CLOCK_MONOTONIC) < end);
}

/* Names its thread (a call: this function keeps a frame record, so a frame-pointer walk finds
 * its caller), sets fpcr's DN and FZ bits and every byte of vN to 0x40 + N, says so, then spins
 * where the capture signal finds it: its signal frame shows exactly this state. Never returns. */
static volatile uint32_t driver_parked_ready;
/* movi vN.16b, #(0x40 + N) */
#define DRIVER_MOVI(n) "movi v" #n ".16b, #(0x40 + " #n ")\n\t"
#define DRIVER_MOVI4(a, b, c, d) DRIVER_MOVI(a) DRIVER_MOVI(b) DRIVER_MOVI(c) DRIVER_MOVI(d)

__attribute__((noinline, noreturn)) static void driver_parked(void) {
    pthread_setname_np(pthread_self(), "parked");
#if defined(__aarch64__)
    /* clang-format off */
    __asm__ volatile(
        "mrs x9, fpcr\n\t"
        "orr x9, x9, #0x3000000\n\t" /* DN (bit 25), FZ (bit 24) */
        "msr fpcr, x9\n\t"
        DRIVER_MOVI4(0, 1, 2, 3) DRIVER_MOVI4(4, 5, 6, 7) DRIVER_MOVI4(8, 9, 10, 11)
        DRIVER_MOVI4(12, 13, 14, 15) DRIVER_MOVI4(16, 17, 18, 19) DRIVER_MOVI4(20, 21, 22, 23)
        DRIVER_MOVI4(24, 25, 26, 27) DRIVER_MOVI4(28, 29, 30, 31)
        "mov w10, #1\n\t"
        "stlr w10, [%0]\n"  /* ready */
        "1:\n\t"
        "yield\n\t"
        "b 1b\n"
        :
        : "r"(&driver_parked_ready)
        : "x9", "x10", "memory", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10",
          "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23",
          "v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31");
    /* clang-format on */
#else
    driver_parked_ready = 1;
#endif
    for (;;) driver_sink++;
}

static void *driver_parked_thread(void *unused) {
    (void)unused;
    driver_parked();
}

static const char *driver_mode;

__attribute__((noinline)) static void driver_level3(void) {
    if (strcmp(driver_mode, "null") == 0 || strcmp(driver_mode, "threads") == 0) {
        driver_null();
    } else if (strcmp(driver_mode, "brk") == 0) {
        aft_test_breakpoint();
    } else if (strcmp(driver_mode, "abort") == 0) {
        abort();
    } else if (strcmp(driver_mode, "overflow-main") == 0) {
        driver_sink = (int)driver_overflow(0);
    } else if (strcmp(driver_mode, "overflow-thread") == 0) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, driver_overflow_thread, NULL) != 0) exit(2);
        pthread_join(thread, NULL);
    } else if (strcmp(driver_mode, "hang") == 0) {
        driver_spin_ms(1500); /* the main thread stops beating for 1.5 s, running */
    }
    driver_sink++;
}

__attribute__((noinline)) static void driver_level2(void) {
    driver_level3();
    driver_sink++;
}

__attribute__((noinline)) static void driver_level1(void) {
    driver_level2();
    driver_sink++;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(
            stderr,
            "usage: crash_driver null|brk|abort|overflow-main|overflow-thread|threads|hang DIR\n");
        return 2;
    }
    driver_mode = argv[1];
    driver_install(argv[2]);
    if (strcmp(driver_mode, "threads") == 0) {
        /* Started after install: the thread gets its alternate stack from Aftermath's own
         * pthread_create path, and the crash comes once it spins with its state set. */
        pthread_t parked;
        if (pthread_create(&parked, NULL, driver_parked_thread, NULL) != 0) exit(2);
        while (!__atomic_load_n(&driver_parked_ready, __ATOMIC_ACQUIRE)) {
            struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000 * 1000};
            nanosleep(&ms, NULL);
        }
    }
    if (strcmp(driver_mode, "hang") != 0) {
        driver_level1();
        fprintf(stderr, "crash_driver: %s did not end the process\n", driver_mode);
        return 1;
    }

    char hangs[4096], error[256];
    snprintf(hangs, sizeof(hangs), "%s/hangs", argv[2]);
    driver_mkdir(hangs);
    aft_watchdog_options w;
    memset(&w, 0, sizeof(w));
    w.hang_directory = hangs;
    w.threshold_ms = 250;
    w.heartbeat_mode = AFT_HEARTBEAT_MANUAL;
    /* qemu-user cannot deliver the guest's highest real-time signals (it keeps them for itself),
     * which the watchdog picks by default: under emulation the capture uses SIGRTMIN + 4. */
    w.capture_signal = SIGRTMIN + 4;
    if (aft_watchdog_start(&w, error, sizeof(error)) != 0) {
        fprintf(stderr, "crash_driver: aft_watchdog_start: %s\n", error);
        return 2;
    }
    struct timespec ten_ms = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};
    for (int i = 0; i < 50; i++) { /* half a second of a healthy loop: the watchdog arms */
        aft_heartbeat();
        nanosleep(&ten_ms, NULL);
    }
    driver_level1();
    for (int i = 0; i < 50; i++) { /* beating again: the hang ends and is marked finished */
        aft_heartbeat();
        nanosleep(&ten_ms, NULL);
    }
    aft_watchdog_stats stats;
    aft_watchdog_get_stats(&stats);
    aft_watchdog_stop();
    printf("hangs=%llu capture_method=%u signal_usable=%u\n", (unsigned long long)stats.hangs,
           stats.last_capture_method, stats.signal_usable);
    return stats.hangs == 1 ? 0 : 1;
}
