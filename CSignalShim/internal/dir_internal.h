/*
 * dir_internal.h: directory listings at normal time without a DIR (io/start_io.c), for the C
 * files that list one on start's paths (crash/reserve.c, crash/threads_capture.c), and the
 * rename that never replaces (runs/runs_prepare.c). Not seen by Swift, which lists through
 * aft_dir_reader and renames through aft_rename_noreplace (CSignalShim.h).
 */
#ifndef AFT_DIR_INTERNAL_H
#define AFT_DIR_INTERNAL_H

#include <stdint.h>

/* A directory's entries read with getdents64(2) into the caller's buffer (normal time): no
 * DIR, whose 32 KiB buffer glibc takes from the calling thread's heap, leaving the page at its
 * far end dirty for good once freed. fd is the caller's to open and close; pos and len start
 * at 0. */
typedef struct aft_dir_cursor {
    int fd;
    uint32_t pos, len, capacity;
    unsigned char *buf; /* 8-byte aligned, capacity bytes */
} aft_dir_cursor;
/* The next entry's name (in buf until the next call), inode and d_type; NULL at the end, or on
 * an error with errno set. */
const char *aft_dir_cursor_next(aft_dir_cursor *c, uint64_t *inode, uint8_t *type);

/* renameat(2) that never replaces an existing target (renameat2's RENAME_NOREPLACE), relative to
 * directory descriptors (AT_FDCWD for paths): 0, or an errno value (EEXIST; EINVAL or ENOSYS
 * where the file system or kernel has no such rename). aft_rename_noreplace is it on paths. */
int aft_renameat_noreplace(int from_dir, const char *from, int to_dir, const char *to);

#endif /* AFT_DIR_INTERNAL_H */
