/*
 * report_sections_async.c: CRASH-TIME CODE, under the crash-time contract of
 * CSignalShim/README.md (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift;
 * checked by AsyncSafetyTests). The sections of a report whose size depends on where it is
 * written: the images and threads under a file-size limit or on a full disk, the stacks (the
 * crashing main thread's written from where it is), and the padding to a sized reserve's length.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "report_writer_internal.h"

static const uint8_t aft_g_zeros[4096]; /* padding's bytes */

static int aft_async_image_has_frame(const aft_image *image, const uint64_t *frames,
                                     uint32_t frame_count) {
    for (uint32_t i = 0; i < frame_count; i++)
        if (frames[i] >= image->start && frames[i] < image->end) return 1;
    return 0;
}

/* The images section when only `fitting` images fit: the images the frames are in first, then
 * the others, in address order; marked truncated. */
void aft_async_emit_fitting_images(aft_writer *w, const aft_image *images, uint32_t count,
                                   uint32_t fitting, const uint64_t *frames, uint32_t frame_count) {
    uint32_t with_frames = 0;
    for (uint32_t i = 0; i < count; i++)
        with_frames += (uint32_t)aft_async_image_has_frame(&images[i], frames, frame_count);
    uint32_t others = fitting > with_frames ? fitting - with_frames : 0;
    aft_section_header sh = {.type = AFT_SECTION_IMAGES,
                             .entry_size = sizeof(aft_image),
                             .count = fitting,
                             .flags = AFT_SECTION_TRUNCATED};
    aft_async_emit(w, &sh, sizeof(sh));
    uint32_t emitted = 0;
    for (uint32_t i = 0; i < count && emitted < fitting; i++) {
        if (!aft_async_image_has_frame(&images[i], frames, frame_count)) {
            if (others == 0) continue;
            others--;
        }
        aft_async_emit_kept(w, &images[i], sizeof(aft_image));
        emitted++;
    }
}

/* The known images a report of `room` bytes left takes: those the frames are in first, then
 * the others, each while its entry and path fit; marked in chosen. Returns their count, *paths
 * their paths' bytes. */
static uint32_t aft_async_known_fitting(uint32_t count, uint64_t room, const uint64_t *frames,
                                        uint32_t frame_count, uint64_t *chosen, uint64_t *paths) {
    uint32_t n = 0;
    *paths = 0;
    for (int with_frames = 1; with_frames >= 0; with_frames--) {
        for (uint32_t i = 0; i < count; i++) {
            const aft_image_entry *e = &aft_g_known_images[i];
            uint32_t size = e->path_size;
            int has = 0;
            for (uint32_t f = 0; f < frame_count && !has; f++)
                has = frames[f] >= e->start && frames[f] < e->end;
            if (has != with_frames || room < AFT_IMAGE_ENTRY_SIZE + size) continue;
            room -= AFT_IMAGE_ENTRY_SIZE + size;
            chosen[i / 64] |= 1ull << (i % 64);
            n++;
            *paths += size;
        }
    }
    return n;
}

void aft_async_emit_known_images(aft_writer *w, uint32_t count, uint64_t room,
                                 const uint64_t *frames, uint32_t frame_count) {
    uint64_t paths = 0;
    for (uint32_t i = 0; i < count; i++) paths += aft_g_known_images[i].path_size;
    aft_section_header list = {.type = AFT_SECTION_IMAGE_LIST,
                               .entry_size = AFT_IMAGE_ENTRY_SIZE,
                               .count = count,
                               .flags = 0};
    aft_section_header bytes = {.type = AFT_SECTION_IMAGE_PATHS, .entry_size = 1, .count = 0};
    if (room >= 2 * sizeof(aft_section_header) + (uint64_t)count * AFT_IMAGE_ENTRY_SIZE + paths) {
        /* All of them: two pieces, where they are. */
        bytes.count = (uint32_t)paths;
        aft_async_emit(w, &list, sizeof(list));
        aft_async_emit_kept(w, aft_g_known_images, (size_t)count * AFT_IMAGE_ENTRY_SIZE);
        aft_async_emit(w, &bytes, sizeof(bytes));
        aft_async_emit_kept(w, aft_known_paths(count), (size_t)paths);
        return;
    }
    if (room < 2 * sizeof(aft_section_header)) return;
    /* Those that fit, chosen once: the entries and paths written are the ones counted, in
     * address order, and exactly the bytes the headers say. */
    uint64_t chosen[AFT_MAX_IMAGES / 64] = {0};
    if (count > AFT_MAX_IMAGES) count = AFT_MAX_IMAGES;
    list.count = aft_async_known_fitting(count, room - 2 * sizeof(aft_section_header), frames,
                                         frame_count, chosen, &paths);
    list.flags = AFT_SECTION_TRUNCATED;
    bytes.count = (uint32_t)paths;
    aft_async_emit(w, &list, sizeof(list));
    for (uint32_t i = 0; i < count; i++)
        if ((chosen[i / 64] >> (i % 64)) & 1u)
            aft_async_emit_kept(w, &aft_g_known_images[i], AFT_IMAGE_ENTRY_SIZE);
    aft_async_emit(w, &bytes, sizeof(bytes));
    const char *at = aft_known_paths(count);
    uint64_t left = paths;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t size = aft_g_known_images[i].path_size;
        if ((chosen[i / 64] >> (i % 64)) & 1u) {
            uint64_t taken = size < left ? size : left;
            aft_async_emit_kept(w, at, (size_t)taken);
            left -= taken;
        }
        at += size;
    }
    while (left > 0) { /* rewritten meanwhile (a second start): as many bytes as counted */
        size_t zeros = left < sizeof(aft_g_zeros) ? (size_t)left : sizeof(aft_g_zeros);
        aft_async_emit_kept(w, aft_g_zeros, zeros);
        left -= zeros;
    }
}

uint64_t aft_async_images_room(void) {
    if (!aft_g_known_link_map.valid) return sizeof(aft_section_header) + 64 * sizeof(aft_image);
    atomic_thread_fence(memory_order_acquire);
    uint32_t n = atomic_load(&aft_g_known_image_count);
    uint64_t room = 2 * sizeof(aft_section_header) + (uint64_t)n * AFT_IMAGE_ENTRY_SIZE;
    for (uint32_t i = 0; i < n && i < AFT_MAX_IMAGES; i++) room += aft_g_known_images[i].path_size;
    return room;
}

/* Whether the file system has size bytes for fd from offset on: allocated by the call (beyond
 * the file's end too, its size unchanged). A file system that cannot tell (EOPNOTSUPP) is
 * taken at its word. */
int aft_async_space_for(int fd, uint64_t offset, uint64_t size) {
    /* Inside the space reserved at start: there already. */
    if (fd == aft_g_state.reserved_fd && offset + size <= aft_g_state.reserved_bytes) return 1;
    long r = syscall(SYS_fallocate, (long)fd, (long)FALLOC_FL_KEEP_SIZE, (long)offset, (long)size);
    return r == 0 || (errno != ENOSPC && errno != EDQUOT && errno != EFBIG);
}

/* The bytes of the first `count` records' STACK_MEMORY sections. */
uint64_t aft_async_stacks_size(const aft_thread_capture *c, uint32_t count) {
    uint64_t stacks = 0;
    for (uint32_t i = 0; i < count && i < c->info.recorded; i++)
        if (c->records[i].stack_size > 0)
            stacks +=
                sizeof(aft_section_header) + sizeof(aft_memory_header) + c->records[i].stack_size;
    return stacks;
}

/* The other threads' summary, records and frames. Under a file-size limit they go only where
 * they fit with room for the images, and the stack memory only where it fits too. 1: written
 * with room for every stack, 0: without, -1: not written. */
int aft_async_emit_threads(aft_writer *w, const aft_thread_capture *c, uint64_t limit) {
    if (c == NULL || c->info.recorded == 0) return -1;
    aft_threads_info info = c->info;
    uint64_t records = 3 * sizeof(aft_section_header) + sizeof(info) +
                       (uint64_t)info.recorded * sizeof(aft_thread) +
                       (uint64_t)c->frame_count * sizeof(uint64_t);
    uint64_t stacks = aft_async_stacks_size(c, info.recorded);
    uint64_t images_room = aft_async_images_room();
    uint64_t used = sizeof(aft_file_header) + w->body_size;
    int with_stacks = 1;
    if (limit != UINT64_MAX) {
        if (used + records + images_room > limit) return -1;
        with_stacks = used + records + images_room + stacks <= limit;
    }
    /* A full disk: the thread sections only where the space is there (allocated now, the file's
     * size unchanged), so that they never cost the report its images or its commit. */
    if (!aft_async_space_for(w->fd, used, records + images_room + (with_stacks ? stacks : 0))) {
        with_stacks = 0;
        if (!aft_async_space_for(w->fd, used, records + images_room)) return -1;
    }
    if (!with_stacks) info.flags |= AFT_THREADS_CUT_BY_FILE_LIMIT;
    aft_section_header sh = {
        .type = AFT_SECTION_THREADS_INFO, .entry_size = sizeof(info), .count = 1, .flags = 0};
    aft_async_emit(w, &sh, sizeof(sh));
    aft_async_emit(w, &info, sizeof(info)); /* this frame's copy */
    aft_async_emit_section(w, AFT_SECTION_THREADS, sizeof(aft_thread), info.recorded,
                           info.omitted ? AFT_SECTION_TRUNCATED : 0, c->records);
    aft_async_emit_section(w, AFT_SECTION_THREAD_FRAMES, sizeof(uint64_t), c->frame_count, 0,
                           c->frames);
    return with_stacks;
}

/* The Swift async callers: the crashing or hung thread's, then the other threads' (a capture
 * that failed midway adds none). Under a file-size limit or on a full disk, only where they fit
 * with room for the images. */
void aft_async_emit_swift_async(aft_writer *w, const aft_report_spec *spec, uint64_t limit) {
    const aft_thread_capture *c = spec->threads;
    uint32_t own = spec->swift_async != NULL ? spec->swift_async_count : 0;
    uint32_t others = c != NULL && c->info.recorded > 0 ? c->swift_async.count : 0;
    if (own + others == 0) return;
    uint64_t size =
        sizeof(aft_section_header) + (uint64_t)(own + others) * sizeof(aft_swift_async_link);
    uint64_t images_room = aft_async_images_room();
    uint64_t used = sizeof(aft_file_header) + w->body_size;
    if ((limit != UINT64_MAX && used + size + images_room > limit) ||
        !aft_async_space_for(w->fd, used, size + images_room))
        return;
    aft_section_header sh = {.type = AFT_SECTION_SWIFT_ASYNC,
                             .entry_size = sizeof(aft_swift_async_link),
                             .count = own + others,
                             .flags = 0};
    aft_async_emit(w, &sh, sizeof(sh));
    aft_async_emit_kept(w, spec->swift_async, (size_t)own * sizeof(aft_swift_async_link));
    if (others > 0)
        aft_async_emit_kept(w, c->swift_async.links, (size_t)others * sizeof(aft_swift_async_link));
}

/* The crashing thread's stack, left where it is by the capture: written by pwrite from there,
 * so that the kernel reads it and says how much of it could be read (where a read here could
 * fault, in a handler that has the fault's signal blocked), then its CRC taken from the same
 * bytes, now known readable. 0 when it could not all be written so: the caller copies it. */
static int aft_async_emit_stack_in_place(aft_writer *w, const aft_thread *r) {
    aft_async_flush(w);
    if (w->error) return 1;
    aft_memory_header m = {
        .thread_id = r->thread_id, .start = r->stack_start, .size = r->stack_size};
    aft_section_header sh = {.type = AFT_SECTION_STACK_MEMORY,
                             .entry_size = 1,
                             .count = (uint32_t)(sizeof(m) + r->stack_size),
                             .flags = 0};
    const uint8_t *bytes = (const uint8_t *)(uintptr_t)r->stack_start;
    struct iovec pieces[3] = {
        {&sh, sizeof(sh)}, {&m, sizeof(m)}, {(void *)(uintptr_t)bytes, r->stack_size}};
    size_t total = sizeof(sh) + sizeof(m) + (size_t)r->stack_size;
    /* At the writer's offset, which moves only once it is all written: a copy made instead
     * overwrites. */
    off_t at = (off_t)w->offset;
    ssize_t n;
    do {
        n = (ssize_t)syscall(SYS_pwritev, (long)w->fd, (long)pieces, 3L, (long)at, 0L);
    } while (n < 0 && errno == EINTR);
    if (n != (ssize_t)total) return 0;
    w->crc = aft_async_crc32(w->crc, &sh, sizeof(sh));
    w->crc = aft_async_crc32(w->crc, &m, sizeof(m));
    w->crc = aft_async_crc32(w->crc, bytes, (size_t)r->stack_size);
    w->body_size += total;
    w->offset += total;
    return 1;
}

/* One STACK_MEMORY section per thread whose stack was kept, in record order, for the first
 * `count` records. */
void aft_async_emit_stacks(aft_writer *w, aft_thread_capture *c, uint32_t count) {
    for (uint32_t i = 0; i < count && i < c->info.recorded; i++) {
        const aft_thread *r = &c->records[i];
        if (r->stack_size == 0) continue;
        uint64_t start = r->stack_start, size = r->stack_size;
        if (i == 0 && c->stack_in_place) {
            if (aft_async_emit_stack_in_place(w, r)) continue;
            size = aft_async_copy_stack_late(c, 0, &start); /* not all readable: what is */
            if (size == 0) continue;
        }
        aft_memory_header m = {.thread_id = r->thread_id, .start = start, .size = size};
        aft_section_header sh = {.type = AFT_SECTION_STACK_MEMORY,
                                 .entry_size = 1,
                                 .count = (uint32_t)(sizeof(m) + size),
                                 .flags = 0};
        aft_async_emit(w, &sh, sizeof(sh));
        aft_async_emit(w, &m, sizeof(m));
        aft_async_emit_kept(w, c->arena + c->slots[i].stack_offset, (size_t)size);
    }
}

/* A reserve sized at install (reserve.c) is longer than a small report: the report is made as
 * long as the file with a padding section of zeros, which costs far less than shrinking the
 * file (a truncation of cached pages). 0 when it cannot be (a file-size limit, a size beyond
 * what a reserve is given): the caller shrinks the file instead. */
int aft_async_pad_to_size(aft_writer *w, uint64_t limit) {
    /* The reserve sized at install: its size then, which only the writer's own bytes change
     * (a file nobody else writes), where there was one; else asked. */
    uint64_t size = aft_g_state.reserve_cached_bytes;
    if (w->fd != aft_g_state.reserved_fd || size == 0) {
        struct stat st;
        if (fstat(w->fd, &st) != 0) return 0;
        size = (uint64_t)st.st_size;
    }
    uint64_t used = sizeof(aft_file_header) + w->body_size;
    if (size <= used) return 1;
    uint64_t gap = size - used;
    if (gap < sizeof(aft_section_header)) gap += sizeof(aft_g_zeros); /* past it: a section */
    if (gap > AFT_RESERVE_SIZED_MAX || (limit != UINT64_MAX && used + gap > limit)) return 0;
    aft_section_header sh = {.type = AFT_SECTION_PADDING,
                             .entry_size = 1,
                             .count = (uint32_t)(gap - sizeof(sh)),
                             .flags = 0};
    aft_async_emit(w, &sh, sizeof(sh));
    for (uint64_t left = gap - sizeof(sh); left > 0 && !w->error;) {
        size_t n = left < sizeof(aft_g_zeros) ? (size_t)left : sizeof(aft_g_zeros);
        aft_async_emit_kept(w, aft_g_zeros, n);
        left -= n;
    }
    return 1;
}
