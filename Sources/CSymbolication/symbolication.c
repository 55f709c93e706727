// DWARF lookups with elfutils' libdwfl. Tools only; see include/CSymbolication.h.
#include "CSymbolication.h"
#include "symbolication_internal.h"

// The CDW system library target links elfutils and libstdc++; its header lists the same.
#include <dwarf.h>
#include <elfutils/debuginfod.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/// An address range and the DIE it belongs to.
typedef struct {
    Dwarf_Addr low, high;
    Dwarf_Off offset;
} die_range;

/// Ranges sorted by low address, for binary search.
typedef struct {
    die_range *items;
    size_t count, capacity;
} range_list;

/// One compile unit's functions, collected on the first lookup that lands in it.
typedef struct {
    Dwarf_Off cu_offset;
    range_list functions;
    int built;
} cu_table;

struct aftsym_image {
    Dwfl *dwfl;
    Dwfl_Module *module;
    char *debug_path;
    /// Every compile unit's ranges: libdw 0.188 finds units only through .debug_aranges,
    /// which Swift's compiler does not write.
    range_list units;
    cu_table *tables; ///< one per unit, by offset
    size_t table_count;
    int units_built;
};

/// libdwfl asks for the separate debug file only when the main file has no DWARF of its own;
/// the caller chose (and checked) it beforehand, so this opens exactly that file.
static int find_chosen_debuginfo(Dwfl_Module *module, void **userdata, const char *module_name,
                                 Dwarf_Addr base, const char *file_name, const char *debuglink_file,
                                 GElf_Word debuglink_crc, char **debuginfo_file_name) {
    (void)module;
    (void)module_name;
    (void)base;
    (void)file_name;
    (void)debuglink_file;
    (void)debuglink_crc;
    const aftsym_image *image = *userdata;
    if (image == NULL || image->debug_path == NULL) return -1;
    int fd = aftsym_open_regular(image->debug_path);
    if (fd >= 0) *debuginfo_file_name = strdup(image->debug_path);
    return fd;
}

static char *no_debuginfo_path = NULL;
static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = find_chosen_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &no_debuginfo_path,
};

aftsym_image *aftsym_image_open(const char *elf_path, const char *debug_path, uint64_t load_address,
                                char *error, size_t error_size) {
    elf_version(EV_CURRENT);
    aftsym_image *image = calloc(1, sizeof *image);
    if (image == NULL) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    if (debug_path != NULL) image->debug_path = strdup(debug_path);
    image->dwfl = dwfl_begin(&callbacks);
    if (image->dwfl == NULL) {
        snprintf(error, error_size, "libdwfl: %s", dwfl_errmsg(-1));
        aftsym_image_close(image);
        return NULL;
    }
    int fd = aftsym_open_regular(elf_path);
    if (fd < 0) {
        snprintf(error, error_size, "cannot open %s: %s", elf_path, strerror(errno));
        aftsym_image_close(image);
        return NULL;
    }
    dwfl_report_begin(image->dwfl);
    // libdwfl takes the descriptor (it closes it with the Dwfl). With add_p_vaddr false, the
    // module starts at load_address and its bias is load_address minus the first PT_LOAD's
    // aligned address: how the loader placed it.
    image->module = dwfl_report_elf(image->dwfl, elf_path, elf_path, fd, load_address, false);
    if (image->module == NULL) {
        snprintf(error, error_size, "%s: %s", elf_path, dwfl_errmsg(-1));
        close(fd);
        aftsym_image_close(image);
        return NULL;
    }
    dwfl_report_end(image->dwfl, NULL, NULL);
    void **userdata = NULL;
    dwfl_module_info(image->module, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
    if (userdata != NULL) *userdata = image;
    return image;
}

void aftsym_image_close(aftsym_image *image) {
    if (image == NULL) return;
    if (image->dwfl != NULL) dwfl_end(image->dwfl);
    free(image->debug_path);
    free(image->units.items);
    for (size_t i = 0; i < image->table_count; i++) free(image->tables[i].functions.items);
    free(image->tables);
    free(image);
}

int aftsym_image_has_dwarf(aftsym_image *image) {
    Dwarf_Addr bias = 0;
    return dwfl_module_getdwarf(image->module, &bias) != NULL;
}

/// The DIE's linkage name (following abstract origins and specifications), else its name.
static const char *die_name(Dwarf_Die *die) {
    Dwarf_Attribute attr;
    const char *name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
    if (name == NULL)
        name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
    if (name == NULL) name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr));
    return name;
}

static int die_int(Dwarf_Die *die, unsigned int at) {
    Dwarf_Attribute attr;
    Dwarf_Word value = 0;
    if (dwarf_formudata(dwarf_attr(die, at, &attr), &value) != 0) return 0;
    return value > 0x7fffffff ? 0 : (int)value;
}

static int compare_ranges(const void *a, const void *b) {
    const die_range *x = a, *y = b;
    return x->low < y->low ? -1 : x->low > y->low;
}

static int range_add(range_list *list, Dwarf_Addr low, Dwarf_Addr high, Dwarf_Off offset) {
    if (list->count == list->capacity) {
        size_t grown = list->capacity == 0 ? 64 : list->capacity * 2;
        die_range *bigger = realloc(list->items, grown * sizeof *bigger);
        if (bigger == NULL) return -1;
        list->items = bigger;
        list->capacity = grown;
    }
    list->items[list->count++] = (die_range){low, high, offset};
    return 0;
}

/// Adds every range of `die` (DW_AT_low_pc/high_pc or DW_AT_ranges).
static void add_die_ranges(range_list *list, Dwarf_Die *die, Dwarf_Off offset) {
    Dwarf_Addr base = 0, low = 0, high = 0;
    ptrdiff_t it = 0;
    while ((it = dwarf_ranges(die, it, &base, &low, &high)) > 0) {
        if (high > low && range_add(list, low, high, offset) != 0) return;
    }
}

/// The range containing `pc`; among nested ones, the innermost (latest starting).
static const die_range *range_find(const range_list *list, Dwarf_Addr pc) {
    size_t low = 0, high = list->count;
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        if (list->items[mid].low <= pc)
            low = mid + 1;
        else
            high = mid;
    }
    for (size_t i = low, checked = 0; i > 0 && checked < 64; i--, checked++) {
        const die_range *r = &list->items[i - 1];
        if (pc >= r->low && pc < r->high) return r;
    }
    return NULL;
}

static void build_units(aftsym_image *image, Dwarf *dwarf) {
    image->units_built = 1;
    size_t capacity = 0;
    Dwarf_Off offset = 0, next = 0;
    size_t header_size = 0;
    while (dwarf_nextcu(dwarf, offset, &next, &header_size, NULL, NULL, NULL) == 0) {
        Dwarf_Die cu;
        Dwarf_Off cu_offset = offset + header_size;
        if (dwarf_offdie(dwarf, cu_offset, &cu) != NULL) {
            add_die_ranges(&image->units, &cu, cu_offset);
            if (image->table_count == capacity) {
                size_t grown = capacity == 0 ? 16 : capacity * 2;
                cu_table *bigger = realloc(image->tables, grown * sizeof *bigger);
                if (bigger == NULL) break;
                image->tables = bigger;
                capacity = grown;
            }
            image->tables[image->table_count++] = (cu_table){.cu_offset = cu_offset};
        }
        offset = next;
    }
    qsort(image->units.items, image->units.count, sizeof *image->units.items, compare_ranges);
}

/// The compile unit containing the DWARF address, through the unit table.
static Dwarf_Die *find_cu(aftsym_image *image, Dwarf *dwarf, Dwarf_Addr address, Dwarf_Die *out) {
    if (!image->units_built) build_units(image, dwarf);
    const die_range *r = range_find(&image->units, address);
    return r == NULL ? NULL : dwarf_offdie(dwarf, r->offset, out);
}

/// Collects the functions under `parent`: subprograms with addresses, searching through
/// containers (modules, namespaces, types) and into functions for nested ones.
static void collect_functions(Dwarf_Die *parent, range_list *out, int depth) {
    Dwarf_Die child;
    if (depth > 64 || dwarf_child(parent, &child) != 0) return;
    do {
        switch (dwarf_tag(&child)) {
        case DW_TAG_subprogram:
            add_die_ranges(out, &child, dwarf_dieoffset(&child));
            collect_functions(&child, out, depth + 1);
            break;
        case DW_TAG_lexical_block:
        case DW_TAG_module:
        case DW_TAG_namespace:
        case DW_TAG_class_type:
        case DW_TAG_structure_type:
        case DW_TAG_union_type:
        case DW_TAG_enumeration_type:
            collect_functions(&child, out, depth + 1);
            break;
        default:
            break;
        }
    } while (dwarf_siblingof(&child, &child) == 0);
}

/// The function table of the unit at `cu`, built on first use.
static const range_list *unit_functions(aftsym_image *image, Dwarf *dwarf, Dwarf_Die *cu) {
    if (!image->units_built) build_units(image, dwarf);
    Dwarf_Off offset = dwarf_dieoffset(cu);
    size_t low = 0, high = image->table_count;
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        if (image->tables[mid].cu_offset < offset)
            low = mid + 1;
        else
            high = mid;
    }
    if (low == image->table_count || image->tables[low].cu_offset != offset) return NULL;
    cu_table *table = &image->tables[low];
    if (!table->built) {
        table->built = 1;
        collect_functions(cu, &table->functions, 0);
        qsort(table->functions.items, table->functions.count, sizeof *table->functions.items,
              compare_ranges);
    }
    return &table->functions;
}

enum { max_scope_depth = 256 };

/// Appends to `path` the scopes under `parent` that contain `pc`, outermost first; returns the
/// new depth.
static int walk_scopes(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *path, int depth) {
    Dwarf_Die child;
    if (depth >= max_scope_depth || dwarf_child(parent, &child) != 0) return depth;
    do {
        switch (dwarf_tag(&child)) {
        case DW_TAG_subprogram:
        case DW_TAG_inlined_subroutine:
        case DW_TAG_lexical_block:
        case DW_TAG_try_block:
        case DW_TAG_catch_block:
            if (dwarf_haspc(&child, pc) > 0) {
                path[depth] = child;
                return walk_scopes(&child, pc, path, depth + 1);
            }
            break;
        default:
            break;
        }
    } while (dwarf_siblingof(&child, &child) == 0);
    return depth;
}

/// The scopes containing `pc`, innermost first, in a malloc'ed array (as dwarf_getscopes
/// gives them): the unit's function table finds the function, then a walk of its inlined
/// subroutines and blocks. Without a function there, dwarf_getscopes itself (which on libdw
/// 0.188 gives up on a whole unit when one DIE's address attributes puzzle it, as Swift's do).
static int find_scopes(aftsym_image *image, Dwarf *dwarf, Dwarf_Die *cu, Dwarf_Addr pc,
                       Dwarf_Die **scopes) {
    *scopes = NULL;
    const range_list *functions = dwarf == NULL ? NULL : unit_functions(image, dwarf, cu);
    const die_range *r = functions == NULL ? NULL : range_find(functions, pc);
    Dwarf_Die function;
    if (r == NULL || dwarf_offdie(dwarf, r->offset, &function) == NULL) {
        int count = dwarf_getscopes(cu, pc, scopes);
        return count > 0 ? count : 0;
    }
    Dwarf_Die *path = malloc(max_scope_depth * sizeof *path);
    if (path == NULL) return 0;
    path[0] = function;
    int depth = walk_scopes(&function, pc, path, 1);
    for (int i = 0; i < depth / 2; i++) {
        Dwarf_Die t = path[i];
        path[i] = path[depth - 1 - i];
        path[depth - 1 - i] = t;
    }
    *scopes = path;
    return depth;
}

static char *dup_or_null(const char *s) { return s == NULL ? NULL : strdup(s); }

int aftsym_image_lookup(aftsym_image *image, uint64_t address, aftsym_frame *frames, int capacity,
                        char **symbol, uint64_t *symbol_offset) {
    if (symbol != NULL) {
        *symbol = NULL;
        *symbol_offset = 0;
        GElf_Off offset = 0;
        GElf_Sym sym;
        const char *name =
            dwfl_module_addrinfo(image->module, address, &offset, &sym, NULL, NULL, NULL);
        if (name != NULL) {
            *symbol = strdup(name);
            *symbol_offset = offset;
        }
    }
    if (capacity <= 0) return 0;

    Dwarf_Addr bias = 0;
    Dwarf *dwarf = dwfl_module_getdwarf(image->module, &bias);
    Dwarf_Die *cu = dwfl_module_addrdie(image->module, address, &bias);
    Dwarf_Die cu_mem;
    if (cu == NULL) {
        if (dwarf == NULL) return 0;
        cu = find_cu(image, dwarf, address - bias, &cu_mem);
        if (cu == NULL) return 0;
    }
    Dwarf_Addr dwarf_address = address - bias;

    // The innermost frame's place is the line table's row for the address.
    const char *file = NULL;
    int line = 0, column = 0;
    Dwarf_Line *row = dwarf_getsrc_die(cu, dwarf_address);
    if (row != NULL) {
        file = dwarf_linesrc(row, NULL, NULL);
        dwarf_lineno(row, &line);
        dwarf_linecol(row, &column);
    }

    Dwarf_Files *files = NULL;
    size_t file_count = 0;
    if (dwarf_getsrcfiles(cu, &files, &file_count) != 0) files = NULL;

    // Scopes containing the address, innermost first; each inlined subroutine is a frame whose
    // caller's place is its DW_AT_call_file/line/column.
    Dwarf_Die *scopes = NULL;
    int scope_count = find_scopes(image, dwarf, cu, dwarf_address, &scopes);
    int count = 0;
    for (int i = 0; i < scope_count && count < capacity; i++) {
        Dwarf_Die *scope = &scopes[i];
        int tag = dwarf_tag(scope);
        if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine) continue;
        aftsym_frame *frame = &frames[count++];
        frame->name = dup_or_null(die_name(scope));
        frame->file = dup_or_null(file);
        frame->line = line;
        frame->column = column;
        frame->inlined = tag == DW_TAG_inlined_subroutine;
        if (tag == DW_TAG_subprogram) break;
        // The caller's place, for the next frame.
        Dwarf_Attribute attr;
        Dwarf_Word file_index = 0;
        file = NULL;
        if (files != NULL &&
            dwarf_formudata(dwarf_attr(scope, DW_AT_call_file, &attr), &file_index) == 0 &&
            file_index < file_count) {
            file = dwarf_filesrc(files, file_index, NULL, NULL);
        }
        line = die_int(scope, DW_AT_call_line);
        column = die_int(scope, DW_AT_call_column);
    }
    free(scopes);
    return count;
}
