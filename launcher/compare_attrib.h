/* compare_attrib: the attribution of two start-ups side by side, for
 * `tts-launch compare` (docs/compare.md, "where the time went"): per kind
 * and per cause (kind, what), the milliseconds before and after and their
 * shares of each window. Reads the sections' typed views only. */
#ifndef TTS_COMPARE_ATTRIB_H
#define TTS_COMPARE_ATTRIB_H

#include <stdbool.h>
#include <stddef.h>

#include "attrib_build.h"
#include "timeline.h"

/* One figure on both sides, in ms: NAN for a side without the section; a
 * cause the other side has and this one lacks is 0 here. */
struct cattr_row {
	enum attr_kind kind;
	const char *what; /* NULL: the kind's total */
	double b, a;
};

struct cattr {
	bool has[2];			/* the side has an attribution section */
	double window[2], explained[2]; /* ms; NAN without the section */
	struct cattr_row *kinds;	/* every kind either side has, largest first */
	size_t n_kinds;
	struct cattr_row *causes; /* every (kind, what) either side has, largest first */
	size_t n_causes;
	struct attr_view v[2]; /* the causes' whats point in here */
};

/* 0, or -1 when out of memory (then nothing to free). */
int cattr_build(struct cattr *c, const struct timeline *before, const struct timeline *after);
void cattr_free(struct cattr *c);

/* ms as a share of side s's window (NAN without it) */
double cattr_share(const struct cattr *c, int s, double ms);

#endif
