/*
 * arch_x86_64_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). What differs on x86-64: the registers of a signal context, the pc and
 * frame pointer the unwinder starts from, which traps re-fire, and how a return address is
 * recognised on a stack. arch_aarch64_async.c is the same for arm64; other architectures get
 * the neutral answers at the end of this file.
 */
#include <signal.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <sys/syscall.h>
#include <unistd.h>
#include <ucontext.h>

#include "shim_internal.h"
#include "swift_async_internal.h"
#include "unwind_internal.h"

#if defined(__x86_64__)

void aft_async_arch_registers(const void *ucontext, aft_crash_info *ci) {
    const ucontext_t *uc = ucontext;
    uint32_t count = NGREG < AFT_MAX_REGISTERS ? NGREG : AFT_MAX_REGISTERS;
    for (uint32_t i = 0; i < count; i++) ci->registers[i] = (uint64_t)uc->uc_mcontext.gregs[i];
    ci->register_count = count;
    ci->pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    ci->sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
    ci->arch = AFT_ARCH_X86_64;
}

/* A system call the signal cut short: it returned -EINTR (rax) and the instruction before the
 * pc is `syscall` (0f 05). */
int aft_async_arch_interrupted_syscall(const void *ucontext) {
    const ucontext_t *uc = ucontext;
    uint64_t pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    uint8_t b[2];
    if ((int64_t)uc->uc_mcontext.gregs[REG_RAX] != -4 || pc < 2 ||
        aft_async_read_memory(pc - 2, b, sizeof(b)) != 0)
        return 0;
    return b[0] == 0x0f && b[1] == 0x05;
}

int aft_async_arch_in_syscall(const void *ucontext, int64_t *nr) {
    const ucontext_t *uc = ucontext;
    uint64_t pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    uint8_t b[2];
    *nr = -2;
    if (aft_async_arch_interrupted_syscall(ucontext)) return 1;
    /* A wait the kernel restarts after the handler (SA_RESTART): rip is back on the syscall
     * instruction and rax holds the call's number again. */
    if (pc == 0 || aft_async_read_memory(pc, b, sizeof(b)) != 0) return 0;
    if (b[0] != 0x0f || b[1] != 0x05) return 0;
    *nr = (int64_t)uc->uc_mcontext.gregs[REG_RAX];
    return 1;
}

void *aft_async_arch_synthesize_context(void *buffer, uint32_t capacity, uint64_t pc, uint64_t sp,
                                        uint64_t scratch[512], int *by_tables) {
    *by_tables = 0;
    _Static_assert(sizeof(ucontext_t) + 16 <= AFT_SYNTHETIC_CONTEXT_ROOM, "room for a context");
    if (capacity < sizeof(ucontext_t) + 16) return NULL;
    aft_async_memset(buffer, 0, sizeof(ucontext_t) + 16); /* the zero before it: no trampoline */
    ucontext_t *uc = (ucontext_t *)((uint8_t *)buffer + 16);
    uc->uc_mcontext.gregs[REG_RIP] = (greg_t)pc;
    uc->uc_mcontext.gregs[REG_RSP] = (greg_t)sp;
    /* The kernel gives no frame pointer: the frame record of the first function that keeps one
     * stands in for it (code built with frame pointers keeps its frames' unwind rules relative
     * to rbp), by the unwind tables and that function's prologue, else the first record above
     * sp. */
    uint64_t returns[8];
    uint32_t count = 0;
    uint64_t record = aft_async_cfi_record_from_sp(pc, sp, returns, 8, &count);
    *by_tables = record != 0;
    if (record == 0) record = aft_async_frame_record_above(sp, scratch);
    uc->uc_mcontext.gregs[REG_RBP] = (greg_t)record;
    return uc;
}

/* The calling thread's thread pointer (the fs base). */
uint64_t aft_async_arch_thread_pointer(void) {
    /* The register itself (no memory read: %fs:0 would fault in a thread made by a raw clone,
     * without TLS), else asked of the kernel. */
    if (aft_g_arch_fsgsbase) {
        uint64_t base;
        __asm__ volatile("rdfsbase %0" : "=r"(base));
        return base;
    }
    unsigned long tp = 0;
    if (syscall(SYS_arch_prctl, 0x1003 /* ARCH_GET_FS */, &tp) != 0) return 0;
    return (uint64_t)tp;
}

/* The 512-byte FXSAVE area the kernel saved (the layout a minidump's context holds). */
uint32_t aft_async_arch_fp_state(const void *ucontext, uint8_t *out, uint32_t capacity) {
    const ucontext_t *uc = ucontext;
    if (uc->uc_mcontext.fpregs == NULL || capacity < 512) return 0;
    /* The calling thread's own signal frame lies just above its stack pointer: copied. Another
     * thread's context (one that crashed too) is read without faulting: it may be stale. */
    uintptr_t fp = (uintptr_t)uc->uc_mcontext.fpregs, here = (uintptr_t)__builtin_frame_address(0);
    if (fp > here && fp - here < 65536) {
        aft_async_memcpy(out, uc->uc_mcontext.fpregs, 512);
    } else if (aft_async_read_memory((uint64_t)fp, out, 512) != 0) {
        return 0;
    }
    return 512;
}

void aft_async_arch_pc_fp(const void *ucontext, uint64_t *pc, uint64_t *fp) {
    const ucontext_t *uc = ucontext;
    *pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    *fp = (uint64_t)uc->uc_mcontext.gregs[REG_RBP];
}

/* Swift's async context register is r14 (the swiftasync convention); rbp the frame pointer. */
void aft_async_arch_swift_registers(const uint64_t *registers, uint32_t count,
                                    uint64_t *context_register, uint64_t *fp) {
    *context_register = count > REG_R14 ? registers[REG_R14] : 0;
    *fp = count > REG_RBP ? registers[REG_RBP] : 0;
}

uint64_t aft_async_arch_swift_context_now(void) {
    uint64_t value;
    __asm__ volatile("mov %%r14, %0" : "=r"(value));
    return value;
}

/* int3 has advanced the pc past itself: the trap does not fire again. */
int aft_async_arch_trap_refires(void) { return 0; }

/* cpuid leaf 0's vendor: an instruction, but a hypervisor exit in a virtual machine (about
 * 5 µs on this project's), paid by a crash rather than by every start. */
void aft_async_arch_cpu_vendor(char out[12]) {
    unsigned a, b, c, d;
    __cpuid(0, a, b, c, d);
    (void)a;
    const unsigned vendor[3] = {b, d, c}; /* "Genu" "ineI" "ntel" */
    for (int i = 0; i < 12; i++) out[i] = (char)(vendor[i / 4] >> (8 * (i % 4)));
}

/* Code addresses are plain addresses. */
uint64_t aft_async_arch_code_address(uint64_t address) { return address; }

/* Whether the bytes before address end with a call instruction. */
int aft_async_arch_follows_call(uint64_t address) {
    uint8_t b[8];
    if (address < 8 || aft_async_read_memory(address - 8, b, sizeof(b)) != 0) return 0;
    return aft_x86_64_ends_in_call(b);
}

int aft_x86_64_ends_in_call(const uint8_t b[8]) {
    if (b[3] == 0xE8) return 1; /* call rel32 */
    /* call r/m64: FF /2, optionally after a REX prefix. */
    for (int at = 0; at <= 6; at++) {
        if (b[at] != 0xFF) continue;
        uint8_t modrm = b[at + 1];
        if (((modrm >> 3) & 7) != 2) continue;
        uint32_t mod = modrm >> 6, rm = modrm & 7, len = 2;
        if (mod == 0) {
            if (rm == 4) {
                if (at + 2 > 7) continue;
                len += 1 + ((b[at + 2] & 7) == 5 ? 4 : 0);
            } else if (rm == 5) {
                len += 4;
            }
        } else if (mod == 1) {
            len += 1 + (rm == 4);
        } else if (mod == 2) {
            len += 4 + (rm == 4);
        }
        if ((uint32_t)(8 - at) == len) return 1; /* a REX prefix before FF changes nothing */
    }
    return 0;
}

#elif !defined(__aarch64__)

/* Neither x86-64 nor arm64: no registers, no frame pointer, every candidate accepted. */
void aft_async_arch_registers(const void *ucontext, aft_crash_info *ci) {
    (void)ucontext;
    ci->arch = AFT_ARCH_UNKNOWN;
}

int aft_async_arch_interrupted_syscall(const void *ucontext) {
    (void)ucontext;
    return 0;
}

int aft_async_arch_in_syscall(const void *ucontext, int64_t *nr) {
    (void)ucontext;
    *nr = -2;
    return 0;
}

uint64_t aft_async_arch_thread_pointer(void) { return 0; }

void *aft_async_arch_synthesize_context(void *buffer, uint32_t capacity, uint64_t pc, uint64_t sp,
                                        uint64_t scratch[512], int *by_tables) {
    *by_tables = 0;
    (void)buffer;
    (void)capacity;
    (void)pc;
    (void)sp;
    (void)scratch;
    return NULL;
}

uint32_t aft_async_arch_fp_state(const void *ucontext, uint8_t *out, uint32_t capacity) {
    (void)ucontext;
    (void)out;
    (void)capacity;
    return 0;
}

void aft_async_arch_pc_fp(const void *ucontext, uint64_t *pc, uint64_t *fp) {
    (void)ucontext;
    *pc = 0;
    *fp = 0;
}

int aft_async_arch_trap_refires(void) { return 0; }

uint64_t aft_async_arch_code_address(uint64_t address) { return address; }

void aft_async_arch_swift_registers(const uint64_t *registers, uint32_t count,
                                    uint64_t *context_register, uint64_t *fp) {
    (void)registers;
    (void)count;
    *context_register = 0;
    *fp = 0;
}

uint64_t aft_async_arch_swift_context_now(void) { return 0; }

void aft_async_arch_cpu_vendor(char out[12]) { (void)out; }

int aft_async_arch_follows_call(uint64_t address) {
    (void)address;
    return 1;
}

#endif
