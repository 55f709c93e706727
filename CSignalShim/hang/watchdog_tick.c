/*
 * watchdog_tick.c: NORMAL-TIME CODE, run on the watchdog thread. One target's step at a tick:
 * its sign of life (a ping that ran, a beat, a unit still open), the decision, and the start,
 * live updates and end of its hang (whose capture and file are watchdog_async.c's). Never calls
 * out of C: pings and the news of a finished hang go through the pinger thread (pinger.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "CSignalShim.h"
#include "watchdog_internal.h"

#define AFT_PING_PERIOD_NS (AFT_WATCHDOG_TICK_NS - 5000000ull)
#define AFT_RATE_REFILL_NS ((uint64_t)AFT_WATCH_RATE_REFILL_S * 1000000000ull)

static uint32_t aft_index(aft_watchdog *w, aft_watch_target *t) {
    return (uint32_t)(t - w->targets);
}

static uint64_t aft_target_beats(aft_watchdog *w, aft_watch_target *t) {
    if (t == &w->targets[0]) return __atomic_load_n(&aft_g_heartbeat_beats, __ATOMIC_ACQUIRE);
    return atomic_load(&t->beats);
}

static aft_watch_target *aft_parent(aft_watchdog *w, aft_watch_target *t) {
    return t->parent > 0 && (uint32_t)t->parent < AFT_WATCH_MAX_TARGETS ? &w->targets[t->parent]
                                                                        : NULL;
}

static int aft_target_detecting(aft_watchdog *w, aft_watch_target *t) {
    aft_watch_target *p = aft_parent(w, t); /* a unit is paused with its work target */
    return atomic_load(&t->armed) && atomic_load(&t->pause_depth) <= 0 &&
           (p == NULL || atomic_load(&p->pause_depth) <= 0) && !atomic_load(&w->background);
}

int aft_watchdog_open_task_leaf(uint64_t tid, const char *leaf) {
    char p[64];
    aft_async_task_path(p, tid, leaf);
    return open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
}

/* A thread of this process that has ended (its tid is free). A signal 0 checks without /proc,
 * which a hardened service may not have. */
static int aft_thread_ended(uint64_t tid) {
    int saved = errno;
    int ended = syscall(SYS_tgkill, (long)getpid(), (long)tid, 0L) != 0 && errno == ESRCH;
    errno = saved;
    return ended;
}

int aft_watch_thread_gone(aft_watch_target *t) {
    if (t == &aft_g_watchdog.targets[0] || t->kind == AFT_HANG_KIND_CONCURRENCY_POOL) return 0;
    if (t->source == AFT_SOURCE_PING && atomic_load(&t->roaming)) return 0;
    uint64_t tid = atomic_load(&t->tid);
    return tid != 0 && aft_thread_ended(tid);
}

void aft_watchdog_retire_target(aft_watchdog *w, aft_watch_target *t, uint32_t slot,
                                uint64_t end_ns) {
    uint32_t state = slot & 0xffu;
    if (t == &w->targets[0] || (state != AFT_SLOT_ACTIVE && state != AFT_SLOT_HUNG)) return;
    atomic_store(&t->hang_end_ns, end_ns);
    if (atomic_compare_exchange_strong(&t->slot, &slot, (slot & ~0xffu) | AFT_SLOT_ENDED))
        aft_watchdog_wake(w);
}

/* An event loop waiting for its descriptors. Its CPU time first (its CPU clock, no read): a
 * loop found idle that has not run since is idle still; otherwise its system call. */
static int aft_loop_idle(aft_watchdog *w, aft_watch_target *t, uint64_t tid) {
    if (t->syscall_fd_tid != tid) {
        if (t->syscall_fd >= 0) close(t->syscall_fd);
        t->syscall_fd_tid = tid;
        t->syscall_fd = aft_watchdog_open_task_leaf(tid, "syscall");
        t->idle_run_ns = UINT64_MAX;
    }
    if (t->syscall_fd < 0) return 0;
    uint64_t run_ns = aft_thread_cpu_ns(tid); /* unreadable (UINT64_MAX): its call is read */
    if (run_ns != UINT64_MAX && run_ns == t->idle_run_ns) return 1;
    ssize_t n = pread(t->syscall_fd, w->proc_buf, sizeof(w->proc_buf) - 1, 0);
    int64_t nr = -1;
    uint64_t sp = 0, pc = 0;
    int idle = n > 0 && aft_async_syscall_parse(w->proc_buf, (size_t)n, &nr, &sp, &pc) && nr >= 0 &&
               aft_async_syscall_idle_wait(nr);
    t->idle_run_ns = idle ? run_ns : UINT64_MAX;
    return idle;
}

/* Asks for a ping when one is due: every 100 ms, an idle event loop every
 * AFT_WATCH_IDLE_PING_MS only (a job in a poll of its own still gets one). */
static void aft_maybe_ping(aft_watchdog *w, aft_watch_target *t, uint64_t now) {
    if (atomic_load(&t->ping_outstanding)) return;
    if (t->last_ping_ns != 0 && now - t->last_ping_ns < AFT_PING_PERIOD_NS) return;
    uint64_t tid = atomic_load(&t->tid);
    /* An event loop in its wait, or the main thread waiting in its run loop where pings found
     * it idle before (main_idle.c): alive without a ping, one every AFT_WATCH_IDLE_PING_MS. */
    int is_main = t == &w->targets[0];
    if ((t->kind == AFT_HANG_KIND_EVENT_LOOP || is_main) && tid != 0 && t->last_ping_ns != 0 &&
        now - t->last_ping_ns < (uint64_t)AFT_WATCH_IDLE_PING_MS * 1000000ull &&
        (is_main ? aft_main_loop_idle(t, tid) : aft_loop_idle(w, t, tid))) {
        atomic_fetch_add(&w->idle_skips, 1);
        t->idle_seen_ns = now; /* waiting for work: alive, as a ping that ran */
        return;
    }
    if (is_main && tid != 0) aft_main_note_ping(t, tid);
    t->last_ping_ns = now;
    aft_watchdog_request_ping(w, aft_index(w, t));
}

void aft_watchdog_arm_target(aft_watchdog *w, aft_watch_target *t, uint64_t now) {
    /* A pinged target never heard from: one ping a second until it answers. */
    if (t->source != AFT_SOURCE_PING || atomic_load(&t->armed) || atomic_load(&t->ping_outstanding))
        return;
    if (t->last_ping_ns != 0 && now - t->last_ping_ns < 1000000000ull) return;
    t->last_ping_ns = now;
    aft_watchdog_request_ping(w, aft_index(w, t));
}

/* The rate limit: a bucket of AFT_WATCH_RATE_BURST records, one back per refill period. A
 * unit's hangs count against its work target. */
static aft_watch_target *aft_rate_owner(aft_watchdog *w, aft_watch_target *t) {
    if (t->parent > 0 && (uint32_t)t->parent < AFT_WATCH_MAX_TARGETS) return &w->targets[t->parent];
    return t;
}

static int aft_rate_allow(aft_watchdog *w, aft_watch_target *t, uint64_t now) {
    aft_watch_target *o = aft_rate_owner(w, t);
    uint64_t cap = (uint64_t)AFT_WATCH_RATE_BURST * AFT_RATE_REFILL_NS;
    if (o->rate_last_ns != 0) o->rate_tokens_ns += now - o->rate_last_ns;
    if (o->rate_tokens_ns > cap) o->rate_tokens_ns = cap;
    o->rate_last_ns = now;
    if (o->rate_tokens_ns < AFT_RATE_REFILL_NS) {
        o->suppressed++;
        atomic_fetch_add(&w->rate_limited, 1);
        return 0;
    }
    o->rate_tokens_ns -= AFT_RATE_REFILL_NS;
    return 1;
}

void aft_watchdog_finish_target(aft_watchdog *w, aft_watch_target *t, uint64_t end_ns) {
    aft_async_watchdog_update_hang(w, t, end_ns, 1);
    atomic_store(&t->in_hang, 0);
    atomic_store(&t->hang_end_ns, 0);
    if (t == &w->targets[0])
        __atomic_fetch_and(&aft_g_heartbeat_attention, ~AFT_ATTENTION_HANG, __ATOMIC_RELEASE);
    atomic_fetch_and(&t->attention, ~AFT_TARGET_HANG);
    t->stretch = AFT_STRETCH_NONE;
    aft_watchdog_request_finished(w);
}

/* When the hang in progress ended (0: not yet). */
static uint64_t aft_hang_end(aft_watchdog *w, aft_watch_target *t, uint64_t now, uint64_t prev_tick,
                             int alive) {
    uint32_t state = atomic_load(&t->slot) & 0xffu;
    if (t != &w->targets[0] && state == AFT_SLOT_ENDED) { /* a unit ended, a target removed */
        uint64_t end = atomic_load(&t->hang_end_ns);
        return end != 0 ? end : now;
    }
    if (t->source == AFT_SOURCE_PING)
        return atomic_load(&t->ping_outstanding) ? 0 : atomic_load(&t->ping_ran_ns);
    if (t->source == AFT_SOURCE_BEAT) {
        uint64_t end = atomic_load(&t->hang_end_ns);
        if (end != 0) return end;
        return alive ? prev_tick + (now - prev_tick) / 2 : 0;
    }
    return 0;
}

static void aft_begin(aft_watchdog *w, aft_watch_target *t, uint64_t tid, uint64_t now) {
    uint64_t onset = t->earliest_onset + (t->blocked_since - t->earliest_onset) / 2;
    if (t->source == AFT_SOURCE_UNIT) onset = t->blocked_since;
    if (t->source != AFT_SOURCE_UNIT) atomic_store(&t->hang_end_ns, 0); /* a unit's: its end */
    atomic_store(&t->in_hang, 1);
    if (t == &w->targets[0] && t->source == AFT_SOURCE_BEAT)
        __atomic_fetch_or(&aft_g_heartbeat_attention, AFT_ATTENTION_HANG, __ATOMIC_RELEASE);
    if (t->source == AFT_SOURCE_BEAT && t != &w->targets[0])
        atomic_fetch_or(&t->attention, AFT_TARGET_HANG);
    aft_async_watchdog_begin_hang(w, t, tid, onset, now);
    t->stretch = AFT_STRETCH_HANG;
}

void aft_watchdog_tick_target(aft_watchdog *w, aft_watch_target *t, uint64_t now,
                              uint64_t prev_tick, uint64_t late) {
    uint32_t slot = atomic_load(&t->slot);
    if (t->source == AFT_SOURCE_UNIT && t->parent < 0) return; /* a work target: its units are */
    if (t->source == AFT_SOURCE_UNIT && t->parent >= 0 && (slot >> 8) != t->seen_generation) {
        /* A new unit in this slot: its own stretch. */
        t->seen_generation = slot >> 8;
        t->stretch = AFT_STRETCH_NONE;
        t->hang_fd = -1;
        t->baseline_ns = 0;
        aft_watch_target *p = aft_parent(w, t);
        t->parent_generation = p != NULL ? atomic_load(&p->generation) : 0;
    } else if (t->source == AFT_SOURCE_UNIT && t->parent >= 0) {
        aft_watch_target *p = aft_parent(w, t); /* its work target paused or resumed */
        uint32_t gen = p != NULL ? atomic_load(&p->generation) : 0;
        if (gen != t->parent_generation) {
            t->parent_generation = gen;
            if (t->stretch != AFT_STRETCH_HANG) t->rebase = 1;
        }
    } else if (t->source != AFT_SOURCE_UNIT) {
        uint32_t gen = atomic_load(&t->generation);
        if (gen != t->seen_generation) {
            t->seen_generation = gen;
            if (t->stretch != AFT_STRETCH_HANG) t->rebase = 1;
        }
    }
    uint64_t beats = aft_target_beats(w, t);
    int alive = beats != t->last_beats;
    t->last_beats = beats;

    if (t->stretch == AFT_STRETCH_HANG) {
        if (late) t->hang_stopped_ns += late;
        uint64_t end = aft_hang_end(w, t, now, prev_tick, alive);
        int live_due = now + 5000000ull >= t->hang_last_live_ns + AFT_WATCHDOG_LIVE_NS;
        if (end == 0 && live_due && aft_watch_thread_gone(t)) {
            /* Its thread ended in the hang: that is its end, and the target's. */
            aft_watchdog_retire_target(w, t, atomic_load(&t->slot), now);
            end = now;
        }
        if (end != 0) {
            aft_watchdog_finish_target(w, t, end);
            t->earliest_onset = end;
            t->blocked_since = now;
        } else if (live_due) {
            aft_async_watchdog_update_hang(w, t, now, 0);
        }
        return;
    }
    if (!aft_target_detecting(w, t)) {
        t->stretch = AFT_STRETCH_NONE;
        t->rebase = 1;
        aft_watchdog_arm_target(w, t, now);
        return;
    }
    if (late) t->rebase = 1; /* the process was stopped: that time is nobody's hang */
    if (t->rebase) {
        t->rebase = 0;
        t->blocked_since = t->earliest_onset = t->baseline_ns = now;
        if (t->source == AFT_SOURCE_PING) aft_maybe_ping(w, t, now);
        return;
    }

    /* The target's silence so far. */
    if (t->source == AFT_SOURCE_PING) {
        if (!atomic_load(&t->ping_outstanding)) {
            if (t == &w->targets[0]) aft_main_note_answer(t);
            uint64_t ran = atomic_load(&t->ping_ran_ns);
            if (t->idle_seen_ns > ran) ran = t->idle_seen_ns;
            t->earliest_onset = ran > t->baseline_ns ? ran : t->baseline_ns;
            t->blocked_since = now;
            if (t->stretch == AFT_STRETCH_IGNORED) t->stretch = AFT_STRETCH_NONE;
            aft_maybe_ping(w, t, now);
            return;
        }
        /* A ping still waiting from before (a pause) counts from the baseline. */
        uint64_t posted = atomic_load(&t->ping_posted_ns);
        t->blocked_since = posted > t->baseline_ns ? posted : t->baseline_ns;
    } else if (t->source == AFT_SOURCE_BEAT) {
        if (alive) {
            t->earliest_onset = prev_tick;
            t->blocked_since = now;
            if (t->stretch == AFT_STRETCH_IGNORED) t->stretch = AFT_STRETCH_NONE;
            return;
        }
    } else {
        if ((slot & 0xffu) != AFT_SLOT_ACTIVE) return;
        /* From its begin, or the last fresh start (a stop of the process, a resume). */
        uint64_t begin = atomic_load(&t->begin_ns);
        t->blocked_since = t->earliest_onset = begin > t->baseline_ns ? begin : t->baseline_ns;
    }
    if (t->stretch == AFT_STRETCH_IGNORED) return; /* one verdict per stretch */
    if (now <= t->blocked_since || now - t->blocked_since <= t->threshold_ns) return;

    /* Past the threshold: only now is /proc worth reading. */
    uint64_t tid = t->kind == AFT_HANG_KIND_CONCURRENCY_POOL ? 0 : atomic_load(&t->tid);
    char state = tid != 0 ? aft_async_watchdog_thread_state(w, tid) : '?';
    aft_hang_facts facts = {
        .thread_gone = tid != 0 && state == '?' && aft_thread_ended(tid),
        .silent_ns = now - t->blocked_since,
        .threshold_ns = t->threshold_ns,
        .armed = atomic_load(&t->armed),
        .pause_depth = atomic_load(&t->pause_depth),
        .foreground = !atomic_load(&w->background),
        .crash_in_progress = aft_async_crash_in_progress(),
        .traced = aft_async_watchdog_traced(w),
        .thread_state = state,
    };
    uint32_t verdict = aft_async_hang_decide(&facts);
    if (facts.thread_gone && aft_watch_thread_gone(t)) {
        /* Its one thread ended (a loop shut down, a unit's thread left without its end):
         * nobody's hang, and the target is over. */
        aft_watchdog_retire_target(w, t, slot, now);
        t->stretch = AFT_STRETCH_IGNORED;
        return;
    }
    if (verdict == AFT_HANG_VERDICT_OFF) {
        t->rebase = 1;
    } else if (verdict == AFT_HANG_VERDICT_IGNORE) {
        atomic_fetch_add(&w->ignored, 1);
        t->stretch = AFT_STRETCH_IGNORED;
    } else if (verdict == AFT_HANG_VERDICT_HANG) {
        if (!aft_rate_allow(w, t, now)) {
            t->stretch = AFT_STRETCH_IGNORED;
            return;
        }
        if (t->source == AFT_SOURCE_UNIT) { /* from now on only the watchdog frees the slot */
            uint32_t expected = slot;
            if (!atomic_compare_exchange_strong(&t->slot, &expected,
                                                (slot & ~0xffu) | AFT_SLOT_HUNG))
                return; /* it ended just now */
        }
        aft_begin(w, t, tid, now);
    }
}

uint64_t aft_watchdog_target_due(aft_watchdog *w, aft_watch_target *t) {
    (void)w;
    if (t->stretch == AFT_STRETCH_HANG) return t->hang_last_live_ns + AFT_WATCHDOG_LIVE_NS;
    if (t->stretch == AFT_STRETCH_NONE && !t->rebase)
        return t->blocked_since + t->threshold_ns + 1000000ull;
    return 0;
}

int aft_watchdog_target_idle(aft_watchdog *w, aft_watch_target *t) {
    if (t->stretch == AFT_STRETCH_HANG) return 0;
    if (!aft_target_detecting(w, t)) return 1; /* not watched now: needs no tick */
    return t->kind == AFT_HANG_KIND_EVENT_LOOP && t->idle_run_ns != UINT64_MAX &&
           t->syscall_fd_tid != 0 && !atomic_load(&t->ping_outstanding);
}
