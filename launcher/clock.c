#include "clock.h"

static uint64_t t0_ns;
static struct timespec t0_wall;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void clock_init(void)
{
	if (t0_ns)
		return;
	t0_ns = mono_ns();
	clock_gettime(CLOCK_REALTIME, &t0_wall);
}

uint64_t clock_t0_ns(void) { return t0_ns; }

struct timespec clock_t0_wall(void) { return t0_wall; }

double clock_ns_to_ms(uint64_t ns) { return ((double)ns - (double)t0_ns) / 1e6; }

double clock_ms(void) { return clock_ns_to_ms(mono_ns()); }
