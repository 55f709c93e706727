/* aft_watchdog.h: the hang watchdog's C interface (issue 3). Included by CSignalShim.h. */
#ifndef AFT_WATCHDOG_H
#define AFT_WATCHDOG_H
#endif
