/*
 * reserve.c: NORMAL-TIME CODE. The crash file's space, reserved at install so that a disk that
 * fills up later still takes the report, and its every thread's stacks where it can.
 */
#include <fcntl.h>
#include <stdint.h>

#include "shim_internal.h"
#include "threads_internal.h"

/* Allocates the disk space a crash file needs, so a disk that fills up later still takes the
 * report: the deepest stack, the images seen now and as many again loaded later. The file
 * keeps its size 0 (FALLOC_FL_KEEP_SIZE): an empty reserve still tells a dead run without a
 * crash. The writer gives back what the report did not use. Where the file system cannot
 * (EOPNOTSUPP) or the disk is already full, the crash is written as before. */
uint64_t aft_reserve_crash_space(int fd, uint32_t image_count) {
    aft_g_state.reserve_holds_stacks = 0;
    if (fd < 0) return 0;
    uint64_t images = (uint64_t)image_count * 2 + 16;
    if (images > AFT_MAX_IMAGES) images = AFT_MAX_IMAGES;
    uint64_t size = sizeof(aft_file_header) + 4 * sizeof(aft_section_header) + sizeof(aft_context) +
                    sizeof(aft_crash_info) + (uint64_t)AFT_MAX_FRAMES * sizeof(uint64_t) +
                    images * sizeof(aft_image);
    /* And the other threads of a typical server: 64 records, their frames and stacks. Where
     * that does not fit, the report alone: the writer leaves out what the disk cannot take. */
    uint64_t threads =
        4 * sizeof(aft_section_header) + sizeof(aft_threads_info) +
        AFT_STACK_EARLY_THREADS * (sizeof(aft_thread) + AFT_THREAD_MAX_FRAMES * sizeof(uint64_t)) +
        AFT_THREADS_RESERVED_STACK_BYTES;
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)(size + threads)) == 0) {
        aft_g_state.reserve_holds_stacks = 1;
        return size + threads;
    }
    return fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)size) == 0 ? size : 0;
}
