/*
 * reserve_internal.h: the crash file reserved at start (reserve.c, normal time), and the
 * take-over of an empty file a dead run left (a crash reserve, a spare run file).
 */
#ifndef AFT_RESERVE_INTERNAL_H
#define AFT_RESERVE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "aftermath_format.h"

/* Normal time (reserve.c): allocates the crash file's space (fd unwritten) for a report with
 * images for image_count objects, and every thread's where the disk has it; the bytes reserved
 * (0: none). Sets aft_g_state.reserve_holds_stacks and reserve_cached_bytes: the file's size
 * becomes that of a typical report, its bytes still zero (allocated unwritten, no data write),
 * the rest of the space beyond its size. */
uint64_t aft_reserve_crash_space(int fd, uint32_t image_count);
/* Normal time, off start's caller: the reserve's sized part read into the page cache (zero
 * pages, no disk read), so that the crash writes into pages that are there. */
void aft_reserve_cache(int fd);
/* Normal time (reserve.c): the crash file in dir_fd, open and locked, its name in name (a
 * `.crash.tmp`, AFT_FILE_NAME_CAPACITY bytes): a dead run's empty reserve under the name it has
 * (the crash's rename gives it this run's), or a new `<report_id>.crash.tmp`; -1 when none
 * could be made. */
int aft_reserve_open(int dir_fd, const uint8_t report_id[AFT_ID_SIZE], char *name);
/* dir_fd/name opened (no link followed, never blocking) and locked when it is an empty regular
 * file of ours with one link, made 0600: a file left to be taken over (a dead run's crash
 * reserve, a spare run file). A file of at most unwritten_max bytes whose header is still zero
 * counts as empty too (a crash reserve, sized at install; a run file recycled as the spare).
 * -1 otherwise. */
int aft_take_empty_file(int dir_fd, const char *name, size_t unwritten_max);
/* Whether fd (st its fstat) is a regular file nothing was written to: empty, or of at most
 * unwritten_max bytes whose header is there and zero. */
int aft_file_unwritten(int fd, const struct stat *st, size_t unwritten_max);

#endif
