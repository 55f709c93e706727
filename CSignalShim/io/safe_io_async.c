/*
 * safe_io_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). Byte, string and I/O helpers for the crash-time code: write loops,
 * string copies, the re-raise (CRC-32: crc32_async.c). Its own loops rather than libc's string functions, which may be
 * ifunc-resolved or instrumented. Memory whose mapping is uncertain is read with pread(2) on
 * /proc/self/mem (or write(2) into a pipe), which seccomp filters of hardened services allow,
 * unlike process_vm_readv.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim_internal.h"
#include "sys_internal.h"

int aft_async_write_all(int fd, const void *data, size_t size) {
    const uint8_t *p = data;
    while (size > 0) {
        ssize_t n = aft_sys_write(fd, p, size);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) return EIO;
        p += n;
        size -= (size_t)n;
    }
    return 0;
}

int aft_async_pwrite_all(int fd, const void *data, size_t size, off_t offset) {
    const uint8_t *p = data;
    while (size > 0) {
        ssize_t n = pwrite(fd, p, size, offset);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) return EIO;
        p += n;
        size -= (size_t)n;
        offset += n;
    }
    return 0;
}

size_t aft_async_strlen(const char *s, size_t capacity) {
    size_t n = 0;
    while (n < capacity && s[n] != '\0') n++;
    return n;
}

/* Eight bytes a step, at any alignment (both architectures load and store unaligned words);
 * the volatile stores keep the compiler from turning the loops back into libc calls. */
typedef uint64_t __attribute__((aligned(1), may_alias)) aft_unaligned_u64;

void aft_async_memset(void *dst, int value, size_t size) {
    volatile uint8_t *d = dst;
    uint64_t word = 0x0101010101010101ull * (uint8_t)value;
    for (; size >= 8; size -= 8, d += 8) *(volatile aft_unaligned_u64 *)d = word;
    for (size_t i = 0; i < size; i++) d[i] = (uint8_t)value;
}

void aft_async_memcpy(void *dst, const void *src, size_t size) {
    volatile uint8_t *d = dst;
    const uint8_t *s = src;
    for (; size >= 8; size -= 8, d += 8, s += 8)
        *(volatile aft_unaligned_u64 *)d = *(const aft_unaligned_u64 *)s;
    for (size_t i = 0; i < size; i++) d[i] = s[i];
}

int aft_async_copy_tail(char *dst, size_t capacity, const char *src, size_t src_len) {
    if (capacity == 0) return src_len > 0;
    int truncated = 0;
    if (src_len > capacity - 1) {
        src += src_len - (capacity - 1);
        src_len = capacity - 1;
        truncated = 1;
    }
    aft_async_memcpy(dst, src, src_len);
    dst[src_len] = '\0';
    return truncated;
}

uint64_t aft_async_gettid(void) { return (uint64_t)syscall(SYS_gettid); }

uint64_t aft_async_now_ns(clockid_t clock) {
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

aft_memory_reader aft_g_memory = {.mem_fd = -1, .pipe_fds = {-1, -1}};

/* The inode of fd when it is open and of the expected kind, else 0. */
static uint64_t aft_async_fd_inode(int fd, mode_t kind) {
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || (st.st_mode & S_IFMT) != kind) return 0;
    return (uint64_t)st.st_ino;
}

static void aft_async_memory_pipe_open(void) {
    int fds[2];
    if (syscall(SYS_pipe2, fds, O_CLOEXEC | O_NONBLOCK) == 0) {
        aft_g_memory.pipe_fds[0] = fds[0];
        aft_g_memory.pipe_fds[1] = fds[1];
        aft_g_memory.pipe_ino = aft_async_fd_inode(fds[0], S_IFIFO);
    } else {
        aft_g_memory.pipe_fds[0] = aft_g_memory.pipe_fds[1] = -1;
        aft_g_memory.pipe_ino = 0;
    }
}

/* Fallback for a process without /proc: write(2) from the address into a pipe copies the bytes
 * or fails with EFAULT, never faults; they are read back at once. One user at a time (a second
 * one gets EBUSY rather than interleaved bytes); a pipe left in an unknown state is dropped. The
 * pipe is opened by its first user when the normal-time refresh did not open it. */
static int aft_async_read_memory_pipe(uint64_t address, void *out, size_t size) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&aft_g_memory.pipe_busy, &expected, 1)) return EBUSY;
    if (aft_g_memory.pipe_fds[1] < 0 && aft_g_memory.pipe_ino == 0) aft_async_memory_pipe_open();
    if (aft_g_memory.pipe_fds[1] < 0) {
        atomic_store(&aft_g_memory.pipe_busy, 0);
        return ENOSYS;
    }
    int err = 0;
    uint8_t *dst = out;
    while (size > 0 && err == 0) {
        size_t chunk = size < 4096 ? size : 4096;
        ssize_t w =
            aft_sys_write(aft_g_memory.pipe_fds[1], (const void *)(uintptr_t)address, chunk);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            err = w < 0 ? errno : EIO;
            break;
        }
        size_t got = 0;
        while (got < (size_t)w) {
            ssize_t r = read(aft_g_memory.pipe_fds[0], dst + got, (size_t)w - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            got += (size_t)r;
        }
        if (got != (size_t)w) { /* bytes left behind would shift every later read */
            aft_g_memory.pipe_fds[0] = aft_g_memory.pipe_fds[1] = -1;
            err = EIO;
            break;
        }
        if ((size_t)w < chunk) err = EFAULT; /* the rest is not mapped */
        dst += w;
        address += (uint64_t)w;
        size -= (size_t)w;
    }
    atomic_store(&aft_g_memory.pipe_busy, 0);
    return err;
}

int aft_async_read_memory(uint64_t address, void *out, size_t size) {
    if (size == 0) return 0;
    if (address == 0 || address + size < address || address + size > (uint64_t)INT64_MAX)
        return EFAULT;
    int fd = aft_async_memory_fd();
    if (fd >= 0) {
        ssize_t n;
        do {
            n = pread(fd, out, size, (off_t)address);
        } while (n < 0 && errno == EINTR);
        if (n == (ssize_t)size) return 0;
        /* A short read or EIO: the range is not (all) mapped. Anything else (the descriptor
         * closed by the app, refused): try the pipe. */
        if (n >= 0 || errno == EIO || errno == EFAULT) return EFAULT;
    }
    return aft_async_read_memory_pipe(address, out, size);
}

static void aft_async_memory_reader_check(pid_t pid);

void aft_async_memory_reader_refresh(void) { aft_async_memory_reader_check(getpid()); }

void aft_async_memory_reader_refresh_for(pid_t pid) {
    /* The same process: its descriptors are checked by the first read, which a crash whose
     * stacks are left to the next launch may never make. */
    if (aft_g_memory.pid == pid && aft_g_memory.mem_ino != 0) {
        atomic_store(&aft_g_memory.unchecked, 1);
        return;
    }
    aft_async_memory_reader_check(pid);
}

int aft_async_memory_fd(void) {
    if (atomic_load(&aft_g_memory.unchecked) && atomic_exchange(&aft_g_memory.unchecked, 0))
        aft_async_memory_reader_check(aft_g_memory.pid);
    return aft_g_memory.mem_fd;
}

static void aft_async_memory_reader_check(pid_t pid) {
    atomic_store(&aft_g_memory.unchecked, 0);
    int forked = aft_g_memory.pid != pid;
    /* A forked child's descriptor reads the parent's memory and its pipe is shared with the
     * parent; an app that closed descriptors may have reused the numbers for other files.
     * Reading either as memory would report another process's or a file's bytes. */
    if (forked || aft_g_memory.mem_ino == 0 ||
        aft_async_fd_inode(aft_g_memory.mem_fd, S_IFREG) != aft_g_memory.mem_ino) {
        aft_g_memory.mem_fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
        aft_g_memory.mem_ino = aft_async_fd_inode(aft_g_memory.mem_fd, S_IFREG);
        if (aft_g_memory.mem_ino == 0) aft_g_memory.mem_fd = -1;
    }
    /* The pipe only where /proc/self/mem cannot be read: two descriptors less for every app
     * otherwise; should the app close that one, the first read through the pipe opens it. */
    if (forked ||
        (aft_g_memory.pipe_ino != 0 &&
         (aft_async_fd_inode(aft_g_memory.pipe_fds[1], S_IFIFO) != aft_g_memory.pipe_ino ||
          aft_async_fd_inode(aft_g_memory.pipe_fds[0], S_IFIFO) != aft_g_memory.pipe_ino))) {
        aft_g_memory.pipe_fds[0] = aft_g_memory.pipe_fds[1] = -1;
        aft_g_memory.pipe_ino = 0;
    }
    if (aft_g_memory.mem_fd < 0 && aft_g_memory.pipe_ino == 0) aft_async_memory_pipe_open();
    aft_g_memory.pid = pid;
}

ssize_t aft_async_read_small_file(const char *path, char *buf, size_t capacity) {
    if (capacity == 0) return -1;
    /* Non-blocking, no final symlink, regular files only: a FIFO planted where a counter
     * file was must not hold the reader (O_NONBLOCK makes the open return; fstat refuses it). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    size_t used = 0;
    while (used < capacity - 1) {
        /* pread, as the other readers of files here: the first call of a library function
         * binds it through the dynamic linker, whose frames (about 3 KiB, the vector registers'
         * save area among them) would come on top of start's deepest call, where this is. */
        ssize_t n = pread(fd, buf + used, capacity - 1 - used, (off_t)used);
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (n == 0) break;
        used += (size_t)n;
    }
    close(fd);
    buf[used] = '\0';
    return (ssize_t)used;
}

size_t aft_async_u64_to_dec(uint64_t v, char *buf) {
    char tmp[21];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    for (size_t i = 0; i < n; i++) buf[i] = tmp[n - 1 - i];
    buf[n] = '\0';
    return n;
}

/* No snprintf: at the install's completion this may be a process's first use of the printf
 * family, whose first call costs 14-20 µs. */
void aft_async_task_path(char out[64], uint64_t tid, const char *leaf) {
    static const char prefix[] = "/proc/self/task/";
    size_t n = sizeof(prefix) - 1, leaf_size = 0;
    while (leaf_size < 16 && leaf[leaf_size] != '\0') leaf_size++;
    aft_async_memcpy(out, prefix, n);
    n += aft_async_u64_to_dec(tid, out + n); /* at most 20 digits */
    out[n++] = '/';
    aft_async_memcpy(out + n, leaf, leaf_size);
    out[n + leaf_size] = '\0';
}

void aft_async_hold_file_size_signal(aft_file_size_hold *hold) {
    sigset_t block, pending;
    sigemptyset(&block);
    sigaddset(&block, SIGXFSZ);
    sigprocmask(SIG_BLOCK, &block, &hold->saved_mask);
    hold->was_pending = aft_sys_sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1;
}

void aft_async_release_file_size_signal(const aft_file_size_hold *hold) {
    sigset_t pending;
    if (!hold->was_pending && aft_sys_sigpending(&pending) == 0 &&
        sigismember(&pending, SIGXFSZ) == 1) {
        /* Raised by our own write past the limit (it failed with EFBIG): take it back. */
        sigset_t wanted;
        sigemptyset(&wanted);
        sigaddset(&wanted, SIGXFSZ);
        struct timespec now = {0, 0};
        syscall(SYS_rt_sigtimedwait, &wanted, NULL, &now, (long)(_NSIG / 8));
    }
    sigprocmask(SIG_SETMASK, &hold->saved_mask, NULL);
}

uint64_t aft_async_file_size_limit(void) {
    struct rlimit limit;
    if (syscall(SYS_prlimit64, 0L, (long)RLIMIT_FSIZE, NULL, &limit) != 0 ||
        limit.rlim_cur == RLIM_INFINITY)
        return UINT64_MAX;
    return (uint64_t)limit.rlim_cur;
}

void aft_async_reraise(int signo, siginfo_t *info) {
    if (info == NULL || syscall(SYS_rt_tgsigqueueinfo, (long)getpid(), (long)aft_async_gettid(),
                                (long)signo, info) != 0)
        syscall(SYS_tgkill, (long)getpid(), (long)aft_async_gettid(), (long)signo);
    sigset_t unblock;
    sigemptyset(&unblock);
    sigaddset(&unblock, signo);
    sigprocmask(SIG_UNBLOCK, &unblock, NULL);
}

/* ---- futex ---- */

void aft_async_futex_wake(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

void aft_async_futex_wait_until(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns) {
    if (deadline_ns == 0) {
        syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
        return;
    }
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000ull),
                          .tv_nsec = (long)(deadline_ns % 1000000000ull)};
    /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline. */
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_BITSET_PRIVATE, expected, &ts, NULL,
            FUTEX_BITSET_MATCH_ANY);
}

void aft_async_process_cpu(aft_crash_info *ci) {
    struct rusage usage; /* every thread's, so far: one plain system call */
    if (syscall(SYS_getrusage, (long)RUSAGE_SELF, &usage) != 0) return;
    ci->cpu_user_us = (uint64_t)usage.ru_utime.tv_sec * 1000000u + (uint64_t)usage.ru_utime.tv_usec;
    ci->cpu_system_us =
        (uint64_t)usage.ru_stime.tv_sec * 1000000u + (uint64_t)usage.ru_stime.tv_usec;
}
