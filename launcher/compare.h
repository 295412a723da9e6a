/* compare: two saved timelines side by side (`tts-launch compare BEFORE.json
 * AFTER.json`, issue 5): phase durations, total start-up, page faults,
 * request latency and its spread, mlock outcome. Reads only the timeline
 * model, so it works offline. docs/compare.md describes the figures. */
#ifndef TTS_COMPARE_H
#define TTS_COMPARE_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "timeline.h"

/* Nearest-rank percentile of n values sorted ascending: the value of rank
 * ceil(p/100 * n) (1-based, at least 1). NAN when n is 0. */
double compare_percentile(const double *sorted, size_t n, double p);

/* Every figure of the comparison as a new JSON object (the `--format json`
 * output), from the typed views of the two timelines; the names are only
 * echoed. NULL when out of memory. */
json_t *compare_build(const struct timeline *before, const struct timeline *after,
		      const char *before_name, const char *after_name);

/* The plain aligned table of what compare_build returned. */
void compare_print_text(const json_t *cmp, FILE *out);

/* `tts-launch compare ...`: argv[0] is "compare". Returns the exit code: 0,
 * or 2 for bad usage or an unreadable timeline (named in the message). */
int compare_command(int argc, char **argv);

#endif
