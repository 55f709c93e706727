/*
 * crc32_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), the file format's
 * body_crc: pure computation over the caller's bytes. Slice-by-8 tables everywhere; on x86-64
 * with PCLMULQDQ, carry-less multiplication folds 64 bytes a step (the method of Intel's "Fast
 * CRC Computation for Generic Polynomials Using PCLMULQDQ", with this polynomial's constants),
 * about seven times faster: the handler checksums every stack it writes. Whether the
 * instruction is there is read once at normal time (aft_crc32_prepare): nothing here runs cpuid.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shim_internal.h"
#include "crc32_tables.h"

/* 1: PCLMULQDQ may be used; 0: unknown or absent (tables only). */
AFT_SMALL_STATE _Atomic int aft_g_crc_clmul;

/* The running CRC (not inverted) over size bytes, by table. */
static uint32_t aft_async_crc32_tables(uint32_t crc, const uint8_t *p, size_t size) {
    while (size >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                             (uint32_t)p[3] << 24);
        uint32_t hi =
            (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        crc = aft_crc_tables[7][lo & 0xFF] ^ aft_crc_tables[6][(lo >> 8) & 0xFF] ^
              aft_crc_tables[5][(lo >> 16) & 0xFF] ^ aft_crc_tables[4][lo >> 24] ^
              aft_crc_tables[3][hi & 0xFF] ^ aft_crc_tables[2][(hi >> 8) & 0xFF] ^
              aft_crc_tables[1][(hi >> 16) & 0xFF] ^ aft_crc_tables[0][hi >> 24];
        p += 8;
        size -= 8;
    }
    while (size-- > 0) crc = (crc >> 8) ^ aft_crc_tables[0][(crc ^ *p++) & 0xFF];
    return crc;
}

#if defined(__x86_64__)
#include <immintrin.h>

/* The running CRC over size bytes, size >= 64 and a multiple of 16. Four 128-bit lanes are
 * folded forward 512 bits a step, then into one lane, which is reduced to 64 and 32 bits and
 * finally by Barrett reduction. */
__attribute__((target("pclmul,sse2"))) static uint32_t
aft_async_crc32_clmul(uint32_t crc, const uint8_t *p, size_t size) {
    /* x^(512+64) and x^512 mod P, x^(128+64) and x^128 mod P, x^64 mod P (bit-reflected, shifted
     * left by one), and Barrett's mu and P. */
    const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596ll, 0x154442bd4ll);
    const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009ell, 0x1751997d0ll);
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124ll);
    const __m128i mu_p = _mm_set_epi64x(0x1F7011641ll, 0x1DB710641ll);
    const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);

    __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    p += 64;
    size -= 64;
    while (size >= 64) {
        __m128i h1 = _mm_clmulepi64_si128(x1, k1k2, 0x11),
                h2 = _mm_clmulepi64_si128(x2, k1k2, 0x11);
        __m128i h3 = _mm_clmulepi64_si128(x3, k1k2, 0x11),
                h4 = _mm_clmulepi64_si128(x4, k1k2, 0x11);
        x1 = _mm_xor_si128(_mm_clmulepi64_si128(x1, k1k2, 0x00), h1);
        x2 = _mm_xor_si128(_mm_clmulepi64_si128(x2, k1k2, 0x00), h2);
        x3 = _mm_xor_si128(_mm_clmulepi64_si128(x3, k1k2, 0x00), h3);
        x4 = _mm_xor_si128(_mm_clmulepi64_si128(x4, k1k2, 0x00), h4);
        x1 = _mm_xor_si128(x1, _mm_loadu_si128((const __m128i *)(const void *)p));
        x2 = _mm_xor_si128(x2, _mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
        x3 = _mm_xor_si128(x3, _mm_loadu_si128((const __m128i *)(const void *)(p + 32)));
        x4 = _mm_xor_si128(x4, _mm_loadu_si128((const __m128i *)(const void *)(p + 48)));
        p += 64;
        size -= 64;
    }
    /* Four lanes into one, then the remaining 16-byte blocks. */
    __m128i lanes[3] = {x2, x3, x4};
    for (int i = 0; i < 3; i++) {
        __m128i h = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, k3k4, 0x00), h), lanes[i]);
    }
    while (size >= 16) {
        __m128i h = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_clmulepi64_si128(x1, k3k4, 0x00), h);
        x1 = _mm_xor_si128(x1, _mm_loadu_si128((const __m128i *)(const void *)p));
        p += 16;
        size -= 16;
    }
    /* 128 bits to 64 (appending 32 zero bits), then to 32. */
    __m128i t = _mm_clmulepi64_si128(k3k4, x1, 0x01);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
    __m128i high = _mm_srli_si128(x1, 4);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00), high);
    /* Barrett reduction to the 32-bit remainder. */
    __m128i r = x1;
    x1 = _mm_and_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask32), mu_p, 0x10), mask32);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(x1, mu_p, 0x00), r);
    return (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(x1, 4));
}
#endif

uint32_t aft_async_crc32(uint32_t crc, const void *data, size_t size) {
    const uint8_t *p = data;
    crc = ~crc;
#if defined(__x86_64__)
    if (size >= 64 && atomic_load_explicit(&aft_g_crc_clmul, memory_order_relaxed) == 1) {
        size_t folded = size & ~(size_t)15;
        crc = aft_async_crc32_clmul(crc, p, folded);
        p += folded;
        size -= folded;
    }
#endif
    return ~aft_async_crc32_tables(crc, p, size);
}

uint32_t aft_async_crc32_portable(uint32_t crc, const void *data, size_t size) {
    return ~aft_async_crc32_tables(~crc, data, size);
}
