/*
 * bss_pairs.c: NORMAL-TIME CODE, though none runs here. Where four large zero-fill tables lie,
 * two by two, so that the bytes an app uses of each pair share one page. Each table is sized
 * for the most a process may need (a thousand threads, hundreds of images) and only its first
 * entries are written in most apps: on its own, each took a page of private memory for a few
 * hundred bytes. In each pair, the first table keeps what is used at its end (the thread
 * registry's slots from the last one down; the Swift async state's code ranges from the last
 * one down, its fields after them) and the second at its start (the watchdog's fields and main
 * target; the known images), and the page where they meet holds AFT_PAIR_MEET bytes of the
 * first: the thread registry's last 64 slots, the Swift async state's fields and last 60
 * ranges. The owners (threads.c, hang/watchdog*.c, unwind/swift_chain*.c,
 * images/known_images.c) reach them through the constant pointers below, which the loader
 * relocates into a page every app has dirty already.
 */
#include <stddef.h>

#include "shim_internal.h"
#include "swift_async_internal.h"
#include "threads_internal.h"
#include "watchdog_internal.h"

#define AFT_PAGE 4096u
#define AFT_PAIR_MEET 1024u

typedef struct aft_pair_threads_watchdog {
    char unused[AFT_PAIR_MEET];
    aft_known_thread known_threads[AFT_KNOWN_THREADS];
    aft_watchdog watchdog;
} aft_pair_threads_watchdog;
_Static_assert(offsetof(aft_pair_threads_watchdog, watchdog) % AFT_PAGE == AFT_PAIR_MEET,
               "the registry's last slots and the watchdog's first fields share a page");

#define AFT_PAIR_ASYNC_PAD                                                                         \
    ((AFT_PAIR_MEET + AFT_PAGE - sizeof(aft_swift_async_state) % AFT_PAGE) % AFT_PAGE)
typedef struct aft_pair_async_images {
    char unused[AFT_PAIR_ASYNC_PAD == 0 ? AFT_PAGE : AFT_PAIR_ASYNC_PAD];
    aft_swift_async_state swift_async;
    aft_known_images known;
} aft_pair_async_images;
_Static_assert(offsetof(aft_pair_async_images, known) % AFT_PAGE == AFT_PAIR_MEET,
               "the Swift async state's last bytes and the known images' first share a page");

/* Page-aligned: where the two tables of a pair meet is a fixed place in a page. */
_Alignas(AFT_PAGE) aft_pair_threads_watchdog aft_g_pair_threads_watchdog;
_Alignas(AFT_PAGE) aft_pair_async_images aft_g_pair_async_images;

aft_known_thread *const aft_g_known_threads_ref = aft_g_pair_threads_watchdog.known_threads;
aft_watchdog *const aft_g_watchdog_ref = &aft_g_pair_threads_watchdog.watchdog;
aft_swift_async_state *const aft_g_swift_async_ref = &aft_g_pair_async_images.swift_async;
aft_known_images *const aft_g_known_ref = &aft_g_pair_async_images.known;
