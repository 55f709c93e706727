/*
 * pool_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md (no
 * malloc, no locks, no stdio, no Swift). Runs on the watchdog thread while the Swift
 * concurrency pool is starved: tells the threads running a Swift job (swift_job_run on their
 * stack, its range read at normal time, or a current task) in a hang's capture of every thread, and counts them
 * blocked (asleep: S or D) or busy (running: R).
 */
#include "threads_internal.h"
#include "watchdog_internal.h"

static int aft_async_runs_job(const aft_watchdog *w, const uint64_t *frames, uint32_t count) {
    if (w->job_run_start == 0) return 0;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t pc = frames[i];
        if (pc > w->job_run_start && pc <= w->job_run_end) return 1; /* a return address */
    }
    return 0;
}

int32_t aft_async_pool_classify(aft_watchdog *w, aft_thread_capture *c) {
    aft_hang_target *h = &w->hang_target;
    uint32_t offset = 0, recorded = c->info.recorded;
    int32_t lead = -1, lead_blocked = 0;
    for (uint32_t i = 0; i < recorded; i++) {
        aft_thread *r = &c->records[i];
        const uint64_t *frames = c->frames + offset;
        uint32_t count = r->frame_count;
        offset += count;
        if (offset > c->frame_count) continue;
        /* Its frames pass through swift_job_run, or it runs in a task (its async callers were
         * read): a walk by frame pointers can miss the first in a blocked worker's stack. */
        if (!aft_async_runs_job(w, frames, count) &&
            !aft_async_swift_store_has(&c->swift_async, r->thread_id))
            continue;
        r->flags |= AFT_THREAD_SWIFT_JOB;
        h->pool_jobs++;
        int blocked = r->state == 'S' || r->state == 'D';
        if (blocked) h->pool_blocked++;
        if (r->state == 'R') h->pool_busy++;
        if (lead < 0 || (blocked && !lead_blocked)) {
            lead = (int32_t)i;
            lead_blocked = blocked;
        }
    }
    return lead;
}

/* The frames of record i of the capture (its slice of c->frames), into out. */
uint32_t aft_async_pool_record_frames(const aft_thread_capture *c, uint32_t index, uint64_t *out,
                                      uint32_t capacity) {
    uint32_t offset = 0;
    for (uint32_t i = 0; i < index && i < c->info.recorded; i++)
        offset += c->records[i].frame_count;
    uint32_t n = c->records[index].frame_count;
    if (offset + n > c->frame_count) return 0;
    if (n > capacity) n = capacity;
    aft_async_memcpy(out, c->frames + offset, (size_t)n * sizeof(uint64_t));
    return n;
}

/* A pool's hang: every thread, those inside a Swift job marked; the lead one's stack is the
 * hang's. Returns its frames (0: none). */
uint32_t aft_async_pool_hang(aft_watchdog *w, aft_hang_info *h) {
    w->hang_target.pool_width = atomic_load(&w->pool_width);
    w->capture_swift_async_count = 0; /* the workers' chains are the capture's */
    /* Not while a late capture handler still runs: it has the capture slot's window. */
    if ((atomic_load(&w->capture_state) & 0xffu) == AFT_CAPTURE_RUNNING) return 0;
    aft_async_unwind_warm_up(); /* a process's first hang: nothing paused meanwhile */
    aft_async_threads_capture_for_hang(0, 1);
    aft_async_threads_release_capture(&aft_g_hang_threads, 1);
    int32_t lead = aft_async_pool_classify(w, &aft_g_hang_threads);
    if (lead < 0) return 0;
    const aft_thread *r = &aft_g_hang_threads.records[lead];
    h->thread_id = r->thread_id;
    h->thread_state = r->state;
    h->syscall_number = r->syscall_number >= 0 ? (uint64_t)r->syscall_number : UINT64_MAX;
    aft_async_memcpy(h->thread_name, r->name, sizeof(h->thread_name));
    h->capture_method =
        r->context_source == AFT_THREAD_CONTEXT_SIGNAL ? AFT_CAPTURE_SIGNAL : AFT_CAPTURE_PROC;
    return aft_async_pool_record_frames(&aft_g_hang_threads, (uint32_t)lead, w->pool_frames,
                                        AFT_THREAD_MAX_FRAMES);
}
