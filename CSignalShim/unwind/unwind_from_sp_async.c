/*
 * unwind_from_sp_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). A thread known only by sp and pc (asleep in a system call, from
 * /proc/self/task/<tid>/syscall) has no frame pointer to start a walk from: the kernel keeps it
 * but does not say. Its innermost functions are libc's, which keep no frame record but whose
 * unwind tables say where each keeps its return address relative to sp (unwind_cfi_async.c).
 * This file steps through those, then finds the frame record of the first function that keeps
 * one: where a frame on the way saved the frame pointer, or else from that function's prologue
 * (push rbp; mov rbp, rsp; pushes; sub rsp), which says how far below its record sp is at a
 * call. Scanning the stack for a record instead takes the stale records a deeper call left in a
 * frame's unset locals. Every read goes through aft_async_read_memory. x86-64 only; elsewhere
 * nothing is found and the caller scans.
 */
#include <stdint.h>

#include "unwind_internal.h"

#if defined(__x86_64__)

#define AFT_CFI_MAX_STEPS 8u /* libc frames below the first record: a wrapper and its waits */
#define AFT_CFI_FRAME_MAX (1u << 20) /* a record further above sp than this is not believed */

/* How far below its frame record a function keeps sp once its prologue has run: the prologue's
 * pushes after the record and its sub rsp, decoded from function's first bytes. 0 with *below
 * when the function starts with a frame-pointer prologue that ends before pc. */
static int aft_cfi_prologue(uint64_t function, uint64_t pc, uint64_t *below) {
    uint8_t b[40];
    if (aft_async_read_memory(function, b, sizeof(b)) != 0) return -1;
    uint32_t i = 0;
    if (b[0] == 0xF3 && b[1] == 0x0F && b[2] == 0x1E && b[3] == 0xFA) i = 4; /* endbr64 */
    if (b[i] != 0x55) return -1;                                             /* push rbp */
    i++;
    if (!(b[i] == 0x48 &&
          ((b[i + 1] == 0x89 && b[i + 2] == 0xE5) || (b[i + 1] == 0x8B && b[i + 2] == 0xEC))))
        return -1; /* mov rbp, rsp */
    i += 3;
    uint64_t size = 0;
    while (i + 7 <= sizeof(b)) {
        if (b[i] >= 0x50 && b[i] <= 0x57 && b[i] != 0x54 && b[i] != 0x55) {
            size += 8, i += 1; /* push r64 (rax, rbx, ...; push rax reserves 8 bytes) */
        } else if (b[i] == 0x41 && b[i + 1] >= 0x50 && b[i + 1] <= 0x57) {
            size += 8, i += 2; /* push r8-r15 */
        } else if (b[i] == 0x48 && b[i + 1] == 0x83 && b[i + 2] == 0xEC) {
            if (b[i + 3] & 0x80) return -1; /* sign-extended: a sub of a negative */
            size += b[i + 3], i += 4;       /* sub rsp, imm8 */
            break;
        } else if (b[i] == 0x48 && b[i + 1] == 0x81 && b[i + 2] == 0xEC) {
            size += (uint64_t)b[i + 3] | (uint64_t)b[i + 4] << 8 | (uint64_t)b[i + 5] << 16 |
                    (uint64_t)b[i + 6] << 24;
            i += 7;
            break;
        } else {
            break;
        }
    }
    if (pc < function + i || size >= AFT_CFI_FRAME_MAX) return -1;
    *below = size;
    return 0;
}

/* The target of the direct call (call rel32) that ends at ret, or 0 when it is another kind. */
static uint64_t aft_cfi_direct_call_target(uint64_t ret) {
    uint8_t call[5];
    if (ret < 5 || aft_async_read_memory(ret - 5, call, sizeof(call)) != 0 || call[0] != 0xE8)
        return 0;
    int32_t rel = (int32_t)((uint32_t)call[1] | (uint32_t)call[2] << 8 | (uint32_t)call[3] << 16 |
                            (uint32_t)call[4] << 24);
    return ret + (uint64_t)(int64_t)rel;
}

/* A frame record at record, at or above sp: a link further up (or 0, the chain's end) and a
 * return address just after a call in an image read after start. With function (a record
 * computed from its prologue, not read from a saved register), that call, when it is a direct
 * one, must be to function: a function that moves sp after its prologue (a variable-length
 * array, a Swift generic's value buffers) puts the computed record on the stale records a deeper
 * call left there, whose return addresses follow calls to other functions. */
static int aft_cfi_record_plausible(uint64_t record, uint64_t sp, uint64_t function) {
    uint64_t pair[2];
    if (record < sp || record - sp >= AFT_CFI_FRAME_MAX || (record & 7) != 0 ||
        aft_async_read_memory(record, pair, sizeof(pair)) != 0)
        return 0;
    uint64_t ret = aft_async_arch_code_address(pair[1]);
    if (!((pair[0] == 0 || pair[0] > record) && aft_async_pc_in_known_image(ret) &&
          aft_async_arch_follows_call(ret)))
        return 0;
    uint64_t target = function != 0 ? aft_cfi_direct_call_target(ret) : 0;
    return target == 0 || target == function;
}

/* Where the prologue does not place the record (the function moved sp after it): the first
 * record in the 4 KiB above sp whose return address follows a direct call to function, the
 * one its caller made. A stale record a deeper call left returns after a call to another
 * function. 0 when there is none (a caller that called it through a pointer). */
static uint64_t aft_cfi_record_called_from(uint64_t sp, uint64_t function) {
    uint64_t words[64];
    for (uint64_t base = sp; base < sp + 4096; base += sizeof(words) - 8) {
        if (aft_async_read_memory(base, words, sizeof(words)) != 0) return 0;
        for (uint32_t i = 0; i + 1 < 64; i++) {
            uint64_t at = base + 8ull * i, ret = aft_async_arch_code_address(words[i + 1]);
            if (!(words[i] == 0 || (words[i] > at && words[i] - at < AFT_CFI_FRAME_MAX)) ||
                ret < 4096 || !aft_async_pc_in_known_image(ret))
                continue;
            if (aft_cfi_direct_call_target(ret) == function) return at;
        }
    }
    return 0;
}

int aft_async_cfi_frame_below(uint64_t ret, uint64_t *below) {
    aft_cfi_row row;
    uint64_t function = 0;
    if (ret == 0 || aft_async_cfi_row_at(ret - 1, &function, &row) != 0 ||
        row.cfa_register != AFT_CFI_RBP || row.cfa_offset != 16)
        return -1;
    return aft_cfi_prologue(function, ret, below);
}

uint64_t aft_async_cfi_record_from_sp(uint64_t pc, uint64_t sp, uint64_t *frames, uint32_t capacity,
                                      uint32_t *count) {
    uint64_t rbp = 0, function = 0;
    int rbp_known = 0;
    uint32_t n = 0;
    *count = 0;
    if (pc == 0 || sp == 0 || (sp & 7) != 0) return 0;
    for (uint32_t step = 0; step <= AFT_CFI_MAX_STEPS; step++) {
        /* The innermost pc is where the system call returns to; a caller's, just after its
         * call: the row of the call itself. */
        aft_cfi_row row;
        if (aft_async_cfi_row_at(step == 0 ? pc : pc - 1, &function, &row) != 0) return 0;
        if (row.cfa_register == AFT_CFI_RBP && row.cfa_offset == 16) {
            uint64_t record = 0, below = 0;
            if (rbp_known) {
                record = rbp;
            } else if (aft_cfi_prologue(function, pc, &below) == 0) {
                record = sp + below;
            }
            if (record == 0 || !aft_cfi_record_plausible(record, sp, rbp_known ? 0 : function))
                record = rbp_known ? 0 : aft_cfi_record_called_from(sp, function);
            if (record == 0) return 0;
            *count = n;
            return record;
        }
        if (row.cfa_register != AFT_CFI_RSP || row.cfa_offset < 8 || row.rbp_saved < 0) return 0;
        uint64_t cfa = sp + (uint64_t)row.cfa_offset, ret = 0;
        if (aft_async_read_memory(cfa - 8, &ret, sizeof(ret)) != 0) return 0;
        ret = aft_async_arch_code_address(ret);
        if (!aft_async_pc_in_known_image(ret) || !aft_async_arch_follows_call(ret)) return 0;
        if (row.rbp_saved) {
            if (aft_async_read_memory(cfa + (uint64_t)row.rbp_offset, &rbp, sizeof(rbp)) != 0)
                return 0;
            rbp_known = 1;
        }
        if (n < capacity) frames[n++] = ret;
        sp = cfa;
        pc = ret;
    }
    return 0;
}

#else

int aft_async_cfi_frame_below(uint64_t ret, uint64_t *below) {
    (void)ret, (void)below;
    return -1;
}

uint64_t aft_async_cfi_record_from_sp(uint64_t pc, uint64_t sp, uint64_t *frames, uint32_t capacity,
                                      uint32_t *count) {
    (void)pc, (void)sp, (void)frames, (void)capacity;
    *count = 0;
    return 0;
}

#endif
