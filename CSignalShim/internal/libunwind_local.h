/*
 * libunwind_local.h: libunwind's local interface (this process's own stacks), reached through a
 * table filled by dlopen at the first use instead of a link-time dependency: a process that
 * never hangs nor records an error maps no libunwind (three libraries with liblzma), and one
 * without libunwind installed walks frame pointers. Loaded at normal time only
 * (libunwind_load.c); crash-time code reads the table, or walks frame pointers while it is NULL.
 */
#ifndef AFT_LIBUNWIND_LOCAL_H
#define AFT_LIBUNWIND_LOCAL_H

#define UNW_LOCAL_ONLY
#include <libunwind.h>

typedef struct aft_libunwind {
    int (*init_local2)(unw_cursor_t *, unw_context_t *, int);
    int (*step)(unw_cursor_t *);
    int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
#if defined(__x86_64__)
    int (*getcontext)(unw_context_t *); /* elsewhere (arm64) the header's own inline code */
#endif
} aft_libunwind;

/* The table once loaded, else NULL: one atomic load, async-signal-safe. */
const aft_libunwind *aft_async_libunwind(void);
/* Normal time: loads libunwind once (dlopen; blocks while another thread holds the loader's
 * lock); the table, or NULL when it cannot be loaded (then for good). */
const aft_libunwind *aft_libunwind_load(void);
/* Crash-time side of a load another thread does: asks the watchdog's pinger thread to load it
 * and waits until wait_ns from now at most; the table, or NULL (frame pointers this time). */
const aft_libunwind *aft_async_libunwind_request(uint64_t wait_ns);

/* The calling thread's context, where libunwind's unw_getcontext is. */
#if defined(__x86_64__)
#define AFT_UNW_GETCONTEXT(u, context) ((u)->getcontext(context))
#else
#define AFT_UNW_GETCONTEXT(u, context) unw_getcontext(context)
#endif

#endif /* AFT_LIBUNWIND_LOCAL_H */
