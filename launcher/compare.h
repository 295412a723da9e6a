/* compare: two saved timelines side by side (`tts-launch compare BEFORE.json
 * AFTER.json`, issue 5): phase durations, total start-up, page faults,
 * request latency and its spread, model-file faults per request, mlock
 * outcome, and a one-line verdict. Reads only the timeline model (its typed
 * views), so it works offline; compiled without jansson. docs/compare.md
 * describes the figures. */
#ifndef TTS_COMPARE_H
#define TTS_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "timeline.h"

/* Nearest-rank percentile of n values sorted ascending: the value of rank
 * ceil(p/100 * n) (1-based, at least 1). NAN when n is 0. */
double compare_percentile(const double *sorted, size_t n, double p);

/* A phase row whose difference is noise, left out of the text table (JSON
 * keeps it, "noise": true): both sides under COMPARE_NOISE_FLOOR_MS, or
 * |after - before| under max(COMPARE_NOISE_MIN_MS, COMPARE_NOISE_SHARE of
 * before). A side without the figure is never noise. */
#define COMPARE_NOISE_FLOOR_MS 5.0
#define COMPARE_NOISE_MIN_MS   2.0
#define COMPARE_NOISE_SHARE    0.05
bool compare_is_noise(double before, double after);

/* Every figure of the comparison, computed once from the typed views of the
 * two timelines; it borrows their strings, so free it before them; the
 * names are only echoed. NULL when out of memory. */
struct compare;
struct compare *compare_build(const struct timeline *before, const struct timeline *after,
			      const char *before_name, const char *after_name);
void compare_free(struct compare *c);

/* "with --mlock: request p99 50.9 -> 25.4 ms, model-file faults per request
 * 499 -> 0" (the table's last line, JSON's "verdict"). */
const char *compare_verdict(const struct compare *c);

/* The `--format json` output (indented); 0, or -1 when writing failed. */
int compare_write_json(const struct compare *c, FILE *out);

/* The plain aligned table, ending with the verdict. */
void compare_print_text(const struct compare *c, FILE *out);

/* `tts-launch compare ...`: argv[0] is "compare". Returns the exit code: 0,
 * or 2 for bad usage or an unreadable timeline (named in the message). */
int compare_command(int argc, char **argv);

#endif
