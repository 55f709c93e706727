/*
 * images.c: NORMAL-TIME CODE (never runs in a signal handler). The images loaded at start and
 * their GNU build ids (or text hashes, for images linked without one), read directly from the mapped images through dl_iterate_phdr: no
 * system call per image (process_vm_readv, which hardened services refuse, is never used),
 * and the loader's lock held while its list of objects is read. Also opens what the crash
 * path reads memory through (/proc/self/mem, a pipe).
 */
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "shim_internal.h"

void aft_memory_reader_prepare(void) {
    /* Opens the descriptors the first time (and again in a forked child, or when the app
     * closed them); otherwise two fstat calls. */
    aft_async_memory_reader_refresh();
}

uint32_t aft_images_from_maps_fd(int fd, aft_image *images, uint32_t capacity, int read_build_ids,
                                 const char *main_executable_path, uint32_t *truncated) {
    /* On the heap for the call: a thread-local would put its 24 KiB in the static TLS of every
     * thread the app has (zero-filled at each one's start). */
    aft_maps_scratch *scratch = malloc(sizeof(*scratch));
    if (scratch == NULL) {
        if (truncated) *truncated = 1;
        return 0;
    }
    if (read_build_ids) aft_memory_reader_prepare();
    uint32_t n = aft_async_images_from_fd(scratch, fd, images, capacity, read_build_ids,
                                          main_executable_path, truncated);
    free(scratch);
    return n;
}

uint32_t aft_build_id_at(uint64_t base, uint8_t *out, uint32_t capacity, uint64_t *load_bias,
                         uint32_t *flags) {
    aft_memory_reader_prepare();
    return aft_async_build_id_at(base, out, capacity, load_bias, flags);
}

/* Memory inside a loaded object's PT_LOAD segments: mapped, so read directly. */
static int aft_read_mapped(uint64_t address, void *out, size_t size) {
    memcpy(out, (const void *)(uintptr_t)address, size);
    return 0;
}

typedef struct aft_object_scan {
    aft_loaded_object *objects;
    uint32_t capacity, count;
    int signature_valid;
    uint64_t link_count, link_hash;
    int signature_only;
    aft_link_map_snapshot *signature; /* where the nodes go (may be NULL) */
} aft_object_scan;

/* Whether [address, address + size) lies in a readable PT_LOAD segment of the object. */
static int aft_in_readable_load(const struct dl_phdr_info *info, uint64_t address, uint64_t size) {
    for (uint32_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R)) continue;
        uint64_t start = info->dlpi_addr + ph->p_vaddr;
        if (address >= start && address + size <= start + ph->p_memsz) return 1;
    }
    return 0;
}

static int aft_scan_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    aft_object_scan *scan = data;
    if (scan->count == 0 && !scan->signature_valid) {
        /* The loader's lock is held for this callback: its list cannot change meanwhile. */
        aft_link_map_snapshot *s = scan->signature;
        uint32_t ignored = 0;
        scan->signature_valid = aft_async_link_map_walk(
            aft_read_mapped, &scan->link_count, &scan->link_hash, s ? s->nodes : NULL,
            s ? AFT_MAX_IMAGES : 0, s ? &s->node_count : &ignored);
        if (scan->signature_only) return 1;
    }
    if (scan->count == scan->capacity) return 1;
    uint64_t lowest = UINT64_MAX;
    for (uint32_t i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD && info->dlpi_phdr[i].p_vaddr < lowest)
            lowest = info->dlpi_phdr[i].p_vaddr;
    if (lowest == UINT64_MAX) return 0;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) page = 4096;
    aft_loaded_object *object = &scan->objects[scan->count];
    memset(object, 0, sizeof(*object));
    object->start = (info->dlpi_addr + lowest) & ~((uint64_t)page - 1);
    object->load_bias = info->dlpi_addr;
    /* Only notes inside a readable loaded segment are read directly. */
    int notes_mapped = 1;
    for (uint32_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_NOTE &&
            !aft_in_readable_load(info, info->dlpi_addr + ph->p_vaddr, ph->p_memsz))
            notes_mapped = 0;
    }
    if (notes_mapped)
        object->build_id_size =
            aft_async_image_id(aft_read_mapped, info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum,
                               object->build_id, AFT_BUILD_ID_CAPACITY, &object->flags);
    scan->count++;
    return 0;
}

uint32_t aft_loaded_objects(aft_loaded_object *objects, uint32_t capacity,
                            aft_link_map_snapshot *signature) {
    aft_object_scan scan = {.objects = objects, .capacity = capacity};
    dl_iterate_phdr(aft_scan_object, &scan);
    if (signature) {
        signature->valid = scan.signature_valid;
        signature->count = scan.link_count;
        signature->hash = scan.link_hash;
    }
    return scan.count;
}

/* The loaded images from the loader's list, each with the extent /proc/self/maps shows (from
 * its first page to the end of its file's last mapped byte, rounded up to a page) but with the
 * path the loader opened, not the kernel's resolved one. */
typedef struct aft_loader_scan {
    aft_image *images;
    uint32_t capacity, count, truncated, seen;
    int usable;
    const char *main_path;
    uint64_t vdso;
    long page;
    aft_link_map_snapshot *signature;
} aft_loader_scan;

static int aft_has_prefix(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int aft_scan_image(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    aft_loader_scan *scan = data;
    if (scan->seen++ == 0) {
        /* The loader's lock is held for this callback: its list cannot change meanwhile. */
        aft_link_map_snapshot *s = scan->signature;
        s->valid = aft_async_link_map_walk(aft_read_mapped, &s->count, &s->hash, s->nodes,
                                           AFT_MAX_IMAGES, &s->node_count);
    }
    uint64_t lowest = UINT64_MAX, highest = 0;
    int executable = 0;
    for (uint32_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        if (ph->p_vaddr < lowest) lowest = ph->p_vaddr;
        if (ph->p_vaddr + ph->p_filesz > highest) highest = ph->p_vaddr + ph->p_filesz;
        if (ph->p_flags & PF_X) executable = 1;
    }
    if (!executable) return 0; /* no code: maps' reading leaves such a file out too */
    uint64_t mask = (uint64_t)scan->page - 1;
    uint64_t start = (info->dlpi_addr + lowest) & ~mask;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    uint32_t flags = 0;
    if (scan->seen == 1) { /* the loader lists the program first, unnamed */
        flags = AFT_IMAGE_MAIN_EXECUTABLE;
        if (scan->main_path && scan->main_path[0] != '\0') name = scan->main_path;
    } else if (start == scan->vdso) {
        flags = AFT_IMAGE_VDSO;
        name = "[vdso]";
    } else if (name[0] != '/' || aft_has_prefix(name, "/proc/") ||
               aft_has_prefix(name, "/memfd:")) {
        /* Not the file's absolute path (a relative dlopen, a descriptor's or a memfd's name):
         * maps tells what it is. */
        scan->usable = 0;
    }
    if (!scan->usable) return 1;
    if (scan->count == scan->capacity) {
        scan->truncated = 1;
        return 1;
    }
    aft_image *img = &scan->images[scan->count++];
    memset(img, 0, sizeof(*img));
    img->start = start;
    img->end = (info->dlpi_addr + highest + mask) & ~mask;
    img->load_bias = info->dlpi_addr;
    img->flags = flags;
    if (aft_async_copy_tail(img->path, AFT_PATH_CAPACITY, name, strlen(name)))
        img->flags |= AFT_IMAGE_PATH_TRUNCATED;
#if defined(__x86_64__)
    img->arch = AFT_ARCH_X86_64;
#elif defined(__aarch64__)
    img->arch = AFT_ARCH_ARM64;
#endif
    /* Only notes inside a readable loaded segment are read directly. */
    for (uint32_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_NOTE &&
            !aft_in_readable_load(info, info->dlpi_addr + ph->p_vaddr, ph->p_memsz))
            return 0;
    }
    img->build_id_size =
        aft_async_image_id(aft_read_mapped, info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum,
                           img->build_id, AFT_BUILD_ID_CAPACITY, &img->flags);
    if (img->build_id_size > 0) img->flags |= AFT_IMAGE_BUILD_ID_FROM_MEMORY;
    return 0;
}

uint32_t aft_images_from_loader(aft_image *images, uint32_t capacity, const char *main_path,
                                aft_link_map_snapshot *signature, int *usable,
                                uint32_t *truncated) {
    aft_loader_scan scan = {.images = images,
                            .capacity = capacity,
                            .usable = 1,
                            .main_path = main_path,
                            .vdso = (uint64_t)getauxval(AT_SYSINFO_EHDR),
                            .page = sysconf(_SC_PAGESIZE),
                            .signature = signature};
    if (scan.page <= 0) scan.page = 4096;
    signature->valid = 0;
    dl_iterate_phdr(aft_scan_image, &scan);
    /* In address order, as maps lists them: the crash path's lookups and comparisons rely on it. */
    for (uint32_t i = 1; i < scan.count; i++) {
        for (uint32_t k = i; k > 0 && images[k - 1].start > images[k].start; k--) {
            aft_image t = images[k];
            images[k] = images[k - 1];
            images[k - 1] = t;
        }
    }
    *usable = scan.usable && scan.count > 0;
    if (truncated) *truncated = scan.truncated;
    return scan.usable ? scan.count : 0;
}

typedef struct aft_main_scan {
    uint8_t *out;
    uint32_t capacity, size, flags, objects;
} aft_main_scan;

static int aft_scan_main(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    aft_main_scan *scan = data;
    if (scan->objects++ > 0 || scan->out == NULL) return 0; /* the others are only counted */
    for (uint32_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_NOTE &&
            !aft_in_readable_load(info, info->dlpi_addr + ph->p_vaddr, ph->p_memsz))
            return 0;
    }
    scan->size = aft_async_image_id(aft_read_mapped, info->dlpi_addr, info->dlpi_phdr,
                                    info->dlpi_phnum, scan->out, scan->capacity, &scan->flags);
    return 0;
}

uint32_t aft_main_executable_id(uint8_t *out, uint32_t capacity, uint32_t *flags,
                                uint32_t *object_count) {
    aft_main_scan scan = {.out = out, .capacity = capacity};
    dl_iterate_phdr(aft_scan_main, &scan);
    if (flags) *flags = scan.flags;
    if (object_count) *object_count = scan.objects;
    return scan.size;
}

int aft_link_map_signature_now(aft_link_map_snapshot *signature) {
    aft_object_scan scan = {.signature_only = 1, .signature = signature};
    dl_iterate_phdr(aft_scan_object, &scan);
    signature->valid = scan.signature_valid;
    signature->count = scan.link_count;
    signature->hash = scan.link_hash;
    return scan.signature_valid;
}

void aft_fill_build_ids(aft_image *images, uint32_t count, const aft_loaded_object *objects,
                        uint32_t object_count) {
#if defined(__x86_64__)
    const uint32_t arch = AFT_ARCH_X86_64;
#elif defined(__aarch64__)
    const uint32_t arch = AFT_ARCH_ARM64;
#else
    const uint32_t arch = AFT_ARCH_UNKNOWN;
#endif
    for (uint32_t i = 0; i < count; i++) {
        aft_image *img = &images[i];
        const aft_loaded_object *found = NULL;
        for (uint32_t k = 0; k < object_count && !found; k++)
            if (objects[k].start == img->start) found = &objects[k];
        if (found) {
            /* Loaded by the loader into this process: the machine is this process's. */
            memcpy(img->build_id, found->build_id, AFT_BUILD_ID_CAPACITY);
            img->build_id_size = found->build_id_size;
            if (found->build_id_size > 0) img->flags |= AFT_IMAGE_BUILD_ID_FROM_MEMORY;
            img->flags |= found->flags;
            img->load_bias = found->load_bias;
            img->arch = arch;
            continue;
        }
        /* Mapped by other means (an ELF file mmap'ed by hand): read without faulting. */
        aft_async_read_image_identity(img);
    }
}
