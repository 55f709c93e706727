/*
 * known_images.c: NORMAL-TIME CODE (never runs in a signal handler). The images read at start,
 * kept as every report lists them (internal/known_images_internal.h): read at the install's
 * completion, read again after a library Aftermath loaded itself, copied out whole for Swift.
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shim_internal.h"

AFT_SMALL_STATE _Atomic uint32_t aft_g_known_image_count;
AFT_SMALL_STATE aft_known_link_map aft_g_known_link_map;

/* Reads the loaded images once at install: the main executable's build id goes into the
 * context, and every image's build id is kept so the crash path reads from memory only
 * images loaded later (dlopen). All of it from the loader's list (dl_iterate_phdr) under its
 * lock, without a system call: the images' extents from their program headers, their build
 * ids from their mapped notes, their paths as the loader opened them. Only where the loader
 * names an image otherwise than by an absolute path (a relative dlopen, a memfd) are the
 * extents and paths read from /proc/self/maps instead. What the read needs only meanwhile is
 * mapped for the call, or lies at the bottom of start's delivery thread's own stack: static, its
 * pages would stay in every app for good. */
typedef struct aft_images_scratch {
    aft_loaded_object objects[AFT_MAX_IMAGES];
    aft_link_map_snapshot before, after;
    aft_image read[AFT_MAX_IMAGES]; /* then kept as aft_g_known_images lists them */
} aft_images_scratch;

/* From /proc/self/maps, with the build ids from the loader's list: whether the snapshot holds
 * (no library came or went while maps were read). */
static uint32_t aft_images_from_maps(aft_images_scratch *s, const char *main_path, int *holds) {
    *holds = 0;
    uint32_t objects = aft_loaded_objects(s->objects, AFT_MAX_IMAGES, &s->before);
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    uint32_t truncated = 0;
    uint32_t n = aft_images_from_maps_fd(fd, s->read, AFT_MAX_IMAGES, 0, main_path, &truncated);
    close(fd);
    aft_fill_build_ids(s->read, n, s->objects, objects);
    aft_link_map_signature_now(&s->after);
    *holds = s->before.valid && s->after.valid && s->before.count == s->after.count &&
             s->before.hash == s->after.hash && !truncated && n > 0;
    return n;
}

void aft_prepare_images(aft_context *context) {
    aft_g_known_link_map.valid = 0;
    atomic_store(&aft_g_known_image_count, 0); /* a maps read meanwhile reuses none of them */
    /* On start's delivery thread, the bottom of its own stack: its release gives the pages
     * back with the stack's (a mapping of its own cost a map and an unmap, the unmap's TLB
     * flush an interrupt of every core the app runs on). */
    aft_images_scratch *s = aft_own_stack_scratch(sizeof(*s));
    const int mapped = s == NULL;
    if (mapped) {
        s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (s == MAP_FAILED) return;
    }
    /* Each record is cleared as it is read; the snapshots' own fields here. */
    memset(&s->before, 0, offsetof(aft_link_map_snapshot, nodes));
    memset(&s->after, 0, offsetof(aft_link_map_snapshot, nodes));
    int usable = 0, holds = 0;
    uint32_t truncated = 0;
    uint32_t n = aft_images_from_loader(s->read, AFT_MAX_IMAGES, context->executable_path,
                                        &s->after, &usable, &truncated);
    if (usable) {
        holds = s->after.valid && !truncated;
    } else {
        n = aft_images_from_maps(s, context->executable_path, &holds);
    }
    /* Kept as a report lists them: each image's fields, its path's own bytes after the others'
     * (a tenth of the pages the whole aft_image records took, and a crash writes them as are). */
    char *paths = aft_known_paths(n);
    for (uint32_t i = 0; i < n; i++) {
        aft_image *img = &s->read[i];
        img->path_size = (uint32_t)strnlen(img->path, AFT_PATH_CAPACITY - 1);
        memcpy(&aft_g_known_images[i], img, sizeof(aft_image_entry));
        memcpy(paths, img->path, img->path_size);
        paths += img->path_size;
    }
    aft_g_known_image_count = n;
    if (holds) {
        const aft_link_map_snapshot *after = &s->after;
        size_t nodes_at = ((size_t)(paths - aft_g_known.bytes) + 7) / sizeof(uint64_t);
        aft_g_known_link_map.count = after->count;
        aft_g_known_link_map.hash = after->hash;
        aft_g_known_link_map.node_count = after->node_count;
        aft_g_known_link_map.nodes_at = (uint32_t)nodes_at;
        memcpy(&aft_g_known.words[nodes_at], after->nodes,
               sizeof(after->nodes[0]) * after->node_count);
        atomic_thread_fence(memory_order_release); /* a crash that sees valid sees the rest */
        aft_g_known_link_map.valid = 1;
    }
    if (mapped) munmap(s, sizeof(*s));
    if (context->app_build_id_size > 0) return;
    for (uint32_t i = 0; i < n; i++) {
        if (aft_g_known_images[i].flags & AFT_IMAGE_MAIN_EXECUTABLE) {
            memcpy(context->app_build_id, aft_g_known_images[i].build_id, AFT_BUILD_ID_CAPACITY);
            context->app_build_id_size = aft_g_known_images[i].build_id_size;
            if (aft_g_known_images[i].flags & AFT_IMAGE_BUILD_ID_TEXT_HASH)
                memcpy(context->app_build_id + AFT_TEXT_HASH_SIZE, AFT_TEXT_HASH_MARKER,
                       sizeof(AFT_TEXT_HASH_MARKER));
            break;
        }
    }
}

uint32_t aft_known_images_copy(aft_image *images, uint32_t capacity) {
    uint32_t known = atomic_load(&aft_g_known_image_count), n = known < capacity ? known : capacity;
    const char *paths = aft_known_paths(known);
    for (uint32_t i = 0; i < n; i++) {
        memset(&images[i], 0, sizeof(aft_image));
        memcpy(&images[i], &aft_g_known_images[i], sizeof(aft_image_entry));
        memcpy(images[i].path, paths, images[i].path_size);
        paths += images[i].path_size;
    }
    return n;
}
