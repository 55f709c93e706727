/*
 * plt_binding.c: NORMAL-TIME CODE, test-only. Whether the main program's call slot for a
 * function (its R_*_JUMP_SLOT relocation's GOT entry) is still unbound: a program linked without
 * -z now binds each slot at its first call (glibc's lazy binding), and until then the slot holds
 * an address inside the program itself (its PLT). Read from the program's own dynamic section
 * in memory.
 */
#include "CHarnessFaults.h"

#include <elf.h>
#include <link.h>
#include <string.h>

#if defined(__x86_64__)
#define AFT_TEST_JUMP_SLOT R_X86_64_JUMP_SLOT
#elif defined(__aarch64__)
#define AFT_TEST_JUMP_SLOT R_AARCH64_JUMP_SLOT
#endif

typedef struct aft_test_slot_query {
    const char *name;
    int result;
} aft_test_slot_query;

/* The main program is the first object dl_iterate_phdr reports (an empty name). */
static int aft_test_slot_in_main(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    aft_test_slot_query *q = data;
    const ElfW(Dyn) *dynamic = NULL;
    uintptr_t low = UINTPTR_MAX, high = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC) dynamic = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
        if (ph->p_type == PT_LOAD) {
            uintptr_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
            if (start < low) low = start;
            if (end > high) high = end;
        }
    }
    if (dynamic == NULL) return 1;
    const ElfW(Rela) *relocations = NULL;
    const ElfW(Sym) *symbols = NULL;
    const char *strings = NULL;
    size_t bytes = 0;
    /* The loader has relocated these entries to run-time addresses. */
    for (const ElfW(Dyn) *d = dynamic; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_JMPREL) relocations = (const ElfW(Rela) *)d->d_un.d_ptr;
        if (d->d_tag == DT_PLTRELSZ) bytes = d->d_un.d_val;
        if (d->d_tag == DT_SYMTAB) symbols = (const ElfW(Sym) *)d->d_un.d_ptr;
        if (d->d_tag == DT_STRTAB) strings = (const char *)d->d_un.d_ptr;
    }
    if (relocations == NULL || symbols == NULL || strings == NULL) return 1;
    for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); i++) {
        const ElfW(Rela) *r = &relocations[i];
        if (ELF64_R_TYPE(r->r_info) != AFT_TEST_JUMP_SLOT) continue;
        if (strcmp(strings + symbols[ELF64_R_SYM(r->r_info)].st_name, q->name) != 0) continue;
        uintptr_t target = *(const uintptr_t *)(info->dlpi_addr + r->r_offset);
        q->result = target >= low && target < high ? 1 : 0;
        break;
    }
    return 1; /* the main program only */
}

int aft_test_call_slot_unbound(const char *name) {
    aft_test_slot_query q = {.name = name, .result = -1};
    if (name != NULL) dl_iterate_phdr(aft_test_slot_in_main, &q);
    return q.result;
}
