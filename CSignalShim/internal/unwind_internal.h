/*
 * unwind_internal.h: what the unwinding files share among themselves, beyond the unwinding part
 * of shim_internal.h: unwind_async.c (the helpers and the requests), unwind_resident_async.c
 * (the resident helper), unwind_walk_async.c (the frame-pointer walk), unwind_helpers.c (their
 * preparation at normal time) and install.c, which calls the last. Not seen by Swift.
 */
#ifndef AFT_UNWIND_INTERNAL_H
#define AFT_UNWIND_INTERNAL_H

#include <stdint.h>
#include <sys/types.h>

#include "shim_internal.h"

/* ---- crash time ---- */
/* Each slot's window of stack memory for the frame-pointer walk (unwind_walk_async.c). */
extern aft_stack_window aft_g_stack_windows[AFT_UNWIND_SLOTS];
/* The walk from sp of a thread whose stack is readable now (a hang's watched thread, from its
 * own handler): one read of the window at sp finds the first record, the return addresses below
 * it and the first records above, then the walk with the return addresses between records. */
uint32_t aft_async_walk_from_sp_window(aft_stack_window *w, uint64_t pc, uint64_t sp,
                                       uint64_t *frames, uint32_t capacity, uint32_t *truncated);
/* One request, in a helper (a helper of its own, or the resident): the loader's list, then the
 * stack into the slot's shared buffer (unwind_async.c). */
void aft_async_unwind_serve(aft_unwind_slot *slot);
/* A helper's signals, whatever the app installed: the crash signals end it by _exit on
 * stack_index's fault stack; AFT_UNWIND_DEADLINE_SIGNAL ends it by its default action; with
 * block_all every other signal is blocked (the resident), else none (unwind_async.c). */
void aft_async_unwind_helper_signals(int block_all, uint32_t stack_index);
/* A helper's deadline ends it by this signal first: libunwind blocks every signal around
 * dl_iterate_phdr and its own mutexes, so the helper ends outside them, never holding the
 * loader's lock or one of libunwind's. SIGKILL only AFT_UNWIND_KILL_GRACE_NS later, for a helper
 * still inside one: waiting on a lock a stuck thread holds (the loader's, while it may hold
 * libunwind's cache lock; libunwind is abandoned after any deadline end). Its default action
 * ends the helper without a core dump. */
#define AFT_UNWIND_DEADLINE_SIGNAL SIGALRM
#define AFT_UNWIND_KILL_GRACE_NS (50ull * 1000 * 1000)
/* Hands slot's request to the resident helper: 1 with its pid when it took it, 0 when there is
 * none for this process, it is busy with another request, or it has died
 * (unwind_resident_async.c). */
int aft_async_resident_take(aft_unwind_slot *slot, pid_t *pid);

/* Whether an image read after start (or at the crash, before the install completed) holds pc:
 * then its start and load bias (link_map_async.c). */
int aft_async_known_image_range(uint64_t pc, uint64_t *start, uint64_t *load_bias);
/* A thread known by sp and pc alone, asleep in a system call: the return addresses its unwind
 * tables give, from the libc function at pc up to the first function that keeps a frame record
 * (at most capacity into frames, their number in *count), and that record's address, from a
 * frame that saved the frame pointer or from the function's prologue. 0 when the tables or the
 * prologue do not say, and the caller scans for a record instead. x86-64 (unwind_from_sp_async.c). */
uint64_t aft_async_cfi_record_from_sp(uint64_t pc, uint64_t sp, uint64_t *frames, uint32_t capacity,
                                      uint32_t *count);
/* For a return address into a function that keeps a frame record (its tables' CFA rbp + 16 at
 * the call): how far below that record its sp is at the call, by its prologue. 0, or -1 when the
 * tables or the prologue do not say (unwind_from_sp_async.c). */
int aft_async_cfi_frame_below(uint64_t ret, uint64_t *below);

#if defined(__x86_64__)
#define AFT_CFI_RSP 7u /* DWARF's numbers of the registers a walk from sp follows */
#define AFT_CFI_RBP 6u
/* A row of an image's unwind tables, as far as a walk from sp follows it. */
typedef struct aft_cfi_row {
    uint32_t cfa_register; /* AFT_CFI_RSP or AFT_CFI_RBP; anything else: not followed */
    int64_t cfa_offset;
    int rbp_saved; /* 1: rbp at CFA + rbp_offset; 0: unchanged; -1: a rule not followed */
    int64_t rbp_offset;
} aft_cfi_row;
/* The row at pc of the FDE that covers it, and its function's start: 0, or -1 when pc has no
 * FDE or its tables hold what is not read here (unwind_cfi_async.c). */
int aft_async_cfi_row_at(uint64_t pc, uint64_t *function, aft_cfi_row *row);
/* Whether the 8 bytes before a return address end in a call instruction (call rel32, or call
 * r/m64 with or without a REX prefix): pure, for live memory (aft_async_arch_follows_call) and
 * for the images' files at the next launch (unwind_remote.c). arch_x86_64_async.c. */
int aft_x86_64_ends_in_call(const uint8_t b[8]);
#endif

/* ---- normal time (unwind_helpers.c) ---- */
/* Once libunwind is loaded (a first hang, a recorded error): the helpers' answer pages faulted
 * in, so a later capture takes no page fault there. */
void aft_unwind_helpers_fault_in(void);
/* The helpers' mappings (aft_async_unwind_helpers_ready): none yet, being made, made. */
#define AFT_HELPERS_UNMAPPED 0
#define AFT_HELPERS_MAPPING 1
#define AFT_HELPERS_MAPPED 2
extern _Atomic int aft_g_unwind_helpers_state;
/* Maps every slot's helper stack and shared buffer at their first use (a crash, a hang's
 * capture, libunwind's load), not at every start: 1 once they are there, 0 where they cannot
 * be had (no memory, or another thread mapping them right now: the frame-pointer stack then).
 * Async-signal-safe: raw system calls and atomics (unwind_helpers_async.c). */
int aft_async_unwind_helpers_ready(void);
/* In a forked child: the parent's resident helper serves the parent; the child has none. */
void aft_unwind_resident_after_fork_in_child(void);

#endif /* AFT_UNWIND_INTERNAL_H */
