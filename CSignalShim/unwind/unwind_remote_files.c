/*
 * unwind_remote_files.c: NORMAL-TIME CODE, run at the next launch (never in a handler, never in
 * the crashed process). The images of a crash as unwind_remote.c reads them: each file mapped
 * once, read-only, used only when it is a regular ELF file of this machine with the build id the
 * crash recorded, and the crashed process's bytes at an address read from that file.
 */
#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unwind_remote_internal.h"

int aft_remote_range(uint64_t offset, uint64_t size, uint64_t total) {
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
aft_remote_file *aft_remote_open(aft_remote_state *s, uint32_t i) {
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

int aft_remote_image_index(const aft_remote_state *s, uint64_t address, uint32_t *out) {
    for (uint32_t i = 0; i < s->in->image_count; i++) {
        const aft_remote_image *image = &s->in->images[i];
        if (address >= image->start && address < image->end) {
            *out = i;
            return 1;
        }
    }
    return 0;
}

/* The file-backed loadable segment that holds address, with its image's file and the address
 * as the file's virtual address; NULL when none does. */
static const Elf64_Phdr *aft_remote_segment(aft_remote_state *s, uint64_t address,
                                            aft_remote_file **file, uint64_t *vaddr) {
    uint32_t i;
    if (!aft_remote_image_index(s, address, &i)) return NULL;
    aft_remote_file *f = aft_remote_open(s, i);
    if (f == NULL) return NULL;
    *file = f;
    *vaddr = address - s->in->images[i].load_bias;
    for (uint32_t k = 0; k < f->phnum; k++) {
        const Elf64_Phdr *p = &f->phdrs[k];
        if (p->p_type == PT_LOAD && *vaddr >= p->p_vaddr && *vaddr - p->p_vaddr < p->p_filesz)
            return p;
    }
    return NULL;
}

/* size bytes at the crashed process's address, from the file of the image mapped there. */
int aft_remote_read_image(aft_remote_state *s, uint64_t address, void *out, size_t size) {
    aft_remote_file *f;
    uint64_t vaddr;
    const Elf64_Phdr *p = aft_remote_segment(s, address, &f, &vaddr);
    if (p == NULL || p->p_filesz - (vaddr - p->p_vaddr) < size) return 0;
    uint64_t offset = p->p_offset + (vaddr - p->p_vaddr);
    if (!aft_remote_range(offset, size, f->size)) return 0;
    memcpy(out, f->map + offset, size);
    return 1;
}

int aft_remote_read_word(const aft_remote_state *s, uint64_t address, uint64_t *value) {
    for (uint32_t i = 0; i < s->in->memory_count; i++) {
        const aft_remote_memory *m = &s->in->memory[i];
        if (address >= m->start && address - m->start < m->size &&
            m->size - (address - m->start) >= sizeof(*value)) {
            memcpy(value, m->bytes + (address - m->start), sizeof(*value));
            return 1;
        }
    }
    return 0;
}

static int aft_remote_function_order(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The file's function symbols (.symtab and .dynsym, defined, with a size) as sorted (start,
 * size) pairs: one pass to count, one to fill, a sort. Empty when there are none or memory runs
 * short. */
static void aft_remote_read_functions(aft_remote_file *f) {
    f->functions_read = 1;
    Elf64_Ehdr eh;
    memcpy(&eh, f->map, sizeof(eh));
    if (eh.e_shentsize != sizeof(Elf64_Shdr) ||
        !aft_remote_range(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), f->size))
        return;
    for (int fill = 0; fill < 2; fill++) {
        uint64_t count = 0;
        for (uint32_t k = 0; k < eh.e_shnum; k++) {
            Elf64_Shdr sh;
            memcpy(&sh, f->map + eh.e_shoff + (uint64_t)k * sizeof(sh), sizeof(sh));
            if ((sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
                sh.sh_entsize != sizeof(Elf64_Sym) ||
                !aft_remote_range(sh.sh_offset, sh.sh_size, f->size))
                continue;
            for (uint64_t at = 0; at + sizeof(Elf64_Sym) <= sh.sh_size; at += sizeof(Elf64_Sym)) {
                Elf64_Sym sym;
                memcpy(&sym, f->map + sh.sh_offset + at, sizeof(sym));
                if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF ||
                    sym.st_size == 0)
                    continue;
                if (fill && count < f->function_count) {
                    f->functions[2 * count] = sym.st_value;
                    f->functions[2 * count + 1] = sym.st_size;
                }
                count++;
            }
        }
        if (fill) break;
        if (count == 0 || count > (1u << 24)) return;
        f->functions = malloc((size_t)count * 2 * sizeof(uint64_t));
        if (f->functions == NULL) return;
        f->function_count = (uint32_t)count;
    }
    qsort(f->functions, f->function_count, 2 * sizeof(uint64_t), aft_remote_function_order);
}

int aft_remote_function_start(aft_remote_state *s, uint64_t address, uint64_t *start) {
    uint32_t i;
    if (!aft_remote_image_index(s, address, &i)) return 0;
    aft_remote_file *f = aft_remote_open(s, i);
    if (f == NULL) return 0;
    if (!f->functions_read) aft_remote_read_functions(f);
    uint64_t bias = s->in->images[i].load_bias, vaddr = address - bias;
    /* The last function that starts at or before vaddr; the one before it where sizes overlap
     * (an alias of another size) is not looked for. */
    uint32_t lo = 0, hi = f->function_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (f->functions[2 * mid] <= vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0) return 0;
    uint64_t first = f->functions[2 * (lo - 1)], size = f->functions[2 * (lo - 1) + 1];
    if (vaddr - first >= size) return 0;
    *start = first + bias;
    return 1;
}

void aft_remote_close_files(aft_remote_state *s) {
    for (uint32_t i = 0; i < s->in->image_count; i++) {
        if (s->files[i].map != NULL) munmap((void *)s->files[i].map, s->files[i].size);
        free(s->files[i].functions);
    }
    free(s->files);
}

int aft_remote_in_code(aft_remote_state *s, uint64_t address) {
    aft_remote_file *f;
    uint64_t vaddr;
    const Elf64_Phdr *p = aft_remote_segment(s, address, &f, &vaddr);
    return p != NULL && (p->p_flags & PF_X) != 0;
}
