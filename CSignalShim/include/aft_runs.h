/* aft_runs.h: the run record's C interface and format (issue 4). Included by CSignalShim.h. */
#ifndef AFT_RUNS_H
#define AFT_RUNS_H
#endif
