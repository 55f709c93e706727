/*
 * park_internal.h: where Aftermath's own long-lived threads wait. Part of threads_internal.h
 * and watchdog_internal.h (which include it); not imported by Swift.
 *
 * The watchdog, the pinger and the run record's updater note their stack pointer and the pc
 * after the call, in the function that waits, right before each wait, and clear the pc once
 * awake. A crash lists such a thread with them (AFT_THREAD_CONTEXT_PARKED) instead of with no
 * registers: minidump readers then have a context for it (Breakpad's minidump-2-core crashed
 * on a thread without one), and none is paused or read from /proc (a first read of a thread's
 * syscall file costs about 20 µs). A thread noted running (pc 0) is listed without, as is the
 * resident helper's donor. A delivery lent the app's name notes where it hands the batch to
 * the app's exporter (aft_thread_note_handing_off): a crash meanwhile lists it there.
 * The sp is the caller's on x86-64 and in clang's arm64 builds, a few words off in others (gcc
 * at -O0, a sanitizer's frames): it is only a reader's context, never used to read memory.
 */
#ifndef AFT_PARK_INTERNAL_H
#define AFT_PARK_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct aft_park_note {
    _Atomic uint64_t sp;
    _Atomic uint64_t pc; /* 0: not waiting */
} aft_park_note;

/* The notes, by thread (threads_capture_async.c). */
extern aft_park_note aft_g_park_watchdog, aft_g_park_pinger, aft_g_park_run;

/* Notes its caller's stack pointer and the pc after the call: the caller is about to wait. */
void aft_park_note_wait(aft_park_note *note);
/* Awake: the note no longer says where it is. */
static inline void aft_park_note_awake(aft_park_note *note) { atomic_store(&note->pc, 0); }

#endif /* AFT_PARK_INTERNAL_H */
