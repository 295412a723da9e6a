/* stale_scan: stale_find() alone (the /proc scan every start makes for
 * earlier instances), timed: argv[1] calls, each time in ms on one line.
 * Linked against a build's launcher objects by stale_scan.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "stale.h"

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	struct config c;
	int calls = argc > 1 ? atoi(argv[1]) : 7;

	config_defaults(&c);
	c.stale_match = "webui.py";
	for (int i = 0; i < calls; i++) {
		struct stale_list l;
		double t = now_ms();

		if (stale_find(&c, &l) < 0) {
			perror("stale_find");
			return 1;
		}
		printf("%.3f\n", now_ms() - t);
		stale_list_free(&l);
	}
	return 0;
}
