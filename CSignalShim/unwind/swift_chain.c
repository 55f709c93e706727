/*
 * swift_chain.c: NORMAL-TIME CODE (never runs in a signal handler). What the walk of a thread's
 * Swift async callers needs (swift_async_internal.h), read once at the install's completion on
 * Aftermath's start thread: where the runtime's current-task word lies from a thread's thread
 * pointer, what an AsyncTask's first word holds, and the code of every image; and the calling
 * thread's chain, for a handled error.
 *
 * The current-task word is learnt, not assumed: on this thread (ours, running no task) every
 * word of the runtime's thread-local block is set to a marker of its own, swift_task_getCurrent
 * says which one it reads, and the block is put back at once. Its distance from the thread
 * pointer is the same in every thread, as for any library loaded with the program (static TLS);
 * a runtime loaded later (dlopen) gives words no task is found at, and the walk records nothing.
 */
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim_internal.h"
#include "swift_async_internal.h"

#define AFT_SWIFT_TLS_WORDS 64u
#define AFT_SWIFT_TLS_MARKER 0x5A17A5C000000000ull

typedef struct aft_swift_runtime_find {
    uint64_t symbol;     /* swift_task_getCurrent */
    void *tls_block;     /* this thread's block of the runtime's image */
    uint64_t tls_size;   /* its PT_TLS size */
    uint64_t code_start; /* the runtime image's code */
    uint64_t code_end;
} aft_swift_runtime_find;

static void aft_swift_async_add_code(aft_swift_async_state *s, uint64_t start, uint64_t end) {
    if (s->code_count >= AFT_SWIFT_ASYNC_CODE_RANGES || end <= start) return;
    /* From the table's end down, kept sorted by start: a new first slot, the lower starts
     * moved down into it. */
    uint32_t at = AFT_SWIFT_ASYNC_CODE_RANGES - 1u - s->code_count++;
    while (at + 1u < AFT_SWIFT_ASYNC_CODE_RANGES && s->code[at + 1u][0] <= start) {
        s->code[at][0] = s->code[at + 1u][0];
        s->code[at][1] = s->code[at + 1u][1];
        at++;
    }
    s->code[at][0] = start;
    s->code[at][1] = end;
}

static int aft_swift_async_image(struct dl_phdr_info *info, size_t size, void *data) {
    aft_swift_runtime_find *f = data;
    uint64_t start = UINT64_MAX, end = 0, tls_size = 0;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type == PT_TLS) tls_size = p->p_memsz;
        if (p->p_type != PT_LOAD || !(p->p_flags & PF_X)) continue;
        uint64_t lo = (uint64_t)info->dlpi_addr + p->p_vaddr, hi = lo + p->p_memsz;
        aft_swift_async_add_code(&aft_g_swift_async, lo, hi);
        if (lo < start) start = lo;
        if (hi > end) end = hi;
    }
    if (f->symbol >= start && f->symbol < end) {
        f->code_start = start;
        f->code_end = end;
        f->tls_size = tls_size;
        if (size >= offsetof(struct dl_phdr_info, dlpi_tls_data) + sizeof(void *))
            f->tls_block = info->dlpi_tls_data;
    }
    return 0;
}

/* Which word of block swift_task_getCurrent reads, or -1. */
static int aft_swift_async_learn_word(void *(*get_current)(void), uint64_t *block, uint32_t words) {
    uint64_t saved[AFT_SWIFT_TLS_WORDS];
    memcpy(saved, block, (size_t)words * 8);
    for (uint32_t i = 0; i < words; i++) block[i] = AFT_SWIFT_TLS_MARKER | ((uint64_t)i << 4);
    uint64_t got = (uint64_t)(uintptr_t)get_current();
    memcpy(block, saved, (size_t)words * 8);
    if ((got & ~0xFFFFull) != AFT_SWIFT_TLS_MARKER) return -1;
    uint64_t index = (got & 0xFFFFull) >> 4;
    return index < words && (got & 15u) == 0 ? (int)index : -1;
}

void aft_swift_async_prepare(void) {
    aft_swift_async_state *s = &aft_g_swift_async;
    if (atomic_load(&s->ready)) return;
    void *(*get_current)(void) = (void *(*)(void))dlsym(RTLD_DEFAULT, "swift_task_getCurrent");
    const uint64_t *metadata = dlsym(RTLD_DEFAULT, "_swift_concurrency_debug_asyncTaskMetadata");
    if (get_current == NULL || metadata == NULL || *metadata == 0) return; /* no Swift tasks */
    aft_swift_runtime_find f = {.symbol = (uint64_t)(uintptr_t)get_current};
    s->code_count = 0;
    dl_iterate_phdr(aft_swift_async_image, &f);
    if (f.tls_block == NULL || f.tls_size < 8 || f.code_end == 0) return;
    uint32_t words = (uint32_t)(f.tls_size / 8);
    if (words > AFT_SWIFT_TLS_WORDS) words = AFT_SWIFT_TLS_WORDS;
    int word = aft_swift_async_learn_word(get_current, f.tls_block, words);
    uint64_t tp = aft_async_arch_thread_pointer();
    if (word < 0 || tp == 0) return;
    s->tls_offset = (int64_t)((uint64_t)(uintptr_t)f.tls_block + (uint64_t)word * 8 - tp);
    s->task_metadata = *metadata;
    s->runtime_start = f.code_start;
    s->runtime_end = f.code_end;
    atomic_store(&s->ready, 1); /* published last */
}

uint32_t aft_current_swift_async_chain(aft_swift_async_link *out, uint32_t capacity) {
    uint64_t context = aft_async_arch_swift_context_now(); /* first: the caller's value */
    uint64_t scratch[AFT_SWIFT_ASYNC_MAX_LINKS][2];
    uint64_t tid = (uint64_t)syscall(SYS_gettid);
    return aft_async_swift_chain(tid, aft_async_arch_thread_pointer(), context,
                                 (uint64_t)(uintptr_t)__builtin_frame_address(0), out, capacity,
                                 scratch);
}
