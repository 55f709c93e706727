/*
 * swift_async_internal.h: the Swift async callers of a thread (aftermath_format_async.h), shared
 * by unwind/swift_chain.c (normal time: what the walk needs, read once at the install's
 * completion; the chain of the calling thread for a handled error) and
 * unwind/swift_chain_async.c (crash time: the walk). Not seen by Swift.
 *
 * Where the chain starts: the Swift concurrency runtime keeps the task a thread runs in a
 * thread-local word (what swift_task_getCurrent returns); an AsyncTask holds the context it last
 * resumed with. That context may be below the innermost function by the calls that returned
 * since, so a closer one is looked for first: the async context register, and the slot below
 * each frame record's saved frame pointer (where an async frame keeps its context), up to the
 * frame the runtime called. A candidate counts only when its chain reaches the task's, so a
 * stale or foreign value never makes a chain of its own.
 */
#ifndef AFT_SWIFT_ASYNC_INTERNAL_H
#define AFT_SWIFT_ASYNC_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "aftermath_format.h"

/* AsyncTask on 64-bit: Job is eight words (HeapObject, SchedulerPrivate[2], Flags and Id,
 * Voucher, Reserved, ResumeTask), then ResumeContext (swift/ABI/Task.h). */
#define AFT_SWIFT_TASK_RESUME_FUNCTION 56u
#define AFT_SWIFT_TASK_RESUME_CONTEXT 64u
/* Frame records looked at for a closer context than the task's. */
#define AFT_SWIFT_ASYNC_FRAME_CANDIDATES 16u
/* Links from a candidate to the task's chain, at most. */
#define AFT_SWIFT_ASYNC_CANDIDATE_STEPS 32u
/* Executable segments of the images at start: where a resume address must lie. */
#define AFT_SWIFT_ASYNC_CODE_RANGES 1024u
/* Links of every thread of one capture. */
#define AFT_SWIFT_ASYNC_STORE_LINKS 4096u

/* The code ranges first and the table filled from its end, the fields last: what a process
 * uses is the state's last bytes, which share a page with the known images' first ones
 * (bss_pairs.c). */
typedef struct aft_swift_async_state {
    /* [start, end), sorted, in code[AFT_SWIFT_ASYNC_CODE_RANGES - code_count ...] */
    uint64_t code[AFT_SWIFT_ASYNC_CODE_RANGES][2];
    uint32_t code_count;
    int64_t tls_offset;     /* from a thread's thread pointer to its current-task word */
    uint64_t task_metadata; /* what every AsyncTask's first word holds */
    uint64_t runtime_start, runtime_end; /* the concurrency runtime's code */
    _Atomic int ready;                   /* set last, once the rest is written */
} aft_swift_async_state;
extern aft_swift_async_state *const aft_g_swift_async_ref;
#define aft_g_swift_async (*aft_g_swift_async_ref)

/* The links of one capture's threads, and the walk's scratch (one walk at a time). */
typedef struct aft_swift_async_store {
    uint32_t count;
    aft_swift_async_link links[AFT_SWIFT_ASYNC_STORE_LINKS];
    uint64_t scratch[AFT_SWIFT_ASYNC_MAX_LINKS][2];
} aft_swift_async_store;

/* ---- crash time (swift_chain_async.c) ---- */
/* The chain of thread tid (thread pointer tp, its context register and frame pointer as its
 * registers hold them, 0 when unknown) into out (room links, scratch of
 * AFT_SWIFT_ASYNC_MAX_LINKS pairs). Every read is fault-guarded: a corrupt chain ends the walk.
 * Returns the links written, 0 when the thread runs no task. */
uint32_t aft_async_swift_chain(uint64_t tid, uint64_t tp, uint64_t context_register, uint64_t fp,
                               aft_swift_async_link *out, uint32_t room, uint64_t (*scratch)[2]);
/* The same for the calling thread, from its signal frame (a crash's or a hang's capture). */
uint32_t aft_async_swift_chain_here(const void *ucontext, aft_swift_async_link *out, uint32_t room,
                                    uint64_t (*scratch)[2]);
/* The same for a recorded thread (its registers and thread pointer), appended to s. */
void aft_async_swift_chain_of_record(aft_swift_async_store *s, const aft_thread *r);
/* Whether s holds links of thread tid: it ran in a Swift task. */
int aft_async_swift_store_has(const aft_swift_async_store *s, uint64_t tid);
/* The async context register and the frame pointer among registers (aft_thread.registers
 * order); 0 when the architecture has none (arch_*_async.c). */
void aft_async_arch_swift_registers(const uint64_t *registers, uint32_t count,
                                    uint64_t *context_register, uint64_t *fp);
/* The calling thread's async context register, read now. */
uint64_t aft_async_arch_swift_context_now(void);

/* ---- normal time (swift_chain.c) ---- */
/* At the install's completion: the current-task word, the task metadata, the code ranges. */
void aft_swift_async_prepare(void);

#endif /* AFT_SWIFT_ASYNC_INTERNAL_H */
