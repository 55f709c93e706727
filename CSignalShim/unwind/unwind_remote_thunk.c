/*
 * unwind_remote_thunk.c: NORMAL-TIME CODE, run at the next launch (never in a handler, never in
 * the crashed process). x86-64: the caller of a function that has no unwind table entry in an
 * image that has tables (a library's thunk, such as DispatchSemaphore.wait(timeout:) in the
 * Swift 6 toolchains' libswiftDispatch: `push rax`, a call, `pop rcx`, `ret`). libunwind steps
 * past such a frame by the frame pointer, right when the function keeps a frame record, but
 * for one that keeps none the record is its caller's and the caller is lost. The function is
 * found by its image's symbols; its prologue, decoded from the image's file, says where the
 * return address is: nothing is guessed from the stack's contents.
 */
#include <stdint.h>
#include <string.h>

#include "unwind_internal.h"
#include "unwind_remote_internal.h"

#if defined(__x86_64__)

#define AFT_PROLOGUE_BYTES 32u
#define AFT_PROLOGUE_PUSHES 8u
#define AFT_PROLOGUE_MAX_RESERVE (1u << 20)

/* Crash-file register indexes (aft_crash_info: r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp,
 * rip) of the registers `push` encodes as 0-7 without REX.B (rax, rcx, rdx, rbx, rsp, rbp, rsi,
 * rdi); with REX.B, r8-r15 are indexes 0-7. */
static const int aft_push_index[8] = {13, 14, 12, 11, 15, 10, 9, 8};
#define AFT_INDEX_RSP 15
#define AFT_INDEX_RIP 16

typedef struct aft_prologue {
    uint64_t depth; /* bytes pushed or reserved below the return address by pc */
    uint32_t pushes;
    int index[AFT_PROLOGUE_PUSHES];      /* the pushed registers' crash-file indexes */
    uint64_t below[AFT_PROLOGUE_PUSHES]; /* where each is saved: bytes below the return address */
} aft_prologue;

/* What the function at start pushed and reserved by pc, from a prologue of endbr64, `push r64`
 * and `sub rsp, imm` (the first other instruction ends it: nothing after it moves the stack
 * before pc). 0 when it keeps a frame record (`push rbp; mov rbp, rsp`) or is not read. */
static int aft_prologue_decode(aft_remote_state *s, uint64_t start, uint64_t pc, aft_prologue *p) {
    uint8_t b[AFT_PROLOGUE_BYTES];
    uint32_t n = AFT_PROLOGUE_BYTES;
    while (n >= 8 && !aft_remote_read_image(s, start, b, n)) n /= 2; /* a short last function */
    if (n < 8 || pc < start) return 0;
    memset(p, 0, sizeof(*p));
    for (uint32_t o = 0; o < n && start + o < pc;) {
        if (o + 4 <= n && b[o] == 0xF3 && b[o + 1] == 0x0F && b[o + 2] == 0x1E &&
            b[o + 3] == 0xFA) {
            o += 4; /* endbr64 */
            continue;
        }
        uint32_t at = o + (b[o] == 0x41 ? 1u : 0u); /* REX.B: r8-r15 */
        if (at < n && b[at] >= 0x50 && b[at] <= 0x57) {
            uint32_t reg = b[at] - 0x50u;
            int rex = at != o;
            if (!rex && reg == 5 && at + 3 < n && b[at + 1] == 0x48 && b[at + 2] == 0x89 &&
                b[at + 3] == 0xE5)
                return 0;                   /* push rbp; mov rbp, rsp: a frame record */
            if (!rex && reg == 4) return 0; /* push rsp: not a prologue */
            p->depth += 8;
            if (p->pushes < AFT_PROLOGUE_PUSHES) {
                p->index[p->pushes] = rex ? (int)reg : aft_push_index[reg];
                p->below[p->pushes] = p->depth;
                p->pushes++;
            }
            o = at + 1;
            continue;
        }
        if (o + 4 <= n && b[o] == 0x48 && b[o + 1] == 0x83 && b[o + 2] == 0xEC) {
            if (b[o + 3] >= 0x80) return 0; /* sign-extended: not a reservation */
            p->depth += b[o + 3];           /* sub rsp, imm8 */
            o += 4;
            continue;
        }
        if (o + 7 <= n && b[o] == 0x48 && b[o + 1] == 0x81 && b[o + 2] == 0xEC) {
            uint32_t imm;
            memcpy(&imm, b + o + 3, sizeof(imm));
            if (imm > AFT_PROLOGUE_MAX_RESERVE) return 0;
            p->depth += imm; /* sub rsp, imm32 */
            o += 7;
            continue;
        }
        break;
    }
    return 1;
}

int aft_remote_past_thunk(aft_remote_state *s, uint64_t pc, uint64_t sp, uint64_t *registers,
                          uint64_t *ret) {
    uint64_t start, slot, value, saved;
    aft_prologue p;
    if (s->register_count <= AFT_INDEX_RIP || !aft_remote_function_start(s, pc, &start) ||
        !aft_prologue_decode(s, start, pc, &p))
        return 0;
    slot = sp + p.depth;
    /* A return address: in an image's code, just after a call instruction. */
    uint8_t before[8];
    if (slot < sp || !aft_remote_read_word(s, slot, &value) || value < 8 ||
        !aft_remote_in_code(s, value) || !aft_remote_read_image(s, value - 8, before, 8) ||
        !aft_x86_64_ends_in_call(before))
        return 0;
    for (uint32_t k = 0; k < p.pushes; k++) {
        if (p.index[k] == AFT_INDEX_RSP || !aft_remote_read_word(s, slot - p.below[k], &saved))
            continue;
        registers[p.index[k]] = saved;
    }
    registers[AFT_INDEX_RSP] = slot + 8;
    registers[AFT_INDEX_RIP] = value - 1;
    *ret = value;
    return 1;
}

#endif
