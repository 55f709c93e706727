/*
 * threads_stack_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). The stack memory of every paused thread at a crash, copied through
 * /proc/self/mem into the capture's arena at the caps of aftermath_format.h, each cut at the end
 * of its own stack; and whether a thread's frames can be left to the next launch.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "threads_internal.h"

/* Reads the readable prefix of [address, address + size) into out: its length. */
static uint64_t aft_async_read_prefix(uint64_t address, uint8_t *out, uint64_t size) {
    int fd = aft_async_memory_fd();
    if (fd >= 0 && address != 0 && address + size > address) {
        ssize_t n;
        do {
            n = pread(fd, out, (size_t)size, (off_t)address);
        } while (n < 0 && errno == EINTR);
        if (n >= 0) return (uint64_t)n;
        if (errno == EIO || errno == EFAULT) return 0;
    }
    uint64_t got = 0; /* without /proc/self/mem: a page at a time */
    while (got < size) {
        uint64_t chunk = 4096 - ((address + got) & 4095u);
        if (chunk > size - got) chunk = size - got;
        if (aft_async_read_memory(address + got, out + got, (size_t)chunk) != 0) break;
        got += chunk;
    }
    return got;
}

/* The readable prefix of a stack from *start, at most cap bytes, into out; a start in a guard
 * page (a stack overflow) moves up a page at a time, twice at most. */
static uint64_t aft_async_read_stack(uint64_t *start, uint8_t *out, uint64_t cap) {
    uint64_t got = 0;
    for (int attempt = 0; attempt < 3 && got == 0; attempt++) {
        got = aft_async_read_prefix(*start, out, cap);
        if (got == 0) *start = (*start + 4096) & ~4095ull;
    }
    return got;
}

uint64_t aft_async_copy_stack_late(aft_thread_capture *c, uint32_t index, uint64_t *start) {
    const aft_thread *r = &c->records[index];
    *start = r->stack_start;
    return aft_async_read_stack(start, c->arena + c->slots[index].stack_offset, r->stack_size);
}

/* The writable mappings, "start-end rw..." at each line's start of /proc/self/maps, parsed as
 * the bytes come (a line may span two reads). */
static void aft_async_read_mappings(aft_thread_capture *c) {
    c->mapping_count = 0;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    uint64_t start = 0, end = 0;
    int field = 0; /* 0 start, 1 end, 2 r, 3 w, 4 rest of the line */
    int writable = 0;
    char *buf = c->dirents;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(c->dirents));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        for (ssize_t i = 0; i < n; i++) {
            char ch = buf[i];
            if (ch == '\n') {
                if (writable && end > start && c->mapping_count < AFT_THREADS_MAPPINGS) {
                    c->mappings[c->mapping_count][0] = start;
                    c->mappings[c->mapping_count][1] = end;
                    c->mapping_count++;
                }
                start = end = 0;
                field = writable = 0;
                continue;
            }
            uint64_t digit = ch >= '0' && ch <= '9'   ? (uint64_t)(ch - '0')
                             : ch >= 'a' && ch <= 'f' ? (uint64_t)(ch - 'a' + 10)
                                                      : 16;
            if (field == 0 && ch == '-')
                field = 1;
            else if (field == 0 && digit < 16)
                start = start << 4 | digit;
            else if (field == 1 && ch == ' ')
                field = 2;
            else if (field == 1 && digit < 16)
                end = end << 4 | digit;
            else if (field == 2)
                field = 3; /* r, or - */
            else if (field == 3) {
                writable = ch == 'w';
                field = 4;
            }
        }
    }
    close(fd);
}

/* The end of the writable mapping that holds address, or of the first one above it (an sp in a
 * guard page); 0 when there is none, or no list. */
static uint64_t aft_async_mapping_end(const aft_thread_capture *c, uint64_t *address) {
    for (uint32_t i = 0; i < c->mapping_count; i++) {
        if (c->mappings[i][1] <= *address) continue;
        if (c->mappings[i][0] > *address) {
            if (c->mappings[i][0] - *address > 65536) return 0; /* no stack of its */
            *address = c->mappings[i][0];
        }
        return c->mappings[i][1];
    }
    return 0;
}

/* Copies a thread's stack from its sp (less the red zone) up, at most cap bytes, cut at the end
 * of the mapping. An sp in a guard page (a stack overflow) starts at the next pages up. */
void aft_async_copy_stack(aft_thread_capture *c, uint32_t index, uint64_t *used) {
    aft_thread *r = &c->records[index];
    uint64_t cap = index == 0                        ? AFT_STACK_CAP_CRASHED
                   : index < AFT_STACK_EARLY_THREADS ? AFT_STACK_CAP_EARLY
                                                     : AFT_STACK_CAP_LATE;
    if (r->sp <= AFT_STACK_RED_ZONE || *used + cap > sizeof(c->arena)) return;
    if (r->flags & AFT_THREAD_AFTERMATH) return; /* one of ours: its stack is no evidence */
    uint64_t start = (r->sp - AFT_STACK_RED_ZONE) & ~15ull;
    /* Cut below its static TLS, which glibc keeps at the top of a thread's stack mapping (tens
     * of KiB in a Swift process, the same in every thread): on x86-64 below the thread pointer,
     * with a page to spare for glibc's thread descriptor above the last frame; on arm64 the TLS
     * is above the thread pointer. Else at the end of the stack's own mapping: the next one up
     * is another thread's guard page and stack, which /proc/self/mem would read as well. The
     * main thread's stack ends where start found it; unknown, it has no neighbour above: a read
     * stops at its end by itself. */
    uint64_t tp = r->thread_pointer;
    if (tp == 0) tp = aft_async_known_thread_pointer(r->thread_id); /* known by /proc alone */
#if defined(__x86_64__)
    uint64_t tls = aft_g_static_tls_size;
    uint64_t end = tp > tls + 4096 ? tp - tls + 4096 : 0;
#else
    uint64_t end = tp;
#endif
    if ((r->flags & AFT_THREAD_MAIN) && aft_g_main_stack_end != 0 && aft_g_main_stack_pid == c->pid)
        end = aft_g_main_stack_end;
    if (end <= start || end - start > (1u << 24)) end = 0; /* not above this stack */
    if (end == 0 && !(r->flags & AFT_THREAD_MAIN)) {
        if (!c->mappings_read) {
            aft_async_read_mappings(c);
            c->mappings_read = 1;
        }
        end = c->mapping_count > 0 ? aft_async_mapping_end(c, &start) : 0;
    }
    uint64_t whole = cap;
    if (end > start && end - start < cap) cap = end - start;
    if (index == 0 && (r->flags & AFT_THREAD_MAIN) && end == aft_g_main_stack_end && end > start) {
        /* A crashing main thread's stack does not change while the handler runs (the thread is
         * in it, or on its alternate stack, below its red zone): left where it is, for the
         * writer to write from there, where a copy would read it through /proc/self/mem into
         * arena pages touched for the first time (about 40 µs of a crash's 200 at 12 KiB). Its
         * slot in the arena is kept for the copy the writer makes should it not all be
         * readable. Another thread's is copied: its extent reaches into its static TLS and
         * thread descriptor, where the kernel keeps writing (the rseq area's cpu id), so that
         * bytes taken twice, once written and once summed, could differ. */
        r->stack_start = start;
        r->stack_size = cap;
        if (cap == whole && end > start + cap) r->flags |= AFT_THREAD_STACK_TRUNCATED;
        c->slots[index].stack_offset = *used;
        *used += (cap + 15) & ~15ull;
        c->stack_in_place = 1;
        return;
    }
    uint8_t *out = c->arena + *used;
    uint64_t got = aft_async_read_stack(&start, out, cap);
    if (got == 0) return;
    if (got == cap && cap == whole && (end == 0 || end > start + cap)) {
        uint8_t probe;
        if (aft_async_read_prefix(start + cap, &probe, 1) == 1)
            r->flags |= AFT_THREAD_STACK_TRUNCATED;
    }
    r->stack_start = start;
    r->stack_size = got;
    c->slots[index].stack_offset = *used;
    *used += (got + 15) & ~15ull;
}

uint64_t aft_async_known_thread_pointer(uint64_t tid) {
    uint32_t high = atomic_load(&aft_g_known_threads_high);
    for (uint32_t i = 0; i < high && i < AFT_KNOWN_THREADS; i++) {
        const aft_known_thread *k = aft_known_thread_slot(i);
        if (atomic_load(&k->tid) == tid) return atomic_load(&k->thread_pointer);
    }
    return 0;
}

/* Whether a thread's frames can be left to the next launch, which unwinds them from the
 * registers and stack bytes of the file with the images' unwind tables, as a crash server
 * would: it answered from its signal frame, or the kernel gave its sp and pc; its whole stack
 * is in the arena (not cut at its cap), every stack copied so far fits in the crash file's
 * reserve, and its pc is in an image read at start. Else it is unwound here. */
int aft_async_thread_unwind_deferrable(const aft_thread_capture *c, uint32_t index) {
    const aft_thread *r = &c->records[index];
    const aft_capture_slot *slot = &c->slots[index];
    if (c->for_hang || !c->defer_unwinding || r->stack_size == 0 || r->pc == 0) return 0;
    int parked = atomic_load(&slot->state) == AFT_SLOT_PARKED && slot->ucontext != NULL &&
                 r->register_count > 0;
    /* One the kernel gave sp and pc for: its registers are made of them (threads_record). */
    if (!parked && r->context_source != AFT_THREAD_CONTEXT_SYSCALL) return 0;
    if (r->flags & (AFT_THREAD_STACK_TRUNCATED | AFT_THREAD_AFTERMATH)) return 0;
    if (c->slots[index].stack_offset + r->stack_size > AFT_THREADS_RESERVED_STACK_BYTES) return 0;
    return aft_async_pc_in_known_image(aft_async_arch_code_address(r->pc));
}
