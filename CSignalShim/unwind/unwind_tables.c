/*
 * unwind_tables.c: NORMAL-TIME CODE. Every loaded image's unwind table (the binary-search table
 * of its .eh_frame_hdr) registered with libunwind as dynamic unwind info, once, when libunwind
 * is loaded. libunwind looks there before it calls dl_iterate_phdr, so an unwinding helper finds
 * a frame's FDE without the loader's lock. A helper killed at its deadline inside
 * dl_iterate_phdr left that lock held for good: the app's next dlopen, C++ throw or backtrace
 * then waited forever (LoaderLockTests; about one kill in ten). The list follows libraries
 * loaded and unloaded later (aft_unwind_tables_refresh, from the run record's periodic update):
 * a new one is registered, a gone one cancelled. Only a pc outside every registered image (a
 * library loaded since the last refresh, a corrupt return address) still takes that lock.
 */
#include <elf.h>
#include <link.h>
#include <stddef.h>
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

/* One entry per executable segment of each image: a few dozen in a Swift server. An entry
 * cancelled (its image unloaded) is never reused: a helper walking the list at that moment
 * still follows its next pointer. */
#define AFT_UNWIND_TABLES_MAX 512u
typedef struct aft_unwind_table {
    unw_dyn_info_t di; /* in libunwind's list while live */
    uint8_t live;      /* registered and not cancelled */
    uint8_t seen;      /* its image was found by this sync */
} aft_unwind_table;
static aft_unwind_table aft_g_unwind_tables[AFT_UNWIND_TABLES_MAX];
AFT_SMALL_STATE static uint32_t aft_g_unwind_table_count; /* slots used, live or cancelled */
AFT_SMALL_STATE static uint32_t aft_g_unwind_tables_live;
AFT_SMALL_STATE static void (*aft_g_unwind_register)(unw_dyn_info_t *);
AFT_SMALL_STATE static void (*aft_g_unwind_cancel)(unw_dyn_info_t *);
/* The loader's counts of objects added and removed at the last registration. */
AFT_SMALL_STATE static unsigned long long aft_g_unwind_adds, aft_g_unwind_subs;

typedef struct aft_tables_scan {
    int changed_only; /* stop at the first object: only the counts are wanted */
    unsigned long long adds, subs;
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
    aft_tables_scan *scan = data;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
        scan->adds = info->dlpi_adds;
        scan->subs = info->dlpi_subs;
    }
    if (scan->changed_only) return 1;
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
        unw_word_t start = (unw_word_t)(info->dlpi_addr + segment->p_vaddr);
        uint32_t known = 0;
        for (; known < aft_g_unwind_table_count; known++) {
            const unw_dyn_info_t *k = &aft_g_unwind_tables[known].di;
            if (aft_g_unwind_tables[known].live && k->start_ip == start &&
                k->u.rti.table_data == (unw_word_t)(uintptr_t)p)
                break;
        }
        if (known < aft_g_unwind_table_count) { /* registered already, still there */
            aft_g_unwind_tables[known].seen = 1;
            continue;
        }
        if (aft_g_unwind_table_count == AFT_UNWIND_TABLES_MAX) continue; /* full: unregistered */
        uint32_t slot = aft_g_unwind_table_count++;
        unw_dyn_info_t *di = &aft_g_unwind_tables[slot].di;
        memset(di, 0, sizeof(*di));
        di->format = UNW_INFO_FORMAT_REMOTE_TABLE;
        di->start_ip = (unw_word_t)(info->dlpi_addr + segment->p_vaddr);
        di->end_ip = di->start_ip + (unw_word_t)segment->p_memsz;
        di->gp = gp;
        di->u.rti.name_ptr = (unw_word_t)(uintptr_t)info->dlpi_name;
        di->u.rti.segbase = (unw_word_t)(uintptr_t)hdr;
        di->u.rti.table_data = (unw_word_t)(uintptr_t)p;
        di->u.rti.table_len = (unw_word_t)(fde_count * 8u / sizeof(unw_word_t));
        aft_g_unwind_register(di);
        aft_g_unwind_tables[slot].live = 1;
        aft_g_unwind_tables[slot].seen = 1;
        aft_g_unwind_tables_live++;
    }
    return 0;
}

/* Registers what is loaded and not registered yet, cancels what is registered and gone. */
static void aft_unwind_tables_sync(void) {
    for (uint32_t i = 0; i < aft_g_unwind_table_count; i++) aft_g_unwind_tables[i].seen = 0;
    aft_tables_scan scan = {.changed_only = 0};
    dl_iterate_phdr(aft_register_image_tables, &scan);
    for (uint32_t i = 0; i < aft_g_unwind_table_count; i++) {
        if (!aft_g_unwind_tables[i].live || aft_g_unwind_tables[i].seen) continue;
        if (aft_g_unwind_cancel != NULL) aft_g_unwind_cancel(&aft_g_unwind_tables[i].di);
        aft_g_unwind_tables[i].live = 0;
        aft_g_unwind_tables_live--;
    }
    aft_g_unwind_adds = scan.adds;
    aft_g_unwind_subs = scan.subs;
}

uint32_t aft_unwind_tables_register(void (*register_table)(unw_dyn_info_t *),
                                    void (*cancel_table)(unw_dyn_info_t *)) {
    if (register_table != NULL && aft_g_unwind_register == NULL) {
        aft_g_unwind_register = register_table;
        aft_g_unwind_cancel = cancel_table;
        aft_unwind_tables_sync();
    }
    return aft_g_unwind_tables_live;
}

int aft_unwind_tables_refresh_locked(void) {
    if (aft_g_unwind_register == NULL) return 0;
    /* The loader's counts, from its first object: one short call while nothing changed. */
    aft_tables_scan scan = {.changed_only = 1};
    dl_iterate_phdr(aft_register_image_tables, &scan);
    if (scan.adds == aft_g_unwind_adds && scan.subs == aft_g_unwind_subs) return 0;
    aft_unwind_tables_sync();
    return 1;
}

uint32_t aft_unwind_tables_count(void) { return aft_g_unwind_tables_live; }

int aft_unwind_tables_cover(uint64_t address) {
    int covered = 0;
    for (uint32_t i = 0; i < aft_g_unwind_table_count && !covered; i++)
        covered = aft_g_unwind_tables[i].live && address >= aft_g_unwind_tables[i].di.start_ip &&
                  address < aft_g_unwind_tables[i].di.end_ip;
    return covered;
}
