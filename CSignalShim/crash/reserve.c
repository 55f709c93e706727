/*
 * reserve.c: NORMAL-TIME CODE. The crash file, opened at install (a dead run's empty one taken
 * over where there is one), and its space, reserved so that a disk that fills up later still
 * takes the report, and its every thread's stacks where it can.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h> /* renameat */
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dir_internal.h"
#include "shim_internal.h"
#include "reserve_internal.h"
#include "threads_internal.h"

int aft_file_unwritten(int fd, const struct stat *st, size_t unwritten_max) {
    if (!S_ISREG(st->st_mode)) return 0;
    if (st->st_size == 0) return 1;
    if ((size_t)st->st_size > unwritten_max) return 0;
    uint8_t header[sizeof(aft_file_header)]; /* every writer writes its header first */
    if (pread(fd, header, sizeof(header), 0) != (ssize_t)sizeof(header)) return 0;
    for (size_t i = 0; i < sizeof(header); i++)
        if (header[i] != 0) return 0;
    return 1;
}

int aft_take_empty_file(int dir_fd, const char *name, size_t unwritten_max) {
    int fd = openat(dir_fd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return -1;
    struct stat st;
    /* Locked first: a live run holds the lock from before the name is visible, and no other
     * launch can take it meanwhile. Then empty (or no larger than unwritten_max and never
     * written), ours, one link, 0600: changed only where it is not (a change of mode, even to
     * the same one, is a journal transaction for the inode, 15-20 µs on ext4). */
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &st) == 0 &&
        aft_file_unwritten(fd, &st, unwritten_max) && st.st_uid == geteuid() && st.st_nlink == 1 &&
        ((st.st_mode & 07777) == 0600 || fchmod(fd, 0600) == 0))
        return fd;
    close(fd);
    return -1;
}

/* An earlier run's empty reserve whose run is dead (its lock free), locked and kept under its
 * name (in name): its inode and its allocated space are this run's, where creating and
 * allocating them again costs a new inode and extents (the most expensive part of start on a
 * busy file system), and the next launch's removal of the old one is saved too. Not renamed:
 * the crash's rename names the report, and a name change here would cost start a directory
 * update. A reserve with bytes in it (a handler that died writing) is never taken: the next
 * launch salvages it. -1 when there is none. */
static int aft_reserve_take_dead(int dir_fd, char *name) {
    _Alignas(8) unsigned char buf[1024]; /* a few entries a read: at most 8 are examined */
    aft_dir_cursor list = {.fd =
                               openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK),
                           .capacity = sizeof(buf),
                           .buf = buf};
    if (list.fd < 0) return -1;
    static const char suffix[] = ".crash.tmp";
    const size_t slen = sizeof(suffix) - 1;
    int taken = -1, examined = 0;
    const char *entry;
    uint64_t inode;
    uint8_t type;
    while (taken < 0 && examined < 8 &&
           (entry = aft_dir_cursor_next(&list, &inode, &type)) != NULL) {
        size_t len = strlen(entry);
        if (entry[0] == '.' || len <= slen || len >= AFT_FILE_NAME_CAPACITY ||
            strcmp(entry + len - slen, suffix) != 0 || (type != DT_REG && type != DT_UNKNOWN))
            continue;
        examined++;
        /* Locked: its run is dead. A live run's, a written one, or one a collector removed
         * meanwhile is left. */
        taken = aft_take_empty_file(dir_fd, entry, AFT_RESERVE_SIZED_MAX);
        if (taken >= 0) memcpy(name, entry, len + 1);
    }
    close(list.fd);
    return taken;
}

int aft_reserve_open(int dir_fd, const uint8_t report_id[AFT_ID_SIZE], char *name) {
    char hidden_name[AFT_FILE_NAME_CAPACITY + 1];
    int reserved = aft_reserve_take_dead(dir_fd, name);
    if (reserved >= 0) return reserved;
    char *tmp_name = name;
    aft_async_id_file_name(tmp_name, AFT_FILE_NAME_CAPACITY, report_id, ".crash.tmp");
    hidden_name[0] = '.';
    aft_async_id_file_name(hidden_name + 1, sizeof(hidden_name) - 1, report_id, ".reserve");
    /* Created under a hidden name, locked, then renamed into place: another instance's next
     * launch never sees it empty and unlocked, and so never removes it. */
    reserved =
        openat(dir_fd, hidden_name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (reserved >= 0 && (fchmod(reserved, 0600) != 0 || /* 0600 whatever the umask */
                          flock(reserved, LOCK_EX | LOCK_NB) != 0 ||
                          renameat(dir_fd, hidden_name, dir_fd, tmp_name) != 0)) {
        unlinkat(dir_fd, hidden_name, 0);
        close(reserved);
        reserved = -1;
    }
    return reserved;
}

/* Allocates the disk space a crash file needs, so a disk that fills up later still takes the
 * report: the deepest stack, the images seen now and as many again loaded later. The writer
 * gives back what the report did not use. Where the file system cannot (EOPNOTSUPP) or the disk
 * is already full, the crash is written as before.
 * A typical report's first bytes (its records, the images seen now, listed with paths of 64
 * bytes on average, a crashing thread's stack of 12 KiB) are the file's size from now on,
 * allocated unwritten: zeros, without a byte written to disk, which aft_reserve_cache then
 * brings into the page cache. A crash's write into pages that are there costs about half of
 * one that makes them (the kernel's page allocation and the file system's delayed allocation
 * of each), and the writer fills what its report leaves of that size with a padding section.
 * The rest of the space is kept beyond the file's size (FALLOC_FL_KEEP_SIZE). A reserve whose
 * header is still zero tells a dead run without a crash. */
uint64_t aft_reserve_crash_space(int fd, uint32_t image_count) {
    aft_g_state.reserve_holds_stacks = 0;
    aft_g_state.reserve_cached_bytes = 0;
    if (fd < 0) return 0;
    uint64_t typical = sizeof(aft_file_header) + 6 * sizeof(aft_section_header) +
                       sizeof(aft_context) + sizeof(aft_system_info) + sizeof(aft_crash_info) +
                       64 * sizeof(uint64_t) + (uint64_t)image_count * (AFT_IMAGE_ENTRY_SIZE + 64) +
                       3 * sizeof(aft_section_header) + sizeof(aft_threads_info) +
                       4 * sizeof(aft_thread) + 12288;
    typical = (typical + 4095) & ~(uint64_t)4095;
    if (typical > AFT_RESERVE_SIZED_MAX) typical = AFT_RESERVE_SIZED_MAX;
    uint64_t images = (uint64_t)image_count * 2 + 16;
    if (images > AFT_MAX_IMAGES) images = AFT_MAX_IMAGES;
    uint64_t size = sizeof(aft_file_header) + 5 * sizeof(aft_section_header) + sizeof(aft_context) +
                    sizeof(aft_system_info) + sizeof(aft_crash_info) +
                    (uint64_t)AFT_MAX_FRAMES * sizeof(uint64_t) + images * sizeof(aft_image);
    /* And the other threads of a typical server: 64 records, their frames and stacks. Where
     * that does not fit, the report alone: the writer leaves out what the disk cannot take. */
    uint64_t threads =
        4 * sizeof(aft_section_header) + sizeof(aft_threads_info) +
        AFT_STACK_EARLY_THREADS * (sizeof(aft_thread) + AFT_THREAD_MAX_FRAMES * sizeof(uint64_t)) +
        AFT_THREADS_RESERVED_STACK_BYTES;
    uint64_t reserved = 0;
    struct stat st;
    int known = fstat(fd, &st) == 0;
    /* A dead run's reserve taken over has its blocks already: fallocate would cost start a
     * journal transaction for nothing. */
    if (known && (uint64_t)st.st_blocks * 512u >= size + threads) {
        aft_g_state.reserve_holds_stacks = 1;
        reserved = size + threads;
    } else if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)(size + threads)) == 0) {
        aft_g_state.reserve_holds_stacks = 1;
        reserved = size + threads;
    } else if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)size) == 0) {
        reserved = size;
    }
    /* Sized inside the space just allocated: no new blocks, the size alone changes. Never past
     * a file-size limit (ulimit -f): that truncation would end the process by SIGXFSZ. */
    if (reserved >= typical && aft_async_file_size_limit() >= typical && known) {
        if ((uint64_t)st.st_size < typical && ftruncate(fd, (off_t)typical) == 0)
            st.st_size = (off_t)typical;
        if ((uint64_t)st.st_size >= typical)
            aft_g_state.reserve_cached_bytes = (uint64_t)st.st_size;
    }
    return reserved;
}

void aft_reserve_cache(int fd) {
    uint64_t bytes = aft_g_state.reserve_cached_bytes;
    if (fd >= 0 && bytes > 0) (void)posix_fadvise(fd, 0, (off_t)bytes, POSIX_FADV_WILLNEED);
}
