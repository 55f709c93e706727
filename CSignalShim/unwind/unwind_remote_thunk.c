/*
 * unwind_remote_thunk.c: NORMAL-TIME CODE, run at the next launch (never in a handler, never in
 * the crashed process). x86-64: the caller of a function that has no unwind table entry in an
 * image that has tables (a library's thunk, such as DispatchSemaphore.wait(timeout:) in the
 * Swift 6 toolchains' libswiftDispatch: `push rax`, two `mov`s, a call, `pop rcx`, `ret`).
 * libunwind steps past such a frame by the frame pointer, right when the function keeps a frame
 * record, but for one that keeps none the record is its caller's and the caller is lost. Only
 * that exact shape is taken: the function found by its image's symbols, its bytes from the
 * file, a prologue of pushes and stack reservations, then only moves between registers and
 * loads, then the call the frame returns from. Where its return address then is follows from
 * the prologue; nothing is guessed from the stack's contents. Any other shape (a frame record
 * set up anywhere, a shrink-wrapped or async function, a stack adjustment after the prologue)
 * stays with libunwind's step, as before.
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

/* The length of a ModRM operand (ModRM, SIB, displacement) at b, or 0 when it is not whole in n
 * bytes or is rip-relative to nothing. */
static uint32_t aft_modrm_length(const uint8_t *b, uint32_t n) {
    if (n < 1) return 0;
    uint32_t mod = b[0] >> 6, rm = b[0] & 7, len = 1;
    if (mod == 3) return 1;
    if (rm == 4) {
        if (n < 2) return 0;
        len++; /* SIB */
        if (mod == 0 && (b[1] & 7) == 5) len += 4;
    } else if (mod == 0 && rm == 5) {
        len += 4; /* rip + disp32 */
    }
    len += mod == 1 ? 1 : mod == 2 ? 4 : 0;
    return len <= n ? len : 0;
}

/* The length of a call instruction at b (call rel32, or call r/m64 with an optional REX), or 0. */
static uint32_t aft_call_length(const uint8_t *b, uint32_t n) {
    if (n >= 5 && b[0] == 0xE8) return 5;
    uint32_t at = n >= 1 && (b[0] & 0xF0) == 0x40 ? 1 : 0;
    if (at + 2 > n || b[at] != 0xFF || ((b[at + 1] >> 3) & 7) != 2) return 0;
    uint32_t operand = aft_modrm_length(b + at + 1, n - at - 1);
    return operand == 0 ? 0 : at + 1 + operand;
}

/* The length of a move that leaves rsp and rbp alone at b (mov r/m, r; mov r, r/m; lea r, m:
 * 89, 8B, 8D with an optional REX), or 0. */
static uint32_t aft_plain_move_length(const uint8_t *b, uint32_t n) {
    uint32_t at = n >= 1 && (b[0] & 0xF0) == 0x40 ? 1 : 0;
    if (at + 2 > n) return 0;
    uint8_t rex = at ? b[0] : 0, op = b[at], modrm = b[at + 1];
    if (op != 0x89 && op != 0x8B && op != 0x8D) return 0;
    /* The register written: ModRM.rm for 89 with a register operand, ModRM.reg otherwise. */
    uint32_t written = op == 0x89 ? ((modrm >> 6) == 3 ? (modrm & 7u) | ((rex & 1u) << 3) : 16u)
                                  : ((modrm >> 3) & 7u) | ((rex & 4u) << 1);
    if (written == 4 || written == 5) return 0; /* rsp, rbp */
    uint32_t operand = aft_modrm_length(b + at + 1, n - at - 1);
    return operand == 0 ? 0 : at + 1 + operand;
}

/* What the function at start pushed and reserved before the call that ends at ret: its bytes
 * are a prologue of endbr64, `push r64` (not rbp, not rsp) and `sub rsp, imm`, then only plain
 * moves, then that call. 0 for any other shape, or when they are not read. */
static int aft_prologue_decode(aft_remote_state *s, uint64_t start, uint64_t ret, aft_prologue *p) {
    uint8_t b[AFT_PROLOGUE_BYTES];
    if (ret <= start || ret - start > AFT_PROLOGUE_BYTES) return 0;
    uint32_t n = (uint32_t)(ret - start);
    if (!aft_remote_read_image(s, start, b, n)) return 0;
    memset(p, 0, sizeof(*p));
    uint32_t o = 0;
    int moved = 0; /* past the prologue: moves only */
    while (o < n) {
        uint32_t call = aft_call_length(b + o, n - o);
        if (call != 0 && o + call == n) return 1; /* the call the frame returns from */
        if (!moved && o + 4 <= n && b[o] == 0xF3 && b[o + 1] == 0x0F && b[o + 2] == 0x1E &&
            b[o + 3] == 0xFA) {
            o += 4; /* endbr64 */
            continue;
        }
        uint32_t at = o + (b[o] == 0x41 ? 1u : 0u); /* REX.B: r8-r15 */
        if (!moved && at < n && b[at] >= 0x50 && b[at] <= 0x57) {
            uint32_t reg = b[at] - 0x50u;
            int rex = at != o;
            if (!rex && (reg == 4 || reg == 5)) return 0; /* rsp, or rbp: a frame record */
            p->depth += 8;
            if (p->pushes == AFT_PROLOGUE_PUSHES) return 0;
            p->index[p->pushes] = rex ? (int)reg : aft_push_index[reg];
            p->below[p->pushes] = p->depth;
            p->pushes++;
            o = at + 1;
            continue;
        }
        if (!moved && o + 4 <= n && b[o] == 0x48 && b[o + 1] == 0x83 && b[o + 2] == 0xEC &&
            b[o + 3] < 0x80) {
            p->depth += b[o + 3]; /* sub rsp, imm8 */
            o += 4;
            continue;
        }
        if (!moved && o + 7 <= n && b[o] == 0x48 && b[o + 1] == 0x81 && b[o + 2] == 0xEC) {
            uint32_t imm;
            memcpy(&imm, b + o + 3, sizeof(imm));
            if (imm > AFT_PROLOGUE_MAX_RESERVE) return 0;
            p->depth += imm; /* sub rsp, imm32 */
            o += 7;
            continue;
        }
        uint32_t move = aft_plain_move_length(b + o, n - o);
        if (move == 0) return 0;
        moved = 1;
        o += move;
    }
    return 0;
}

int aft_remote_past_thunk(aft_remote_state *s, uint64_t pc, uint64_t sp, uint64_t *registers,
                          uint64_t *ret) {
    uint64_t start, slot, value, saved;
    aft_prologue p;
    /* pc: a return address less one, in the call the frame returns from. */
    if (s->register_count <= AFT_INDEX_RIP || !aft_remote_function_start(s, pc, &start) ||
        !aft_prologue_decode(s, start, pc + 1, &p))
        return 0;
    slot = sp + p.depth;
    /* A return address: in an image's code, just after a call instruction. */
    uint8_t before[8];
    if (slot < sp || !aft_remote_read_word(s, slot, &value) || value < 8 ||
        !aft_remote_in_code(s, value) || !aft_remote_read_image(s, value - 8, before, 8) ||
        !aft_x86_64_ends_in_call(before))
        return 0;
    for (uint32_t k = 0; k < p.pushes; k++) {
        if (aft_remote_read_word(s, slot - p.below[k], &saved)) registers[p.index[k]] = saved;
    }
    registers[AFT_INDEX_RSP] = slot + 8;
    registers[AFT_INDEX_RIP] = value - 1;
    *ret = value;
    return 1;
}

#endif
