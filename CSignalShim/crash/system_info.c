/*
 * system_info.c: NORMAL-TIME CODE. The machine a crash file records (aftermath_format_system.h),
 * read once when start completes, on its background thread: the crash handler only writes what
 * this prepared, and only once it is ready.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#if defined(__has_include)
#if __has_include(<sys/platform/x86.h>)
#include <sys/platform/x86.h> /* glibc 2.33 and later */
#define AFT_GLIBC_CPUID_LEAF_1 1
#endif
#endif
#endif

#include "runs_internal.h"
#include "shim_internal.h" /* and report_internal.h */

AFT_SMALL_STATE aft_system_info aft_g_system;
AFT_SMALL_STATE atomic_int aft_g_system_ready;

static uint64_t aft_clock_ns(clockid_t clock) {
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The process's start in realtime nanoseconds, from /proc/self/stat's start time (clock ticks
 * after boot): the run record's, read at start beside its realtime and boot-time clocks, else
 * read now. 0 when it cannot be known. */
static uint64_t aft_process_start_realtime_ns(void) {
    uint64_t ticks = aft_g_run_info.process_start_ticks;
    uint64_t real_now = aft_g_run_info.context.start_realtime_ns;
    uint64_t boot_now = aft_g_run_info.start_boottime_ns;
    if (ticks == 0 || real_now == 0 || boot_now == 0) {
        ticks = aft_process_start_ticks("/proc");
        boot_now = aft_clock_ns(CLOCK_BOOTTIME);
        real_now = aft_clock_ns(CLOCK_REALTIME);
    }
    long hz = sysconf(_SC_CLK_TCK);
    if (ticks == 0 || hz <= 0) return 0;
    uint64_t since_boot = ticks * (1000000000u / (uint64_t)hz);
    if (since_boot > boot_now || boot_now - since_boot > real_now) return 0;
    return real_now - (boot_now - since_boot);
}

/* cpuid's signature, or arm64's MIDR_EL1 as the kernel shows it. Each cpuid is a hypervisor
 * exit in a virtual machine (2-13 µs on this project's): leaf 1 is read from what glibc's loader
 * kept of it at exec, raw, and the vendor's leaf 0 is the crash handler's
 * (aft_async_arch_cpu_vendor). Every x86-64 processor has leaf 1. */
static void aft_read_cpu_identity(aft_system_info *out) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
#if defined(AFT_GLIBC_CPUID_LEAF_1)
    const struct cpuid_feature *leaf1 = __x86_get_cpuid_feature_leaf(CPUID_INDEX_1);
    a = leaf1->cpuid_array[0];
    d = leaf1->cpuid_array[3];
    if (a == 0) __cpuid(1, a, b, c, d); /* not filled in (an older loader) */
#else
    __cpuid(1, a, b, c, d);
#endif
    (void)b;
    (void)c;
    out->cpu_signature = a;
    out->cpu_features = d;
#elif defined(__aarch64__)
    char midr[32];
    int fd = open("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1",
                  O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return;
    ssize_t n = read(fd, midr, sizeof(midr) - 1);
    close(fd);
    if (n <= 0) return;
    midr[n] = '\0';
    out->cpu_signature = (uint32_t)strtoull(midr, NULL, 16);
#else
    (void)out;
#endif
}

void aft_prepare_system_info(void) {
    if (atomic_load(&aft_g_system_ready)) return;
    aft_system_info info = {0};
    /* The processors this process may run on (its affinity: a container's cpuset), by one
     * system call; the online count costs a /sys file's open and read. */
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) info.cpu_count = (uint32_t)CPU_COUNT(&cpus);
    aft_read_cpu_identity(&info);
    info.hwcaps = (uint64_t)getauxval(AT_HWCAP);
    info.process_start_realtime_ns = aft_process_start_realtime_ns();
    aft_g_system = info;
    atomic_store(&aft_g_system_ready, 1); /* after the fields: the handler reads them then */
}

void aft_system_after_fork_in_child(void) {
    /* A child began at the fork; the rest of the machine is the parent's. */
    aft_g_system.process_start_realtime_ns = aft_clock_ns(CLOCK_REALTIME);
}
