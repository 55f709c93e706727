/*
 * install.c: NORMAL-TIME CODE (never runs in a signal handler). Prepares everything the crash
 * path needs: the context, the crash directory's fd, the file names, the alternate stack, the
 * handlers; warms libunwind up; and offers test entry points. The unwinding helpers' stacks,
 * buffers and resident helper are prepared by unwind_helpers.c, called from here.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <ucontext.h>
#include <unistd.h>

#include "CSignalShim.h"
#include "libunwind_local.h"
#include "shim_internal.h"
#include "reserve_internal.h"
#include "swift_async_internal.h"
#include "threads_internal.h"
#include "unwind_internal.h"

#define AFT_MIN_ALT_STACK (64u * 1024u)

aft_state aft_g_state = {.crash_dir_fd = -1, .timing_fd = -1, .reserved_fd = -1};
const int aft_g_signals[AFT_SIGNAL_COUNT] = {SIGSEGV, SIGBUS,  SIGILL, SIGTRAP,
                                             SIGFPE,  SIGABRT, SIGSYS};
uint64_t aft_g_frames[AFT_MAX_FRAMES + AFT_UNWIND_SLACK];
aft_image aft_g_images[AFT_MAX_IMAGES];
/* rdfsbase may run in user mode (x86-64; the kernel says so in AT_HWCAP2): set at install. */
AFT_SMALL_STATE int aft_g_arch_fsgsbase;

static uint32_t aft_g_alt_stack_size = AFT_MIN_ALT_STACK;

static void aft_set_error(char *error, size_t capacity, const char *what, int err) {
    if (error && capacity > 0) snprintf(error, capacity, "%s: %s", what, strerror(err));
}

int aft_prepare_thread_mapping(void **mapping, size_t *length) {
    *mapping = NULL;
    *length = 0;
    stack_t current;
    if (sigaltstack(NULL, &current) != 0) return errno;
    if (current.ss_flags & SS_ONSTACK) return 0;
    if (!(current.ss_flags & SS_DISABLE) && current.ss_size >= aft_g_alt_stack_size) return 0;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) page = 4096;
    size_t size = ((size_t)aft_g_alt_stack_size + (size_t)page - 1) & ~((size_t)page - 1);
    uint8_t *mem = mmap(NULL, size + (size_t)page, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) return errno;
    /* The guard page sits below the stack: an overflow of the handler faults, not corrupts. */
    if (mprotect(mem, (size_t)page, PROT_NONE) != 0) {
        int err = errno;
        munmap(mem, size + (size_t)page);
        return err;
    }
    stack_t ss = {.ss_sp = mem + page, .ss_size = size, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        int err = errno;
        munmap(mem, size + (size_t)page);
        return err;
    }
    *mapping = mem;
    *length = size + (size_t)page;
    return 0;
}

int aft_prepare_thread(void) {
    void *mapping;
    size_t length;
    /* A thread the app prepares itself keeps its stack for its whole life. */
    return aft_prepare_thread_mapping(&mapping, &length);
}

void aft_set_session_id(const uint8_t session_id[AFT_ID_SIZE]) {
    /* Byte copies: a crash at this moment may see a mix of old and new bytes in one id; the
     * next launch still reports it (both sessions belong to this run). */
    for (uint32_t i = 0; i < AFT_ID_SIZE; i++)
        ((volatile uint8_t *)aft_g_state.context.session_id)[i] = session_id[i];
}

uint64_t aft_gettid(void) { return aft_async_gettid(); }

void aft_hold_file_size_signal(aft_file_size_hold *hold) { aft_async_hold_file_size_signal(hold); }

void aft_release_file_size_signal(const aft_file_size_hold *hold) {
    aft_async_release_file_size_signal(hold);
}

/* In a forked child: the parent's reserved file (with its shared offset and lock) and its
 * names are not the child's. Give the child its own report id, derived from the parent's and
 * its pid, and let a crash create its file by name. Only async-signal-safe calls: the parent
 * may have had other threads. */
static void aft_completion_after_fork_in_child(void);
static void aft_after_fork_in_child(void) {
    aft_completion_after_fork_in_child();
    if (!aft_g_state.installed) return;
    if (aft_g_state.reserved_fd >= 0) close(aft_g_state.reserved_fd);
    aft_g_state.reserved_fd = -1;
    uint64_t pid = (uint64_t)getpid();
    for (uint32_t i = 0; i < 8; i++) {
        aft_g_state.context.report_id[8 + i] ^= (uint8_t)(pid >> (8 * i));
        aft_g_state.context.run_id[8 + i] ^= (uint8_t)(pid >> (8 * i)); /* not the parent's run */
    }
    aft_g_state.context.pid = pid;
    aft_system_after_fork_in_child();
    aft_async_memory_reader_refresh();
    aft_unwind_helpers_after_fork_in_child();
    aft_unwind_resident_after_fork_in_child();
    aft_threads_after_fork_in_child();
    aft_async_id_file_name(aft_g_state.tmp_name, AFT_FILE_NAME_CAPACITY,
                           aft_g_state.context.report_id, ".crash.tmp");
    aft_async_id_file_name(aft_g_state.final_name, AFT_FILE_NAME_CAPACITY,
                           aft_g_state.context.report_id, ".crash");
}

AFT_SMALL_STATE static pthread_once_t aft_g_atfork_once = PTHREAD_ONCE_INIT;
static void aft_register_atfork(void) { pthread_atfork(NULL, NULL, aft_after_fork_in_child); }

/* ---- what start leaves to a thread of its own ---- */
/* aft_install returns once a crash is reported (its handlers, the reserved file, the main
 * executable's build id); the rest is done on a thread of ours right after, or by the first
 * caller that needs it: every image's build id and the link map's signature (until then a
 * crash reads /proc/self/maps itself) and the unwinding helpers' first pages. The resident
 * unwinding helper waits for the first hang (aft_unwind_resident_start). */
AFT_SMALL_STATE static pthread_mutex_t aft_g_completion_lock = PTHREAD_MUTEX_INITIALIZER;
AFT_SMALL_STATE static uint64_t aft_g_install_generation, aft_g_completed_generation;

/* Everything but the alternate stacks: what a caller that needs the images waits for. */
static void aft_install_complete_images(void) {
    pthread_mutex_lock(&aft_g_completion_lock);
    if (aft_g_completed_generation == aft_g_install_generation) {
        pthread_mutex_unlock(&aft_g_completion_lock);
        return;
    }
    aft_prepare_images(&aft_g_state.context);
    aft_prepare_system_info();
    aft_bind_crash_calls();
    aft_reserve_cache(aft_g_state.reserved_fd);
    aft_threads_read_tls_size();
    aft_swift_async_prepare();
    /* libunwind is neither loaded nor warmed up here: a process that never hangs or records an
     * error never uses it (a crash's threads are unwound at the next launch), and keeps its
     * memory and descriptors. Its first user pays its set-up; a hang's capture, under a longer
     * deadline while it is cold (AFT_UNWIND_COLD_BUDGET_NS): the first pauses about 0.6-1.0 ms,
     * once. Except where a crash's stacks will not be in its file (no reserve that holds them,
     * a file-size limit below it): its handler unwinds them itself, with libunwind loaded now. */
    if (!aft_async_crash_stacks_fit(aft_async_file_size_limit())) (void)aft_libunwind_load();
    aft_g_completed_generation = aft_g_install_generation;
    pthread_mutex_unlock(&aft_g_completion_lock);
}

/* A library Aftermath loaded itself (libunwind, at a first hang or recorded error) changed the
 * loader's list: until the images are read again, every crash and hang would read
 * /proc/self/maps and write whole aft_image records. The run record's next sample, at most a
 * second later and never on the app's threads, reads them again. */
AFT_SMALL_STATE static _Atomic int aft_g_images_stale;
void aft_install_images_changed(void) { atomic_store(&aft_g_images_stale, 1); }
void aft_install_refresh_images(void) {
    if (!atomic_load(&aft_g_images_stale)) return;
    pthread_mutex_lock(&aft_g_completion_lock);
    if (atomic_exchange(&aft_g_images_stale, 0) && aft_g_state.installed &&
        aft_g_completed_generation == aft_g_install_generation)
        aft_prepare_images(&aft_g_state.context);
    pthread_mutex_unlock(&aft_g_completion_lock);
}

AFT_SMALL_STATE static pthread_mutex_t aft_g_altstack_lock = PTHREAD_MUTEX_INITIALIZER;

void aft_install_complete(void) {
    aft_install_complete_images();
    /* Threads that existed before start get an alternate stack, as later ones do (under a lock
     * of its own: it may wait on threads for a second; once per process). Every caller returns
     * once they have it. */
    AFT_SMALL_STATE static int given;
    pthread_mutex_lock(&aft_g_altstack_lock);
    if (!given) {
        aft_threads_give_alternate_stacks();
        given = 1;
    }
    pthread_mutex_unlock(&aft_g_altstack_lock);
}

static void *aft_install_completion_thread(void *arg) {
    (void)arg;
    prctl(PR_SET_NAME, "aftermath.start", 0, 0, 0); /* here: one call, no file for the creator */
    aft_install_complete();
    return NULL;
}

/* In a forked child the lock may have been held by a thread the child does not have. */
static void aft_completion_after_fork_in_child(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    aft_g_completion_lock = fresh;
    aft_g_altstack_lock = fresh;
}

int aft_install(const aft_install_options *options, char *error, size_t error_capacity) {
    if (!options || !options->crash_directory) {
        aft_set_error(error, error_capacity, "aft_install", EINVAL);
        return EINVAL;
    }
    if (options->alt_stack_size > AFT_MIN_ALT_STACK) aft_g_alt_stack_size = options->alt_stack_size;
    int dir_fd = open(options->crash_directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) {
        int err = errno;
        aft_set_error(error, error_capacity, "opening the crash directory", err);
        return err;
    }
    pthread_mutex_lock(&aft_g_completion_lock); /* a completion still running finishes first */
    aft_memory_reader_prepare();
    long page = sysconf(_SC_PAGESIZE); /* for the unwinding helpers' mappings, made later */
    aft_g_helper_page_size = page > 0 ? (size_t)page : 4096;
    aft_crc32_prepare();
    int err = aft_prepare_thread();
    if (err != 0) {
        close(dir_fd);
        pthread_mutex_unlock(&aft_g_completion_lock);
        aft_set_error(error, error_capacity, "sigaltstack", err);
        return err;
    }
    aft_threads_note_installer();

    /* Block our signals while the state changes, so a crash now sees old or new, not half. */
    sigset_t block, saved;
    sigemptyset(&block);
    for (int i = 0; i < AFT_SIGNAL_COUNT; i++) sigaddset(&block, aft_g_signals[i]);
    pthread_sigmask(SIG_BLOCK, &block, &saved);

    /* Reserve the crash file now: creating a file costs ~50 µs the crash path need not pay. */
    char reserved_name[AFT_FILE_NAME_CAPACITY];
    int reserved = aft_reserve_open(dir_fd, options->context.report_id, reserved_name);
    int old_reserved = aft_g_state.reserved_fd;
    char old_tmp[AFT_FILE_NAME_CAPACITY];
    memcpy(old_tmp, aft_g_state.tmp_name, sizeof(old_tmp));

    int old_fd = aft_g_state.crash_dir_fd;
    aft_g_state.context = options->context;
    aft_g_known_link_map.valid = 0; /* first: the crash path reads maps until it is rebuilt */
    aft_g_known_image_count = 0;
    uint32_t objects = 0, main_flags = 0;
    if (aft_g_state.context.app_build_id_size == 0) {
        aft_context *c = &aft_g_state.context;
        c->app_build_id_size =
            aft_main_executable_id(c->app_build_id, AFT_BUILD_ID_CAPACITY, &main_flags, &objects);
        if (main_flags & AFT_IMAGE_BUILD_ID_TEXT_HASH)
            memcpy(c->app_build_id + AFT_TEXT_HASH_SIZE, AFT_TEXT_HASH_MARKER,
                   sizeof(AFT_TEXT_HASH_MARKER));
    } else {
        (void)aft_main_executable_id(NULL, 0, NULL, &objects);
    }
    uint64_t reserved_bytes = aft_reserve_crash_space(reserved, objects);
    aft_g_state.crash_dir_fd = dir_fd;
    aft_g_state.reserved_fd = reserved;
    aft_g_state.reserved_bytes = reserved_bytes;
    aft_g_state.fsync_reports = options->fsync_reports;
    aft_g_state.timing_fd = options->timing_fd;
    if (reserved >= 0)
        memcpy(aft_g_state.tmp_name, reserved_name, AFT_FILE_NAME_CAPACITY);
    else /* no reserve: the handler creates its file under this run's name */
        aft_async_id_file_name(aft_g_state.tmp_name, AFT_FILE_NAME_CAPACITY,
                               aft_g_state.context.report_id, ".crash.tmp");
    aft_async_id_file_name(aft_g_state.final_name, AFT_FILE_NAME_CAPACITY,
                           aft_g_state.context.report_id, ".crash");

    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = aft_async_handler;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < AFT_SIGNAL_COUNT; i++) {
        struct sigaction previous;
        if (sigaction(aft_g_signals[i], &action, &previous) != 0) continue;
        /* Installing twice must not make us our own previous handler; a handler the app
         * installed in between is the new previous one. */
        int ours = previous.sa_sigaction == aft_async_handler && (previous.sa_flags & SA_SIGINFO);
        if (!ours) aft_g_state.previous[i] = previous;
        if (!aft_g_state.has_original[i]) {
            aft_g_state.original[i] = ours ? aft_g_state.previous[i] : previous;
            aft_g_state.has_original[i] = 1;
        }
    }
#if defined(__x86_64__)
    aft_g_arch_fsgsbase = (getauxval(AT_HWCAP2) & 2u) != 0; /* rdfsbase allowed in user mode */
#endif
    aft_g_state.installed = 1;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    aft_threads_prepare(options->capture_signal); /* the signal that pauses the other threads */
    pthread_once(&aft_g_atfork_once, aft_register_atfork);
    atomic_store(&aft_g_thread_stacks_enabled, 1);
    if (old_reserved >= 0) {
        if (old_fd >= 0 && strcmp(old_tmp, aft_g_state.tmp_name) != 0) unlinkat(old_fd, old_tmp, 0);
        close(old_reserved);
    }
    if (old_fd >= 0 && old_fd != dir_fd) close(old_fd);

    aft_g_install_generation++;
    pthread_mutex_unlock(&aft_g_completion_lock);
    if (options->complete_later) return 0;
    pthread_t completion;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 512 * 1024);
    if (aft_thread_create(&completion, &attr, aft_install_completion_thread, NULL) != 0)
        aft_install_complete();
    pthread_attr_destroy(&attr);
    return 0;
}

uint32_t aft_installed_images(aft_image *images, uint32_t capacity) {
    aft_install_complete_images();
    return aft_known_images_copy(images, capacity);
}

void aft_installed_context(aft_context *context) { *context = aft_g_state.context; }

uint64_t aft_crash_reserve_inode(void) {
    struct stat st;
    int fd = aft_g_state.reserved_fd;
    return fd >= 0 && fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
}
