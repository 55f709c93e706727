/*
 * aftermath_format_async.h: the Swift async callers of a thread's frames, part of
 * aftermath_format.h (which includes it at its end); the rules at the top of that file hold here.
 *
 * A Swift async function's callers are not on the machine stack: each caller waits in an async
 * context (a heap record of the task) whose first two words are its own caller's context
 * (`Parent`, NULL at the task's root) and the address where its caller resumes (`ResumeParent`,
 * the entry of a continuation funclet). The writer follows that chain from the context of the
 * innermost function it can find, at the crash or the hang, as it was in memory then, and
 * records each link: the innermost caller first, the task's entry last.
 *
 * SWIFT_ASYNC section (crash, hang and handled-error files): entries of aft_swift_async_link,
 * grouped by thread in the order the threads are recorded, each thread's links innermost first.
 * A thread with no links ran no Swift task, or its chain could not be read. A reader that does
 * not know the section skips it and sees the machine frames alone.
 */
#ifndef AFTERMATH_FORMAT_ASYNC_H
#define AFTERMATH_FORMAT_ASYNC_H

#include <stdint.h>
#include <stddef.h>

#define AFT_SECTION_SWIFT_ASYNC 11u
#define AFT_SWIFT_ASYNC_MAX_LINKS 128u /* links kept per thread; more: AFT_SWIFT_ASYNC_CUT */

/* aft_swift_async_link.flags. The anchor (where the chain's first context was found) is in the
 * first link of a thread: */
#define AFT_SWIFT_ASYNC_FROM_REGISTER 0x1u /* the async context register (x86-64 r14, arm64 x22) */
#define AFT_SWIFT_ASYNC_FROM_FRAME 0x2u    /* the slot below a frame record's saved frame pointer */
/* the task's resume context: the context it last resumed with. Links of calls that have
 * returned since may come first; tools drop those up to the innermost async function. */
#define AFT_SWIFT_ASYNC_FROM_TASK 0x4u
#define AFT_SWIFT_ASYNC_ROOT 0x10u /* (last link) the task's root: its Parent is NULL */
/* (last link) the chain went on: a link could not be read or validated, or the cap was reached */
#define AFT_SWIFT_ASYNC_CUT 0x20u

typedef struct aft_swift_async_link {
    uint64_t thread_id; /* kernel tid of the thread whose task this is */
    uint64_t context;   /* the async context's address */
    uint64_t resume;    /* its ResumeParent: where its caller resumes (a funclet's entry, not a
                           return address: symbolicated as is, without pc-1) */
    uint32_t flags;     /* AFT_SWIFT_ASYNC_* */
    uint32_t depth;     /* 0 for the innermost caller */
} aft_swift_async_link;

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(aft_swift_async_link) == 32, "aft_swift_async_link size");
_Static_assert(offsetof(aft_swift_async_link, flags) == 24, "aft_swift_async_link flags offset");
#endif

#endif /* AFTERMATH_FORMAT_ASYNC_H */
