/* clock: every time in a timeline is milliseconds since the launcher
 * started, on CLOCK_MONOTONIC (the clock bpf_ktime_get_ns() reads). */
#ifndef TTS_CLOCK_H
#define TTS_CLOCK_H

#include <stdint.h>
#include <time.h>

void clock_init(void);			 /* call first thing in main() */
uint64_t clock_t0_ns(void);		 /* monotonic ns at launcher start */
struct timespec clock_t0_wall(void);	 /* wall clock at launcher start */
double clock_ms(void);			 /* ms since launcher start, now */
double clock_ns_to_ms(uint64_t mono_ns); /* a monotonic timestamp, as ms since start */

#endif
