// Shared by CSymbolication's files; not part of its public header.
#ifndef AFTSYM_INTERNAL_H
#define AFTSYM_INTERNAL_H

#include <sys/types.h>

/* Larger files are refused unread: no image or debug file comes near it, and a path a crash
 * file names could be anything. */
#define AFTSYM_MAX_FILE_SIZE ((off_t)2 << 30)

/// Opens `path` read-only without blocking (a FIFO cannot hang us) and only if it is a regular
/// file of at most AFTSYM_MAX_FILE_SIZE bytes. Returns the descriptor or -1 with errno set.
int aftsym_open_regular(const char *path);

#endif
