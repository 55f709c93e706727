/*
 * known_images_internal.h: the images read at start, as every report lists them. Part of
 * shim_internal.h (which includes it); not imported by Swift.
 *
 * They are kept the way a report's IMAGE_LIST and IMAGE_PATHS sections hold them
 * (aftermath_format_images.h), one right after the other in one buffer: count aft_image_entry
 * records, then each one's path_size path bytes, in order; then, 8-aligned, the loader's list
 * nodes when they were read (aft_g_known_link_map: its 4 KiB of node room took a page of its
 * own in every app). A report writes the two pieces from
 * where they are, and an app's pages hold no path's unused bytes: a Swift app's 57 images take
 * 2 pages instead of the 5 their aft_image records took. The buffer is .bss: only what the
 * images use is ever written. The count is aft_g_known_image_count (shim_internal.h).
 */
#ifndef AFT_KNOWN_IMAGES_INTERNAL_H
#define AFT_KNOWN_IMAGES_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "aftermath_format.h"

#define AFT_KNOWN_IMAGES_BYTES                                                                     \
    ((size_t)AFT_MAX_IMAGES * (AFT_IMAGE_ENTRY_SIZE + AFT_PATH_CAPACITY + sizeof(uint64_t)))

typedef union aft_known_images {
    aft_image_entry entries[AFT_KNOWN_IMAGES_BYTES / AFT_IMAGE_ENTRY_SIZE];
    uint64_t words[AFT_KNOWN_IMAGES_BYTES / sizeof(uint64_t)];
    char bytes[AFT_KNOWN_IMAGES_BYTES];
} aft_known_images;

/* In bss_pairs.c, right after the Swift async state, whose last bytes share its first page. */
extern aft_known_images *const aft_g_known_ref;
#define aft_g_known (*aft_g_known_ref)
#define aft_g_known_images (aft_g_known.entries)

/* The loader's list when the images were read (valid == 0: do not trust it): its signature,
 * and node_count nodes in order (0: not kept), from aft_g_known.words[nodes_at] on. */
typedef struct aft_known_link_map {
    uint64_t count, hash;
    int valid;
    uint32_t node_count;
    uint32_t nodes_at;
} aft_known_link_map;
extern aft_known_link_map aft_g_known_link_map;

/* Where the paths of count known images begin: right after their entries. */
static inline char *aft_known_paths(uint32_t count) {
    return aft_g_known.bytes + (size_t)count * AFT_IMAGE_ENTRY_SIZE;
}

/* Reads the images and the loader's list into aft_g_known (known_images.c, normal time); the
 * main executable's build id into context where it has none. */
void aft_prepare_images(aft_context *context);
/* The first capacity known images as whole aft_image records; their count. */
uint32_t aft_known_images_copy(aft_image *images, uint32_t capacity);

/* size bytes at the bottom of start's delivery thread's own stack, when the caller runs on it
 * with room to spare below and the thread has not yet given back its stack below its frame,
 * else NULL (memory.c). What the thread touches there goes back with the rest of that stack:
 * below its frame as it takes on a role, whole once it has ended. Not zero-filled where the
 * stack was used before. */
void *aft_own_stack_scratch(size_t size);

/* A library Aftermath loaded itself changed the loader's list: the images are read again by
 * aft_install_refresh_images, at normal time on one of Aftermath's threads (install.c). */
void aft_install_images_changed(void);
void aft_install_refresh_images(void);

#endif /* AFT_KNOWN_IMAGES_INTERNAL_H */
