/*
 * unwind_cfi_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). The row of an image's unwind tables at a pc, as far as a walk from sp
 * needs it (unwind_from_sp_async.c): where the CFA is (rsp or rbp plus an offset) and where the
 * frame pointer was saved. The FDE is found by the binary search table of the image's
 * .eh_frame_hdr, in memory; its CIE's and its own instructions run up to the pc. Every read
 * goes through aft_async_read_memory. x86-64 only.
 */
#include <elf.h>
#include <stdint.h>

#include "unwind_internal.h"

#if defined(__x86_64__)

#define AFT_CFI_STATES 4u   /* remember_state depth */
#define AFT_CFI_BYTES 1024u /* an FDE's or a CIE's bytes read at most */

typedef struct aft_cfi_reader {
    const uint8_t *at, *end;
    int bad;
} aft_cfi_reader;

static uint64_t aft_cfi_uleb(aft_cfi_reader *r) {
    uint64_t value = 0;
    for (unsigned shift = 0; r->at < r->end; shift += 7) {
        uint8_t b = *r->at++;
        if (shift < 64) value |= (uint64_t)(b & 0x7F) << shift;
        if ((b & 0x80) == 0) return value;
    }
    r->bad = 1;
    return 0;
}

static int64_t aft_cfi_sleb(aft_cfi_reader *r) {
    int64_t value = 0;
    unsigned shift = 0;
    while (r->at < r->end) {
        uint8_t b = *r->at++;
        if (shift < 64) value |= (int64_t)((uint64_t)(b & 0x7F) << shift);
        shift += 7;
        if ((b & 0x80) == 0) {
            if (shift < 64 && (b & 0x40)) value |= -((int64_t)1 << shift);
            return value;
        }
    }
    r->bad = 1;
    return 0;
}

static uint64_t aft_cfi_fixed(aft_cfi_reader *r, unsigned size) {
    uint64_t value = 0;
    if ((size_t)(r->end - r->at) < size) {
        r->bad = 1;
        return 0;
    }
    for (unsigned i = 0; i < size; i++) value |= (uint64_t)r->at[i] << (8 * i);
    r->at += size;
    return value;
}

/* The size of an encoded pointer's value (DW_EH_PE_* low nibble); 0 for one not read here. */
static unsigned aft_cfi_encoded_size(uint8_t encoding) {
    switch (encoding & 0x0F) {
    case 0x00:
        return 8; /* absptr */
    case 0x02:
    case 0x0A:
        return 2;
    case 0x03:
    case 0x0B:
        return 4;
    case 0x04:
    case 0x0C:
        return 8;
    default:
        return 0;
    }
}

/* An encoded pointer at r (absolute or pc-relative, where at_address is where r->at is). */
static int aft_cfi_pointer(aft_cfi_reader *r, uint8_t encoding, uint64_t at_address,
                           uint64_t *out) {
    unsigned size = aft_cfi_encoded_size(encoding);
    if (size == 0 || (encoding & 0x70) > 0x10) return -1; /* only absolute and pc-relative */
    uint64_t raw = aft_cfi_fixed(r, size);
    if (r->bad) return -1;
    if ((encoding & 0x08) && size < 8) { /* signed */
        uint64_t sign = 1ull << (8 * size - 1);
        raw = (raw ^ sign) - sign;
    }
    *out = (encoding & 0x70) == 0x10 ? at_address + raw : raw;
    return 0;
}

/* Runs instructions until the location passes target; rows[0] is the row, the rest the
 * remembered states. initial: the CIE's row, for DW_CFA_restore. */
static int aft_cfi_run(aft_cfi_reader *r, uint64_t *loc, uint64_t target, uint64_t code_align,
                       int64_t data_align, aft_cfi_row *row, const aft_cfi_row *initial) {
    aft_cfi_row saved[AFT_CFI_STATES];
    uint32_t depth = 0;
    while (r->at < r->end && !r->bad) {
        uint8_t op = *r->at++;
        uint64_t reg = 0, delta = 0;
        switch (op >> 6) {
        case 1:
            delta = (op & 0x3Fu) * code_align;
            goto advance;
        case 2:
            reg = op & 0x3Fu;
            if (reg == AFT_CFI_RBP) {
                row->rbp_saved = 1;
                row->rbp_offset = (int64_t)aft_cfi_uleb(r) * data_align;
            } else {
                (void)aft_cfi_uleb(r);
            }
            continue;
        case 3:
            if ((op & 0x3Fu) == AFT_CFI_RBP && initial) {
                row->rbp_saved = initial->rbp_saved;
                row->rbp_offset = initial->rbp_offset;
            }
            continue;
        default:
            break;
        }
        switch (op) {
        case 0x00:
            continue; /* nop */
        case 0x02:
            delta = aft_cfi_fixed(r, 1) * code_align;
            goto advance; /* advance_loc1 */
        case 0x03:
            delta = aft_cfi_fixed(r, 2) * code_align;
            goto advance; /* advance_loc2 */
        case 0x04:
            delta = aft_cfi_fixed(r, 4) * code_align;
            goto advance; /* advance_loc4 */
        case 0x05:
        case 0x2F: /* offset_extended, GNU_negative_offset_extended */
            reg = aft_cfi_uleb(r);
            delta = aft_cfi_uleb(r);
            if (reg == AFT_CFI_RBP) {
                row->rbp_saved = 1;
                row->rbp_offset = (op == 0x05 ? 1 : -1) * (int64_t)delta * data_align;
            }
            continue;
        case 0x06: /* restore_extended */
            if (aft_cfi_uleb(r) == AFT_CFI_RBP && initial) {
                row->rbp_saved = initial->rbp_saved;
                row->rbp_offset = initial->rbp_offset;
            }
            continue;
        case 0x07:
        case 0x08: /* undefined, same_value */
            if (aft_cfi_uleb(r) == AFT_CFI_RBP) row->rbp_saved = op == 0x08 ? 0 : -1;
            continue;
        case 0x09: /* register */
            if (aft_cfi_uleb(r) == AFT_CFI_RBP) row->rbp_saved = -1;
            (void)aft_cfi_uleb(r);
            continue;
        case 0x0A: /* remember_state */
            if (depth == AFT_CFI_STATES) return -1;
            saved[depth++] = *row;
            continue;
        case 0x0B: /* restore_state */
            if (depth == 0) return -1;
            *row = saved[--depth];
            continue;
        case 0x0C: /* def_cfa */
            row->cfa_register = (uint32_t)aft_cfi_uleb(r);
            row->cfa_offset = (int64_t)aft_cfi_uleb(r);
            continue;
        case 0x0D:
            row->cfa_register = (uint32_t)aft_cfi_uleb(r);
            continue; /* def_cfa_register */
        case 0x0E:
            row->cfa_offset = (int64_t)aft_cfi_uleb(r);
            continue; /* def_cfa_offset */
        case 0x12:    /* def_cfa_sf */
            row->cfa_register = (uint32_t)aft_cfi_uleb(r);
            row->cfa_offset = aft_cfi_sleb(r) * data_align;
            continue;
        case 0x13:
            row->cfa_offset = aft_cfi_sleb(r) * data_align;
            continue; /* def_cfa_offset_sf */
        case 0x11:    /* offset_extended_sf */
            reg = aft_cfi_uleb(r);
            if (reg == AFT_CFI_RBP) {
                row->rbp_saved = 1;
                row->rbp_offset = aft_cfi_sleb(r) * data_align;
            } else {
                (void)aft_cfi_sleb(r);
            }
            continue;
        case 0x14:
        case 0x15: /* val_offset(_sf): rbp computed, not saved */
            if (aft_cfi_uleb(r) == AFT_CFI_RBP) row->rbp_saved = -1;
            if (op == 0x14)
                (void)aft_cfi_uleb(r);
            else
                (void)aft_cfi_sleb(r);
            continue;
        case 0x2E:
            (void)aft_cfi_uleb(r);
            continue; /* GNU_args_size */
        case 0x0F:    /* def_cfa_expression: a CFA this file does not compute */
            row->cfa_register = UINT32_MAX;
            delta = aft_cfi_uleb(r);
            if (delta > (uint64_t)(r->end - r->at)) return -1;
            r->at += delta;
            continue;
        case 0x10:
        case 0x16: /* expression, val_expression */
            if (aft_cfi_uleb(r) == AFT_CFI_RBP) row->rbp_saved = -1;
            delta = aft_cfi_uleb(r);
            if (delta > (uint64_t)(r->end - r->at)) return -1;
            r->at += delta;
            continue;
        default:
            return -1; /* set_loc and anything unknown */
        }
    advance:
        if (r->bad || *loc + delta > target) return r->bad ? -1 : 0;
        *loc += delta;
    }
    return r->bad ? -1 : 0;
}

/* The .eh_frame_hdr of the image holding pc (from its program headers, in memory), or 0. */
static uint64_t aft_cfi_eh_frame_hdr(uint64_t pc) {
    uint64_t start = 0, load_bias = 0;
    if (!aft_async_known_image_range(pc, &start, &load_bias)) return 0;
    Elf64_Ehdr eh;
    if (aft_async_read_memory(start, &eh, sizeof(eh)) != 0 || eh.e_ident[EI_MAG0] != ELFMAG0 ||
        eh.e_ident[EI_MAG1] != ELFMAG1 || eh.e_ident[EI_MAG2] != ELFMAG2 ||
        eh.e_ident[EI_MAG3] != ELFMAG3 || eh.e_phentsize != sizeof(Elf64_Phdr))
        return 0;
    Elf64_Phdr ph[32];
    uint32_t phnum = eh.e_phnum < 32 ? eh.e_phnum : 32;
    if (aft_async_read_memory(start + eh.e_phoff, ph, phnum * sizeof(Elf64_Phdr)) != 0) return 0;
    for (uint32_t i = 0; i < phnum; i++)
        if (ph[i].p_type == PT_GNU_EH_FRAME) return load_bias + ph[i].p_vaddr;
    return 0;
}

int aft_async_cfi_row_at(uint64_t pc, uint64_t *function, aft_cfi_row *row) {
    uint64_t hdr = aft_cfi_eh_frame_hdr(pc);
    uint8_t head[12];
    if (hdr == 0 || aft_async_read_memory(hdr, head, sizeof(head)) != 0) return -1;
    /* version 1, the table as datarel sdata4 pairs, its count as udata4 after a 4-byte
     * eh_frame_ptr: what every linker writes. */
    if (head[0] != 1 || head[3] != 0x3B || head[2] != 0x03 || aft_cfi_encoded_size(head[1]) != 4)
        return -1;
    uint32_t count = (uint32_t)head[8] | (uint32_t)head[9] << 8 | (uint32_t)head[10] << 16 |
                     (uint32_t)head[11] << 24;
    uint64_t table = hdr + 12;
    int64_t target = (int64_t)(pc - hdr);
    uint32_t low = 0, high = count; /* the last entry whose start <= target */
    int32_t entry[2] = {0, 0}, last[2 * 48];
    while (high - low > 48) { /* a read an entry, until the last 48 take one read */
        uint32_t mid = low + (high - low) / 2;
        if (aft_async_read_memory(table + 8ull * mid, entry, 4) != 0) return -1;
        if ((int64_t)entry[0] <= target)
            low = mid;
        else
            high = mid;
    }
    if (count == 0 || aft_async_read_memory(table + 8ull * low, last, 8ull * (high - low)) != 0)
        return -1;
    uint32_t found = 0;
    while (found + 1 < high - low && (int64_t)last[2 * (found + 1)] <= target) found++;
    if ((int64_t)last[2 * found] > target) return -1;
    uint64_t fde = hdr + (uint64_t)(int64_t)last[2 * found + 1];
    uint8_t fbytes[AFT_CFI_BYTES], cbytes[AFT_CFI_BYTES];
    uint32_t flen = 0, clen = 0, cie_delta = 0;
    if (aft_async_read_memory(fde, &flen, 4) != 0 || flen < 12 || flen == 0xFFFFFFFFu ||
        aft_async_read_memory(fde + 4, &cie_delta, 4) != 0 || cie_delta == 0)
        return -1;
    uint64_t cie = fde + 4 - cie_delta;
    /* In 64 bits: a corrupt length near 2^32 must not wrap to a few bytes. */
    uint64_t fsize = (uint64_t)flen + 4 < AFT_CFI_BYTES ? (uint64_t)flen + 4 : AFT_CFI_BYTES;
    if (aft_async_read_memory(cie, &clen, 4) != 0 || clen < 8 || clen == 0xFFFFFFFFu) return -1;
    uint64_t csize = (uint64_t)clen + 4 < AFT_CFI_BYTES ? (uint64_t)clen + 4 : AFT_CFI_BYTES;
    if (aft_async_read_memory(fde, fbytes, fsize) != 0 ||
        aft_async_read_memory(cie, cbytes, csize) != 0)
        return -1;
    /* The CIE: id 0, version, augmentation, alignments, return register, augmentation data. */
    aft_cfi_reader c = {cbytes + 8, cbytes + csize, 0};
    if (cbytes[4] | cbytes[5] | cbytes[6] | cbytes[7]) return -1;
    uint8_t version = *c.at++;
    const uint8_t *augmentation = c.at;
    while (c.at < c.end && *c.at) c.at++;
    if (c.at >= c.end) return -1;
    c.at++;
    uint64_t code_align = aft_cfi_uleb(&c);
    int64_t data_align = aft_cfi_sleb(&c);
    if (version == 1)
        (void)aft_cfi_fixed(&c, 1);
    else
        (void)aft_cfi_uleb(&c);
    uint8_t fde_encoding = 0; /* absptr unless 'R' says */
    int has_z = augmentation[0] == 'z';
    if (has_z) {
        uint64_t size = aft_cfi_uleb(&c);
        const uint8_t *data = c.at, *data_end = c.at + size;
        if (c.bad || size > (uint64_t)(c.end - c.at)) return -1;
        for (const uint8_t *a = augmentation + 1; *a && data < data_end; a++) {
            if (*a == 'R') {
                fde_encoding = *data++;
            } else if (*a == 'L') {
                data++;
            } else if (*a == 'P') {
                unsigned psize = aft_cfi_encoded_size(*data);
                if (psize == 0) return -1;
                data += 1 + psize;
            } else if (*a != 'S' && *a != 'B') {
                return -1;
            }
        }
        c.at = data_end;
    } else if (augmentation[0] != 0) {
        return -1;
    }
    /* The FDE: its function's range, then (with 'z') its augmentation data. */
    aft_cfi_reader f = {fbytes + 8, fbytes + fsize, 0};
    uint64_t begin = 0, range = 0;
    if (aft_cfi_pointer(&f, fde_encoding, fde + 8, &begin) != 0 ||
        aft_cfi_pointer(&f, fde_encoding & 0x0F, 0, &range) != 0)
        return -1;
    if (pc < begin || pc - begin >= range) return -1; /* in a function without an FDE */
    if (has_z) {
        uint64_t size = aft_cfi_uleb(&f);
        if (f.bad || size > (uint64_t)(f.end - f.at)) return -1;
        f.at += size;
    }
    aft_cfi_row initial = {AFT_CFI_RSP, 8, 0, 0};
    uint64_t loc = begin;
    if (aft_cfi_run(&c, &loc, UINT64_MAX, code_align, data_align, &initial, NULL) != 0) return -1;
    *row = initial;
    loc = begin;
    /* Cut short at AFT_CFI_BYTES: the rows past it are unknown, so only a pc they cannot
     * concern is answered (the run stops at the first advance past pc). */
    if (aft_cfi_run(&f, &loc, pc, code_align, data_align, row, &initial) != 0) return -1;
    if (fsize < (uint64_t)flen + 4 && f.at >= f.end) return -1;
    *function = begin;
    return 0;
}

#endif
