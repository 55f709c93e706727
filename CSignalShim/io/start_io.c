/*
 * start_io.c: NORMAL-TIME CODE. What start and its quiet delivery read, in as few system calls
 * as can be: random bytes for the run's ids, and directory listings without a DIR.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "CSignalShim.h"
#include "dir_internal.h"

int aft_random_bytes(void *buf, size_t size) {
    size_t filled = 0;
    while (filled < size) {
        ssize_t n = getrandom((char *)buf + filled, size - filled, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1; /* no getrandom(2): a kernel before 3.17 */
        filled += (size_t)n;
    }
    return 0;
}

/* What getdents64(2) writes: struct linux_dirent64. */
struct aft_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

int aft_dir_reader_open(aft_dir_reader *r, const char *path) {
    r->pos = r->len = 0;
    r->fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    return r->fd < 0 ? errno : 0;
}

const char *aft_dir_cursor_next(aft_dir_cursor *c, uint64_t *inode, uint8_t *type) {
    if (c->fd < 0) return NULL;
    if (c->pos >= c->len) {
        long n;
        do {
            n = syscall(SYS_getdents64, (long)c->fd, c->buf, (long)c->capacity);
        } while (n < 0 && errno == EINTR);
        if (n <= 0) return NULL; /* the end, or an error (errno) */
        c->pos = 0;
        c->len = (uint32_t)n;
    }
    const struct aft_dirent64 *d = (const struct aft_dirent64 *)(const void *)(c->buf + c->pos);
    if (c->len - c->pos < offsetof(struct aft_dirent64, d_name) + 1u ||
        d->d_reclen < offsetof(struct aft_dirent64, d_name) + 1u || d->d_reclen > c->len - c->pos) {
        errno = EIO; /* not what the kernel writes */
        return NULL;
    }
    c->pos += d->d_reclen;
    *inode = d->d_ino;
    *type = d->d_type;
    return d->d_name;
}

const char *aft_dir_reader_next(aft_dir_reader *r, uint64_t *inode, uint8_t *type) {
    aft_dir_cursor c = {
        .fd = r->fd, .pos = r->pos, .len = r->len, .capacity = sizeof(r->buf), .buf = r->buf};
    const char *name = aft_dir_cursor_next(&c, inode, type);
    r->pos = c.pos;
    r->len = c.len;
    return name;
}

void aft_dir_reader_close(aft_dir_reader *r) {
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
}

int aft_renameat_noreplace(int from_dir, const char *from, int to_dir, const char *to) {
#ifdef SYS_renameat2
    return syscall(SYS_renameat2, (long)from_dir, from, (long)to_dir, to,
                   1L /* RENAME_NOREPLACE */) == 0
               ? 0
               : errno;
#else
    (void)from_dir;
    (void)from;
    (void)to_dir;
    (void)to;
    return ENOSYS;
#endif
}

int aft_rename_noreplace(const char *from, const char *to) {
    return aft_renameat_noreplace(AT_FDCWD, from, AT_FDCWD, to);
}
