/*
 * aftermath_format.h: THE on-disk formats of Aftermath, shared by C (writer, at crash time) and
 * Swift (reader, on the next launch). Treat this like a wire protocol:
 *   - fixed-width integers only; addresses are uint64_t; no pointers, size_t, bool or enums;
 *   - every array has a capacity #define and a count before it; explicit _reserved padding;
 *   - every size and offset is _Static_assert'ed below and asserted again from Swift;
 *   - bump AFT_FORMAT_VERSION when a file may hold what an older reader cannot take, keep a
 *     fixture of every version; readers take every version from AFT_FORMAT_MIN_VERSION on.
 *
 * Versions: 1, the first; 2 adds every thread of the process: THREADS_INFO, THREADS and
 * THREAD_FRAMES sections (crash and hang files) and STACK_MEMORY (crash files). A version 1
 * file has none of them and still decodes. Run and handled-error files are unchanged by 2.
 * A hang file's HANG_TARGET section came later within 2: a reader that skips it, as every
 * reader skips a section it does not know, sees a main thread's hang. So did SWIFT_ASYNC
 * (aftermath_format_async.h): without it a reader sees the machine frames alone, and SYSTEM
 * (aftermath_format_system.h): without it, no processor details. 3 writes a crash's or hang's
 * images, where those read at start still hold, as IMAGE_LIST and IMAGE_PATHS
 * (aftermath_format_images.h): IMAGES' entries without their paths' unused bytes.
 *
 * A file is:  aft_file_header | section | section | ...
 * Each section is an aft_section_header followed by count entries of entry_size bytes.
 * Sections are written in the order that tells the most when a file is cut short:
 * context, event (crash or hang), frames of the crashing/blocked thread, the other threads
 * (summary, records, frames), images, then the threads' stack memory, the largest part.
 * The header is written first with commit == 0 and rewritten last with the body's size, its
 * CRC-32 (IEEE) and commit == AFT_COMMIT_MARKER. A file is then renamed into place, so a file
 * with its final name is whole; a leftover ".tmp" is a writer that died midway, or a crash's
 * reserve, committed in place by the handler (the commit marker says which), which the next
 * launch renames. Fields that change after commit (a hang's duration) live in the header's
 * live block, outside the CRC, with their own check value.
 */
#ifndef AFTERMATH_FORMAT_H
#define AFTERMATH_FORMAT_H

#include <stdint.h>
#include <stddef.h>

#define AFT_MAGIC 0x4D544641u /* "AFTM" little-endian */
#define AFT_FORMAT_VERSION 3u
#define AFT_FORMAT_MIN_VERSION 1u
#define AFT_COMMIT_MARKER 0x54494D43u /* "CMIT" */
#define AFT_LIVE_CHECK_SALT 0xA5F1E7u

/* File kinds */
#define AFT_KIND_CRASH 1u
#define AFT_KIND_HANG 2u

/* Header flags */
#define AFT_FLAG_FSYNCED 0x1u       /* the writer fsync'ed the file before renaming */
#define AFT_FLAG_NESTED_FAULT 0x2u  /* the handler itself faulted while writing */
#define AFT_FLAG_HANG_FINISHED 0x4u /* (hang) the main thread ran again */

/* Section types */
#define AFT_SECTION_CONTEXT 1u
#define AFT_SECTION_CRASH 2u
#define AFT_SECTION_FRAMES 3u
#define AFT_SECTION_IMAGES 4u
#define AFT_SECTION_HANG 5u
#define AFT_SECTION_THREADS_INFO 6u /* one aft_threads_info: how the capture of every thread went */
#define AFT_SECTION_THREADS 7u      /* aft_thread entries, the crashing thread first */
#define AFT_SECTION_THREAD_FRAMES 8u /* uint64_t: each thread's frame_count frames, record order */
/* entry_size 1: an aft_memory_header, then its bytes; one section per captured stack, in record
 * order */
#define AFT_SECTION_STACK_MEMORY 9u
/* (hang files) one aft_hang_target: which watched target hung; a file without it is a main
 * thread's hang */
#define AFT_SECTION_HANG_TARGET 10u
/* entry_size 1: zero bytes that fill a crash file to the size its reserve already had (the
 * reserve's first pages are sized and cached at start, so the crash writes into them); read
 * as nothing */
#define AFT_SECTION_PADDING 12u
/* The most a crash reserve is sized to at start. An unlocked `.crash.tmp` of at most this size
 * whose header is all zero was never written: a run that ended without a crash. */
#define AFT_RESERVE_SIZED_MAX (64u * 1024u)

/* Section flags */
#define AFT_SECTION_TRUNCATED 0x1u /* more entries existed than the capacity */

/* Capacities */
#define AFT_MAX_FRAMES 4096u
#define AFT_MAX_IMAGES 512u
#define AFT_MAX_REGISTERS 40u
#define AFT_PATH_CAPACITY 256u /* a longer path keeps its last 255 bytes */
#define AFT_BUILD_ID_CAPACITY 32u
#define AFT_ID_SIZE 16u
#define AFT_SHORT_STRING 64u
#define AFT_NAME_STRING 128u
#define AFT_THREAD_NAME 16u

/* Architectures (aft_crash_info.arch, aft_image.arch) */
#define AFT_ARCH_UNKNOWN 0u
#define AFT_ARCH_X86_64 1u
#define AFT_ARCH_ARM64 2u

/* How the frames were obtained */
#define AFT_UNWINDER_NONE 0u
#define AFT_UNWINDER_LIBUNWIND 1u
#define AFT_UNWINDER_FRAME_POINTER 2u
#define AFT_UNWINDER_PC_ONLY 3u
/* The crashing thread's frames are left to the next launch, which unwinds them from its
 * registers and stack memory (the FRAMES section holds the pc only). */
#define AFT_UNWINDER_DEFERRED 4u

/* How libunwind's attempt ended (aft_crash_info.unwind_status). The handler walks frame
 * pointers first, without locks, then gives libunwind a deadline in a helper process. */
#define AFT_UNWIND_STATUS_NOT_RECORDED 0u  /* files written before the field existed */
#define AFT_UNWIND_STATUS_COMPLETE 1u      /* finished: its stack is used when it has 2+ frames */
#define AFT_UNWIND_STATUS_TIMED_OUT 2u     /* not finished in time (a lock another thread held) */
#define AFT_UNWIND_STATUS_HELPER_FAILED 3u /* its helper could not start, or died */
#define AFT_UNWIND_STATUS_SKIPPED 4u       /* not tried: an earlier helper was killed */

/* Image flags */
#define AFT_IMAGE_MAIN_EXECUTABLE 0x1u
#define AFT_IMAGE_DELETED 0x2u /* the path ended in " (deleted)", already removed */
#define AFT_IMAGE_PATH_TRUNCATED 0x4u
#define AFT_IMAGE_BUILD_ID_FROM_MEMORY 0x8u
#define AFT_IMAGE_VDSO 0x10u
#define AFT_IMAGE_ANONYMOUS 0x20u /* memfd or other non-file mapping */
/* No GNU build id: build_id is the image's text hash, AFT_TEXT_HASH_SIZE bytes: the first
 * min(4096, p_filesz) bytes of its first executable PT_LOAD segment, XOR-folded in 16-byte
 * chunks (byte i goes into build_id[i % 16]). The file's bytes at that segment's p_offset
 * give the same hash. */
#define AFT_IMAGE_BUILD_ID_TEXT_HASH 0x40u
#define AFT_TEXT_HASH_SIZE 16u
#define AFT_TEXT_HASH_LENGTH 4096u
/* aft_context.app_build_id is the main executable's text hash when app_build_id_size is
 * AFT_TEXT_HASH_SIZE and the bytes after the hash begin with this marker (its NUL included);
 * after a GNU build id the rest of app_build_id is zero. */
#define AFT_TEXT_HASH_MARKER "text_hash"

typedef struct aft_file_header {
    uint32_t magic;           /* AFT_MAGIC */
    uint16_t version;         /* AFT_FORMAT_VERSION */
    uint16_t header_size;     /* sizeof(aft_file_header) */
    uint32_t kind;            /* AFT_KIND_* */
    uint32_t flags;           /* AFT_FLAG_* */
    uint64_t body_size;       /* bytes after the header covered by body_crc */
    uint32_t body_crc;        /* CRC-32 (IEEE 802.3) of the body */
    uint32_t commit;          /* AFT_COMMIT_MARKER once the body is whole */
    uint64_t live_value;      /* mutable after commit: a hang's duration in ms */
    uint64_t live_updated_ns; /* CLOCK_REALTIME of the last live update */
    uint32_t live_check;      /* aft_live_check(live_value, live_updated_ns) */
    uint32_t live_flags;      /* mutable flags (AFT_FLAG_HANG_FINISHED) */
    uint8_t _reserved[8];
} aft_file_header;

typedef struct aft_section_header {
    uint32_t type;       /* AFT_SECTION_* */
    uint32_t entry_size; /* bytes per entry */
    uint32_t count;      /* entries that follow */
    uint32_t flags;      /* AFT_SECTION_* flags */
} aft_section_header;

/* The run's context, prepared at start; copied verbatim into every report of the run. */
typedef struct aft_context {
    uint8_t report_id[AFT_ID_SIZE];  /* this report's id (crash id), UUID bytes */
    uint8_t session_id[AFT_ID_SIZE]; /* session.id, UUID bytes */
    uint8_t run_id[AFT_ID_SIZE];     /* the run (process instance) */
    uint64_t pid;
    uint64_t start_realtime_ns;
    char service_name[AFT_NAME_STRING];
    char service_version[AFT_SHORT_STRING];
    char os_name[AFT_SHORT_STRING];
    char os_version[AFT_SHORT_STRING];
    char kernel_release[AFT_SHORT_STRING];
    uint8_t app_build_id[AFT_BUILD_ID_CAPACITY]; /* GNU build id of the main executable, or
                                                    its text hash (AFT_TEXT_HASH_MARKER) */
    uint32_t app_build_id_size;
    uint32_t arch; /* AFT_ARCH_* */
    char executable_path[AFT_PATH_CAPACITY];
    char app_root[AFT_PATH_CAPACITY]; /* in_app root of this run */
} aft_context;

typedef struct aft_crash_info {
    int32_t signal;
    int32_t code;           /* si_code */
    int32_t error_number;   /* si_errno */
    uint32_t arch;          /* AFT_ARCH_* */
    uint64_t fault_address; /* si_addr */
    int64_t sender_pid;     /* for sent signals (si_code <= 0), else -1 */
    int64_t sender_uid;     /* for sent signals, else -1 */
    uint64_t thread_id;     /* kernel tid of the crashing thread */
    uint64_t time_realtime_ns;
    uint64_t handler_entry_monotonic_ns;
    uint64_t pc;
    uint64_t sp;
    uint32_t register_count;
    uint32_t unwinder; /* AFT_UNWINDER_* */
    uint64_t registers
        [AFT_MAX_REGISTERS]; /* x86-64: mcontext gregs order; arm64: x0-x30, sp, pc, pstate */
    char thread_name[AFT_THREAD_NAME];
    uint32_t is_main_thread; /* 1 when tid == pid */
    uint32_t unwind_status;  /* AFT_UNWIND_STATUS_* */
    uint64_t cpu_user_us;    /* the process's CPU time at the crash, in user mode and in the */
    uint64_t cpu_system_us;  /* kernel (getrusage); both 0: not recorded (older files) */
    uint8_t _reserved[16];
} aft_crash_info;

/* A hang's fixed part; its duration is in the header's live block. */
typedef struct aft_hang_info {
    uint64_t begin_realtime_ns; /* when the main thread stopped answering */
    uint64_t begin_monotonic_ns;
    uint64_t thread_id; /* the blocked thread */
    uint64_t threshold_ms;
    uint64_t capture_pause_ns; /* how long the thread was stopped for the capture */
    uint64_t syscall_number;   /* from /proc/.../syscall, or UINT64_MAX */
    uint64_t wchan_pc;
    uint32_t capture_method; /* AFT_CAPTURE_* */
    char thread_state;       /* from /proc/.../stat: R, S, D, ... */
    char _pad[3];
    char thread_name[AFT_THREAD_NAME];
    char wait_channel[AFT_SHORT_STRING];
    uint8_t previous_session_id[AFT_ID_SIZE]; /* session.previous_id; zero: none (and in
                                                 files written before it existed) */
    uint8_t _reserved[16];
} aft_hang_info;

/* The watched target a hang is of, and for the Swift concurrency pool what its workers did. */
typedef struct aft_hang_target {
    char name[AFT_SHORT_STRING]; /* the name it was watched under */
    uint32_t kind;               /* AFT_HANG_KIND_* (CSignalShim.h): main 0, event loop 1,
                                    thread 2, work 3, concurrency pool 4 */
    uint32_t suppressed;         /* its hangs left unrecorded by the rate limit since its last */
    uint32_t pool_width;         /* (pool) its queue's width: the configured CPUs */
    uint32_t pool_jobs;          /* (pool) threads inside a Swift job (swift_job_run) */
    uint32_t pool_blocked;       /* (pool) of those, asleep (S or D): blocked */
    uint32_t pool_busy;          /* (pool) of those, running (R) */
    uint8_t _reserved[40];
} aft_hang_target;

#define AFT_CAPTURE_SIGNAL 1u /* a signal handler on the thread captured its stack */
#define AFT_CAPTURE_PROC 2u   /* the signal was not delivered: /proc stat and syscall */

typedef struct aft_image {
    uint64_t start;     /* lowest mapped address (the load address) */
    uint64_t end;       /* highest mapped address, exclusive */
    uint64_t load_bias; /* start - (first PT_LOAD p_vaddr rounded down), from memory */
    uint32_t flags;     /* AFT_IMAGE_* */
    uint32_t build_id_size;
    uint8_t build_id[AFT_BUILD_ID_CAPACITY];
    uint32_t arch;      /* AFT_ARCH_* */
    uint32_t path_size; /* its length (IMAGE_LIST); an IMAGES section's path ends at its NUL */
    char path[AFT_PATH_CAPACITY];
} aft_image;

/* ---- every thread at a crash (format version 2) ----
 * The crashing thread pauses every other thread of the process with a directed signal; each
 * answers from its own signal frame (registers, floating-point state) and waits until the crash
 * is written. A thread that cannot or does not answer is still listed, with what the kernel
 * gives (/proc/self/task/<tid>/syscall: stack pointer and pc), and says why. */
#define AFT_MAX_THREADS 512u       /* threads recorded; more are counted (omitted) */
#define AFT_THREAD_MAX_FRAMES 128u /* frames kept per thread other than the crashing one */
#define AFT_FP_STATE_CAPACITY 528u
/* Stack memory kept per thread, from the stack pointer (less the 128-byte red zone) up, cut at
 * the end of its mapping: the crashing thread's first, then the first 63 others', then the
 * rest's. */
#define AFT_STACK_CAP_CRASHED (256u * 1024u)
#define AFT_STACK_CAP_EARLY (32u * 1024u)
#define AFT_STACK_CAP_LATE (2u * 1024u)
#define AFT_STACK_EARLY_THREADS 64u /* records with the early cap, the crashing thread's included */
#define AFT_STACK_RED_ZONE 128u

/* aft_thread.flags */
#define AFT_THREAD_CRASHED 0x1u         /* the thread whose crash this is */
#define AFT_THREAD_MAIN 0x2u            /* tid == pid */
#define AFT_THREAD_ALSO_CRASHED 0x4u    /* crashed too meanwhile: registers of its own fault */
#define AFT_THREAD_STACK_TRUNCATED 0x8u /* the stack went on past its cap */
#define AFT_THREAD_AFTERMATH 0x10u      /* one of Aftermath's own threads ("aftermath.*") */
#define AFT_THREAD_SWIFT_JOB 0x20u      /* (hangs) inside a Swift job: swift_job_run on its stack */
#define AFT_THREAD_FP_FROM_TABLES                                                                  \
    0x40u /* (sp and pc only) its frame pointer by the unwind tables */

/* aft_thread.context_source: where the registers come from */
#define AFT_THREAD_CONTEXT_NONE 0u   /* none: listed by id, name and state only */
#define AFT_THREAD_CONTEXT_SIGNAL 1u /* every register, from the thread's own signal frame */
/* sp and pc only, from /proc/self/task/<tid>/syscall; its registers then hold those two and the
 * frame pointer (and arm64's link register) taken from the first frame record above sp, the rest
 * zero */
#define AFT_THREAD_CONTEXT_SYSCALL 2u
#define AFT_THREAD_CONTEXT_CRASH 3u  /* every register, from its crash's signal frame */
#define AFT_THREAD_CONTEXT_PARKED 4u /* (Aftermath's) sp and pc it noted before its wait */

/* aft_thread.why: why a thread has no full context (0 when it has one) */
#define AFT_THREAD_WHY_NONE 0u
#define AFT_THREAD_WHY_BLOCKS_SIGNAL 1u   /* it blocks every signal the capture could use */
#define AFT_THREAD_WHY_STOPPED 2u         /* stopped (SIGSTOP) or held by a tracer */
#define AFT_THREAD_WHY_UNINTERRUPTIBLE 3u /* in uninterruptible sleep (D) */
#define AFT_THREAD_WHY_NO_ANSWER 4u       /* signalled, no answer by the deadline */
#define AFT_THREAD_WHY_SIGNAL_FAILED 5u   /* the signal could not be sent */
#define AFT_THREAD_WHY_NO_SIGNAL 6u       /* no capture signal could be installed */
#define AFT_THREAD_WHY_ZOMBIE 7u          /* exiting (Z, X) */
#define AFT_THREAD_WHY_ASLEEP 8u /* (hangs) asleep in a call a signal would cut short: not woken */
#define AFT_THREAD_WHY_OWN 9u    /* one of Aftermath's own threads: listed, never paused */

/* aft_threads_info.flags */
#define AFT_THREADS_DEADLINE_REACHED 0x1u  /* some thread did not answer in time */
#define AFT_THREADS_NO_TASK_LIST 0x2u      /* /proc/self/task could not be read */
#define AFT_THREADS_CUT_BY_FILE_LIMIT 0x4u /* stacks left out: RLIMIT_FSIZE */
#define AFT_THREADS_SIGPROF_BORROWED 0x8u  /* SIGPROF reached threads that block the other */

typedef struct aft_threads_info {
    uint32_t seen;           /* distinct threads /proc/self/task listed during the capture */
    uint32_t recorded;       /* aft_thread records in the THREADS section */
    uint32_t omitted;        /* threads past AFT_MAX_THREADS, listed nowhere */
    uint32_t exited;         /* threads that ended during the capture */
    uint32_t signalled;      /* threads sent the capture signal */
    uint32_t answered;       /* of those, answered in time */
    uint32_t rounds;         /* listings of /proc/self/task until no new thread appeared */
    uint32_t capture_signal; /* the real-time signal used, 0: none */
    uint64_t capture_ns;     /* from the first listing to the last answer (or the deadline) */
    uint64_t unwind_ns;      /* unwinding the other threads */
    uint64_t deadline_ns;    /* how long answers were waited for */
    uint32_t flags;          /* AFT_THREADS_* */
    uint32_t stack_bytes;    /* stack memory kept, all threads */
    uint8_t _reserved[32];
} aft_threads_info;

typedef struct aft_thread {
    uint64_t thread_id;
    char name[AFT_THREAD_NAME]; /* /proc/self/task/<tid>/comm */
    uint32_t flags;             /* AFT_THREAD_* */
    uint32_t context_source;    /* AFT_THREAD_CONTEXT_* */
    uint32_t why;               /* AFT_THREAD_WHY_* */
    uint32_t register_count;    /* registers as aft_crash_info.registers */
    uint64_t pc;
    uint64_t sp;
    uint64_t registers[AFT_MAX_REGISTERS];
    uint32_t fp_state_size; /* x86-64: the 512-byte FXSAVE area; arm64: fpsr, fpcr (u32 each),
                               then v0-v31 (16 bytes each); 0: none */
    uint32_t unwinder;      /* AFT_UNWINDER_* */
    uint8_t fp_state[AFT_FP_STATE_CAPACITY];
    int64_t syscall_number; /* from /proc/.../syscall: -1 outside a syscall, -2 unknown */
    uint64_t stack_start;   /* the stack memory kept (in a STACK_MEMORY section) */
    uint64_t stack_size;
    uint32_t frame_count; /* this thread's frames in the THREAD_FRAMES section */
    uint32_t frames_truncated;
    uint32_t unwind_status; /* AFT_UNWIND_STATUS_* */
    int32_t crash_signal;   /* AFT_THREAD_ALSO_CRASHED: its signal */
    char state;             /* /proc state letter: R, S, D, T, t, Z, ... ('?' unknown) */
    char _pad[7];
    /* its TLS thread pointer (x86-64 fs base, arm64 tpidr_el0), 0: unknown */
    uint64_t thread_pointer;
    uint8_t _reserved[24];
} aft_thread;

/* Precedes the bytes of a STACK_MEMORY section. */
typedef struct aft_memory_header {
    uint64_t thread_id;
    uint64_t start; /* address of the first byte */
    uint64_t size;  /* bytes that follow */
    uint64_t _reserved;
} aft_memory_header;

/* The live block's check value: changes with either field, never 0 for a valid update. */
static inline uint32_t aft_live_check(uint64_t value, uint64_t updated_ns) {
    uint64_t x = value * 0x9E3779B97F4A7C15ull ^ updated_ns ^ AFT_LIVE_CHECK_SALT;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return (uint32_t)x | 1u;
}

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(aft_file_header) == 64, "aft_file_header size");
_Static_assert(offsetof(aft_file_header, body_size) == 16, "body_size offset");
_Static_assert(offsetof(aft_file_header, body_crc) == 24, "body_crc offset");
_Static_assert(offsetof(aft_file_header, commit) == 28, "commit offset");
_Static_assert(offsetof(aft_file_header, live_value) == 32, "live_value offset");
_Static_assert(offsetof(aft_file_header, live_check) == 48, "live_check offset");
_Static_assert(sizeof(aft_section_header) == 16, "aft_section_header size");
_Static_assert(sizeof(aft_context) == 1000, "aft_context size");
_Static_assert(offsetof(aft_context, service_name) == 64, "service_name offset");
_Static_assert(offsetof(aft_context, app_build_id) == 448, "app_build_id offset");
_Static_assert(offsetof(aft_context, executable_path) == 488, "executable_path offset");
_Static_assert(sizeof(aft_crash_info) == 464, "aft_crash_info size");
_Static_assert(offsetof(aft_crash_info, registers) == 88, "registers offset");
_Static_assert(sizeof(aft_hang_info) == 176, "aft_hang_info size");
_Static_assert(sizeof(aft_hang_target) == 128, "aft_hang_target size");
_Static_assert(offsetof(aft_hang_info, previous_session_id) == 144, "previous_session_id offset");
_Static_assert(sizeof(aft_image) == 328, "aft_image size");
_Static_assert(offsetof(aft_image, path) == 72, "aft_image path offset");
_Static_assert(sizeof(aft_threads_info) == 96, "aft_threads_info size");
_Static_assert(sizeof(aft_thread) == 992, "aft_thread size");
_Static_assert(offsetof(aft_thread, registers) == 56, "aft_thread registers offset");
_Static_assert(offsetof(aft_thread, fp_state) == 384, "aft_thread fp_state offset");
_Static_assert(offsetof(aft_thread, syscall_number) == 912, "aft_thread syscall_number offset");
_Static_assert(offsetof(aft_thread, state) == 952, "aft_thread state offset");
_Static_assert(sizeof(aft_memory_header) == 32, "aft_memory_header size");
_Static_assert(AFT_TEXT_HASH_SIZE + sizeof(AFT_TEXT_HASH_MARKER) <= AFT_BUILD_ID_CAPACITY, "hash");
#endif

/* Parts of this header (Swift sees them all): run and handled-error files; the Swift async
 * callers of a thread's frames; the machine of a crash; images without their unused bytes. */
#include "aftermath_format_runs.h"
#include "aftermath_format_async.h"
#include "aftermath_format_system.h"
#include "aftermath_format_images.h"

#endif /* AFTERMATH_FORMAT_H */
