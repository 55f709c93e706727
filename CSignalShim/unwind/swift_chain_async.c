/*
 * swift_chain_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). The Swift async callers of a thread (swift_async_internal.h): its task from
 * the runtime's thread-local word, the task's chain of contexts, and a closer first context from
 * the context register or a frame's slot when one leads into that chain. Every read goes through
 * aft_async_read_memory (a corrupt or foreign value ends the walk, never the report); each link
 * must be 16-byte aligned, readable, and resume in the code of an image loaded at start.
 */
#include <stdint.h>

#include "shim_internal.h"
#include "swift_async_internal.h"
#include "threads_internal.h"

/* An address an async context may have: 16-byte aligned, in the user half, past page 0. */
static int aft_async_swift_plausible(uint64_t context) {
    return context >= 4096u && (context & 15u) == 0 && context < (1ull << 48);
}

/* Whether address is in the code of an image loaded at start (binary search). */
static int aft_async_swift_code(uint64_t address) {
    const aft_swift_async_state *s = &aft_g_swift_async;
    uint32_t count = s->code_count <= AFT_SWIFT_ASYNC_CODE_RANGES ? s->code_count : 0;
    const uint32_t first = AFT_SWIFT_ASYNC_CODE_RANGES - count; /* filled from the end */
    uint32_t low = first, high = AFT_SWIFT_ASYNC_CODE_RANGES;
    address = aft_async_arch_code_address(address);
    while (low < high) {
        uint32_t mid = low + (high - low) / 2;
        if (s->code[mid][0] <= address) {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    return low > first && address < s->code[low - 1][1];
}

/* One link: context's Parent and ResumeParent; 0 when it cannot be a context (its Parent is
 * checked when it is followed). */
static int aft_async_swift_link(uint64_t context, uint64_t pair[2]) {
    if (!aft_async_swift_plausible(context) || aft_async_read_memory(context, pair, 16) != 0)
        return 0;
    return aft_async_swift_code(pair[1]);
}

/* The task's chain from its resume context into scratch: contexts and resume addresses.
 * *root: it ended at the root (Parent NULL). */
static uint32_t aft_async_swift_task_chain(uint64_t task, uint64_t (*scratch)[2], int *root) {
    uint64_t words[(AFT_SWIFT_TASK_RESUME_CONTEXT + 8) / 8];
    *root = 0;
    if (!aft_async_swift_plausible(task) || aft_async_read_memory(task, words, sizeof(words)) != 0)
        return 0;
    if (words[0] != aft_g_swift_async.task_metadata) return 0; /* not an AsyncTask */
    uint64_t context = words[AFT_SWIFT_TASK_RESUME_CONTEXT / 8];
    uint32_t n = 0;
    while (n < AFT_SWIFT_ASYNC_MAX_LINKS) {
        uint64_t pair[2];
        if (!aft_async_swift_link(context, pair)) break;
        scratch[n][0] = context;
        scratch[n][1] = pair[1];
        n++;
        if (pair[0] == 0) {
            *root = 1;
            break;
        }
        /* A loop (a context its own ancestor) is cut by the cap; a self-link at once. */
        if (pair[0] == context || !aft_async_swift_plausible(pair[0])) break;
        context = pair[0];
    }
    return n;
}

/* Where chain (the task's, n links) holds context, or n. */
static uint32_t aft_async_swift_index(uint64_t (*chain)[2], uint32_t n, uint64_t context) {
    for (uint32_t i = 0; i < n; i++)
        if (chain[i][0] == context) return i;
    return n;
}

/* From candidate, the links before it reaches the task's chain, into prefix; the index in the
 * chain where it joins, or n when it does not (within AFT_SWIFT_ASYNC_CANDIDATE_STEPS). */
static uint32_t aft_async_swift_join(uint64_t candidate, uint64_t (*chain)[2], uint32_t n,
                                     uint64_t (*prefix)[2], uint32_t *prefix_count) {
    uint64_t context = candidate;
    *prefix_count = 0;
    for (uint32_t step = 0; step <= AFT_SWIFT_ASYNC_CANDIDATE_STEPS; step++) {
        uint32_t at = aft_async_swift_index(chain, n, context);
        if (at < n) return at;
        uint64_t pair[2];
        if (step == AFT_SWIFT_ASYNC_CANDIDATE_STEPS || !aft_async_swift_link(context, pair) ||
            !aft_async_swift_plausible(pair[0]))
            return n;
        prefix[*prefix_count][0] = context;
        prefix[*prefix_count][1] = pair[1];
        (*prefix_count)++;
        context = pair[0];
    }
    return n;
}

/* The chain of a thread that runs task (its word in the runtime's thread-local). */
static uint32_t aft_async_swift_chain_of_task(uint64_t tid, uint64_t task,
                                              uint64_t context_register, uint64_t fp,
                                              aft_swift_async_link *out, uint32_t room,
                                              uint64_t (*scratch)[2]) {
    const aft_swift_async_state *s = &aft_g_swift_async;
    if (task == 0 || room == 0) return 0; /* not in a task */
    int root = 0;
    uint32_t n = aft_async_swift_task_chain(task, scratch, &root);
    if (n == 0) return 0;

    /* A closer start: the context register, then each frame's slot below its saved frame
     * pointer, innermost first, up to the frame the runtime called (the job's first). */
    uint64_t prefix[AFT_SWIFT_ASYNC_CANDIDATE_STEPS][2];
    uint32_t prefix_count = 0, start = 0, anchor = AFT_SWIFT_ASYNC_FROM_TASK;
    int found = 0;
    if (aft_async_swift_plausible(context_register)) {
        start = aft_async_swift_join(context_register, scratch, n, prefix, &prefix_count);
        if (start < n) {
            found = 1;
            anchor = AFT_SWIFT_ASYNC_FROM_REGISTER;
        }
    }
    for (uint32_t i = 0; !found && i < AFT_SWIFT_ASYNC_FRAME_CANDIDATES; i++) {
        uint64_t record[3]; /* the slot below, the saved frame pointer, the return address */
        if (fp < 4096u || (fp & 7u) != 0 || aft_async_read_memory(fp - 8, record, 24) != 0) break;
        if (aft_async_swift_plausible(record[0])) {
            start = aft_async_swift_join(record[0], scratch, n, prefix, &prefix_count);
            if (start < n) {
                found = 1;
                anchor = AFT_SWIFT_ASYNC_FROM_FRAME;
                break;
            }
        }
        uint64_t ret = aft_async_arch_code_address(record[2]);
        if (ret >= s->runtime_start && ret < s->runtime_end) break; /* the runtime called it */
        if (record[1] <= fp || record[1] - fp > (1u << 20)) break;
        fp = record[1];
    }
    if (!found) {
        start = 0;
        prefix_count = 0;
    }

    uint32_t count = 0;
    for (uint32_t i = 0; i < prefix_count && count < room; i++, count++) {
        out[count].context = prefix[i][0];
        out[count].resume = prefix[i][1];
    }
    for (uint32_t i = start; i < n && count < room; i++, count++) {
        out[count].context = scratch[i][0];
        out[count].resume = scratch[i][1];
    }
    for (uint32_t i = 0; i < count; i++) {
        out[i].thread_id = tid;
        out[i].depth = i;
        out[i].flags = i == 0 ? anchor : 0;
    }
    int whole = root && count == prefix_count + (n - start);
    out[count - 1].flags |= whole ? AFT_SWIFT_ASYNC_ROOT : AFT_SWIFT_ASYNC_CUT;
    return count;
}

void aft_async_swift_chain_of_record(aft_swift_async_store *s, const aft_thread *r) {
    if (r->thread_pointer == 0 || s->count >= AFT_SWIFT_ASYNC_STORE_LINKS) return;
    if (r->context_source != AFT_THREAD_CONTEXT_SIGNAL &&
        r->context_source != AFT_THREAD_CONTEXT_CRASH)
        return; /* without its registers: its task is still known, but not read from /proc */
    uint64_t context = 0, fp = 0;
    aft_async_arch_swift_registers(r->registers, r->register_count, &context, &fp);
    uint32_t room = AFT_SWIFT_ASYNC_STORE_LINKS - s->count;
    if (room > AFT_SWIFT_ASYNC_MAX_LINKS) room = AFT_SWIFT_ASYNC_MAX_LINKS;
    s->count += aft_async_swift_chain(r->thread_id, r->thread_pointer, context, fp,
                                      s->links + s->count, room, s->scratch);
}

uint32_t aft_async_swift_chain(uint64_t tid, uint64_t tp, uint64_t context_register, uint64_t fp,
                               aft_swift_async_link *out, uint32_t room, uint64_t (*scratch)[2]) {
    const aft_swift_async_state *s = &aft_g_swift_async;
    if (!atomic_load(&s->ready) || tp == 0 || room == 0) return 0;
    uint64_t task = 0;
    if (aft_async_read_memory(tp + (uint64_t)s->tls_offset, &task, sizeof(task)) != 0) return 0;
    return aft_async_swift_chain_of_task(tid, task, context_register, fp, out, room, scratch);
}

uint32_t aft_async_swift_chain_here(const void *ucontext, aft_swift_async_link *out, uint32_t room,
                                    uint64_t (*scratch)[2]) {
    const aft_swift_async_state *s = &aft_g_swift_async;
    uint64_t tp = aft_async_arch_thread_pointer();
    if (ucontext == NULL || !atomic_load(&s->ready) || tp == 0 || room == 0) return 0;
    /* A word in the calling thread's own static TLS is mapped as long as the thread lives:
     * read as is (a guarded read through /proc/self/mem costs more than the rest of a crash's
     * first steps). A word in TLS allocated on demand lies elsewhere in each thread: guarded. */
    int64_t at = s->tls_offset, size = (int64_t)aft_g_static_tls_size;
#if defined(__x86_64__)
    int in_static = at < 0 && -at >= 8 && -at <= size; /* below the thread pointer */
#else
    int in_static = at >= 16 && at + 8 <= size; /* above the thread control block */
#endif
    uint64_t task = 0;
    if (in_static)
        task = *(const volatile uint64_t *)(uintptr_t)(tp + (uint64_t)at);
    else if (aft_async_read_memory(tp + (uint64_t)at, &task, sizeof(task)) != 0)
        return 0;
    if (task == 0) return 0;
    aft_crash_info regs;
    aft_async_memset(&regs, 0, sizeof(regs));
    aft_async_arch_registers(ucontext, &regs);
    uint64_t context = 0, fp = 0;
    aft_async_arch_swift_registers(regs.registers, regs.register_count, &context, &fp);
    return aft_async_swift_chain_of_task(aft_async_gettid(), task, context, fp, out, room, scratch);
}

int aft_async_swift_store_has(const aft_swift_async_store *s, uint64_t tid) {
    for (uint32_t i = 0; i < s->count && i < AFT_SWIFT_ASYNC_STORE_LINKS; i++)
        if (s->links[i].thread_id == tid) return 1;
    return 0;
}
