/*
 * proc_parse_async.c: CRASH-TIME CODE, under the crash-time contract of CSignalShim/README.md
 * (async-signal-safe calls only, no malloc, no locks, no stdio, no Swift; checked by
 * AsyncSafetyTests). Parsers of /proc texts (a thread's stat, syscall and status files) for the
 * watchdog, which runs them while the watched thread is stuck: pure functions over the given
 * bytes, no system call.
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>

#include "watchdog_internal.h"

char aft_async_stat_state(const char *text, size_t length) {
    /* "tid (comm) S ...": comm may hold spaces and ')', so use the last ')'. */
    size_t close = length;
    for (size_t i = 0; i < length; i++)
        if (text[i] == ')') close = i;
    if (close == length || close + 2 >= length || text[close + 1] != ' ') return '?';
    char c = text[close + 2];
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ? c : '?';
}

static const char *aft_async_token(const char *p, const char *end, const char **token_end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\t')) p++;
    const char *q = p;
    while (q < end && *q != ' ' && *q != '\n' && *q != '\t' && *q != '\0') q++;
    *token_end = q;
    return p;
}

static int aft_async_parse_number(const char *p, const char *end, int hex, uint64_t *out) {
    uint64_t v = 0;
    int digits = 0;
    if (hex && end - p >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) p += 2;
    for (; p < end; p++) {
        char c = *p;
        uint64_t d;
        if (c >= '0' && c <= '9')
            d = (uint64_t)(c - '0');
        else if (hex && c >= 'a' && c <= 'f')
            d = (uint64_t)(c - 'a' + 10);
        else if (hex && c >= 'A' && c <= 'F')
            d = (uint64_t)(c - 'A' + 10);
        else
            return 0;
        v = hex ? (v << 4) | d : v * 10 + d;
        if (++digits > 20) return 0;
    }
    *out = v;
    return digits > 0;
}

int aft_async_syscall_parse(const char *text, size_t length, int64_t *nr, uint64_t *sp,
                            uint64_t *pc) {
    /* "nr a1 a2 a3 a4 a5 a6 sp pc", "-1 sp pc" (blocked, not in a syscall), or "running". */
    const char *end = text + length, *te;
    const char *t = aft_async_token(text, end, &te);
    if (t == te) return 0;
    int negative = *t == '-';
    uint64_t n;
    if (!aft_async_parse_number(t + negative, te, 0, &n)) return 0;
    *nr = negative ? -(int64_t)n : (int64_t)n;
    uint64_t values[8];
    int count = 0;
    for (t = aft_async_token(te, end, &te); t < te && count < 8;
         t = aft_async_token(te, end, &te)) {
        if (!aft_async_parse_number(t, te, 1, &values[count])) return 0;
        count++;
    }
    int expected = *nr >= 0 ? 8 : 2;
    if (count != expected) return 0;
    *sp = values[expected - 2];
    *pc = values[expected - 1];
    return 1;
}

int aft_async_syscall_interrupted(int64_t nr) {
    /* signal(7): never restarted after a handler, whatever SA_RESTART says. */
    static const long never_restarted[] = {
#ifdef SYS_nanosleep
        SYS_nanosleep,
#endif
#ifdef SYS_clock_nanosleep
        SYS_clock_nanosleep,
#endif
#ifdef SYS_poll
        SYS_poll,
#endif
#ifdef SYS_ppoll
        SYS_ppoll,
#endif
#ifdef SYS_select
        SYS_select,
#endif
#ifdef SYS_pselect6
        SYS_pselect6,
#endif
#ifdef SYS_epoll_wait
        SYS_epoll_wait,
#endif
#ifdef SYS_epoll_pwait
        SYS_epoll_pwait,
#endif
#ifdef SYS_epoll_pwait2
        SYS_epoll_pwait2,
#endif
#ifdef SYS_msgrcv
        SYS_msgrcv,
#endif
#ifdef SYS_msgsnd
        SYS_msgsnd,
#endif
#ifdef SYS_semop
        SYS_semop,
#endif
#ifdef SYS_semtimedop
        SYS_semtimedop,
#endif
#ifdef SYS_io_getevents
        SYS_io_getevents,
#endif
#ifdef SYS_io_pgetevents
        SYS_io_pgetevents,
#endif
#ifdef SYS_rt_sigtimedwait
        SYS_rt_sigtimedwait,
#endif
#ifdef SYS_rt_sigsuspend
        SYS_rt_sigsuspend,
#endif
#ifdef SYS_pause
        SYS_pause,
#endif
        -1,
    };
    for (size_t i = 0; never_restarted[i] != -1; i++)
        if (never_restarted[i] == nr) return 1;
    return 0;
}

/* The start of the value of a "Key:" line of a status file, and its end (the line's). */
static const char *aft_async_status_line(const char *text, size_t length, const char *key,
                                         const char **line_end) {
    size_t key_len = aft_async_strlen(key, 64);
    for (size_t i = 0; i + key_len + 1 < length; i++) {
        if (i > 0 && text[i - 1] != '\n') continue;
        size_t k = 0;
        while (k < key_len && text[i + k] == key[k]) k++;
        if (k != key_len || text[i + k] != ':') continue;
        size_t at = i + k + 1, end = at;
        while (at < length && (text[at] == '\t' || text[at] == ' ')) at++;
        for (end = at; end < length && text[end] != '\n';) end++;
        *line_end = text + end;
        return text + at;
    }
    return NULL;
}

int aft_async_status_field(const char *text, size_t length, const char *key, int hex,
                           uint64_t *out) {
    const char *end, *te, *v = aft_async_status_line(text, length, key, &end);
    if (v == NULL) return 0;
    const char *t = aft_async_token(v, end, &te);
    return aft_async_parse_number(t, te, hex, out);
}

char aft_async_status_state(const char *text, size_t length) {
    const char *end, *v = aft_async_status_line(text, length, "State", &end);
    return v != NULL && v < end ? *v : '?';
}

void aft_async_status_name(const char *text, size_t length, char *out) {
    const char *end, *v = aft_async_status_line(text, length, "Name", &end);
    if (v != NULL) aft_async_copy_tail(out, AFT_THREAD_NAME, v, (size_t)(end - v));
}

int aft_async_syscall_idle_wait(int64_t nr) {
    /* An event loop between jobs waits in one of these for its descriptors. */
    static const long waits[] = {
#ifdef SYS_poll
        SYS_poll,
#endif
#ifdef SYS_ppoll
        SYS_ppoll,
#endif
#ifdef SYS_select
        SYS_select,
#endif
#ifdef SYS_pselect6
        SYS_pselect6,
#endif
#ifdef SYS_epoll_wait
        SYS_epoll_wait,
#endif
#ifdef SYS_epoll_pwait
        SYS_epoll_pwait,
#endif
#ifdef SYS_epoll_pwait2
        SYS_epoll_pwait2,
#endif
        -1,
    };
    for (size_t i = 0; waits[i] != -1; i++)
        if (waits[i] == nr) return 1;
    return 0;
}

int aft_async_first_number(const char *text, size_t length, uint64_t *out) {
    const char *end = text + length, *te;
    const char *t = aft_async_token(text, end, &te);
    return aft_async_parse_number(t, te, 0, out);
}
