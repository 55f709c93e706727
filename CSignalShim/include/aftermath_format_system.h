/*
 * aftermath_format_system.h: the machine a crash happened on, part of aftermath_format.h (which
 * includes it at its end); the rules at the top of that file hold here.
 *
 * SYSTEM section (crash files, right after the context): one aft_system_info, read when start
 * completes (on its background thread), so a crash in the first moments of a run may have
 * none. It gives what a minidump's SystemInfo and MiscInfo streams hold and the context does
 * not: the processor count and identity, and when the process began. A reader that does not
 * know the section skips it and sees no processor details.
 */
#ifndef AFTERMATH_FORMAT_SYSTEM_H
#define AFTERMATH_FORMAT_SYSTEM_H

#include <stdint.h>
#include <stddef.h>

#define AFT_SECTION_SYSTEM 13u

typedef struct aft_system_info {
    uint32_t cpu_count;     /* processors the process may run on (its affinity mask) */
    uint32_t cpu_signature; /* x86-64: cpuid leaf 1 eax; arm64: MIDR_EL1; 0 unknown */
    uint32_t cpu_features;  /* x86-64: cpuid leaf 1 edx */
    uint32_t _reserved0;
    char cpu_vendor[16];                /* x86-64: cpuid's vendor ("GenuineIntel"), NUL-padded */
    uint64_t hwcaps;                    /* getauxval(AT_HWCAP) */
    uint64_t process_start_realtime_ns; /* the process's start (its /proc start time); 0 unknown */
    uint8_t _reserved[16];
} aft_system_info;

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(aft_system_info) == 64, "aft_system_info size");
_Static_assert(offsetof(aft_system_info, cpu_vendor) == 16, "aft_system_info cpu_vendor offset");
_Static_assert(offsetof(aft_system_info, process_start_realtime_ns) == 40,
               "aft_system_info process_start_realtime_ns offset");
#endif

#endif /* AFTERMATH_FORMAT_SYSTEM_H */
