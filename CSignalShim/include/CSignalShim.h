/*
 * CSignalShim: the C half of Aftermath. The only header Swift imports.
 *
 * Normal-time functions (called from Swift at start or in tests) are named aft_*; functions that
 * may run in a signal handler or while the main thread is stuck are named aft_async_* and live
 * in files ending in _async.c. See CSignalShim/README.md for the boundary and its rules.
 */
#ifndef CSIGNALSHIM_H
#define CSIGNALSHIM_H

#include <stdint.h>
#include <stddef.h>
#include "aftermath_format.h"
#include "aft_watchdog.h"
#include "aft_runs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What aft_install needs; everything is copied, nothing is kept by reference. */
typedef struct aft_install_options {
    const char *crash_directory;  /* existing directory for crash files */
    aft_context context;          /* the run's context (report_id = this run's crash id) */
    int32_t fsync_reports;        /* fsync a crash file before renaming it into place */
    int32_t timing_fd;            /* benchmark only: the handler writes its duration here; -1 */
    uint32_t alt_stack_size;      /* 0 = 64 KiB */
    uint32_t _reserved;
} aft_install_options;

/* Installs the crash handlers (SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE, SIGABRT, SIGSYS) on an
 * alternate stack, remembering the previous handlers. Returns 0, or an errno value with a
 * message in error (NUL-terminated). Calling it again replaces the context and directory. */
int aft_install(const aft_install_options *options, char *error, size_t error_capacity);

/* The images read at install (with build ids), in address order; returns their number. */
uint32_t aft_installed_images(aft_image *images, uint32_t capacity);

/* The context the handler writes (with the app build id read at install). */
void aft_installed_context(aft_context *context);

/* Restores the handlers that were there before aft_install (tests and benchmarks). */
void aft_uninstall(void);

/* Gives the calling thread an alternate signal stack of at least 64 KiB with a guard page,
 * unless it already has an adequate one. Returns 0 or an errno value. */
int aft_prepare_thread(void);

/* Replaces the session id that later reports of this run carry. */
void aft_set_session_id(const uint8_t session_id[AFT_ID_SIZE]);

/* The kernel thread id of the caller. */
uint64_t aft_gettid(void);

/* CRC-32 (IEEE 802.3), as used in aft_file_header.body_crc. Start with crc = 0. */
uint32_t aft_crc32(uint32_t crc, const void *data, size_t size);

/* Parses a /proc/<pid>/maps stream from fd into images (executable file mappings and the
 * vdso, segments merged). When read_build_ids is non-zero the GNU build id of each image is
 * read from this process's memory, so only pass it for this process's own maps.
 * Returns the number of images written; *truncated is set when more did not fit. */
uint32_t aft_images_from_maps_fd(int fd, aft_image *images, uint32_t capacity,
                                 int read_build_ids, const char *main_executable_path,
                                 uint32_t *truncated);

/* Reads the GNU build id of the ELF image loaded at base from this process's memory.
 * Returns its size (0 when there is none or it cannot be read). */
uint32_t aft_build_id_at(uint64_t base, uint8_t *out, uint32_t capacity, uint64_t *load_bias);

/* The calling thread's stack (libunwind; frame pointers as fallback), skipping `skip` frames
 * of its own callers. Returns the number of frames written. */
uint32_t aft_current_stack(uint64_t *frames, uint32_t capacity, uint32_t skip);

#ifdef __cplusplus
}
#endif

#endif /* CSIGNALSHIM_H */
