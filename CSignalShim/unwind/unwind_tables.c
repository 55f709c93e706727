/*
 * unwind_tables.c: NORMAL-TIME CODE. Every loaded image's unwind table (the binary-search table
 * of its .eh_frame_hdr) registered with libunwind as dynamic unwind info, once, when libunwind
 * is loaded. libunwind looks there before it calls dl_iterate_phdr, so an unwinding helper finds
 * a frame's FDE without the loader's lock. A helper killed at its deadline inside
 * dl_iterate_phdr left that lock held for good: the app's next dlopen, C++ throw or backtrace
 * then waited forever (LoaderLockTests; about one kill in ten). Only a pc outside every image
 * registered here (a library loaded later, a corrupt return address) still goes that way.
 */
#include <elf.h>
#include <link.h>
#include <string.h>

#include "libunwind_local.h"
#include "shim_internal.h"
#include "unwind_internal.h"

/* DWARF pointer encodings (the .eh_frame_hdr fields'). */
#define AFT_DW_EH_PE_ABSPTR 0x00u
#define AFT_DW_EH_PE_UDATA4 0x03u
#define AFT_DW_EH_PE_SDATA4 0x0bu
#define AFT_DW_EH_PE_UDATA8 0x04u
#define AFT_DW_EH_PE_SDATA8 0x0cu
#define AFT_DW_EH_PE_PCREL 0x10u
#define AFT_DW_EH_PE_DATAREL 0x30u
#define AFT_DW_EH_PE_OMIT 0xffu

/* One entry per executable segment of each image: a few dozen in a Swift server. */
#define AFT_UNWIND_TABLES_MAX 512u
static unw_dyn_info_t aft_g_unwind_tables[AFT_UNWIND_TABLES_MAX];
AFT_SMALL_STATE static uint32_t aft_g_unwind_table_count;

typedef struct aft_tables_scan {
    void (*register_table)(unw_dyn_info_t *);
} aft_tables_scan;

/* A pointer of the encodings .eh_frame_hdr uses for its first two fields; 0 for any other. */
static int aft_read_encoded(const uint8_t **p, uint8_t encoding, uint64_t *out) {
    const uint8_t *at = *p;
    uint64_t value;
    switch (encoding & 0x0fu) {
    case AFT_DW_EH_PE_ABSPTR:
    case AFT_DW_EH_PE_UDATA8:
    case AFT_DW_EH_PE_SDATA8: {
        uint64_t v;
        memcpy(&v, at, 8);
        value = v;
        *p = at + 8;
        break;
    }
    case AFT_DW_EH_PE_UDATA4: {
        uint32_t v;
        memcpy(&v, at, 4);
        value = v;
        *p = at + 4;
        break;
    }
    case AFT_DW_EH_PE_SDATA4: {
        int32_t v;
        memcpy(&v, at, 4);
        value = (uint64_t)(int64_t)v;
        *p = at + 4;
        break;
    }
    default:
        return 0;
    }
    switch (encoding & 0x70u) {
    case 0:
        break;
    case AFT_DW_EH_PE_PCREL:
        value += (uint64_t)(uintptr_t)at;
        break;
    default:
        return 0;
    }
    *out = value;
    return 1;
}

static int aft_register_image_tables(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    aft_tables_scan *scan = data;
    const ElfW(Phdr) *eh = NULL, *dynamic = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME) eh = &info->dlpi_phdr[i];
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dynamic = &info->dlpi_phdr[i];
    }
    if (eh == NULL || eh->p_memsz < 12) return 0;
    const uint8_t *hdr = (const uint8_t *)(uintptr_t)(info->dlpi_addr + eh->p_vaddr);
    /* Version 1 with the sorted table libunwind searches (data-relative, signed 4 bytes). */
    if (hdr[0] != 1 || hdr[3] != (AFT_DW_EH_PE_DATAREL | AFT_DW_EH_PE_SDATA4)) return 0;
    const uint8_t *p = hdr + 4;
    uint64_t eh_frame = 0, fde_count = 0;
    if (hdr[1] == AFT_DW_EH_PE_OMIT || !aft_read_encoded(&p, hdr[1], &eh_frame) ||
        hdr[2] == AFT_DW_EH_PE_OMIT || !aft_read_encoded(&p, hdr[2], &fde_count) ||
        fde_count == 0 || fde_count > (eh->p_memsz - (uint64_t)(p - hdr)) / 8)
        return 0;
    /* The object's DT_PLTGOT, as libunwind takes it: what data-relative pointers add to. */
    unw_word_t gp = 0;
    if (dynamic != NULL) {
        for (const ElfW(Dyn) *d =
                 (const ElfW(Dyn) *)(uintptr_t)(info->dlpi_addr + dynamic->p_vaddr);
             d->d_tag != DT_NULL; d++) {
            if (d->d_tag == DT_PLTGOT) {
                gp = (unw_word_t)d->d_un.d_ptr;
                break;
            }
        }
    }
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *segment = &info->dlpi_phdr[i];
        if (segment->p_type != PT_LOAD || !(segment->p_flags & PF_X)) continue;
        if (aft_g_unwind_table_count == AFT_UNWIND_TABLES_MAX) return 1;
        unw_dyn_info_t *di = &aft_g_unwind_tables[aft_g_unwind_table_count++];
        memset(di, 0, sizeof(*di));
        di->format = UNW_INFO_FORMAT_REMOTE_TABLE;
        di->start_ip = (unw_word_t)(info->dlpi_addr + segment->p_vaddr);
        di->end_ip = di->start_ip + (unw_word_t)segment->p_memsz;
        di->gp = gp;
        di->u.rti.name_ptr = (unw_word_t)(uintptr_t)info->dlpi_name;
        di->u.rti.segbase = (unw_word_t)(uintptr_t)hdr;
        di->u.rti.table_data = (unw_word_t)(uintptr_t)p;
        di->u.rti.table_len = (unw_word_t)(fde_count * 8u / sizeof(unw_word_t));
        scan->register_table(di);
    }
    return 0;
}

uint32_t aft_unwind_tables_register(void (*register_table)(unw_dyn_info_t *)) {
    if (register_table == NULL || aft_g_unwind_table_count > 0) return aft_g_unwind_table_count;
    aft_tables_scan scan = {.register_table = register_table};
    dl_iterate_phdr(aft_register_image_tables, &scan);
    return aft_g_unwind_table_count;
}

uint32_t aft_unwind_tables_count(void) { return aft_g_unwind_table_count; }
