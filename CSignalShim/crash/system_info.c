/*
 * system_info.c: NORMAL-TIME CODE. The machine a crash file records (aftermath_format_system.h),
 * read once when start completes, on its background thread: the crash handler only writes what
 * this prepared, and only once it is ready.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "shim_internal.h" /* and report_internal.h */

AFT_SMALL_STATE aft_system_info aft_g_system;
AFT_SMALL_STATE atomic_int aft_g_system_ready;

/* Reads at most capacity - 1 bytes of a small /proc or /sys file, NUL-terminated; 0 if none. */
static size_t aft_read_small_file(const char *path, char *out, size_t capacity) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return 0;
    size_t n = 0;
    while (n + 1 < capacity) {
        ssize_t got = read(fd, out + n, capacity - 1 - n);
        if (got <= 0) break;
        n += (size_t)got;
    }
    close(fd);
    out[n] = '\0';
    return n;
}

static uint64_t aft_clock_ns(clockid_t clock) {
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The process's start in realtime nanoseconds: /proc/self/stat's start time (clock ticks after
 * boot, field 22, counted after the command's closing parenthesis, which may hold spaces) set
 * against the boot-time clock. 0 when it cannot be read. */
static uint64_t aft_process_start_realtime_ns(void) {
    char stat[1024];
    if (aft_read_small_file("/proc/self/stat", stat, sizeof(stat)) == 0) return 0;
    char *p = NULL;
    for (char *c = stat; *c != '\0'; c++)
        if (*c == ')') p = c;
    if (p == NULL) return 0;
    p++;
    for (int field = 3; field <= 22; field++) { /* p is before field 3 */
        while (*p == ' ') p++;
        if (*p == '\0') return 0;
        if (field == 22) break;
        while (*p != ' ' && *p != '\0') p++;
    }
    char *end = NULL;
    unsigned long long ticks = strtoull(p, &end, 10);
    long hz = sysconf(_SC_CLK_TCK);
    if (end == p || hz <= 0) return 0;
    uint64_t since_boot = (uint64_t)ticks * (1000000000u / (uint64_t)hz);
    uint64_t boot_now = aft_clock_ns(CLOCK_BOOTTIME), real_now = aft_clock_ns(CLOCK_REALTIME);
    if (since_boot > boot_now || boot_now - since_boot > real_now) return 0;
    return real_now - (boot_now - since_boot);
}

static void aft_read_cpu_identity(aft_system_info *out) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d)) {
        unsigned vendor[3] = {b, d, c}; /* "Genu" "ineI" "ntel" */
        for (int i = 0; i < 12; i++) out->cpu_vendor[i] = (char)(vendor[i / 4] >> (8 * (i % 4)));
    }
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        out->cpu_signature = a;
        out->cpu_features = d;
    }
    if (__get_cpuid(0x80000001u, &a, &b, &c, &d)) out->cpu_ext_features = d;
#elif defined(__aarch64__)
    char midr[32];
    if (aft_read_small_file("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1", midr,
                            sizeof(midr)) > 0)
        out->cpu_signature = (uint32_t)strtoull(midr, NULL, 16);
#else
    (void)out;
#endif
}

void aft_prepare_system_info(void) {
    if (atomic_load(&aft_g_system_ready)) return;
    aft_system_info info = {0};
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    info.cpu_count = online > 0 ? (uint32_t)online : 0;
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
