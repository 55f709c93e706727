/*
 * images_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). The loaded images, from /proc/self/maps, with their GNU build ids read
 * from memory (not from the file on disk, which may have been replaced). Images seen at start
 * (images.c, from dl_iterate_phdr) are not read again; others are read with
 * aft_async_read_memory, so a bad address gives an error, never a second fault, and never with
 * process_vm_readv, which seccomp filters of hardened services refuse or kill on. Scratch
 * buffers are static (BSS).
 */
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <unistd.h>

#include "shim_internal.h"

#define AFT_MAX_PHDRS 64

typedef struct aft_maps_entry {
    uint64_t start, end, offset, inode;
    int readable, executable;
    const char *path; /* points into the line buffer */
    size_t path_len;
    int path_cut; /* the line did not fit the buffer */
} aft_maps_entry;

static int aft_async_hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static const char *aft_async_parse_hex(const char *p, const char *end, uint64_t *out) {
    uint64_t v = 0;
    int digits = 0, d;
    while (p < end && (d = aft_async_hex_digit(*p)) >= 0) {
        v = (v << 4) | (uint64_t)d;
        p++;
        digits++;
    }
    *out = v;
    return digits > 0 ? p : NULL;
}

static const char *aft_async_skip_spaces(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    return p;
}

static const char *aft_async_skip_field(const char *p, const char *end) {
    while (p < end && *p != ' ' && *p != '\t') p++;
    return p;
}

/* "start-end perms offset dev inode   path" */
static int aft_async_parse_maps_line(const char *line, size_t len, int cut, aft_maps_entry *e) {
    const char *p = line, *end = line + len;
    if (!(p = aft_async_parse_hex(p, end, &e->start)) || p >= end || *p != '-') return 0;
    if (!(p = aft_async_parse_hex(p + 1, end, &e->end)) || e->end <= e->start) return 0;
    p = aft_async_skip_spaces(p, end);
    if (end - p < 4) return 0;
    e->readable = p[0] == 'r';
    e->executable = p[2] == 'x';
    p = aft_async_skip_spaces(aft_async_skip_field(p, end), end);
    if (!(p = aft_async_parse_hex(p, end, &e->offset))) return 0;
    p = aft_async_skip_spaces(aft_async_skip_field(aft_async_skip_spaces(p, end), end), end);
    e->inode = 0;
    while (p < end && *p >= '0' && *p <= '9') e->inode = e->inode * 10 + (uint64_t)(*p++ - '0');
    p = aft_async_skip_spaces(p, end);
    e->path = p;
    e->path_len = (size_t)(end - p);
    e->path_cut = cut;
    return 1;
}

static int aft_async_same_path(const aft_image *img, const aft_maps_entry *e, const char *path,
                               size_t len) {
    (void)e;
    size_t stored = aft_async_strlen(img->path, AFT_PATH_CAPACITY);
    if (img->flags & AFT_IMAGE_PATH_TRUNCATED) {
        if (len < stored) return 0;
        path += len - stored;
        len = stored;
    }
    if (stored != len) return 0;
    for (size_t i = 0; i < len; i++)
        if (img->path[i] != path[i]) return 0;
    return 1;
}

static int aft_async_ends_with(const char *s, size_t len, const char *suffix, size_t slen) {
    if (len < slen) return 0;
    for (size_t i = 0; i < slen; i++)
        if (s[len - slen + i] != suffix[i]) return 0;
    return 1;
}

static int aft_async_starts_with(const char *s, size_t len, const char *prefix, size_t plen) {
    if (len < plen) return 0;
    for (size_t i = 0; i < plen; i++)
        if (s[i] != prefix[i]) return 0;
    return 1;
}

typedef struct aft_images_builder {
    aft_image *images;
    uint32_t capacity, count, truncated;
    int open;            /* images[count-1] is still collecting mappings */
    int last_executable; /* whether images[count-1] has an executable mapping yet */
    uint64_t last_inode;
    const char *main_path;
    size_t main_len;
} aft_images_builder;

/* Closes the current image: drops it when it had no executable mapping (a data file). */
static void aft_async_close_image(aft_images_builder *b) {
    if (b->open && !b->last_executable) b->count--;
    b->open = 0;
    b->last_executable = 0;
}

static void aft_async_add_entry(aft_images_builder *b, aft_maps_entry *e) {
    const char *path = e->path;
    size_t len = e->path_len;
    if (len == 0) return; /* anonymous: .bss and heaps */
    uint32_t flags = 0;
    if (path[0] == '[') {
        if (!aft_async_starts_with(path, len, "[vdso]", 6)) return; /* stack, heap, vvar */
        flags |= AFT_IMAGE_VDSO;
    } else if (path[0] != '/') {
        return;
    }
    static const char deleted[] = " (deleted)";
    if (aft_async_ends_with(path, len, deleted, sizeof(deleted) - 1)) {
        len -= sizeof(deleted) - 1;
        flags |= AFT_IMAGE_DELETED;
    }
    if (aft_async_starts_with(path, len, "/memfd:", 7)) flags |= AFT_IMAGE_ANONYMOUS;

    if (b->open) {
        aft_image *last = &b->images[b->count - 1];
        if (e->inode == b->last_inode && aft_async_same_path(last, e, path, len) &&
            e->start >= last->start) {
            if (e->end > last->end) last->end = e->end;
            if (e->executable) b->last_executable = 1;
            return;
        }
    }
    aft_async_close_image(b);
    if (b->count == b->capacity) {
        if (e->executable) b->truncated = 1;
        return;
    }
    aft_image *img = &b->images[b->count++];
    aft_async_memset(img, 0, sizeof(*img));
    img->start = e->start;
    img->end = e->end;
    img->load_bias = e->start - e->offset;
    img->flags = flags;
    if (aft_async_copy_tail(img->path, AFT_PATH_CAPACITY, path, len) || e->path_cut)
        img->flags |= AFT_IMAGE_PATH_TRUNCATED;
    if (b->main_len > 0 && b->main_len == len && !(img->flags & AFT_IMAGE_VDSO) &&
        aft_async_starts_with(path, len, b->main_path, b->main_len))
        img->flags |= AFT_IMAGE_MAIN_EXECUTABLE;
    b->open = 1;
    b->last_executable = e->executable;
    b->last_inode = e->inode;
}

/* The same image as seen at install: the same file-backed extent (no other file can be mapped
 * there while it is) and the same flags but for how the id and path were read. */
static int aft_async_same_image(const aft_image_entry *seen, const aft_image *now) {
    uint32_t mask = ~(uint32_t)(AFT_IMAGE_ID_FLAGS | AFT_IMAGE_PATH_TRUNCATED);
    return seen->start == now->start && seen->end == now->end &&
           ((seen->flags ^ now->flags) & mask) == 0;
}

static uint32_t aft_async_identity_at(uint64_t base, uint8_t *out, uint32_t capacity,
                                      uint64_t *load_bias, uint32_t *flags, uint16_t *machine);

void aft_async_read_image_identity(aft_image *img) {
    uint64_t bias = img->load_bias;
    uint16_t machine = 0;
    uint32_t size = aft_async_identity_at(img->start, img->build_id, AFT_BUILD_ID_CAPACITY, &bias,
                                          &img->flags, &machine);
    if (size > 0) {
        img->build_id_size = size;
        img->flags |= AFT_IMAGE_BUILD_ID_FROM_MEMORY;
    }
    img->load_bias = bias;
    img->arch = machine == EM_X86_64    ? AFT_ARCH_X86_64
                : machine == EM_AARCH64 ? AFT_ARCH_ARM64
                                        : AFT_ARCH_UNKNOWN;
}

uint32_t aft_async_images_from_fd(aft_maps_scratch *scratch, int fd, aft_image *images,
                                  uint32_t capacity, int read_build_ids, const char *main_path,
                                  uint32_t *truncated) {
    char *aft_maps_chunk = scratch->chunk, *aft_maps_line = scratch->line;
    aft_images_builder b = {.images = images, .capacity = capacity, .main_path = main_path};
    b.main_len = main_path ? aft_async_strlen(main_path, AFT_MAPS_LINE) : 0;
    size_t line_len = 0;
    int line_cut = 0;
    for (;;) {
        ssize_t n = read(fd, aft_maps_chunk, AFT_MAPS_CHUNK);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        for (ssize_t i = 0; i < n; i++) {
            char c = aft_maps_chunk[i];
            if (c == '\n') {
                aft_maps_entry e;
                if (aft_async_parse_maps_line(aft_maps_line, line_len, line_cut, &e))
                    aft_async_add_entry(&b, &e);
                line_len = 0;
                line_cut = 0;
            } else if (line_len < AFT_MAPS_LINE) {
                aft_maps_line[line_len++] = c;
            } else {
                line_cut = 1; /* keep the start: addresses, perms, offset, inode */
            }
        }
    }
    if (line_len > 0) { /* a last line without a newline */
        aft_maps_entry e;
        if (aft_async_parse_maps_line(aft_maps_line, line_len, line_cut, &e))
            aft_async_add_entry(&b, &e);
    }
    aft_async_close_image(&b);
    if (read_build_ids) {
        uint32_t known = atomic_load(&aft_g_known_image_count);
        uint32_t k = 0;
        const char *path_at = aft_known_paths(known); /* known image k's path */
        for (uint32_t i = 0; i < b.count; i++) {
            aft_image *img = &images[i];
            /* Seen at install at the same address with the same path: reuse what was read
             * from memory then. Both lists are in address order, so one forward scan. */
            while (k < known && aft_g_known_images[k].start < img->start)
                path_at += aft_g_known_images[k++].path_size;
            if (k < known && aft_async_same_image(&aft_g_known_images[k], img)) {
                const aft_image_entry *seen = &aft_g_known_images[k];
                /* Its path as install has it (the loader's, where maps has the kernel's resolved
                 * one: /lib/... for /usr/lib/...): one image, one path in every report. */
                uint32_t size = seen->path_size < AFT_PATH_CAPACITY ? seen->path_size : 0;
                aft_async_memcpy(img->path, path_at, size);
                aft_async_memset(img->path + size, 0, AFT_PATH_CAPACITY - size);
                img->flags = (img->flags & ~(uint32_t)AFT_IMAGE_PATH_TRUNCATED) |
                             (seen->flags & AFT_IMAGE_PATH_TRUNCATED);
                aft_async_memcpy(img->build_id, seen->build_id, AFT_BUILD_ID_CAPACITY);
                img->build_id_size = seen->build_id_size;
                img->load_bias = seen->load_bias;
                img->arch = seen->arch;
                img->flags |= seen->flags & AFT_IMAGE_ID_FLAGS;
                continue;
            }
            aft_async_read_image_identity(img);
        }
    }
    if (truncated) *truncated = b.truncated;
    return b.count;
}

static uint64_t aft_async_align_up(uint64_t v, uint64_t align) {
    return align > 1 ? (v + align - 1) & ~(align - 1) : v;
}

/* An image's first page, read at once: its ELF header, program headers and, in most images,
 * its notes: one read of /proc/self/mem where each would otherwise be one. */
typedef struct aft_page_window {
    uint64_t base;
    uint64_t size; /* 0: nothing read, every read goes through read */
    uint8_t bytes[4096];
} aft_page_window;

static int aft_async_window_read(const aft_page_window *w, aft_memory_read_fn read,
                                 uint64_t address, void *out, size_t size) {
    if (w != NULL && address >= w->base && size <= w->size && address - w->base <= w->size - size) {
        aft_async_memcpy(out, w->bytes + (address - w->base), size);
        return 0;
    }
    return read(address, out, size);
}

static uint32_t aft_async_notes_scan(const aft_page_window *w, aft_memory_read_fn read,
                                     uint64_t load_bias, const void *phdrs, uint32_t phnum,
                                     uint8_t *out, uint32_t capacity) {
    const Elf64_Phdr *ph = phdrs;
    for (uint32_t i = 0; i < phnum; i++) {
        if (ph[i].p_type != PT_NOTE) continue;
        uint64_t align = ph[i].p_align == 8 ? 8 : 4;
        uint64_t at = load_bias + ph[i].p_vaddr;
        uint64_t end = at + (ph[i].p_memsz < 65536 ? ph[i].p_memsz : 65536);
        while (at + sizeof(Elf64_Nhdr) <= end) {
            Elf64_Nhdr nh;
            if (aft_async_window_read(w, read, at, &nh, sizeof(nh)) != 0) break;
            uint64_t name_at = at + sizeof(nh);
            uint64_t desc_at = aft_async_align_up(name_at + nh.n_namesz, align);
            uint64_t next = aft_async_align_up(desc_at + nh.n_descsz, align);
            if (next <= at || next > end) break;
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && nh.n_descsz > 0 &&
                nh.n_descsz <= capacity) {
                char name[4];
                if (aft_async_window_read(w, read, name_at, name, 4) == 0 && name[0] == 'G' &&
                    name[1] == 'N' && name[2] == 'U' && name[3] == '\0' &&
                    aft_async_window_read(w, read, desc_at, out, nh.n_descsz) == 0)
                    return nh.n_descsz;
            }
            at = next;
        }
    }
    return 0;
}

uint32_t aft_async_build_id_in_notes(aft_memory_read_fn read, uint64_t load_bias, const void *phdrs,
                                     uint32_t phnum, uint8_t *out, uint32_t capacity) {
    return aft_async_notes_scan(NULL, read, load_bias, phdrs, phnum, out, capacity);
}

/* The text hash (AFT_IMAGE_BUILD_ID_TEXT_HASH) of the first executable PT_LOAD segment. */
static uint32_t aft_async_text_hash(aft_memory_read_fn read, uint64_t load_bias,
                                    const Elf64_Phdr *ph, uint32_t phnum, uint8_t *out) {
    for (uint32_t i = 0; i < phnum; i++) {
        if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X)) continue;
        if (!(ph[i].p_flags & PF_R)) return 0; /* execute-only: a direct read would fault */
        uint64_t size =
            ph[i].p_filesz < AFT_TEXT_HASH_LENGTH ? ph[i].p_filesz : AFT_TEXT_HASH_LENGTH;
        if (size == 0) return 0;
        uint8_t hash[AFT_TEXT_HASH_SIZE] = {0}, chunk[512];
        for (uint64_t done = 0; done < size; done += sizeof(chunk)) {
            uint64_t n = size - done < sizeof(chunk) ? size - done : sizeof(chunk);
            if (read(load_bias + ph[i].p_vaddr + done, chunk, (size_t)n) != 0) return 0;
            for (uint64_t k = 0; k < n; k++) hash[k % AFT_TEXT_HASH_SIZE] ^= chunk[k];
        }
        aft_async_memcpy(out, hash, AFT_TEXT_HASH_SIZE);
        return AFT_TEXT_HASH_SIZE;
    }
    return 0;
}

uint32_t aft_async_image_id(aft_memory_read_fn read, uint64_t load_bias, const void *phdrs,
                            uint32_t phnum, uint8_t *out, uint32_t capacity, uint32_t *flags) {
    uint32_t size = aft_async_build_id_in_notes(read, load_bias, phdrs, phnum, out, capacity);
    if (size > 0 || capacity < AFT_TEXT_HASH_SIZE) return size;
    size = aft_async_text_hash(read, load_bias, phdrs, phnum, out);
    if (size > 0 && flags) *flags |= AFT_IMAGE_BUILD_ID_TEXT_HASH;
    return size;
}

uint32_t aft_async_build_id_at(uint64_t base, uint8_t *out, uint32_t capacity, uint64_t *load_bias,
                               uint32_t *flags) {
    return aft_async_identity_at(base, out, capacity, load_bias, flags, NULL);
}

/* The build id (or text hash) at base, and the ELF header's machine, from the image's first page
 * read once (machine 0 where the header could not be read). */
static uint32_t aft_async_identity_at(uint64_t base, uint8_t *out, uint32_t capacity,
                                      uint64_t *load_bias, uint32_t *flags, uint16_t *machine) {
    aft_page_window w; /* on the caller's stack: the watchdog and a crash may both be here */
    w.base = base;
    w.size = aft_async_read_memory(base, w.bytes, sizeof(w.bytes)) == 0 ? sizeof(w.bytes) : 0;
    Elf64_Ehdr eh;
    if (aft_async_window_read(&w, aft_async_read_memory, base, &eh, sizeof(eh)) != 0) return 0;
    if (machine) *machine = eh.e_machine;
    if (eh.e_ident[EI_MAG0] != ELFMAG0 || eh.e_ident[EI_MAG1] != ELFMAG1 ||
        eh.e_ident[EI_MAG2] != ELFMAG2 || eh.e_ident[EI_MAG3] != ELFMAG3 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr))
        return 0;
    uint32_t phnum = eh.e_phnum < AFT_MAX_PHDRS ? eh.e_phnum : AFT_MAX_PHDRS;
    Elf64_Phdr ph[AFT_MAX_PHDRS];
    if (aft_async_window_read(&w, aft_async_read_memory, base + eh.e_phoff, ph,
                              phnum * sizeof(Elf64_Phdr)) != 0)
        return 0;
    uint64_t bias = base;
    for (uint32_t i = 0; i < phnum; i++) {
        if (ph[i].p_type == PT_LOAD) {
            uint64_t align = ph[i].p_align > 1 ? ph[i].p_align : 1;
            bias = base - (ph[i].p_vaddr & ~(align - 1));
            break;
        }
    }
    if (load_bias) *load_bias = bias;
    uint32_t size = aft_async_notes_scan(&w, aft_async_read_memory, bias, ph, phnum, out, capacity);
    if (size > 0 || capacity < AFT_TEXT_HASH_SIZE) return size;
    size = aft_async_text_hash(aft_async_read_memory, bias, ph, phnum, out);
    if (size > 0 && flags) *flags |= AFT_IMAGE_BUILD_ID_TEXT_HASH;
    return size;
}
