/* gzip.c: NORMAL-TIME CODE (never runs in a signal handler). gzip (RFC 1952) of a request
 * body with zlib, for Content-Encoding: gzip. */
#include "aftermath_http.h"

#include <limits.h>
#include <zlib.h>

size_t aft_gzip_bound(size_t in_size) {
    /* compressBound covers the zlib wrapper (6 bytes); gzip's is 18. */
    return (size_t)compressBound((uLong)in_size) + 32;
}

size_t aft_gzip(const uint8_t *in, size_t in_size, uint8_t *out, size_t out_capacity) {
    if (in_size > UINT_MAX || out_capacity > UINT_MAX) return 0;
    z_stream z = {0};
    /* 15 + 16: a 32 KiB window with the gzip wrapper. */
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return 0;
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)in_size;
    z.next_out = out;
    z.avail_out = (uInt)out_capacity;
    int status = deflate(&z, Z_FINISH);
    size_t produced = (size_t)z.total_out;
    deflateEnd(&z);
    return status == Z_STREAM_END ? produced : 0;
}
