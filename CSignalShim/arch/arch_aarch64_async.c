/*
 * arch_aarch64_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). What differs on arm64 (see arch_x86_64_async.c for the list), plus pointer
 * authentication: code built with -mbranch-protection (Debian's and Ubuntu's default) signs the
 * return addresses it saves, so a value read back from a stack carries a signature in its top
 * bits until it is stripped.
 */
#include <signal.h>
#include <ucontext.h>

#include "shim_internal.h"
#include "swift_async_internal.h"

#if defined(__aarch64__)

void aft_async_arch_registers(const void *ucontext, aft_crash_info *ci) {
    const ucontext_t *uc = ucontext;
    for (uint32_t i = 0; i < 31; i++) ci->registers[i] = (uint64_t)uc->uc_mcontext.regs[i];
    ci->registers[31] = (uint64_t)uc->uc_mcontext.sp;
    ci->registers[32] = (uint64_t)uc->uc_mcontext.pc;
    ci->registers[33] = (uint64_t)uc->uc_mcontext.pstate;
    ci->register_count = 34; /* x0-x28, fp, lr, sp, pc, pstate */
    ci->pc = (uint64_t)uc->uc_mcontext.pc;
    ci->sp = (uint64_t)uc->uc_mcontext.sp;
    ci->arch = AFT_ARCH_ARM64;
}

/* A system call the signal cut short: it returned -EINTR (x0) and the instruction before the pc
 * is `svc #0`. */
int aft_async_arch_interrupted_syscall(const void *ucontext) {
    const ucontext_t *uc = ucontext;
    uint64_t pc = (uint64_t)uc->uc_mcontext.pc;
    uint32_t insn;
    if ((int64_t)uc->uc_mcontext.regs[0] != -4 || pc < 4 ||
        aft_async_read_memory(pc - 4, &insn, sizeof(insn)) != 0)
        return 0;
    return insn == 0xd4000001u;
}

int aft_async_arch_in_syscall(const void *ucontext, int64_t *nr) {
    const ucontext_t *uc = ucontext;
    uint64_t pc = (uint64_t)uc->uc_mcontext.pc;
    uint32_t insn;
    *nr = -2;
    if (aft_async_arch_interrupted_syscall(ucontext)) return 1;
    /* A wait the kernel restarts after the handler (SA_RESTART): the pc is back on `svc #0`
     * and x8 holds the call's number. */
    if (pc == 0 || aft_async_read_memory(pc, &insn, sizeof(insn)) != 0) return 0;
    if (insn != 0xd4000001u) return 0;
    *nr = (int64_t)uc->uc_mcontext.regs[8];
    return 1;
}

void *aft_async_arch_synthesize_context(void *buffer, uint32_t capacity, uint64_t pc, uint64_t sp,
                                        uint64_t scratch[512], int *by_tables) {
    *by_tables = 0;
    _Static_assert(sizeof(ucontext_t) + 16 <= AFT_SYNTHETIC_CONTEXT_ROOM, "room for a context");
    if (capacity < sizeof(ucontext_t) + 16) return NULL;
    aft_async_memset(buffer, 0, sizeof(ucontext_t) + 16);
    ucontext_t *uc = (ucontext_t *)((uint8_t *)buffer + 16);
    uc->uc_mcontext.pc = pc;
    uc->uc_mcontext.sp = sp;
    /* No frame pointer and no link register from the kernel: the first frame record above sp
     * stands in for both (so a leaf wrapper's caller, whose return address only the link
     * register held, is not shown: its caller is). */
    uint64_t record = aft_async_frame_record_above(sp, scratch), lr = 0;
    if (record != 0 && aft_async_read_memory(record + 8, &lr, sizeof(lr)) == 0) {
        uc->uc_mcontext.regs[29] = record;
        uc->uc_mcontext.regs[30] = aft_async_arch_code_address(lr);
    }
    return uc;
}

/* The calling thread's thread pointer (tpidr_el0). */
uint64_t aft_async_arch_thread_pointer(void) {
    uint64_t tp;
    __asm__ volatile("mrs %0, tpidr_el0" : "=r"(tp));
    return tp;
}

/* fpsr, fpcr, then v0-v31, from the fpsimd_context record among the kernel's records. */
uint32_t aft_async_arch_fp_state(const void *ucontext, uint8_t *out, uint32_t capacity) {
    const ucontext_t *uc = ucontext;
    const uint8_t *records = (const uint8_t *)uc->uc_mcontext.__reserved;
    uint32_t at = 0, room = (uint32_t)sizeof(uc->uc_mcontext.__reserved);
    if (capacity < 8 + 32 * 16) return 0;
    while (at + 8 <= room) {
        uint32_t magic, size;
        aft_async_memcpy(&magic, records + at, 4);
        aft_async_memcpy(&size, records + at + 4, 4);
        if (magic == 0 || size < 8 || size > room - at) return 0;
        if (magic == 0x46508001u && size >= 8 + 8 + 32 * 16) { /* FPSIMD_MAGIC */
            aft_async_memcpy(out, records + at + 8, 8 + 32 * 16);
            return 8 + 32 * 16;
        }
        at += size;
    }
    return 0;
}

void aft_async_arch_pc_fp(const void *ucontext, uint64_t *pc, uint64_t *fp) {
    const ucontext_t *uc = ucontext;
    *pc = (uint64_t)uc->uc_mcontext.pc;
    *fp = (uint64_t)uc->uc_mcontext.regs[29];
}

/* Swift's async context register is x22 (the swiftasync convention); x29 the frame pointer. */
void aft_async_arch_swift_registers(const uint64_t *registers, uint32_t count,
                                    uint64_t *context_register, uint64_t *fp) {
    *context_register = count > 22 ? registers[22] : 0;
    *fp = count > 29 ? registers[29] : 0;
}

uint64_t aft_async_arch_swift_context_now(void) {
    uint64_t value;
    __asm__ volatile("mov %0, x22" : "=r"(value));
    return value;
}

/* brk leaves the pc on the instruction: returning runs it again, like a fault. */
int aft_async_arch_trap_refires(void) { return 1; }

/* The address without a pointer-authentication signature: xpaclri (a hint, so a no-op on cores
 * without pointer authentication) strips x30. */
uint64_t aft_async_arch_code_address(uint64_t address) {
    register uint64_t x30 __asm__("x30") = address;
    __asm__("hint #7" : "+r"(x30)); /* xpaclri */
    return x30;
}

/* Whether the instruction before address is a call: bl, blr, or an authenticating blraa,
 * blraaz, blrab, blrabz. */
int aft_async_arch_follows_call(uint64_t address) {
    uint32_t insn;
    if (address < 4 || (address & 3) != 0) return 0;
    if (aft_async_read_memory(address - 4, &insn, sizeof(insn)) != 0) return 0;
    if ((insn & 0xFC000000u) == 0x94000000u) return 1; /* bl imm26 */
    if ((insn & 0xFFFFFC1Fu) == 0xD63F0000u) return 1; /* blr xn */
    if ((insn & 0xFEFFF800u) == 0xD63F0800u) return 1; /* blraa(z), blrab(z) */
    return 0;
}

/* No vendor string on arm64: MIDR_EL1 (read at start) names the implementer. */
void aft_async_arch_cpu_vendor(char out[12]) { (void)out; }

#endif
