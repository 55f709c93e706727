// The symbolication tools' C side: DWARF lookups with elfutils' libdwfl (function, file, line,
// column and inlined frames), ELF build ids and debug links, debuginfod, C++ demangling.
// Tools only (the `aftermath` command); never linked into apps, never used at crash time.
#ifndef AFTERMATH_CSYMBOLICATION_H
#define AFTERMATH_CSYMBOLICATION_H

#include <stddef.h>
#include <stdint.h>

/// One image opened for lookups.
typedef struct aftsym_image aftsym_image;

/// Opens an image loaded at `load_address` (the start of its lowest mapping). `elf_path` has the
/// program headers: the binary, or its separate debug file when the binary is not at hand.
/// `debug_path` is the separate debug file, or NULL when `elf_path` carries its own DWARF (or
/// there is none). Returns NULL with the reason in `error`.
aftsym_image *aftsym_image_open(const char *elf_path, const char *debug_path, uint64_t load_address,
                                char *error, size_t error_size);
void aftsym_image_close(aftsym_image *image);

/// 1 if DWARF was found for the image (its own or the debug file's), else 0.
int aftsym_image_has_dwarf(aftsym_image *image);

/// One frame of a lookup. Strings are malloc'ed (aftsym_frames_free) or NULL when unknown.
typedef struct {
    char *name;  ///< linkage (mangled) name when DWARF has one, else the plain name
    char *file;  ///< source file, as the compile unit names it (absolute when it can)
    int line;    ///< 0 when unknown
    int column;  ///< 0 when unknown
    int inlined; ///< 1 if this function was inlined into the next frame
} aftsym_frame;

/// Looks up the runtime `address` (for a caller frame, pass the return address minus one).
/// Writes up to `capacity` frames, innermost first: inlined functions, then the function that
/// contains them; returns how many (0 without DWARF for the address). `symbol` receives the
/// symbol table's name (malloc'ed, or NULL) and `symbol_offset` the address's distance from it.
int aftsym_image_lookup(aftsym_image *image, uint64_t address, aftsym_frame *frames, int capacity,
                        char **symbol, uint64_t *symbol_offset);
void aftsym_frames_free(aftsym_frame *frames, int count);

/// The GNU build id of the ELF file at `path`: its length (written to `out` up to `capacity`),
/// 0 if it has none, -1 if the file cannot be read as ELF.
int aftsym_elf_build_id(const char *path, uint8_t *out, size_t capacity);

/// The text hash Aftermath records for an image without a GNU build id: the first
/// min(4096, p_filesz) bytes at p_offset of the file's first executable (readable) PT_LOAD
/// segment, XOR-folded into `out` (byte i into out[i % 16]). 1 when computed, else 0.
int aftsym_elf_text_hash(const char *path, uint8_t out[16]);

/// The file name in the `.gnu_debuglink` section of `path`: 1 if written to `out`, else 0.
int aftsym_elf_debuglink(const char *path, char *out, size_t capacity);

/// 1 if `path` has DWARF line or info sections with contents (not just headers), else 0.
int aftsym_elf_has_dwarf(const char *path);

/// Asks the servers in DEBUGINFOD_URLS for the debug file with `build_id`. Returns 1 with the
/// cached file's path in `path_out`, or 0 with the reason in `error`.
int aftsym_debuginfod_find(const uint8_t *build_id, size_t build_id_size, char *path_out,
                           size_t path_size, char *error, size_t error_size);

/// The demangled C++ name (malloc'ed), or NULL if `name` is not a C++ mangled name.
char *aftsym_cxx_demangle(const char *name);

#endif
