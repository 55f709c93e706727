/*
 * CHarnessFaults: real faults for the harnesses, the tests and the benchmark. Test-only: no
 * product links this target.
 */
#ifndef CHARNESSFAULTS_H
#define CHARNESSFAULTS_H

#include <stdint.h>

/* Integer division through the CPU's divide instruction: SIGFPE (FPE_INTDIV) when b == 0. */
int32_t aft_test_divide(int32_t a, int32_t b);
/* Executes an undefined instruction: SIGILL (ILL_ILLOPN). */
void aft_test_illegal_instruction(void);
/* Executes a breakpoint instruction: SIGTRAP. */
void aft_test_breakpoint(void);
/* Makes the crash writer itself fault (a store to address 16) after its first flush. */
void aft_test_fault_inside_handler(int enabled);

#endif /* CHARNESSFAULTS_H */
