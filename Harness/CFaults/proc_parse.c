/*
 * proc_parse.c: NORMAL-TIME CODE, test-only. Entry points to CSignalShim's /proc parsers
 * (proc_parse_async.c) for the tests, which feed them crafted texts.
 */
#include "CHarnessFaults.h"
#include "watchdog_internal.h"

char aft_proc_stat_state(const char *text, size_t length) {
    return text ? aft_async_stat_state(text, length) : '?';
}

int aft_proc_syscall_parse(const char *text, size_t length, int64_t *nr, uint64_t *sp,
                           uint64_t *pc) {
    if (!text || !nr || !sp || !pc) return 0;
    return aft_async_syscall_parse(text, length, nr, sp, pc);
}

int aft_syscall_interrupted_by_handler(int64_t nr) { return aft_async_syscall_interrupted(nr); }

int64_t aft_proc_status_tracer(const char *text, size_t length) {
    uint64_t v = 0;
    if (!text || !aft_async_status_field(text, length, "TracerPid", 0, &v)) return 0;
    return (int64_t)v;
}

int aft_proc_status_blocks(const char *text, size_t length, int signo) {
    uint64_t mask = 0;
    if (!text || signo < 1 || signo > 64) return -1;
    if (!aft_async_status_field(text, length, "SigBlk", 1, &mask)) return -1;
    return (int)((mask >> (signo - 1)) & 1);
}
