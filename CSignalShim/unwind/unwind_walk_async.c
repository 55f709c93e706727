/*
 * unwind_walk_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). The stack without libunwind, lock free: the frame-pointer walk from a pc and
 * a frame pointer (a signal context's, or the caller's), for hangs with the return address a
 * function without a frame record leaves between two records, every read through
 * aft_async_read_memory 16 KiB at a time, so a corrupt chain ends the walk instead of faulting;
 * and the first frame record above a stack pointer whose linked record is one too, for threads
 * known only by sp and pc.
 */
#include <errno.h>
#include <stdint.h>

#include "shim_internal.h"
#include "unwind_internal.h"

aft_stack_window aft_g_stack_windows[AFT_UNWIND_SLOTS];

/* The 16 bytes at address, through the window: refilled from address with 16 KiB, or up to the
 * end of its page near the end of a mapping, or just the 16 bytes. */
static int aft_async_read_pair(aft_stack_window *w, uint64_t address, uint64_t pair[2]) {
    if (address < w->base || address + 16 > w->base + w->size) {
        uint64_t page_end = (address | 4095u) + 1;
        w->size = 0;
        if (aft_async_read_memory(address, w->data, sizeof(w->data)) == 0) {
            w->size = sizeof(w->data);
        } else if (page_end - address >= 16 &&
                   aft_async_read_memory(address, w->data, page_end - address) == 0) {
            w->size = page_end - address;
        } else if (aft_async_read_memory(address, w->data, 16) == 0) {
            w->size = 16;
        } else {
            return EFAULT;
        }
        w->base = address;
    }
    aft_async_memcpy(pair, w->data + (address - w->base), 16);
    return 0;
}

#if defined(__x86_64__)
/* A return address: in an image read after start, just after a call instruction. */
static int aft_async_plausible_return(uint64_t ret) {
    return ret > 4096 && aft_async_pc_in_known_image(ret) && aft_async_arch_follows_call(ret);
}
#endif

/* The first return address in the words after the record at fp and before the next record
 * (at most AFT_GAP_SCAN_BYTES): the one a function without a frame record (a thunk of a
 * library, libc's code) left when its caller's record is the next. Taken only from another
 * image than the function the record returns into (ret): such a function is a library's, its
 * caller the app's or another library's, while a gap inside one image is a frame's locals. And
 * only where the caller's call left it: the caller keeps the next record, and its prologue says
 * how far below that record its sp is at a call (aft_async_cfi_frame_below), so the return
 * address is the word just below that sp. A return address a deeper call left in the caller's
 * unset locals is anywhere else. 0 when there is none. x86-64 only, as the sp scan. */
#define AFT_GAP_SCAN_BYTES 64u
#define AFT_GAP_SCAN_STEPS 8u
static uint64_t aft_async_gap_return(aft_stack_window *w, uint64_t fp, uint64_t next,
                                     uint64_t ret_of_record) {
#if defined(__x86_64__)
    int skipped_image = aft_async_known_image_of(ret_of_record);
    if (skipped_image < 0) return 0;
    for (uint64_t at = fp + 16; at + 8 <= next && at < fp + 16 + AFT_GAP_SCAN_BYTES; at += 16) {
        uint64_t pair[2];
        if (aft_async_read_pair(w, at, pair) != 0) return 0;
        for (int k = 0; k < 2; k++) {
            if (at + 8u * (uint64_t)k + 8 > next) return 0;
            uint64_t ret = aft_async_arch_code_address(pair[k]);
            int image = ret > 4096 ? aft_async_known_image_of(ret) : -1;
            /* The image first (no system call): a frame's own pointers into its image are not
             * read as code. */
            if (image < 0 || image == skipped_image) continue;
            uint64_t slot = at + 8u * (uint64_t)k, below = 0;
            if (aft_async_arch_follows_call(ret) && aft_async_cfi_frame_below(ret, &below) == 0 &&
                slot + 8 + below == next)
                return ret;
        }
    }
#else
    (void)w, (void)fp, (void)next, (void)ret_of_record;
#endif
    return 0;
}

static uint32_t aft_async_walk(aft_stack_window *w, uint64_t pc, uint64_t fp, uint64_t *frames,
                               uint32_t capacity, uint32_t *truncated, int scan_gaps) {
    if (scan_gaps != 2) w->base = w->size = 0; /* 2: the window read at sp serves first */
    uint32_t n = 0;
    if (capacity == 0) return 0;
    if (pc != 0) frames[n++] = pc;
    uint32_t steps = 0;
    while (fp != 0 && (fp & 7) == 0) {
        uint64_t pair[2]; /* saved fp, return address */
        steps++;
        if (aft_async_read_pair(w, fp, pair) != 0) break;
        if (pair[1] == 0) break;
        if (n == capacity) {
            if (truncated) *truncated = 1;
            break;
        }
        frames[n++] = aft_async_arch_code_address(pair[1]);
        if (pair[0] <= fp) break; /* stacks grow down: the chain must go up */
        /* From a handler (2), the records nearest the pc only: where the waits are. */
        if (scan_gaps && (scan_gaps != 2 || steps <= AFT_GAP_SCAN_STEPS) && pair[0] > fp + 16) {
            uint64_t next = pair[0];
            uint64_t ret = aft_async_gap_return(w, fp, next, frames[n - 1]);
            if (ret != 0) {
                if (n == capacity) {
                    if (truncated) *truncated = 1;
                    break;
                }
                frames[n++] = ret;
            }
        }
        fp = pair[0];
    }
    return n;
}

uint32_t aft_async_frame_pointer_walk(aft_stack_window *w, uint64_t pc, uint64_t fp,
                                      uint64_t *frames, uint32_t capacity, uint32_t *truncated) {
    return aft_async_walk(w, pc, fp, frames, capacity, truncated, 0);
}

uint32_t aft_async_frame_pointer_walk_scanning(aft_stack_window *w, uint64_t pc, uint64_t fp,
                                               uint64_t *frames, uint32_t capacity,
                                               uint32_t *truncated) {
    return aft_async_walk(w, pc, fp, frames, capacity, truncated, 1);
}

uint32_t aft_async_walk_from_sp(aft_stack_window *w, uint64_t pc, uint64_t sp, uint64_t fp,
                                const uint64_t scratch[512], uint64_t *frames, uint32_t capacity,
                                uint32_t *truncated) {
    uint32_t n = 0;
    if (capacity == 0) return 0;
    if (pc != 0) frames[n++] = pc;
    /* The unwind tables first: the frames below the first record exactly, and that record. */
    uint32_t count = 0;
    uint64_t record = aft_async_cfi_record_from_sp(pc, sp, frames + n, capacity - n, &count);
    if (record != 0) {
        n += count;
        return n + aft_async_frame_pointer_walk_scanning(w, 0, record, frames + n, capacity - n,
                                                         truncated);
    }
#if defined(__x86_64__)
    for (uint64_t at = sp; fp > sp && at < fp && at < sp + 512 * 8 && n < capacity; at += 8) {
        uint64_t ret = aft_async_arch_code_address(scratch[(at - sp) / 8]);
        if (aft_async_plausible_return(ret)) frames[n++] = ret;
    }
#else
    (void)sp, (void)scratch;
#endif
    return n + aft_async_frame_pointer_walk_scanning(w, 0, fp, frames + n, capacity - n, truncated);
}

/* Whether words[i] and words[i + 1] (at sp + 8 * i, of the count words read at sp) are a frame
 * record, a saved frame pointer a little further up and then a return address just after a call:
 * 0, no; 2, yes, and the record it links to is one too (its own saved frame pointer further up,
 * or 0 at the chain's end, and a return address after a call), read from words when they hold
 * it; 1, a record whose link is none or cannot be read. A pointer a frame saved into a mapping
 * just above the stack (a malloc arena's heap, which the kernel may place right there) beside a
 * return address is such a 1: what it points at is no record, and a walk from it leaves the
 * stack at once. */
static int aft_async_record_at(const uint64_t *words, uint32_t count, uint64_t sp, uint32_t i) {
    uint64_t at = sp + 8ull * i, next = words[i];
    uint64_t ret = aft_async_arch_code_address(words[i + 1]);
    if (!(next > at + 8 && next - at < (1u << 20) && (next & 7) == 0 && ret > 4096 &&
          aft_async_arch_follows_call(ret)))
        return 0;
    uint64_t linked[2], k = (next - sp) / 8;
    if (k + 1 < count) {
        linked[0] = words[k];
        linked[1] = words[k + 1];
    } else if (aft_async_read_memory(next, linked, sizeof(linked)) != 0) {
        return 1;
    }
    uint64_t linked_ret = aft_async_arch_code_address(linked[1]);
    int linked_record = (linked[0] == 0 || linked[0] > next) && linked_ret > 4096 &&
                        aft_async_arch_follows_call(linked_ret);
    return linked_record ? 2 : 1;
}

/* The first frame record in words (count of them, read at sp) whose linked record is one too;
 * else the first record at all (a caller without frame pointers leaves its callee's record no
 * link to follow); else 0. */
static uint64_t aft_async_first_record(const uint64_t *words, uint32_t count, uint64_t sp) {
    uint64_t first = 0;
    for (uint32_t i = 0; i + 1 < count; i++) {
        int record = aft_async_record_at(words, count, sp, i);
        if (record == 2) return sp + 8ull * i;
        if (record == 1 && first == 0) first = sp + 8ull * i;
    }
    return first;
}

uint32_t aft_async_walk_from_sp_window(aft_stack_window *w, uint64_t pc, uint64_t sp,
                                       uint64_t *frames, uint32_t capacity, uint32_t *truncated) {
    /* One read at sp: the first record above it, the return addresses below that record and the
     * first records of the walk all come from it. */
    w->base = w->size = 0;
    if (capacity == 0 || sp == 0 || (sp & 7) != 0) return 0;
    /* 4 KiB first: the records nearest sp; the walk refills the window further up. */
    uint64_t page_end = (sp | 4095u) + 1;
    if (aft_async_read_memory(sp, w->data, 4096) == 0) {
        w->size = 4096;
    } else if (aft_async_read_memory(sp, w->data, page_end - sp) == 0) {
        w->size = page_end - sp;
    } else {
        return 0;
    }
    w->base = sp;
    const uint64_t *words = (const uint64_t *)(const void *)w->data;
    uint32_t count = (uint32_t)(w->size / 8), n = 0;
    if (count > 512) count = 512; /* the 4 KiB above sp, as for a thread known by sp and pc */
    uint64_t fp = aft_async_first_record(words, count, sp);
    if (pc != 0) frames[n++] = pc;
#if defined(__x86_64__)
    for (uint64_t at = sp; fp > sp && at < fp && n < capacity; at += 8) {
        uint64_t ret = aft_async_arch_code_address(words[(at - sp) / 8]);
        if (aft_async_plausible_return(ret)) frames[n++] = ret;
    }
#endif
    if (fp == 0 || n >= capacity) return n;
    return n + aft_async_walk(w, 0, fp, frames + n, capacity - n, truncated, 2);
}

uint32_t aft_async_unwind_frame_pointers(const void *ucontext, uint64_t *frames, uint32_t capacity,
                                         uint32_t slot, uint32_t *unwinder, uint32_t *truncated) {
    uint64_t pc = 0, fp = 0;
    *truncated = 0;
    *unwinder = AFT_UNWINDER_NONE;
    if (ucontext == NULL || slot >= AFT_UNWIND_SLOTS || capacity == 0) return 0;
    aft_async_arch_pc_fp(ucontext, &pc, &fp);
    uint32_t n = aft_async_frame_pointer_walk(&aft_g_stack_windows[slot], pc, fp, frames, capacity,
                                              truncated);
    *unwinder = n > 1    ? AFT_UNWINDER_FRAME_POINTER
                : n == 1 ? AFT_UNWINDER_PC_ONLY
                         : AFT_UNWINDER_NONE;
    return n;
}

uint64_t aft_async_frame_record_above(uint64_t sp, uint64_t words[512]) { /* 4 KiB above sp */
    if (sp == 0 || (sp & 7) != 0 || aft_async_read_memory(sp, words, 512 * sizeof(uint64_t)) != 0)
        return 0;
    return aft_async_first_record(words, 512, sp);
}
