/*
 * aftermath_format_images.h: the images of a crash or hang file in their compact form, part of
 * aftermath_format.h (which includes it at its end); the rules at the top of that file hold here.
 *
 * An IMAGES section gives each image 328 bytes, 256 of them for its path, which is most often
 * under 80 bytes: 19 KiB of a Swift app's 57 images, half a crash file, written at the crash.
 * From format version 3 the writers give the images read at start (those a crash or hang finds
 * unchanged) as two sections instead, one right after the other:
 *   IMAGE_LIST   entry_size AFT_IMAGE_ENTRY_SIZE: each image's aft_image up to its path, with
 *                path_size, its path's length in bytes;
 *   IMAGE_PATHS  entry_size 1: the list's paths, one after the other in list order, path_size
 *                bytes each, without a NUL.
 * A file has IMAGES or IMAGE_LIST, never both. A reader rebuilds each aft_image from its entry
 * and its path; a path_size beyond what IMAGE_PATHS holds, or beyond AFT_PATH_CAPACITY - 1,
 * makes the list unusable (read as no images, truncated).
 */
#ifndef AFTERMATH_FORMAT_IMAGES_H
#define AFTERMATH_FORMAT_IMAGES_H

#include <stddef.h>

#define AFT_SECTION_IMAGE_LIST 14u
#define AFT_SECTION_IMAGE_PATHS 15u
#define AFT_IMAGE_ENTRY_SIZE 72u /* offsetof(aft_image, path) */

/* An IMAGE_LIST entry: an aft_image's fields before its path, at the same offsets. */
typedef struct aft_image_entry {
    uint64_t start;
    uint64_t end;
    uint64_t load_bias;
    uint32_t flags;
    uint32_t build_id_size;
    uint8_t build_id[AFT_BUILD_ID_CAPACITY];
    uint32_t arch;
    uint32_t path_size; /* its path's bytes in IMAGE_PATHS */
} aft_image_entry;

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(aft_image_entry) == AFT_IMAGE_ENTRY_SIZE, "aft_image_entry size");
_Static_assert(offsetof(aft_image, path) == AFT_IMAGE_ENTRY_SIZE, "an entry is an image's prefix");
_Static_assert(offsetof(aft_image_entry, flags) == offsetof(aft_image, flags), "entry flags");
_Static_assert(offsetof(aft_image_entry, build_id) == offsetof(aft_image, build_id), "entry id");
_Static_assert(offsetof(aft_image_entry, arch) == offsetof(aft_image, arch), "entry arch");
_Static_assert(offsetof(aft_image_entry, path_size) == offsetof(aft_image, path_size),
               "entry size");
#endif

#endif /* AFTERMATH_FORMAT_IMAGES_H */
