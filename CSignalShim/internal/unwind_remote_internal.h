/*
 * unwind_remote_internal.h: what unwind_remote.c (libunwind's remote interface over a crash
 * file's registers and stack bytes) and unwind_remote_files.c (the images' files, checked by
 * build id) share. Normal-time code, run at the next launch. Not seen by Swift.
 */
#ifndef AFT_UNWIND_REMOTE_INTERNAL_H
#define AFT_UNWIND_REMOTE_INTERNAL_H

#include <elf.h>
#include <stddef.h>
#include <stdint.h>

#include "CSignalShim.h"

#define AFT_REMOTE_MAX_FILE (1ull << 31) /* 2 GiB: larger is no image of ours */
#define AFT_REMOTE_REGISTERS 64u         /* registers kept of a crash file's, at most */

/* An image's file, as unwind_remote_files.c maps it. */
typedef struct aft_remote_file {
    int tried;
    const uint8_t *map; /* the whole file, read-only; NULL: not usable */
    size_t size;
    const Elf64_Phdr *phdrs;
    uint32_t phnum;
    uint64_t eh_hdr_vaddr; /* 0: none */
    int functions_read;    /* its function symbols sorted, once, on first use */
    uint64_t *functions;   /* (start, size) pairs in the file's addresses, by start */
    uint32_t function_count;
} aft_remote_file;

/* One unwinding: its input, the images' files (opened on first use) and the registers the
 * cursor starts from (the crash's, or those of a frame found past a function without tables). */
typedef struct aft_remote_state {
    const aft_remote_unwind_input *in;
    aft_remote_file *files; /* one per image */
    uint64_t registers[AFT_REMOTE_REGISTERS];
    uint32_t register_count;
} aft_remote_state;

/* offset + size within total, without overflow. */
int aft_remote_range(uint64_t offset, uint64_t size, uint64_t total);
/* Image i's file, mapped once: a regular file, an ELF of this machine with the recorded build
 * id; NULL otherwise. */
aft_remote_file *aft_remote_open(aft_remote_state *s, uint32_t i);
/* 1 with *out the index of the image that holds address. */
int aft_remote_image_index(const aft_remote_state *s, uint64_t address, uint32_t *out);
/* 1 with size bytes of the crashed process at address, read from the file of its image. */
int aft_remote_read_image(aft_remote_state *s, uint64_t address, void *out, size_t size);

/* Unmaps and frees what the state opened. */
void aft_remote_close_files(aft_remote_state *s);
/* 1 with the 8 bytes the crash captured at address (a stack's). */
int aft_remote_read_word(const aft_remote_state *s, uint64_t address, uint64_t *value);
/* 1 with the start of the function that holds address, by its image's symbols (.symtab, else
 * .dynsym: a function symbol with a size). */
int aft_remote_function_start(aft_remote_state *s, uint64_t address, uint64_t *start);
/* 1 when address lies in an executable segment of its image's file. */
int aft_remote_in_code(aft_remote_state *s, uint64_t address);

#if defined(__x86_64__)
/* The frame past a function that has no table entry (unwind_remote_thunk.c). pc: where the frame
 * is in that function (a return address less one, or an exact pc); sp: its stack pointer;
 * registers: its registers in crash-file order (s->register_count of them). 1 when the
 * function's prologue keeps no frame record and its return address is where the prologue puts
 * it: *ret that address, registers changed to its caller's (rip ret - 1, so that libunwind looks
 * the caller up at the call; rsp above the return address; the registers the prologue pushed
 * restored). 0 otherwise: libunwind's frame-pointer step stays right for a function that keeps
 * a record. */
int aft_remote_past_thunk(aft_remote_state *s, uint64_t pc, uint64_t sp, uint64_t *registers,
                          uint64_t *ret);
#endif

#endif /* AFT_UNWIND_REMOTE_INTERNAL_H */
