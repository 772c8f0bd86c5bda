/* Monotonic time for deadlines and durations: the wall clock can jump. */
#ifndef SBX_CLOCK_H
#define SBX_CLOCK_H

/* Milliseconds on CLOCK_MONOTONIC (from an arbitrary start). */
long long sbx_now_ms(void);

#endif
