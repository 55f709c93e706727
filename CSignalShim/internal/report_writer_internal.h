/*
 * report_writer_internal.h: the report writer's pieces, shared by report_async.c (the writer
 * and the file's frame) and report_sections_async.c (the sections whose size depends on a
 * file-size limit, a full disk or the reserve). Crash-time code only.
 */
#ifndef AFT_REPORT_WRITER_INTERNAL_H
#define AFT_REPORT_WRITER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "shim_internal.h"
#include "threads_internal.h"

/* Pieces in the caller's buffers (which outlive the write) are queued where they are; those in
 * this file's own frames (section headers) are copied into `small` first. */
#define AFT_WRITER_IOVS 64
#define AFT_WRITER_SMALL 1024

typedef struct aft_writer {
    int fd;
    int error;
    uint64_t offset; /* where the next write goes: every write says where (pwritev), so the
                        descriptor's own offset is never moved or read */
    uint32_t crc;
    uint64_t body_size;
    uint32_t count;
    size_t small_used;
    struct iovec iov[AFT_WRITER_IOVS];
    uint8_t small[AFT_WRITER_SMALL];
} aft_writer;

/* Writes what is queued (pwritev at the writer's offset), keeping the first error. */
void aft_async_flush(aft_writer *w);
/* Queues [data, data + size); copy: the bytes live in a frame that ends before the write. */
void aft_async_queue(aft_writer *w, const void *data, size_t size, int copy);
/* Body bytes, counted in the size and the CRC: copied (emit) or where they are (emit_kept). */
void aft_async_emit_as(aft_writer *w, const void *data, size_t size, int copy);
void aft_async_emit(aft_writer *w, const void *data, size_t size);
void aft_async_emit_kept(aft_writer *w, const void *data, size_t size);
/* A section whose entries outlive the write. */
void aft_async_emit_section(aft_writer *w, uint32_t type, uint32_t entry_size, uint32_t count,
                            uint32_t flags, const void *entries);

/* ---- report_sections_async.c ---- */
/* The images section when only `fitting` images fit: those the frames are in first. */
void aft_async_emit_fitting_images(aft_writer *w, const aft_image *images, uint32_t count,
                                   uint32_t fitting, const uint64_t *frames, uint32_t frame_count);
/* The first count images read at start (aft_g_known_images) as IMAGE_LIST and IMAGE_PATHS in
 * room bytes: all of them, or those the frames are in first, then the others that fit. */
void aft_async_emit_known_images(aft_writer *w, uint32_t count, uint64_t room,
                                 const uint64_t *frames, uint32_t frame_count);
/* The room the images will take, held back under a file-size limit: the list of those read at
 * start where they still stand, else 64 whole images. */
uint64_t aft_async_images_room(void);
/* Whether the file system has size bytes for fd from offset on (allocated by the call). */
int aft_async_space_for(int fd, uint64_t offset, uint64_t size);
/* The bytes of the first `count` records' STACK_MEMORY sections. */
uint64_t aft_async_stacks_size(const aft_thread_capture *c, uint32_t count);
/* The other threads' sections; 1: with room for every stack, 0: without, -1: not written. */
int aft_async_emit_threads(aft_writer *w, const aft_thread_capture *c, uint64_t limit);
/* The Swift async callers' section, where it fits. */
void aft_async_emit_swift_async(aft_writer *w, const aft_report_spec *spec, uint64_t limit);
/* The first `count` records' STACK_MEMORY sections. */
void aft_async_emit_stacks(aft_writer *w, aft_thread_capture *c, uint32_t count);
/* The reserve's sized length filled with a padding section; 0 when it cannot be. */
int aft_async_pad_to_size(aft_writer *w, uint64_t limit);

#endif
