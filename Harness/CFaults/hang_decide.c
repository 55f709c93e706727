/*
 * hang_decide.c: NORMAL-TIME CODE, test-only. Entry point to the watchdog's hang decision
 * (watchdog_async.c) for the tests, which feed it crafted facts.
 */
#include "CHarnessFaults.h"
#include "watchdog_internal.h"

_Static_assert(AFT_TEST_HANG_OFF == AFT_HANG_VERDICT_OFF, "verdict off");
_Static_assert(AFT_TEST_HANG_ALIVE == AFT_HANG_VERDICT_ALIVE, "verdict alive");
_Static_assert(AFT_TEST_HANG_IGNORE == AFT_HANG_VERDICT_IGNORE, "verdict ignore");
_Static_assert(AFT_TEST_HANG_HANG == AFT_HANG_VERDICT_HANG, "verdict hang");

uint32_t aft_hang_decide(uint64_t silent_ns, uint64_t threshold_ns, int32_t armed,
                         int32_t pause_depth, int32_t foreground, int32_t crash_in_progress,
                         int32_t traced, char thread_state) {
    aft_hang_facts facts = {
        .silent_ns = silent_ns,
        .threshold_ns = threshold_ns,
        .armed = armed,
        .pause_depth = pause_depth,
        .foreground = foreground,
        .crash_in_progress = crash_in_progress,
        .traced = traced,
        .thread_state = thread_state,
    };
    return aft_async_hang_decide(&facts);
}
