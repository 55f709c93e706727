/*
 * shim_internal.h: state shared by CSignalShim's files. Not imported by Swift.
 * Everything the crash path touches is prepared here at install time.
 */
#ifndef AFT_SHIM_INTERNAL_H
#define AFT_SHIM_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include "aftermath_format.h"
#include "CSignalShim.h"

/* Marks CSignalShim's small mutable globals (flags, locks, ids, small records): they go to
 * .data, side by side, instead of .bss, where the linker interleaves them with the capture's
 * large arrays and each small one that start writes dirties a page of its own in every app. */
#define AFT_SMALL_STATE __attribute__((section(".data.aftermath")))

#define AFT_SIGNAL_COUNT 7
#define AFT_FILE_NAME_CAPACITY 64

/* The prepared state. Written at install (normal time), read at crash time. */
typedef struct aft_state {
    aft_context context; /* copied into every crash file */
    int crash_dir_fd;    /* O_DIRECTORY fd of the crash directory */
    int fsync_reports;
    int timing_fd;
    char tmp_name[AFT_FILE_NAME_CAPACITY];   /* <crash id>.crash.tmp */
    char final_name[AFT_FILE_NAME_CAPACITY]; /* <crash id>.crash */
    int reserved_fd;                         /* tmp_name, created and flock'ed at install */
    uint64_t reserved_bytes;                 /* the space allocated for it then (0: none) */
    int reserve_holds_stacks;                /* it holds the crashing thread's stack too */
    uint64_t reserve_cached_bytes;           /* its size at install, zeros (0: none) */
    struct sigaction previous[AFT_SIGNAL_COUNT];
    /* What was there before our handler was first installed: where a chain that leads back
     * to us (an app handler that calls the one it replaced, then start again) ends. */
    struct sigaction original[AFT_SIGNAL_COUNT];
    int has_original[AFT_SIGNAL_COUNT];
    int installed;
} aft_state;

extern aft_state aft_g_state;
/* Threads created after install get an alternate stack (threads.c). */
extern _Atomic int aft_g_thread_stacks_enabled;
/* 1 once libdispatch has started a thread, or where thread starts cannot be seen
 * (threads.c): before, the Swift concurrency pool has no thread, and its probe waits. Its
 * first thread asks the pinger for the pool's probes at once (pinger.c). */
int aft_concurrency_pool_in_use(void);
void aft_watch_pool_appeared(void);
extern const int aft_g_signals[AFT_SIGNAL_COUNT];
/* The signal mask of Aftermath's own threads (watchdog, run updater), set on entry: the app's
 * asynchronous signals blocked (they are for the app's threads), crash signals and SIGPROF (the
 * Swift backtracer's pause) let through. Normal time (watchdog_signal.c). */
void aft_thread_set_own_mask(void);
/* pthread_create for Aftermath's own threads: the new thread has their mask from the start. */
int aft_thread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                      void *arg);

/* Scratch memory for the crash path, reserved at load time (BSS), never malloc'ed.
 * AFT_UNWIND_SLACK extra entries hold the frames of a tracer's own callers, which are dropped
 * (aft_current_stack). */
#define AFT_UNWIND_SLACK 64u
extern uint64_t aft_g_frames[AFT_MAX_FRAMES + AFT_UNWIND_SLACK];
extern aft_image aft_g_images[AFT_MAX_IMAGES];
/* The images seen at install, with their build ids, sorted as /proc/self/maps lists them. */
#include "known_images_internal.h"
extern _Atomic uint32_t aft_g_known_image_count;

/* ---- async-signal-safe helpers (safe_io_async.c) ---- */
int aft_async_write_all(int fd, const void *data, size_t size);
int aft_async_pwrite_all(int fd, const void *data, size_t size, off_t offset);
uint32_t aft_async_crc32(uint32_t crc, const void *data, size_t size);
/* The same by table alone, whatever the processor has. */
uint32_t aft_async_crc32_portable(uint32_t crc, const void *data, size_t size);
/* 1 when aft_async_crc32 may use the processor's carry-less multiply (x86-64 PCLMULQDQ), -1 when
 * it may not, 0 before aft_crc32_prepare. */
extern _Atomic int aft_g_crc_clmul;
/* Reads, once, whether the processor has what aft_async_crc32's fast path needs (normal time). */
void aft_crc32_prepare(void);
/* Binds every library function the crash-time code calls (bind.c). */
void aft_bind_crash_calls(void);
size_t aft_async_strlen(const char *s, size_t capacity);
void aft_async_memset(void *dst, int value, size_t size);
void aft_async_memcpy(void *dst, const void *src, size_t size);
/* Copies src into dst (capacity incl. NUL); when too long keeps the LAST capacity-1 bytes and
 * returns 1, else 0. */
int aft_async_copy_tail(char *dst, size_t capacity, const char *src, size_t src_len);
uint64_t aft_async_gettid(void);
uint64_t aft_async_now_ns(clockid_t clock);
/* Reads memory of this process without faulting: pread(2) on /proc/self/mem, else write(2)
 * into a pipe. 0 on success, EFAULT when the range is not mapped. */
int aft_async_read_memory(uint64_t address, void *out, size_t size);
/* What aft_async_read_memory uses, opened at normal time (aft_memory_reader_prepare). */
typedef struct aft_memory_reader {
    int mem_fd;                 /* /proc/self/mem of pid, or -1 */
    int pipe_fds[2];            /* non-blocking pipe for the fallback, or -1 */
    pid_t pid;                  /* the process the descriptors were opened in */
    uint64_t mem_ino, pipe_ino; /* what the descriptors were: an app may close and reuse them */
    _Atomic int pipe_busy, unchecked; /* unchecked: to be checked at their first use */
} aft_memory_reader;
extern aft_memory_reader aft_g_memory;
/* Normal time: opens the descriptors once per process (later calls return at once). */
void aft_memory_reader_prepare(void);
/* A forked child (getpid() changed), or a descriptor the app closed or reused: reopened for this
 * process (-1 where that fails); _for, the pid known, checks at first use (aft_async_memory_fd). */
void aft_async_memory_reader_refresh(void);
void aft_async_memory_reader_refresh_for(pid_t pid);
int aft_async_memory_fd(void);
/* Reads size bytes at address into out; 0 on success. */
typedef int (*aft_memory_read_fn)(uint64_t address, void *out, size_t size);
/* Reads a small file whole into buf (NUL-terminated). Returns bytes read or -1. */
ssize_t aft_async_read_small_file(const char *path, char *buf, size_t capacity);
/* Re-raises signo on this thread with its original siginfo (sender kept; tgkill when the
 * kernel refuses that), then unblocks it so it is delivered now. */
void aft_async_reraise(int signo, siginfo_t *info);
/* A file-size limit (RLIMIT_FSIZE) makes a write past it raise SIGXFSZ, whose default action
 * ends the process. Around our own writes the calling thread holds it blocked; on release, one
 * our writes raised is taken back (the write itself failed with EFBIG) and the mask restored. */
void aft_async_hold_file_size_signal(aft_file_size_hold *hold);
void aft_async_release_file_size_signal(const aft_file_size_hold *hold);
/* The file-size limit in bytes; UINT64_MAX when there is none. */
uint64_t aft_async_file_size_limit(void);
/* Whether a crash's stacks will be in its file: the reserve made at start is there and holds
 * them, and no file-size limit cuts the file below it. Then the next launch unwinds them;
 * else the handler does. */
int aft_async_crash_stacks_fit(uint64_t file_size_limit);
/* v in decimal into buf (21 bytes); its length. "/proc/self/task/<tid>/<leaf>" into out. */
size_t aft_async_u64_to_dec(uint64_t v, char *buf);
void aft_async_task_path(char out[64], uint64_t tid, const char *leaf);

/* ---- images (images_async.c) ---- */
#define AFT_MAPS_CHUNK 16384
#define AFT_MAPS_LINE 8192
/* Buffers for one maps parse. The crash path and the watchdog each own one (static), so they
 * never share; normal-time callers put one on their stack. */
typedef struct aft_maps_scratch {
    char chunk[AFT_MAPS_CHUNK];
    char line[AFT_MAPS_LINE];
} aft_maps_scratch;
uint32_t aft_async_images_from_fd(aft_maps_scratch *scratch, int fd, aft_image *images,
                                  uint32_t capacity, int read_build_ids, const char *main_path,
                                  uint32_t *truncated);
/* The flags that say where an image's build id came from. */
#define AFT_IMAGE_ID_FLAGS (AFT_IMAGE_BUILD_ID_FROM_MEMORY | AFT_IMAGE_BUILD_ID_TEXT_HASH)
uint32_t aft_async_build_id_at(uint64_t base, uint8_t *out, uint32_t capacity, uint64_t *load_bias,
                               uint32_t *flags);
/* Reads the build id, load bias and machine of the ELF image mapped at img->start. */
void aft_async_read_image_identity(aft_image *img);
/* The GNU build id in the PT_NOTE segments of an image loaded with load_bias, given its
 * program headers; read through read. Returns its size, 0 when there is none. */
uint32_t aft_async_build_id_in_notes(aft_memory_read_fn read, uint64_t load_bias, const void *phdrs,
                                     uint32_t phnum, uint8_t *out, uint32_t capacity);
/* The GNU build id, else (capacity permitting) the text hash of the first executable PT_LOAD
 * segment, with AFT_IMAGE_BUILD_ID_TEXT_HASH added to *flags (flags may be NULL). */
uint32_t aft_async_image_id(aft_memory_read_fn read, uint64_t load_bias, const void *phdrs,
                            uint32_t phnum, uint8_t *out, uint32_t capacity, uint32_t *flags);
/* A signature of the loader's list of objects; 0 when it cannot be read or is changing. */
int aft_async_link_map_signature(uint64_t *count, uint64_t *hash);
/* The same, reading through read (normal time: directly, with the loader's lock held). */
int aft_async_link_map_signature_with(aft_memory_read_fn read, uint64_t *count, uint64_t *hash);
/* The same, also keeping the nodes' addresses (up to capacity; *node_count 0 past it). */
int aft_async_link_map_walk(aft_memory_read_fn read, uint64_t *count, uint64_t *hash,
                            uint64_t *nodes, uint32_t capacity, uint32_t *node_count);
/* At a crash, without a helper: the signature by plain loads, only at the nodes known when
 * aft_g_known_images was read. 0 at a node not known then (changed) or none kept. */
int aft_async_link_map_signature_known(uint64_t *count, uint64_t *hash);
/* The index of the image read after start that holds pc, or -1 (JIT or other anonymous code,
 * unwound at the crash: the next launch finds no tables for it). Before those are read, the
 * images a crash read itself (aft_async_crash_read_images) stand for them. */
int aft_async_known_image_of(uint64_t pc);
/* A crash before the images were read after start: reads them (/proc/self/maps, build ids
 * from memory) into aft_g_images; their count (0: none could be read). */
uint32_t aft_async_crash_read_images(aft_maps_scratch *scratch, const char *main_path,
                                     uint32_t *truncated);
extern _Atomic uint32_t aft_g_crash_image_count;
int aft_async_pc_in_known_image(uint64_t pc);
/* A link map's signature, and its nodes (a reading's, at normal time). */
typedef struct aft_link_map_snapshot {
    uint64_t count, hash;
    int valid;
    uint32_t node_count; /* the list's nodes then, in order (0: not kept) */
    uint64_t nodes[AFT_MAX_IMAGES];
} aft_link_map_snapshot;

/* ---- images at normal time (images.c) ---- */
/* An object the loader reports (dl_iterate_phdr), with its build id read from its notes. */
typedef struct aft_loaded_object {
    uint64_t start; /* page of its lowest PT_LOAD: the image's start in maps */
    uint64_t load_bias;
    uint32_t build_id_size;
    uint32_t flags; /* AFT_IMAGE_BUILD_ID_TEXT_HASH when build_id is the text hash */
    uint8_t build_id[AFT_BUILD_ID_CAPACITY];
} aft_loaded_object;
/* The loaded objects, and the link map's signature read under the loader's lock. */
uint32_t aft_loaded_objects(aft_loaded_object *objects, uint32_t capacity,
                            aft_link_map_snapshot *signature);
/* The loader's images in address order with their build ids, and the link map's signature
 * (one hold of its lock); *usable 0: a name is not an absolute path (maps must be read). */
uint32_t aft_images_from_loader(aft_image *images, uint32_t capacity, const char *main_path,
                                aft_link_map_snapshot *signature, int *usable, uint32_t *truncated);
/* The main executable's build id (or text hash: AFT_IMAGE_BUILD_ID_TEXT_HASH in *flags) from
 * its notes, and the loaded objects' count, in one pass; the id's size, 0 when none. */
uint32_t aft_main_executable_id(uint8_t *out, uint32_t capacity, uint32_t *flags,
                                uint32_t *object_count);
/* The link map's signature now, read under the loader's lock; 0 when it is changing. */
int aft_link_map_signature_now(aft_link_map_snapshot *signature);
/* Gives each image the build id, load bias and arch of the object that starts where it does;
 * images no object matches are read with aft_async_read_memory. */
void aft_fill_build_ids(aft_image *images, uint32_t count, const aft_loaded_object *objects,
                        uint32_t object_count);
/* Architecture-specific pieces (arch_x86_64_async.c, arch_aarch64_async.c). */
/* Fills the registers, pc, sp and arch of ci from a signal context. */
void aft_async_arch_registers(const void *ucontext, aft_crash_info *ci);
/* x86-64: the processor's vendor ("GenuineIntel", 12 bytes, no NUL) into out; elsewhere none. */
void aft_async_arch_cpu_vendor(char out[12]);
/* The floating-point state of a signal context, as aft_thread.fp_state holds it; its size, 0
 * when there is none. */
uint32_t aft_async_arch_fp_state(const void *ucontext, uint8_t *out, uint32_t capacity);
/* A context with only pc and sp (what /proc/.../syscall gives of a thread that cannot answer),
 * in buffer (16-byte aligned, AFT_SYNTHETIC_CONTEXT_ROOM bytes), or NULL; *by_tables: its frame
 * pointer by the unwind tables and a prologue (aft_async_cfi_record_from_sp), not a scan. */
#define AFT_SYNTHETIC_CONTEXT_ROOM 8192u
void *aft_async_arch_synthesize_context(void *buffer, uint32_t capacity, uint64_t pc, uint64_t sp,
                                        uint64_t scratch[512], int *by_tables);
/* The calling thread's TLS thread pointer, 0 where unknown; by an instruction where the kernel
 * allows it (aft_g_arch_fsgsbase, set at install: x86-64's FSGSBASE), else by a system call. */
uint64_t aft_async_arch_thread_pointer(void);
extern int aft_g_arch_fsgsbase;
/* 1 when the signal context is that of a system call the signal cut short (-EINTR). */
int aft_async_arch_interrupted_syscall(const void *ucontext);
/* 1 when the signal found the thread in a system call: cut short, or to be restarted after the
 * handler; *nr is its number where the context still holds it, else -2. */
int aft_async_arch_in_syscall(const void *ucontext, int64_t *nr);
/* The pc and frame pointer of a signal context. */
void aft_async_arch_pc_fp(const void *ucontext, uint64_t *pc, uint64_t *fp);
/* 1 when a kernel SIGTRAP leaves the pc on the trap instruction (it fires again on return). */
int aft_async_arch_trap_refires(void);
/* A code address as an image offset can use: a pointer-authentication signature stripped. */
uint64_t aft_async_arch_code_address(uint64_t address);
/* 1 when the instruction before address (a candidate return address) is a call. */
int aft_async_arch_follows_call(uint64_t address);

/* ---- unwinding (unwind_*_async.c, unwind_helpers.c; theirs alone: unwind_internal.h) ---- */
/* A slot for one unwinding helper at a time: the crash handler and the hang capture each own
 * one, so they never share. */
#define AFT_UNWIND_SLOTS 2u
#define AFT_UNWIND_SLOT_CRASH 0u
#define AFT_UNWIND_SLOT_CAPTURE 1u
#define AFT_UNWIND_HELPER_STACK (256u * 1024u)
/* How long a handler waits for libunwind before it keeps the frame-pointer stack. */
#define AFT_UNWIND_CRASH_BUDGET_NS (300ull * 1000 * 1000)
#define AFT_UNWIND_LINK_MAP_BUDGET_NS (50ull * 1000 * 1000) /* the link map alone */
#define AFT_UNWIND_CAPTURE_BUDGET_NS (150ull * 1000 * 1000)
/* The least a hang capture's helper gets while libunwind has never finished a stack in this
 * process: its first use sets it up (unwind tables of every image), which a loaded machine can
 * stretch past the budgets above, and a helper killed then abandons libunwind for the process's
 * life. Within the watchdog's second for a capture that is running. */
#define AFT_UNWIND_COLD_BUDGET_NS (600ull * 1000 * 1000)
/* How long a hang's first capture waits for the pinger to load libunwind (a few milliseconds
 * normally; never while the loader's lock is held): then frame pointers, this time. */
#define AFT_LIBUNWIND_LOAD_WAIT_NS (100ull * 1000 * 1000)
/* What the helper hands back, in a MAP_SHARED mapping (seen by a helper that is a copy). */
typedef struct aft_unwind_shared {
    _Atomic uint32_t done; /* futex word: 1 once count, truncated and frames are written */
    uint32_t count;
    uint32_t truncated;
    uint32_t link_map_valid;  /* 1: link_count and link_hash are the loader's list now */
    _Atomic uint32_t started; /* the helper has begun this request (it may hold a lock) */
    uint32_t _pad;
    uint64_t link_count;
    uint64_t link_hash;
    uint64_t frames[AFT_MAX_FRAMES + AFT_UNWIND_SLACK];
} aft_unwind_shared;
/* Set when a helper that shared our memory was killed at its deadline: it may have died holding
 * one of libunwind's locks, so this process calls libunwind no more (no helper is started,
 * aft_current_stack walks frame pointers). */
extern _Atomic int aft_g_libunwind_abandoned;
/* Set once libunwind has finished a stack in this process (its set-up is done). */
extern _Atomic int aft_g_libunwind_warm;
/* Before a hang's capture, on the watchdog's thread: sets libunwind up, while it is cold, by a
 * helper of its own over the caller's stack (AFT_UNWIND_COLD_BUDGET_NS at most), so that the
 * capture after it pauses no thread for that set-up. */
void aft_async_unwind_warm_up(void);
typedef struct aft_unwind_slot {
    aft_unwind_shared *shared; /* NULL: not mapped yet, the frame-pointer stack only */
    void *stack_top;           /* the helper's stack (a guard page below it) */
    void *context;             /* where the helper starts: a signal context, or our own */
    int context_is_signal;
    int shares_memory;  /* the running helper is CLONE_VM, not a copy */
    int wants_link_map; /* the helper also takes the link map's signature, by plain loads */
    int link_map_only;  /* and nothing else: no stack */
    int resident;       /* served by the resident helper, not a helper of its own */
    uint32_t capacity;
    uint64_t budget_ns; /* the helper's own deadline, from its start */
} aft_unwind_slot;
extern aft_unwind_slot aft_g_unwind_slots[AFT_UNWIND_SLOTS];
/* The page size for the helpers' mappings, set at install (0: 4096); in a forked child, the
 * buffers the parent mapped replaced in place: a parent and its child never share one. */
extern size_t aft_g_helper_page_size;
void aft_unwind_helpers_after_fork_in_child(void);
/* The resident helper: one helper process per process, started at install's completion and
 * waiting for requests, so that a crash or a hang capture does not pay for creating and ending
 * a process. It shares our memory and descriptors (CLONE_VM, CLONE_FILES) and runs on the
 * thread-local storage of a thread of ours that does nothing but sleep (its donor), blocks
 * every signal, and dies with that thread (PR_SET_PDEATHSIG): when the process exits or execs.
 * A request it does not finish by the deadline gets it killed, as a helper of its own would
 * be; a process without it (a forked child, a helper that died) starts a helper per request. */
typedef struct aft_unwind_resident {
    _Atomic uint32_t request;      /* futex word: one more for each request */
    uint32_t request_at_spawn;     /* its value when the helper started */
    _Atomic int busy;              /* a requester holds the helper */
    _Atomic int pid;               /* the helper, 0: none */
    int owner;                     /* the process it serves (getpid() of its creator) */
    int donor_tid;                 /* the thread whose thread-local storage it runs on */
    _Atomic uint32_t ready;        /* futex word: warmed up and in its sandbox */
    _Atomic uint32_t retire;       /* futex word: the donor thread is to end (at a crash) */
    aft_unwind_slot *_Atomic slot; /* the request */
    void *stack_top;               /* its own stack */
    int affinity_ok;               /* it may be moved to the requester's CPU */
    int last_cpu;                  /* the CPU it was moved to, -1: none */
} aft_unwind_resident;
extern aft_unwind_resident aft_g_unwind_resident;
/* How the last helper that was reaped ended (a waitpid status), -1 when none was: a fault ends
 * a helper by its own handler's _exit (AFT_UNWIND_HELPER_FAULT_EXIT + signal), never by the
 * signal's default action, whose core dump would take every process sharing the memory on
 * kernels before 5.16. */
extern _Atomic int aft_g_unwind_last_status;
#define AFT_UNWIND_HELPER_FAULT_EXIT 64
/* Tests only: when non-zero, an unwinding helper faults at the start of its next request (the
 * resident included). Defined only by the test-only C target (Harness/CFaults). */
extern volatile uintptr_t aft_g_test_fault_in_helper __attribute__((weak));
/* Normal time, on the donor thread: starts the resident helper; its pid or -1. It is to be
 * served only once it sets ready (warmed up, in its sandbox). */
int aft_unwind_resident_spawn(void);
/* Crash time, once the report is written: ends the donor thread (so the Swift runtime's
 * backtracer, which pauses every thread, finds none that blocks its signals) and with it the
 * resident helper (PR_SET_PDEATHSIG). Waits until the thread is gone, 50 ms at most. */
void aft_async_unwind_resident_retire(void);
/* The stack from a signal context (NULL: from the caller): frame pointers first, then
 * libunwind in a helper (slot) for at most budget_ns. frames needs capacity entries.
 * *status is AFT_UNWIND_STATUS_*: how libunwind's attempt ended. */
uint32_t aft_async_unwind_context(void *ucontext, uint64_t *frames, uint32_t capacity,
                                  uint32_t slot, uint64_t budget_ns, uint32_t *unwinder,
                                  uint32_t *truncated, uint32_t *status);
/* The frame-pointer walk alone from a signal context (no helper): lock free. */
uint32_t aft_async_unwind_frame_pointers(const void *ucontext, uint64_t *frames, uint32_t capacity,
                                         uint32_t slot, uint32_t *unwinder, uint32_t *truncated);
/* The first frame record (a saved frame pointer, then a return address after a call) in the 4 KiB
 * above sp whose linked record is one too (else the first record at all), or 0: where a thread
 * known only by sp and pc keeps its caller's frame. */
uint64_t aft_async_frame_record_above(uint64_t sp, uint64_t scratch[512]);
/* The link map's signature the last helper of slot took (it reads the list with plain loads,
 * where a fault ends the helper alone): 1 with *count and *hash, 0 when it took none. */
int aft_async_unwind_link_map(uint32_t slot, uint64_t *count, uint64_t *hash);
/* The link map's signature alone, by a helper of the crash slot (budget_ns at most): 1 with
 * *count and *hash, 0 when none was taken. */
int aft_async_unwind_link_map_only(void *ucontext, uint64_t budget_ns, uint64_t *count,
                                   uint64_t *hash);
/* A window of stack memory, so that the walk makes one read per 16 KiB, not one per frame. Each
 * caller that may run at the same time as another owns one. */
typedef struct aft_stack_window {
    uint64_t base;
    uint64_t size;
    uint8_t data[16384];
} aft_stack_window;
/* A thread known by sp and pc alone: pc, then the return addresses (words that follow a call
 * instruction) between sp and the frame record fp, as scratch holds them (the 4 KiB above sp
 * that aft_async_frame_record_above read), each in an image read after start: the frames of
 * functions without frame pointers, libc's and others', below the first frame record; then the
 * frame-pointer walk from fp. On arm64, where a call cannot be told from the bytes before a
 * return address, only the walk. */
uint32_t aft_async_walk_from_sp(aft_stack_window *w, uint64_t pc, uint64_t sp, uint64_t fp,
                                const uint64_t scratch[512], uint64_t *frames, uint32_t capacity,
                                uint32_t *truncated);
/* The frame-pointer walk from pc and fp, reading the stack through w: a corrupt chain ends it. */
uint32_t aft_async_frame_pointer_walk(aft_stack_window *w, uint64_t pc, uint64_t fp,
                                      uint64_t *frames, uint32_t capacity, uint32_t *truncated);
/* The same, with the first return address found between two records, where a function without
 * a record of its own (a thunk, libc) left it (x86-64; a hang's stacks, never a crash's). */
uint32_t aft_async_frame_pointer_walk_scanning(aft_stack_window *w, uint64_t pc, uint64_t fp,
                                               uint64_t *frames, uint32_t capacity,
                                               uint32_t *truncated);
void aft_async_futex_wake(_Atomic uint32_t *word); /* futex helpers (safe_io_async.c) */
/* Waits while *word == expected, until the absolute CLOCK_MONOTONIC deadline (0 = forever). */
void aft_async_futex_wait_until(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns);

#include "report_internal.h" /* the report writer (report_async.c) */
/* ---- the crash handler (handler_async.c) ---- */
/* Writes this run's crash file: into reserved_fd when >= 0 (named tmp_name), else creates
 * tmp_name; renames it to the run's final name. */
int aft_async_write_crash(int signo, siginfo_t *info, void *ucontext, uint64_t entry_ns,
                          int reserved_fd, const char *tmp_name);
void aft_async_handler(int signo, siginfo_t *info, void *ucontext);
/* A crash handler has started in this process (the first crashing thread is set). */
int aft_async_crash_in_progress(void);

#endif
