/*
 * report_internal.h: the report writer (report_async.c), which every crash-time file that writes
 * a crash or hang file calls; included by shim_internal.h only (it uses its types). Not seen by
 * Swift.
 */
#ifndef AFT_REPORT_INTERNAL_H
#define AFT_REPORT_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "aftermath_format.h"

struct aft_thread_capture;

/* Tests only: when non-zero, the writer stores to this (unmapped) address after its first
 * flush, to prove that a fault inside the handler neither hangs nor loops. Defined only by the
 * test-only C target (Harness/CFaults): apps never link it, so this weak reference is NULL. */
extern volatile uintptr_t aft_g_test_fault_in_writer __attribute__((weak));
/* Tests only (CHarnessFaults): non-zero, the handler unwinds the crashing thread itself. */
extern volatile int aft_g_test_unwind_in_handler __attribute__((weak));
/* The process's CPU time so far into the crash's record (safe_io_async.c). */
void aft_async_process_cpu(aft_crash_info *ci);
typedef struct aft_report_spec {
    uint32_t kind;  /* AFT_KIND_* */
    uint32_t flags; /* AFT_FLAG_* */
    const aft_context *context;
    uint32_t event_type; /* AFT_SECTION_CRASH or AFT_SECTION_HANG */
    const void *event;
    uint32_t event_size;
    const uint64_t *frames;
    uint32_t frame_count;
    uint32_t frames_truncated;
    aft_maps_scratch *scratch; /* for the images */
    aft_image *images;         /* AFT_MAX_IMAGES entries */
    uint32_t images_read;      /* images holds this many, read by the caller: not read again */
    uint32_t images_truncated;
    int fsync_file;
    int keep_open;       /* return the committed file's fd instead of closing it */
    int has_reserved_fd; /* write into reserved_fd (open, empty) instead of opening */
    int reserved_fd;
    /* The link map's signature, already taken (by the unwinding helper): the writer then
     * compares it instead of walking the list through /proc/self/mem, one read per library. */
    int has_link_map;
    uint64_t link_count, link_hash;
    /* Every thread of the process (crash files): its summary, records, frames and stack
     * memory are written after the frames; NULL: none. */
    struct aft_thread_capture *threads;
    /* The Swift async callers of the crashing or hung thread, before the threads' own. */
    const aft_swift_async_link *swift_async;
    uint32_t swift_async_count;
    /* The machine (crash files), right after the context; NULL: none. */
    const aft_system_info *system;
    /* A second event section right after the first (a hang's target); 0: none. */
    uint32_t extra_type;
    const void *extra;
    uint32_t extra_size;
    /* The file-size limit (ulimit -f), where the caller has it already; else read here. */
    int file_size_limit_known;
    uint64_t file_size_limit;
} aft_report_spec;
/* Writes a report to dir_fd/tmp_name, commits it and renames it to final_name (a crash's
 * reserve is committed in place and keeps its name). Returns 0 or an errno value; with
 * keep_open, *out_fd is the open, committed file. */
int aft_async_write_report(int dir_fd, const char *tmp_name, const char *final_name,
                           const aft_report_spec *spec, int *out_fd);
/* The machine a crash file records (system_info.c): read once when start completes, then
 * aft_g_system_ready is 1. In a forked child, the start becomes the fork's time. */
extern aft_system_info aft_g_system;
extern atomic_int aft_g_system_ready;
void aft_prepare_system_info(void);
void aft_system_after_fork_in_child(void);
/* Marks the reserve's half-written crash report of a handler that faulted. */
void aft_async_mark_handler_fault(void);
/* The calling thread's name (AFT_THREAD_NAME bytes at most, NUL-padded) into out. */
void aft_async_thread_name(char *out);
/* Formats 16 id bytes as 32 lowercase hex digits followed by suffix. */
void aft_async_id_file_name(char *out, size_t capacity, const uint8_t id[AFT_ID_SIZE],
                            const char *suffix);

#endif /* AFT_REPORT_INTERNAL_H */
