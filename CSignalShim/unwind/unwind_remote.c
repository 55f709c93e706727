/*
 * unwind_remote.c: NORMAL-TIME CODE, run at the next launch (never in a handler, never in the
 * crashed process). Unwinds a crashed thread from what its crash file holds, the registers at
 * the fault and the bytes of its stack, against the images on disk, with libunwind's remote
 * interface: the unwind tables (.eh_frame_hdr and .eh_frame) are read from each image's file,
 * checked by its build id, and the stack from the captured bytes. As Breakpad and Crashpad
 * leave the unwinding to a later process, the handler only copies. An image whose file is
 * gone, changed or unreadable gives no tables; libunwind then walks frame pointers where it can.
 */
#include <libunwind.h> /* without UNW_LOCAL_ONLY: the remote interface (libunwind-generic) */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "CSignalShim.h"
#include "shim_internal.h"
#include "unwind_remote_internal.h"

/* libunwind's remote interface, loaded at its first use (dlopen): an app that never reads a
 * crash with deferred threads maps none of it. */
typedef struct aft_remote_libunwind {
    unw_addr_space_t (*create_addr_space)(unw_accessors_t *, int);
    void (*destroy_addr_space)(unw_addr_space_t);
    int (*init_remote)(unw_cursor_t *, unw_addr_space_t, void *);
    int (*step)(unw_cursor_t *);
    int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
    int (*is_signal_frame)(unw_cursor_t *); /* optional */
    /* Not in the public headers, exported by libunwind-generic: the lookup in an .eh_frame_hdr
     * table that libunwind's own ptrace and core-file accessors use. */
    int (*search_unwind_table)(unw_addr_space_t, unw_word_t, unw_dyn_info_t *, unw_proc_info_t *,
                               int, void *);
} aft_remote_libunwind;

AFT_SMALL_STATE static aft_remote_libunwind aft_g_remote;
AFT_SMALL_STATE static int aft_g_remote_loaded; /* 1 loaded, -1 cannot be */
AFT_SMALL_STATE static pthread_once_t aft_g_remote_once = PTHREAD_ONCE_INIT;

#define AFT_REMOTE_STR_(x) #x
#define AFT_REMOTE_STR(x) AFT_REMOTE_STR_(x) /* after expansion: unw_step -> _Ux86_64_step */
#if defined(__x86_64__)
#define AFT_REMOTE_LIBRARY "libunwind-x86_64.so.8"
#else
#define AFT_REMOTE_LIBRARY "libunwind-aarch64.so.8"
#endif

static void aft_remote_load(void) {
    void *h = dlopen(AFT_REMOTE_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) h = dlopen("libunwind-generic.so", RTLD_NOW | RTLD_LOCAL);
    aft_g_remote_loaded = -1;
    if (h == NULL) return;
    aft_install_images_changed(); /* the loader's list changed: read again at the next sample */
    aft_remote_libunwind *r = &aft_g_remote;
    *(void **)&r->create_addr_space = dlsym(h, AFT_REMOTE_STR(unw_create_addr_space));
    *(void **)&r->destroy_addr_space = dlsym(h, AFT_REMOTE_STR(unw_destroy_addr_space));
    *(void **)&r->init_remote = dlsym(h, AFT_REMOTE_STR(unw_init_remote));
    *(void **)&r->step = dlsym(h, AFT_REMOTE_STR(unw_step));
    *(void **)&r->get_reg = dlsym(h, AFT_REMOTE_STR(unw_get_reg));
    *(void **)&r->is_signal_frame = dlsym(h, AFT_REMOTE_STR(unw_is_signal_frame));
    *(void **)&r->search_unwind_table =
        dlsym(h, AFT_REMOTE_STR(UNW_OBJ(dwarf_search_unwind_table)));
    if (r->create_addr_space && r->destroy_addr_space && r->init_remote && r->step && r->get_reg &&
        r->search_unwind_table) {
        aft_g_remote_loaded = 1;
    } else {
        dlclose(h);
    }
}

static int aft_remote_access_mem(unw_addr_space_t as, unw_word_t address, unw_word_t *value,
                                 int write, void *arg) {
    (void)as;
    aft_remote_state *s = arg;
    if (write) return -UNW_EREADONLYREG;
    uint64_t word;
    if (aft_remote_read_word(s, address, &word)) {
        *value = word;
        return 0;
    }
    return aft_remote_read_image(s, address, value, sizeof(*value)) ? 0 : -UNW_EINVAL;
}

/* libunwind's register number to the crash file's register index (aft_crash_info order). */
static int aft_remote_register_index(unw_regnum_t reg) {
#if defined(__x86_64__)
    /* gregs order: r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip */
    static const int map[17] = {13, 12, 14, 11, 9, 8, 10, 15, 0, 1, 2, 3, 4, 5, 6, 7, 16};
    return reg >= 0 && reg < 17 ? map[reg] : -1;
#else
    return reg >= 0 && reg <= 33 ? (int)reg : -1; /* x0..x30, sp, pc, pstate */
#endif
}

static int aft_remote_access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *value,
                                 int write, void *arg) {
    (void)as;
    aft_remote_state *s = arg;
    int index = aft_remote_register_index(reg);
    if (write || index < 0 || (uint32_t)index >= s->register_count) return -UNW_EBADREG;
    *value = s->registers[index];
    return 0;
}

static int aft_remote_access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *value,
                                   int write, void *arg) {
    (void)as, (void)reg, (void)value, (void)write, (void)arg;
    return -UNW_EBADREG;
}

static int aft_remote_resume(unw_addr_space_t as, unw_cursor_t *cursor, void *arg) {
    (void)as, (void)cursor, (void)arg;
    return -UNW_EINVAL;
}

static int aft_remote_dyn_list(unw_addr_space_t as, unw_word_t *list, void *arg) {
    (void)as, (void)list, (void)arg;
    return -UNW_ENOINFO;
}

/* No names here (the next launch symbolicates by itself). Documented as optional, but the arm64
 * step of libunwind 1.8 calls it without a check for NULL. */
static int aft_remote_proc_name(unw_addr_space_t as, unw_word_t ip, char *buf, size_t size,
                                unw_word_t *offset, void *arg) {
    (void)as, (void)ip, (void)buf, (void)size, (void)offset, (void)arg;
    return -UNW_ENOINFO;
}

/* libunwind frees what its table search allocates itself; nothing of ours to release. */
static void aft_remote_put_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg) {
    (void)as, (void)pi, (void)arg;
}

/* An .eh_frame_hdr's encoded value's size: 4 or 8 bytes, 0 for an encoding not handled. */
static uint32_t aft_remote_encoded_size(uint8_t encoding) {
    switch (encoding & 0x0f) {
    case 0x03: /* udata4 */
    case 0x0b: /* sdata4 */
        return 4;
    case 0x00: /* absptr */
    case 0x04: /* udata8 */
    case 0x0c: /* sdata8 */
        return 8;
    default:
        return 0;
    }
}

/* 1 with di describing the .eh_frame_hdr search table of the image that holds pc; 0 when there
 * is no usable one (no image, no file, no header, a form not handled). */
static int aft_remote_table(aft_remote_state *s, uint64_t pc, unw_dyn_info_t *di) {
    uint32_t i;
    if (!aft_remote_image_index(s, pc, &i)) return 0;
    aft_remote_file *f = aft_remote_open(s, i);
    if (f == NULL || f->eh_hdr_vaddr == 0) return 0;
    const aft_remote_image *image = &s->in->images[i];
    uint64_t hdr = image->load_bias + f->eh_hdr_vaddr;
    uint8_t head[4];
    if (!aft_remote_read_image(s, hdr, head, sizeof(head))) return 0;
    /* version 1; the FDE count, then a table of (initial pc, FDE) pairs, 4-byte offsets from
     * the header (datarel | sdata4), the form every linker writes. */
    uint32_t pointer_size = aft_remote_encoded_size(head[1]);
    uint32_t count_size = aft_remote_encoded_size(head[2]);
    if (head[0] != 1 || pointer_size == 0 || count_size == 0 || head[3] != 0x3b) return 0;
    uint64_t count = 0;
    if (!aft_remote_read_image(s, hdr + 4 + pointer_size, &count, count_size) || count == 0 ||
        count > (1u << 24))
        return 0;
    memset(di, 0, sizeof(*di));
    di->format = UNW_INFO_FORMAT_REMOTE_TABLE;
    di->start_ip = image->start;
    di->end_ip = image->end;
    di->u.rti.name_ptr = 0;
    di->u.rti.segbase = hdr;
    di->u.rti.table_data = hdr + 4 + pointer_size + count_size;
    di->u.rti.table_len = (count * 8) / sizeof(unw_word_t);
    return 1;
}

static int aft_remote_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
                                     int need_unwind_info, void *arg) {
    unw_dyn_info_t di;
    if (!aft_remote_table(arg, ip, &di)) return -UNW_ENOINFO;
    return aft_g_remote.search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
}

#if defined(UNW_VERSION) && UNW_VERSION >= UNW_VERSION_CODE(1, 8)
/* Accessors libunwind 1.8 added, given too (its arm64 step calls optional accessors without a
 * check for NULL: a crash on a frame without unwind tables with Debian trixie's 1.8.1): the
 * function's range from its table entry, and the bits of a return address above the 48-bit
 * user address space (a pointer authentication code). */
static int aft_remote_ip_range(unw_addr_space_t as, unw_word_t ip, unw_word_t *start,
                               unw_word_t *end, void *arg) {
    unw_proc_info_t pi;
    memset(&pi, 0, sizeof(pi));
    int r = aft_remote_find_proc_info(as, ip, &pi, 0, arg);
    if (r < 0) return r;
    *start = pi.start_ip;
    *end = pi.end_ip;
    return 0;
}

static unw_word_t aft_remote_ptrauth_mask(unw_addr_space_t as, void *arg) {
    (void)as, (void)arg;
    return ~(unw_word_t)0x0000ffffffffffffull;
}
#endif

#if defined(__x86_64__)
#define AFT_REMOTE_MAX_THUNKS 16u /* frames found past functions without a table, a thread */

/* 0 when the image that holds pc has a usable table with no entry for pc (1: an entry covers
 * it; -1: no table to tell, where libunwind's frame-pointer step is all there is). Nothing is
 * allocated without the unwind info. */
static int aft_remote_covered(unw_addr_space_t as, aft_remote_state *s, uint64_t pc) {
    unw_dyn_info_t di;
    unw_proc_info_t pi;
    if (!aft_remote_table(s, pc, &di)) return -1;
    memset(&pi, 0, sizeof(pi));
    return aft_g_remote.search_unwind_table(as, pc, &di, &pi, 0, s) == 0 ? 1 : 0;
}

/* The cursor's frame's registers in crash-file order: those it knows, the last start's for the
 * rest. */
static void aft_remote_frame_registers(const aft_remote_libunwind *u, unw_cursor_t *cursor,
                                       const aft_remote_state *s, uint64_t *out) {
    memcpy(out, s->registers, s->register_count * sizeof(uint64_t));
    for (unw_regnum_t reg = 0; reg <= UNW_X86_64_RIP; reg++) {
        unw_word_t value;
        int index = aft_remote_register_index(reg);
        if (index >= 0 && (uint32_t)index < s->register_count &&
            u->get_reg(cursor, reg, &value) == 0)
            out[index] = value;
    }
}
#endif

uint32_t aft_remote_unwind(const aft_remote_unwind_input *in, uint64_t *frames, uint32_t capacity,
                           uint32_t *truncated) {
    *truncated = 0;
#if defined(__x86_64__)
    const uint32_t here = AFT_ARCH_X86_64;
#else
    const uint32_t here = AFT_ARCH_ARM64;
#endif
    if (in == NULL || capacity == 0 || in->arch != here || in->register_count == 0) return 0;
    pthread_once(&aft_g_remote_once, aft_remote_load);
    if (aft_g_remote_loaded != 1) return 0; /* no libunwind: the caller walks frame pointers */
    const aft_remote_libunwind *u = &aft_g_remote;
    aft_remote_state s = {.in = in, .files = calloc(in->image_count + 1, sizeof(aft_remote_file))};
    if (s.files == NULL) return 0;
    s.register_count =
        in->register_count < AFT_REMOTE_REGISTERS ? in->register_count : AFT_REMOTE_REGISTERS;
    memcpy(s.registers, in->registers, s.register_count * sizeof(uint64_t));
    unw_accessors_t accessors = {
        .find_proc_info = aft_remote_find_proc_info,
        .put_unwind_info = aft_remote_put_info,
        .get_dyn_info_list_addr = aft_remote_dyn_list,
        .access_mem = aft_remote_access_mem,
        .access_reg = aft_remote_access_reg,
        .access_fpreg = aft_remote_access_fpreg,
        .resume = aft_remote_resume,
        .get_proc_name = aft_remote_proc_name,
#if defined(UNW_VERSION) && UNW_VERSION >= UNW_VERSION_CODE(1, 8)
        .get_proc_ip_range = aft_remote_ip_range,
        .ptrauth_insn_mask = aft_remote_ptrauth_mask,
#endif
    };
    uint32_t n = 0;
    unw_addr_space_t as = u->create_addr_space(&accessors, 0);
    unw_cursor_t cursor;
    if (as != NULL && u->init_remote(&cursor, as, &s) == 0) {
        unw_word_t last_sp = 0;
#if defined(__x86_64__)
        uint32_t thunks = 0;
        uint64_t reported = 0; /* the return address of a frame started at it less one */
        int exact = 1; /* the frame's pc is not a return address: the first, or past a signal */
#endif
        for (;;) {
            unw_word_t ip = 0, sp = 0;
            if (u->get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
            if (u->get_reg(&cursor, UNW_REG_SP, &sp) < 0) break;
            if (n > 0 && sp < last_sp) break; /* a stack runs one way: a loop otherwise */
            last_sp = sp;
#if defined(__aarch64__)
            ip &= 0x0000ffffffffffffull; /* a return address signed by pointer authentication */
#endif
#if defined(__x86_64__)
            /* A return address less one is the call the frame returns from. */
            int is_return = reported != 0 || !exact;
            uint64_t at = reported != 0 ? (uint64_t)ip : (uint64_t)ip - (is_return ? 1 : 0);
            frames[n++] = reported != 0 ? reported : (uint64_t)ip;
            reported = 0;
#else
            frames[n++] = (uint64_t)ip;
#endif
            if (n == capacity) {
                *truncated = u->step(&cursor) > 0;
                break;
            }
#if defined(__x86_64__)
            /* A function without a table entry and without a frame record: its caller from its
             * prologue, the cursor started again there. */
            uint64_t registers[AFT_REMOTE_REGISTERS], ret = 0;
            if (is_return && thunks < AFT_REMOTE_MAX_THUNKS &&
                aft_remote_covered(as, &s, at) == 0) {
                aft_remote_frame_registers(u, &cursor, &s, registers);
                if (aft_remote_past_thunk(&s, at, sp, registers, &ret)) {
                    thunks++;
                    memcpy(s.registers, registers, s.register_count * sizeof(uint64_t));
                    if (u->init_remote(&cursor, as, &s) != 0) {
                        frames[n++] = ret; /* the caller found, where nothing follows it */
                        break;
                    }
                    reported = ret;
                    exact = 0;
                    continue;
                }
            }
            exact = u->is_signal_frame != NULL && u->is_signal_frame(&cursor) > 0;
#endif
            if (u->step(&cursor) <= 0) break;
        }
    }
    if (as != NULL) u->destroy_addr_space(as);
    aft_remote_close_files(&s);
    return n;
}
