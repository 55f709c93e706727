// ELF files, debuginfod and C++ names for the symbolicator, with elfutils. Tools only; see
// include/CSymbolication.h.
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

char *__cxa_demangle(const char *mangled_name, char *output_buffer, size_t *length, int *status);

// Opens `path` read-only without blocking (a FIFO cannot hang us) and only if it is a regular
// file of at most AFTSYM_MAX_FILE_SIZE bytes. Returns the descriptor or -1 with errno set.
int aftsym_open_regular(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    struct stat st;
    int regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    if (!regular || st.st_size > AFTSYM_MAX_FILE_SIZE) {
        close(fd);
        errno = regular ? EFBIG : EINVAL;
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

/// The ELF file at `path`, opened for reading (its descriptor in fd_out), or NULL.
static Elf *open_elf(const char *path, int *fd_out) {
    elf_version(EV_CURRENT);
    int fd = aftsym_open_regular(path);
    if (fd < 0) return NULL;
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    if (elf == NULL || elf_kind(elf) != ELF_K_ELF) {
        if (elf != NULL) elf_end(elf);
        close(fd);
        return NULL;
    }
    *fd_out = fd;
    return elf;
}

int aftsym_elf_build_id(const char *path, uint8_t *out, size_t capacity) {
    int fd = -1;
    Elf *elf = open_elf(path, &fd);
    if (elf == NULL) return -1;
    const void *id = NULL;
    ssize_t size = dwelf_elf_gnu_build_id(elf, &id);
    int result = 0;
    if (size > 0) {
        size_t n = (size_t)size < capacity ? (size_t)size : capacity;
        memcpy(out, id, n);
        result = (int)n;
    }
    elf_end(elf);
    close(fd);
    return result;
}

int aftsym_elf_text_hash(const char *path, uint8_t out[16]) {
    int fd = -1;
    Elf *elf = open_elf(path, &fd);
    if (elf == NULL) return 0;
    size_t phnum = 0, file_size = 0;
    const uint8_t *file = (const uint8_t *)elf_rawfile(elf, &file_size);
    int found = 0;
    if (file != NULL && elf_getphdrnum(elf, &phnum) == 0) {
        for (size_t i = 0; i < phnum; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(elf, (int)i, &ph) == NULL || ph.p_type != PT_LOAD ||
                !(ph.p_flags & PF_X))
                continue;
            uint64_t size = ph.p_filesz < 4096 ? ph.p_filesz : 4096;
            if ((ph.p_flags & PF_R) && size > 0 && ph.p_offset <= file_size &&
                size <= file_size - ph.p_offset) {
                memset(out, 0, 16);
                for (uint64_t k = 0; k < size; k++) out[k % 16] ^= file[ph.p_offset + k];
                found = 1;
            }
            break;
        }
    }
    elf_end(elf);
    close(fd);
    return found;
}

int aftsym_elf_debuglink(const char *path, char *out, size_t capacity) {
    int fd = -1;
    Elf *elf = open_elf(path, &fd);
    if (elf == NULL) return 0;
    GElf_Word crc = 0;
    const char *link = dwelf_elf_gnu_debuglink(elf, &crc);
    int found = 0;
    if (link != NULL && capacity > 0 && strchr(link, '/') == NULL && strlen(link) < capacity) {
        strcpy(out, link);
        found = 1;
    }
    elf_end(elf);
    close(fd);
    return found;
}

int aftsym_elf_has_dwarf(const char *path) {
    int fd = -1;
    Elf *elf = open_elf(path, &fd);
    if (elf == NULL) return 0;
    size_t strndx = 0;
    int found = 0;
    if (elf_getshdrstrndx(elf, &strndx) == 0) {
        Elf_Scn *scn = NULL;
        while (!found && (scn = elf_nextscn(elf, scn)) != NULL) {
            GElf_Shdr shdr;
            if (gelf_getshdr(scn, &shdr) == NULL || shdr.sh_type == SHT_NOBITS || shdr.sh_size == 0)
                continue;
            const char *name = elf_strptr(elf, strndx, shdr.sh_name);
            if (name != NULL &&
                (strcmp(name, ".debug_info") == 0 || strcmp(name, ".zdebug_info") == 0))
                found = 1;
        }
    }
    elf_end(elf);
    close(fd);
    return found;
}

int aftsym_debuginfod_find(const uint8_t *build_id, size_t build_id_size, char *path_out,
                           size_t path_size, char *error, size_t error_size) {
    debuginfod_client *client = debuginfod_begin();
    if (client == NULL) {
        snprintf(error, error_size, "debuginfod client could not start");
        return 0;
    }
    char *path = NULL;
    int fd = debuginfod_find_debuginfo(client, build_id, (int)build_id_size, &path);
    int found = 0;
    if (fd >= 0) {
        close(fd);
        if (path != NULL && strlen(path) < path_size) {
            strcpy(path_out, path);
            found = 1;
        } else {
            snprintf(error, error_size, "debuginfod gave no usable path");
        }
    } else {
        snprintf(error, error_size, "%s", strerror(-fd));
    }
    free(path);
    debuginfod_end(client);
    return found;
}

char *aftsym_cxx_demangle(const char *name) {
    if (name == NULL || strncmp(name, "_Z", 2) != 0) return NULL;
    int status = 0;
    char *demangled = __cxa_demangle(name, NULL, NULL, &status);
    if (status != 0) {
        free(demangled);
        return NULL;
    }
    return demangled;
}

void aftsym_frames_free(aftsym_frame *frames, int count) {
    for (int i = 0; i < count; i++) {
        free(frames[i].name);
        free(frames[i].file);
        frames[i].name = NULL;
        frames[i].file = NULL;
    }
}
