/*
 * report_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). Writes one report file in the format of aftermath_format.h. The caller
 * passes every buffer (frames, images, maps scratch); nothing here is allocated. Order: header
 * (commit 0), context, event, frames, images, then the header again with size, CRC and commit
 * marker, optional fsync, rename into place. A reader that finds the final name finds a whole
 * file; a leftover .tmp holds as much as was written, most useful first. The pieces go out by
 * pwritev(2) from where they already are: no staging copy of the body, nor its pages; each
 * write names its offset, so the descriptor's is never moved.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <stdio.h> /* renameat */
#include <linux/falloc.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report_writer_internal.h"
#include "sys_internal.h"

void aft_async_flush(aft_writer *w) {
    struct iovec *v = w->iov;
    uint32_t left = w->count;
    while (left > 0 && !w->error) {
        long n = syscall(SYS_pwritev, (long)w->fd, (long)v, (long)left, (long)w->offset, 0L);
        if (n < 0) {
            if (errno != EINTR) w->error = errno;
            continue;
        }
        if (n == 0) {
            w->error = EIO;
            break;
        }
        size_t done = (size_t)n;
        w->offset += (uint64_t)n;
        while (left > 0 && done >= v->iov_len) {
            done -= v->iov_len;
            v++;
            left--;
        }
        if (left > 0) {
            v->iov_base = (uint8_t *)v->iov_base + done;
            v->iov_len -= done;
        }
    }
    w->count = 0;
    w->small_used = 0;
}

/* Queues [data, data + size); copy: the bytes live in a frame that ends before the write. */
void aft_async_queue(aft_writer *w, const void *data, size_t size, int copy) {
    if (w->error || size == 0) return;
    if (copy && size > AFT_WRITER_SMALL) {
        aft_async_flush(w); /* not in the writer's own calls: written at once */
        if (!w->error) w->error = aft_async_pwrite_all(w->fd, data, size, (off_t)w->offset);
        if (!w->error) w->offset += size;
        return;
    }
    if (w->count == AFT_WRITER_IOVS || (copy && w->small_used + size > AFT_WRITER_SMALL))
        aft_async_flush(w);
    if (w->error) return;
    if (copy) {
        uint8_t *at = w->small + w->small_used;
        aft_async_memcpy(at, data, size);
        w->small_used += size;
        struct iovec *last = w->count > 0 ? &w->iov[w->count - 1] : NULL;
        if (last != NULL && (uint8_t *)last->iov_base + last->iov_len == at) {
            last->iov_len += size; /* adjacent copies: one piece */
            return;
        }
        data = at;
    }
    w->iov[w->count].iov_base = (void *)(uintptr_t)data;
    w->iov[w->count].iov_len = size;
    w->count++;
}

/* Body bytes: counted in the size and the CRC. */
void aft_async_emit_as(aft_writer *w, const void *data, size_t size, int copy) {
    if (w->error) return;
    w->crc = aft_async_crc32(w->crc, data, size);
    w->body_size += size;
    aft_async_queue(w, data, size, copy);
}

/* A piece in the caller's frame (copied), or in a buffer that outlives the write (not). */
void aft_async_emit(aft_writer *w, const void *data, size_t size) {
    aft_async_emit_as(w, data, size, 1);
}

void aft_async_emit_kept(aft_writer *w, const void *data, size_t size) {
    aft_async_emit_as(w, data, size, 0);
}

/* A section whose entries outlive the write (the caller's buffers, never this file's frames). */
void aft_async_emit_section(aft_writer *w, uint32_t type, uint32_t entry_size, uint32_t count,
                            uint32_t flags, const void *entries) {
    aft_section_header sh = {
        .type = type, .entry_size = entry_size, .count = count, .flags = flags};
    aft_async_emit(w, &sh, sizeof(sh));
    aft_async_emit_kept(w, entries, (size_t)entry_size * count);
}

void aft_async_id_file_name(char *out, size_t capacity, const uint8_t id[AFT_ID_SIZE],
                            const char *suffix) {
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    for (uint32_t i = 0; i < AFT_ID_SIZE && n + 2 < capacity; i++) {
        out[n++] = hex[id[i] >> 4];
        out[n++] = hex[id[i] & 15];
    }
    for (size_t i = 0; suffix[i] != '\0' && n + 1 < capacity; i++) out[n++] = suffix[i];
    out[n] = '\0';
}

int aft_async_write_report(int dir_fd, const char *tmp_name, const char *final_name,
                           const aft_report_spec *spec, int *out_fd) {
    int reserved = spec->has_reserved_fd ? spec->reserved_fd : -1;
    int fd = reserved >= 0 ? reserved
                           : openat(dir_fd, tmp_name,
                                    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return errno;
    if (reserved < 0)
        (void)fchmod(fd, 0600); /* 0600 whatever the umask (a narrower mode still works) */

    aft_file_header header;
    aft_async_memset(&header, 0, sizeof(header));
    header.magic = AFT_MAGIC;
    header.version = AFT_FORMAT_VERSION;
    header.header_size = sizeof(aft_file_header);
    header.kind = spec->kind;
    header.flags = spec->flags | (spec->fsync_file ? AFT_FLAG_FSYNCED : 0);

    /* A file-size limit (ulimit -f) smaller than the whole report: the innermost frames and
     * the images they are in come first; what does not fit is left out and said to be. */
    uint64_t limit =
        spec->file_size_limit_known ? spec->file_size_limit : aft_async_file_size_limit();
    uint64_t fixed = sizeof(header) + 5 * sizeof(aft_section_header) + sizeof(aft_context) +
                     (spec->system != NULL ? sizeof(aft_system_info) : 0) + spec->event_size +
                     (spec->extra != NULL ? spec->extra_size : 0);
    uint32_t frame_count = spec->frame_count;
    uint32_t frames_truncated = spec->frames_truncated;
    if (limit != UINT64_MAX && limit > fixed) {
        uint64_t room = limit - fixed;
        uint64_t images_room = sizeof(aft_section_header) + 4 * sizeof(aft_image);
        room = room > 2 * images_room ? room - images_room : room / 2;
        if ((uint64_t)frame_count * sizeof(uint64_t) > room) {
            frame_count = (uint32_t)(room / sizeof(uint64_t));
            frames_truncated = 1;
        }
    }

    aft_writer w;
    w.fd = fd;
    w.error = 0;
    w.offset = 0;
    w.crc = 0;
    w.body_size = 0;
    w.count = 0;
    w.small_used = 0;
    aft_async_queue(&w, &header, sizeof(header), 1);
    aft_async_emit_section(&w, AFT_SECTION_CONTEXT, sizeof(aft_context), 1, 0, spec->context);
    aft_system_info machine; /* start's, with the processor's vendor read now */
    if (spec->system != NULL) {
        aft_async_memcpy(&machine, spec->system, sizeof(machine));
        aft_async_arch_cpu_vendor(machine.cpu_vendor);
        aft_async_emit_section(&w, AFT_SECTION_SYSTEM, sizeof(aft_system_info), 1, 0, &machine);
    }
    aft_async_emit_section(&w, spec->event_type, spec->event_size, 1, 0, spec->event);
    if (spec->extra_type != 0 && spec->extra != NULL)
        aft_async_emit_section(&w, spec->extra_type, spec->extra_size, 1, 0, spec->extra);
    aft_async_emit_section(&w, AFT_SECTION_FRAMES, sizeof(uint64_t), frame_count,
                           frames_truncated ? AFT_SECTION_TRUNCATED : 0, spec->frames);
    aft_async_flush(&w); /* the most useful part is on disk before the maps are read */
    if (&aft_g_test_fault_in_writer != NULL && aft_g_test_fault_in_writer)
        *(volatile int *)(uintptr_t)aft_g_test_fault_in_writer = 0;
    aft_async_emit_swift_async(&w, spec, limit);
    int with_stacks = aft_async_emit_threads(&w, spec->threads, limit);

    uint32_t image_count = 0, images_truncated = 0;
    const aft_image *images = spec->images;
    uint64_t link_count = 0, link_hash = 0;
    int known = aft_g_known_link_map.valid;
    atomic_thread_fence(memory_order_acquire); /* images written before valid are seen */
    int taken = spec->has_link_map, listed = 0;
    if (taken) {
        link_count = spec->link_count;
        link_hash = spec->link_hash;
    }
    if (spec->images_read > 0) {
        image_count = spec->images_read;
        images_truncated = spec->images_truncated;
    } else if (known && (taken || aft_async_link_map_signature(&link_count, &link_hash)) &&
               link_count == aft_g_known_link_map.count && link_hash == aft_g_known_link_map.hash) {
        /* No library loaded or unloaded since install: the images read then still hold. */
        image_count = atomic_load(&aft_g_known_image_count);
        listed = 1; /* as they are kept: without the paths' unused bytes */
    } else {
        int maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
        if (maps >= 0) {
            image_count =
                aft_async_images_from_fd(spec->scratch, maps, spec->images, AFT_MAX_IMAGES, 1,
                                         spec->context->executable_path, &images_truncated);
            close(maps);
        }
    }
    uint64_t used = sizeof(header) + w.body_size + sizeof(aft_section_header);
    uint64_t fitting = limit == UINT64_MAX ? UINT64_MAX
                       : limit > used      ? (limit - used) / sizeof(aft_image)
                                           : 0;
    if (listed) {
        uint64_t at = used - sizeof(aft_section_header);
        aft_async_emit_known_images(&w, image_count,
                                    limit == UINT64_MAX ? UINT64_MAX
                                    : limit > at        ? limit - at
                                                        : 0,
                                    spec->frames, frame_count);
    } else if ((uint64_t)image_count <= fitting) {
        aft_async_emit_section(&w, AFT_SECTION_IMAGES, sizeof(aft_image), image_count,
                               images_truncated ? AFT_SECTION_TRUNCATED : 0, images);
    } else if (limit > used) {
        aft_async_emit_fitting_images(&w, images, image_count, (uint32_t)fitting, spec->frames,
                                      frame_count);
    }
    /* The stacks last, where they still fit once the images are written; else the crashing
     * thread's alone, which the next launch unwinds (the threads' records are written). */
    aft_thread_capture *c = spec->threads;
    if (with_stacks >= 0 && c != NULL) {
        uint64_t at = sizeof(header) + w.body_size;
        uint32_t all = with_stacks == 1 ? c->info.recorded : 0;
        uint64_t stacks = aft_async_stacks_size(c, all), first = aft_async_stacks_size(c, 1);
        if (all > 0 && (limit == UINT64_MAX || at + stacks <= limit) &&
            aft_async_space_for(fd, at, stacks))
            aft_async_emit_stacks(&w, c, all);
        else if (first > 0 && (limit == UINT64_MAX || at + first <= limit) &&
                 aft_async_space_for(fd, at, first))
            aft_async_emit_stacks(&w, c, 1);
    }
    int padded = fd == reserved ? aft_async_pad_to_size(&w, limit) : 1;
    aft_async_flush(&w);

    if (!w.error) {
        header.body_size = w.body_size;
        header.body_crc = w.crc;
        header.commit = AFT_COMMIT_MARKER;
        w.error = aft_async_pwrite_all(fd, &header, sizeof(header), 0);
    }
    if (!w.error && fd == reserved) {
        /* The reserve allocated at start beyond the report goes back to the file system. */
        off_t end = (off_t)(sizeof(header) + w.body_size);
        if (!padded && aft_sys_ftruncate(fd, end) != 0) w.error = errno;
        syscall(SYS_fallocate, (long)fd, (long)(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE),
                (long)end, (long)(1 << 30));
    }
    if (!w.error && spec->fsync_file && aft_sys_fsync(fd) != 0) w.error = errno;
    /* The reserve is committed by its header alone, under the name it has had since start (a
     * rename cost a cold crash 20-35 µs, a fifth of the handler): the next launch names it by
     * its report's id once its lock is free, this process gone. A file created by name is
     * renamed, as every other report is. */
    if (!w.error && fd != reserved && renameat(dir_fd, tmp_name, dir_fd, final_name) != 0)
        w.error = errno;
    if (w.error) {
        if (fd != reserved) close(fd);
        return w.error;
    }
    if (spec->keep_open && out_fd) {
        *out_fd = fd;
    } else if (fd != reserved) {
        close(fd);
    }
    return 0;
}

/* The calling thread's name: prctl(PR_GET_NAME) is one syscall, no file to open. */
void aft_async_thread_name(char *out) {
    char buf[AFT_THREAD_NAME + 1];
    aft_async_memset(buf, 0, sizeof(buf));
    if (syscall(SYS_prctl, PR_GET_NAME, buf, 0L, 0L, 0L) != 0) buf[0] = '\0';
    aft_async_copy_tail(out, AFT_THREAD_NAME, buf, aft_async_strlen(buf, AFT_THREAD_NAME));
}

/* Marks the half-written report of a handler that faulted: the next launch says so. */
void aft_async_mark_handler_fault(void) {
    int fd = aft_g_state.reserved_fd;
    if (fd < 0) return;
    uint32_t flags = AFT_FLAG_NESTED_FAULT | (aft_g_state.fsync_reports ? AFT_FLAG_FSYNCED : 0);
    (void)aft_async_pwrite_all(fd, &flags, sizeof(flags), (off_t)offsetof(aft_file_header, flags));
}
