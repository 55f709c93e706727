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

/* libunwind's remote interface, loaded at its first use (dlopen): an app that never reads a
 * crash with deferred threads maps none of it. */
typedef struct aft_remote_libunwind {
    unw_addr_space_t (*create_addr_space)(unw_accessors_t *, int);
    void (*destroy_addr_space)(unw_addr_space_t);
    int (*init_remote)(unw_cursor_t *, unw_addr_space_t, void *);
    int (*step)(unw_cursor_t *);
    int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
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
    aft_remote_libunwind *r = &aft_g_remote;
    *(void **)&r->create_addr_space = dlsym(h, AFT_REMOTE_STR(unw_create_addr_space));
    *(void **)&r->destroy_addr_space = dlsym(h, AFT_REMOTE_STR(unw_destroy_addr_space));
    *(void **)&r->init_remote = dlsym(h, AFT_REMOTE_STR(unw_init_remote));
    *(void **)&r->step = dlsym(h, AFT_REMOTE_STR(unw_step));
    *(void **)&r->get_reg = dlsym(h, AFT_REMOTE_STR(unw_get_reg));
    *(void **)&r->search_unwind_table =
        dlsym(h, AFT_REMOTE_STR(UNW_OBJ(dwarf_search_unwind_table)));
    if (r->create_addr_space && r->destroy_addr_space && r->init_remote && r->step && r->get_reg &&
        r->search_unwind_table) {
        aft_g_remote_loaded = 1;
    } else {
        dlclose(h);
    }
}

#define AFT_REMOTE_MAX_FILE (1ull << 31) /* 2 GiB: larger is no image of ours */

typedef struct aft_remote_file {
    int tried;
    const uint8_t *map; /* the whole file, read-only; NULL: not usable */
    size_t size;
    const Elf64_Phdr *phdrs;
    uint32_t phnum;
    uint64_t eh_hdr_vaddr; /* 0: none */
} aft_remote_file;

typedef struct aft_remote_state {
    const aft_remote_unwind_input *in;
    aft_remote_file *files; /* one per image, opened on first use */
} aft_remote_state;

static int aft_remote_range(uint64_t offset, uint64_t size, uint64_t total) {
    return offset <= total && size <= total - offset;
}

/* The build id of the PT_NOTE segments of a mapped ELF file equals expected. */
static int aft_remote_build_id_matches(const aft_remote_file *f, const uint8_t *expected,
                                       uint32_t expected_size) {
    if (expected_size == 0) return 0;
    for (uint32_t i = 0; i < f->phnum; i++) {
        const Elf64_Phdr *p = &f->phdrs[i];
        if (p->p_type != PT_NOTE || !aft_remote_range(p->p_offset, p->p_filesz, f->size)) continue;
        uint64_t at = p->p_offset, end = p->p_offset + p->p_filesz;
        while (at + sizeof(Elf64_Nhdr) <= end) {
            Elf64_Nhdr n;
            memcpy(&n, f->map + at, sizeof(n));
            uint64_t name = at + sizeof(n), desc = name + ((n.n_namesz + 3u) & ~3u);
            uint64_t next = desc + ((n.n_descsz + 3u) & ~3u);
            if (next > end || next <= at) break;
            if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 &&
                memcmp(f->map + name, "GNU", 4) == 0)
                return n.n_descsz == expected_size &&
                       memcmp(f->map + desc, expected, expected_size) == 0;
            at = next;
        }
    }
    return 0;
}

/* Maps image i's file once: a regular file, an ELF of this machine with the recorded build id. */
static aft_remote_file *aft_remote_open(aft_remote_state *s, uint32_t i) {
    aft_remote_file *f = &s->files[i];
    if (f->tried) return f->map != NULL ? f : NULL;
    f->tried = 1;
    const aft_remote_image *image = &s->in->images[i];
    if (image->path == NULL || image->path[0] != '/') return NULL;
    int fd = open(image->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return NULL;
    struct stat st;
    void *map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size >= sizeof(Elf64_Ehdr) &&
        (uint64_t)st.st_size <= AFT_REMOTE_MAX_FILE)
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return NULL;
    f->map = map;
    f->size = (size_t)st.st_size;
    Elf64_Ehdr eh;
    memcpy(&eh, f->map, sizeof(eh));
#if defined(__x86_64__)
    const uint16_t machine = EM_X86_64;
#else
    const uint16_t machine = EM_AARCH64;
#endif
    int ok = memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
             eh.e_ident[EI_DATA] == ELFDATA2LSB && eh.e_machine == machine &&
             eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phoff % 8 == 0 &&
             aft_remote_range(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), f->size);
    if (ok) {
        f->phdrs = (const Elf64_Phdr *)(const void *)(f->map + eh.e_phoff);
        f->phnum = eh.e_phnum;
        ok = aft_remote_build_id_matches(f, image->build_id, image->build_id_size);
    }
    if (!ok) {
        munmap((void *)f->map, f->size);
        f->map = NULL;
        return NULL;
    }
    for (uint32_t k = 0; k < f->phnum; k++)
        if (f->phdrs[k].p_type == PT_GNU_EH_FRAME) f->eh_hdr_vaddr = f->phdrs[k].p_vaddr;
    return f;
}

static int aft_remote_image_index(const aft_remote_state *s, uint64_t address, uint32_t *out) {
    for (uint32_t i = 0; i < s->in->image_count; i++) {
        const aft_remote_image *image = &s->in->images[i];
        if (address >= image->start && address < image->end) {
            *out = i;
            return 1;
        }
    }
    return 0;
}

/* size bytes at the crashed process's address, from the file of the image mapped there. */
static int aft_remote_read_image(aft_remote_state *s, uint64_t address, void *out, size_t size) {
    uint32_t i;
    if (!aft_remote_image_index(s, address, &i)) return 0;
    aft_remote_file *f = aft_remote_open(s, i);
    if (f == NULL) return 0;
    uint64_t vaddr = address - s->in->images[i].load_bias;
    for (uint32_t k = 0; k < f->phnum; k++) {
        const Elf64_Phdr *p = &f->phdrs[k];
        if (p->p_type != PT_LOAD || vaddr < p->p_vaddr || vaddr - p->p_vaddr >= p->p_filesz ||
            p->p_filesz - (vaddr - p->p_vaddr) < size)
            continue;
        uint64_t offset = p->p_offset + (vaddr - p->p_vaddr);
        if (!aft_remote_range(offset, size, f->size)) return 0;
        memcpy(out, f->map + offset, size);
        return 1;
    }
    return 0;
}

static int aft_remote_access_mem(unw_addr_space_t as, unw_word_t address, unw_word_t *value,
                                 int write, void *arg) {
    (void)as;
    aft_remote_state *s = arg;
    if (write) return -UNW_EREADONLYREG;
    for (uint32_t i = 0; i < s->in->memory_count; i++) {
        const aft_remote_memory *m = &s->in->memory[i];
        if (address >= m->start && address - m->start < m->size &&
            m->size - (address - m->start) >= sizeof(*value)) {
            memcpy(value, m->bytes + (address - m->start), sizeof(*value));
            return 0;
        }
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
    if (write || index < 0 || (uint32_t)index >= s->in->register_count) return -UNW_EBADREG;
    *value = s->in->registers[index];
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

static int aft_remote_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
                                     int need_unwind_info, void *arg) {
    aft_remote_state *s = arg;
    uint32_t i;
    if (!aft_remote_image_index(s, ip, &i)) return -UNW_ENOINFO;
    aft_remote_file *f = aft_remote_open(s, i);
    if (f == NULL || f->eh_hdr_vaddr == 0) return -UNW_ENOINFO;
    const aft_remote_image *image = &s->in->images[i];
    uint64_t hdr = image->load_bias + f->eh_hdr_vaddr;
    uint8_t head[4];
    if (!aft_remote_read_image(s, hdr, head, sizeof(head))) return -UNW_ENOINFO;
    /* version 1; the FDE count, then a table of (initial pc, FDE) pairs, 4-byte offsets from
     * the header (datarel | sdata4), the form every linker writes. */
    uint32_t pointer_size = aft_remote_encoded_size(head[1]);
    uint32_t count_size = aft_remote_encoded_size(head[2]);
    if (head[0] != 1 || pointer_size == 0 || count_size == 0 || head[3] != 0x3b)
        return -UNW_ENOINFO;
    uint64_t count = 0;
    if (!aft_remote_read_image(s, hdr + 4 + pointer_size, &count, count_size) || count == 0 ||
        count > (1u << 24))
        return -UNW_ENOINFO;
    unw_dyn_info_t di;
    memset(&di, 0, sizeof(di));
    di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
    di.start_ip = image->start;
    di.end_ip = image->end;
    di.u.rti.name_ptr = 0;
    di.u.rti.segbase = hdr;
    di.u.rti.table_data = hdr + 4 + pointer_size + count_size;
    di.u.rti.table_len = (count * 8) / sizeof(unw_word_t);
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
        for (;;) {
            unw_word_t ip = 0, sp = 0;
            if (u->get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
            if (u->get_reg(&cursor, UNW_REG_SP, &sp) < 0) break;
            if (n > 0 && sp < last_sp) break; /* a stack runs one way: a loop otherwise */
            last_sp = sp;
#if defined(__aarch64__)
            ip &= 0x0000ffffffffffffull; /* a return address signed by pointer authentication */
#endif
            frames[n++] = (uint64_t)ip;
            if (n == capacity) {
                *truncated = u->step(&cursor) > 0;
                break;
            }
            if (u->step(&cursor) <= 0) break;
        }
    }
    if (as != NULL) u->destroy_addr_space(as);
    for (uint32_t i = 0; i < in->image_count; i++)
        if (s.files[i].map != NULL) munmap((void *)s.files[i].map, s.files[i].size);
    free(s.files);
    return n;
}
