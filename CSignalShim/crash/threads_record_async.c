/*
 * threads_record_async.c: CRASH-TIME CODE, under the crash-time contract of
 * CSignalShim/README.md (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift;
 * checked by AsyncSafetyTests). The capture of every thread, once the threads are paused
 * (threads_capture_async.c): their stacks unwound and their stack memory copied, then their
 * release. Also the answer to an alternate-stack request, which gives a thread that existed
 * before start an alternate stack from its own signal handler.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <time.h>
#include <unistd.h>

#include "threads_internal.h"
#include "watchdog_internal.h"

aft_altstack_requests aft_g_altstack_requests;

int aft_async_threads_altstack_request(void *ucontext) {
    aft_altstack_requests *q = &aft_g_altstack_requests;
    if (!atomic_load(&q->open) || ucontext == NULL) return 0;
    uint64_t tid = aft_async_gettid();
    uint32_t n = atomic_load(&q->count);
    for (uint32_t i = 0; i < n && i < AFT_ALTSTACK_REQUESTS; i++) {
        aft_altstack_request *r = &q->requests[i];
        if (atomic_load(&r->tid) != tid) continue;
        uint32_t pending = AFT_ALTSTACK_PENDING;
        if (!atomic_compare_exchange_strong(&r->state, &pending, AFT_ALTSTACK_ANSWERING)) return 1;
        /* The return from this handler (sigreturn) restores the alternate stack its context
         * holds: the new one goes there, and takes effect as the handler returns. */
        ucontext_t *uc = ucontext;
        uint32_t outcome = AFT_ALTSTACK_HAD_ONE;
        if (uc->uc_stack.ss_flags & SS_DISABLE) {
            uc->uc_stack.ss_sp = r->base;
            uc->uc_stack.ss_size = r->size;
            uc->uc_stack.ss_flags = 0;
            outcome = AFT_ALTSTACK_GIVEN;
        }
        atomic_store(&r->state, outcome);
        aft_async_futex_wake(&r->state);
        return 1;
    }
    return 0;
}

/* Reads the readable prefix of [address, address + size) into out: its length. */
static uint64_t aft_async_read_prefix(uint64_t address, uint8_t *out, uint64_t size) {
    int fd = aft_g_memory.mem_fd;
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
static void aft_async_copy_stack(aft_thread_capture *c, uint32_t index, uint64_t *used) {
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
     * main thread's stack has no neighbour above: a read stops at its end by itself. */
    uint64_t tp = r->thread_pointer;
#if defined(__x86_64__)
    uint64_t tls = aft_g_static_tls_size;
    uint64_t end = tp > tls + 4096 ? tp - tls + 4096 : 0;
#else
    uint64_t end = tp;
#endif
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
    uint8_t *out = c->arena + *used;
    uint64_t got = 0;
    for (int attempt = 0; attempt < 3 && got == 0; attempt++) {
        got = aft_async_read_prefix(start, out, cap);
        if (got == 0) start = (start + 4096) & ~4095ull;
    }
    if (got == 0) return;
    if (got == cap && cap == whole && (end == 0 || end > start + cap)) {
        uint8_t probe;
        if (aft_async_read_prefix(start + cap, &probe, 1) == 1)
            r->flags |= AFT_THREAD_STACK_TRUNCATED;
    }
    r->stack_start = start;
    r->stack_size = got;
    c->stack_offsets[index] = *used;
    *used += (got + 15) & ~15ull;
}

/* The stack of a paused thread, or of one the kernel gave sp and pc for. */
static void aft_async_unwind_thread(aft_thread_capture *c, uint32_t index, uint64_t deadline_ns) {
    aft_capture_slot *slot = &c->slots[index];
    aft_thread *r = &c->records[index];
    uint64_t *frames = c->frames + c->frame_count;
    uint32_t room = AFT_THREADS_FRAME_CAPACITY - c->frame_count;
    uint32_t capacity = room < AFT_THREAD_MAX_FRAMES ? room : AFT_THREAD_MAX_FRAMES;
    uint32_t n = 0, unwinder = AFT_UNWINDER_NONE, truncated = 0, status = AFT_UNWIND_STATUS_SKIPPED;
    uint32_t state = atomic_load(&slot->state);
    if (capacity == 0) {
        /* no room left */
    } else if (c->for_hang &&
               (state == AFT_SLOT_PARKED || r->context_source == AFT_THREAD_CONTEXT_SYSCALL)) {
        /* A hang's: frame pointers only, on a window of its own. libunwind's helper would wait
         * on a lock a paused thread may hold (the loader's), and a helper killed at its
         * deadline would take libunwind from every later crash. */
        uint64_t pc = r->pc, fp = 0;
        /* A paused thread in a system call (a lock's wait) is in libc, which keeps no frame
         * record: from its sp, as a thread the kernel gave sp and pc for. */
        int from_sp = r->sp != 0 && (state != AFT_SLOT_PARKED || r->syscall_number >= 0);
        const void *uc = !from_sp ? slot->ucontext
                                  : aft_async_arch_synthesize_context(
                                        c->synthetic, sizeof(c->synthetic), r->pc, r->sp, c->scan);
        if (uc != NULL) aft_async_arch_pc_fp(uc, &pc, &fp);
        n = !from_sp
                ? aft_async_frame_pointer_walk(&c->window, pc, fp, frames, capacity, &truncated)
                : aft_async_walk_from_sp(&c->window, pc, r->sp, fp, c->scan, frames, capacity,
                                         &truncated);
        unwinder = n > 1    ? AFT_UNWINDER_FRAME_POINTER
                   : n == 1 ? AFT_UNWINDER_PC_ONLY
                            : AFT_UNWINDER_NONE;
    } else if (state == AFT_SLOT_PARKED && slot->ucontext != NULL) {
        uint64_t now = aft_async_now_ns(CLOCK_MONOTONIC);
        uint64_t budget = deadline_ns > now ? deadline_ns - now : 0;
        if (budget > AFT_THREADS_UNWIND_EACH_NS) budget = AFT_THREADS_UNWIND_EACH_NS;
        if (budget >= 1000000ull && !atomic_load(&aft_g_libunwind_abandoned)) {
            n = aft_async_unwind_context(slot->ucontext, frames, capacity, c->unwind_slot, budget,
                                         &unwinder, &truncated, &status);
        } else {
            n = aft_async_unwind_frame_pointers(slot->ucontext, frames, capacity, c->unwind_slot,
                                                &unwinder, &truncated);
        }
    } else if (r->context_source == AFT_THREAD_CONTEXT_SYSCALL && r->pc != 0 &&
               (r->flags & AFT_THREAD_AFTERMATH)) {
        frames[0] = r->pc; /* one of ours: where it waits is enough */
        n = 1;
        unwinder = AFT_UNWINDER_PC_ONLY;
    } else if (r->context_source == AFT_THREAD_CONTEXT_SYSCALL && r->pc != 0) {
        /* Only sp and pc: the unwind tables still find its callers (a thread in a system call
         * is in libc, whose tables say where each frame keeps its return address). */
        uint64_t now = aft_async_now_ns(CLOCK_MONOTONIC);
        uint64_t budget = deadline_ns > now ? deadline_ns - now : 0;
        if (budget > AFT_THREADS_UNWIND_EACH_NS) budget = AFT_THREADS_UNWIND_EACH_NS;
        void *uc = aft_async_arch_synthesize_context(c->synthetic, sizeof(c->synthetic), r->pc,
                                                     r->sp, c->scan);
        if (uc != NULL) { /* its registers as the readers of a minidump will unwind them */
            aft_crash_info regs;
            aft_async_memset(&regs, 0, sizeof(regs));
            aft_async_arch_registers(uc, &regs);
            aft_async_memcpy(r->registers, regs.registers, sizeof(r->registers));
            r->register_count = regs.register_count;
        }
        if (uc != NULL && budget >= 1000000ull && !atomic_load(&aft_g_libunwind_abandoned))
            n = aft_async_unwind_context(uc, frames, capacity, c->unwind_slot, budget, &unwinder,
                                         &truncated, &status);
        if (n < 2 && uc != NULL) /* past the budget, or without libunwind: frame pointers */
            n = aft_async_unwind_frame_pointers(uc, frames, capacity, c->unwind_slot, &unwinder,
                                                &truncated);
        if (n < 2) {
            frames[0] = r->pc;
            n = 1;
            unwinder = AFT_UNWINDER_PC_ONLY;
            truncated = 0;
        }
    }
    r->frame_count = n;
    r->frames_truncated = truncated;
    r->unwinder = unwinder;
    r->unwind_status = status;
    c->frame_count += n;
}

/* Opens a capture whose first slot is the calling thread's. */
static void aft_async_capture_open(aft_thread_capture *c, uint64_t self_tid) {
    aft_async_memset(&c->info, 0, sizeof(c->info));
    c->frame_count = 0;
    c->swift_async.count = 0;
    c->sigprof_borrowed = 0;
    atomic_store(&c->answered, 0);
    atomic_store(&c->left, 0);
    atomic_store(&c->count, 0);
    atomic_store(&c->slots[0].tid, self_tid);
    atomic_store(&c->slots[0].state, AFT_SLOT_LISTED);
    atomic_store(&c->count, 1);
    c->info.seen = 1;
    uint32_t gen = atomic_load(&c->generation);
    atomic_store(&c->generation, (gen | 1u) + 2u); /* odd: open, and not the last capture's */
}

/* Lists, signals and collects every other thread, then unwinds them and copies their stacks. */
static void aft_async_capture_run(aft_thread_capture *c, uint64_t begin) {
    /* Our handler must still be the capture signal's: an app may have taken it since. */
    int capture = atomic_load(&aft_g_thread_capture_signal);
    struct sigaction current;
    if (capture > 0 &&
        (sigaction(capture, NULL, &current) != 0 || !(current.sa_flags & SA_SIGINFO) ||
         current.sa_sigaction != aft_async_watchdog_capture_handler))
        capture = 0;
    c->info.capture_signal = capture > 0 ? (uint32_t)capture : 0;
    uint64_t first_signal = 0;
    for (uint32_t round = 0; round < AFT_THREADS_ROUNDS; round++) {
        c->info.rounds = round + 1;
        /* Again only while threads are being paused: a thread created meanwhile is listed. */
        if (aft_async_threads_list(c, capture, &first_signal) == 0 || first_signal == 0) break;
    }
    if (first_signal != 0) aft_async_threads_collect(c, capture, first_signal);
    uint64_t collected = aft_async_now_ns(CLOCK_MONOTONIC);
    c->info.capture_ns = collected - begin;

    /* Drop the threads that ended (and a hang's capturer); keep the order of the rest. */
    uint32_t count = atomic_load(&c->count), kept = c->for_hang ? 0 : 1;
    for (uint32_t i = 1; i < count; i++) {
        if (atomic_load(&c->slots[i].state) == AFT_SLOT_EXITED) continue;
        if (kept != i) {
            aft_async_memcpy(&c->records[kept], &c->records[i], sizeof(aft_thread));
            c->slots[kept].ucontext = c->slots[i].ucontext;
            c->slots[kept].signal = c->slots[i].signal;
            atomic_store(&c->slots[kept].state, atomic_load(&c->slots[i].state));
            atomic_store(&c->slots[kept].tid, atomic_load(&c->slots[i].tid));
        }
        kept++;
    }
    atomic_store(&c->count, kept);
    c->info.recorded = kept;

    uint64_t unwind_deadline = collected + AFT_THREADS_UNWIND_NS;
    for (uint32_t i = c->for_hang ? 0 : 1; i < kept; i++) {
        aft_async_unwind_thread(c, i, unwind_deadline);
        aft_async_swift_chain_of_record(&c->swift_async, &c->records[i]); /* while it waits */
    }
    uint64_t used = 0;
    c->mappings_read = 0;
    c->mapping_count = 0;
    for (uint32_t i = 0; i < kept && !c->for_hang; i++) aft_async_copy_stack(c, i, &used);
    c->info.stack_bytes = (uint32_t)used;
    c->info.unwind_ns = aft_async_now_ns(CLOCK_MONOTONIC) - collected;
}

void aft_async_threads_capture(const aft_crash_info *ci, const void *ucontext,
                               const uint64_t *frames, uint32_t frame_count, uint32_t truncated,
                               int spare_sleepers) {
    aft_thread_capture *c = &aft_g_threads;
    c->spare_sleepers = spare_sleepers;
    uint64_t begin = aft_async_now_ns(CLOCK_MONOTONIC);
    aft_async_capture_open(c, ci->thread_id);
    /* The crashing thread first, from its own fault. */
    aft_thread *r = &c->records[0];
    aft_async_memset(r, 0, sizeof(*r));
    r->thread_id = ci->thread_id;
    aft_async_memcpy(r->name, ci->thread_name, sizeof(r->name));
    r->flags = AFT_THREAD_CRASHED | (ci->is_main_thread ? AFT_THREAD_MAIN : 0);
    r->state = 'R';
    r->syscall_number = -2;
    if (ucontext != NULL) aft_async_fill_from_context(r, ucontext, AFT_THREAD_CONTEXT_CRASH);
    r->thread_pointer = aft_async_arch_thread_pointer();
    r->unwinder = ci->unwinder;
    r->unwind_status = ci->unwind_status;
    uint32_t n = frame_count < AFT_MAX_FRAMES ? frame_count : AFT_MAX_FRAMES;
    aft_async_memcpy(c->frames, frames, (size_t)n * sizeof(uint64_t));
    r->frame_count = n;
    r->frames_truncated = truncated;
    c->frame_count = n;
    aft_async_capture_run(c, begin);
}

void aft_async_threads_capture_for_hang(uint64_t watched_tid) {
    aft_thread_capture *c = &aft_g_hang_threads;
    uint64_t begin = aft_async_now_ns(CLOCK_MONOTONIC);
    c->skip_tid = watched_tid;
    aft_async_capture_open(c, aft_async_gettid());
    aft_async_capture_run(c, begin);
}

void aft_async_threads_release(void) { aft_async_threads_release_capture(&aft_g_threads); }

void aft_async_threads_release_capture(aft_thread_capture *c) {
    uint32_t gen = atomic_load(&c->generation);
    if (!(gen & 1u)) return;
    atomic_store(&c->released, gen);
    aft_async_futex_wake(&c->released);
    atomic_store(&c->generation, gen + 1u); /* closed: a late signal finds nothing to answer */
    uint64_t deadline = aft_async_now_ns(CLOCK_MONOTONIC) + 20ull * 1000 * 1000;
    for (;;) {
        uint32_t left = atomic_load(&c->left);
        if (left >= atomic_load(&c->answered) || aft_async_now_ns(CLOCK_MONOTONIC) >= deadline)
            break;
        aft_async_futex_wait_until(&c->left, left, deadline);
    }
    /* SIGPROF back to its owner, unless a thread we sent it to never answered: it may still be
     * pending there, and its default action would end the process. */
    if (c->sigprof_borrowed) {
        int pending = 0;
        uint32_t n = atomic_load(&c->count);
        for (uint32_t i = 1; i < n; i++)
            if (c->slots[i].signal == SIGPROF && atomic_load(&c->slots[i].state) == AFT_SLOT_LATE)
                pending = 1;
        if (!pending) sigaction(SIGPROF, &c->sigprof_previous, NULL);
        c->sigprof_borrowed = 0;
    }
}
