/*
 * link_map_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). The loader's list of loaded objects at a crash: its signature (has a
 * library come or gone since the images were read after start?), whether a pc lies in one of
 * those images, and the images of a crash that came before they were read.
 */
#include <fcntl.h>
#include <link.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdint.h>

#include "shim_internal.h"
#include "unwind_internal.h"

/* The public head of struct link_map. */
typedef struct {
    uint64_t addr, name, ld, next, prev;
} aft_link_map_head;

/* One node into the signature: where it is loaded, its name, its dynamic section. */
static uint64_t aft_async_link_map_mix(uint64_t h, const aft_link_map_head *entry) {
    uint64_t words[3] = {entry->addr, entry->name, entry->ld};
    for (int i = 0; i < 3; i++) {
        h ^= words[i];
        h *= 0x100000001B3ull;
        h ^= h >> 29;
    }
    return h;
}

/* The loader's list of loaded objects (struct link_map, reached from _r_debug): a count and a
 * hash of (l_addr, l_name, l_ld) of every entry. Equal to the signature taken at install means
 * no library was loaded or unloaded since, so the images read then are still the images now,
 * and /proc/self/maps (the handler's most expensive read, growing with every mapping of the
 * process) need not be read. Returns 0 when the list is being changed or cannot be read. */
int aft_async_link_map_signature_with(aft_memory_read_fn read, uint64_t *count, uint64_t *hash) {
    uint32_t nodes = 0;
    return aft_async_link_map_walk(read, count, hash, NULL, 0, &nodes);
}

int aft_async_link_map_walk(aft_memory_read_fn read, uint64_t *count, uint64_t *hash,
                            uint64_t *nodes, uint32_t capacity, uint32_t *node_count) {
    *node_count = 0;
    struct r_debug debug;
    if (read((uint64_t)(uintptr_t)&_r_debug, &debug, sizeof(debug)) != 0) return 0;
    if (debug.r_state != RT_CONSISTENT) return 0;
    uint64_t n = 0, h = 0xCBF29CE484222325ull;
    uint64_t at = (uint64_t)(uintptr_t)debug.r_map;
    while (at != 0) {
        aft_link_map_head entry;
        if (n == 4096 || read(at, &entry, sizeof(entry)) != 0) return 0;
        if (nodes != NULL && n < capacity) nodes[n] = at;
        h = aft_async_link_map_mix(h, &entry);
        n++;
        at = entry.next;
    }
    *count = n;
    *hash = h;
    *node_count = n <= capacity ? (uint32_t)n : 0;
    return 1;
}

/* The image read after start that holds pc (the index of aft_g_known_images, or before those
 * are read, of the images a crash read itself), its start and load bias; -1 when none does. */
static int aft_async_image_holding(uint64_t pc, uint64_t *start, uint64_t *load_bias) {
    if (aft_g_known_link_map.valid) {
        atomic_thread_fence(memory_order_acquire);
        uint32_t n = atomic_load(&aft_g_known_image_count);
        for (uint32_t i = 0; i < n && i < AFT_MAX_IMAGES; i++) {
            const aft_image_entry *img = &aft_g_known_images[i];
            if (pc < img->start || pc >= img->end) continue;
            *start = img->start;
            *load_bias = img->load_bias;
            return (int)i;
        }
        return -1;
    }
    uint32_t n = atomic_load(&aft_g_crash_image_count); /* a crash before the install completed */
    for (uint32_t i = 0; i < n && i < AFT_MAX_IMAGES; i++) {
        const aft_image *img = &aft_g_images[i];
        if (pc < img->start || pc >= img->end) continue;
        *start = img->start;
        *load_bias = img->load_bias;
        return (int)i;
    }
    return -1;
}

int aft_async_known_image_of(uint64_t pc) {
    uint64_t start = 0, load_bias = 0;
    return aft_async_image_holding(pc, &start, &load_bias);
}

int aft_async_known_image_range(uint64_t pc, uint64_t *start, uint64_t *load_bias) {
    return aft_async_image_holding(pc, start, load_bias) >= 0;
}

AFT_SMALL_STATE _Atomic uint32_t aft_g_crash_image_count;

/* A crash before the install's completion (right after start) has no images read after start:
 * it reads them itself, from /proc/self/maps with their build ids from memory, into
 * aft_g_images, once; they then stand for the images read after start. */
uint32_t aft_async_crash_read_images(aft_maps_scratch *scratch, const char *main_path,
                                     uint32_t *truncated) {
    *truncated = 0;
    int maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (maps < 0) return 0;
    uint32_t n = aft_async_images_from_fd(scratch, maps, aft_g_images, AFT_MAX_IMAGES, 1, main_path,
                                          truncated);
    close(maps);
    atomic_store(&aft_g_crash_image_count, n); /* seq_cst: the images are seen before it */
    return n;
}

int aft_async_pc_in_known_image(uint64_t pc) { return aft_async_known_image_of(pc) >= 0; }

/* The signature by plain loads, each of a node known when the images were read, in the place
 * it had then: those were live allocations, and a node freed since (dlclose) is no longer on
 * the list, so only a list corrupted to hold exactly such an address could lead there. Any
 * other node ends the walk (the list changed; the caller reads it another way). The nodes are
 * cold at a crash, and a walk waits for each in turn (56 libraries: 12 µs here): they are
 * prefetched first, all at once (a prefetch never faults, even at an address no longer mapped). */
int aft_async_link_map_signature_known(uint64_t *count, uint64_t *hash) {
    const aft_known_link_map *k = &aft_g_known_link_map;
    if (!k->valid || k->node_count == 0) return 0;
    atomic_thread_fence(memory_order_acquire); /* the nodes written before valid are seen */
    const uint64_t *nodes = &aft_g_known.words[k->nodes_at];
    for (uint32_t i = 0; i < k->node_count; i++)
        __builtin_prefetch((const void *)(uintptr_t)nodes[i]);
    struct r_debug debug;
    aft_async_memcpy(&debug, &_r_debug, sizeof(debug));
    if (debug.r_state != RT_CONSISTENT) return 0;
    uint64_t n = 0, h = 0xCBF29CE484222325ull;
    for (uint64_t at = (uint64_t)(uintptr_t)debug.r_map; at != 0; n++) {
        if (n >= k->node_count || nodes[n] != at) return 0;
        aft_link_map_head entry;
        aft_async_memcpy(&entry, (const void *)(uintptr_t)at, sizeof(entry));
        h = aft_async_link_map_mix(h, &entry);
        at = entry.next;
    }
    *count = n;
    *hash = h;
    return 1;
}

/* At crash time the list may be half-changed by another thread: read without faulting. */
int aft_async_link_map_signature(uint64_t *count, uint64_t *hash) {
    return aft_async_link_map_signature_with(aft_async_read_memory, count, hash);
}
