/* attrib_build: the model's `attribution` section, written from what the
 * collector gathered (attribution.c does the arithmetic), and read back as
 * a typed view for the renderers (text summary, folded stacks). */
#ifndef TTS_ATTRIB_BUILD_H
#define TTS_ATTRIB_BUILD_H

#include <stdbool.h>

#include "attribution.h"
#include "timeline.h"

struct collector;

/* Replaces tl's `attribution` from c (nothing without an exec of the root). */
void attribution_build(struct timeline *tl, struct collector *c);

/* What the critical thread waits on now (attrib_live.h), from c's trace:
 * at each snapshot while the start-up runs (none once ready). */
void attribution_live(struct timeline *tl, struct collector *c);

/* The section of a model (a saved one too), decoded. */
struct attr_view {
	double start_ms, end_ms, explained_ms, window_ms;
	bool complete; /* the window ended (ready or exit) */
	struct attr_result r;
};

/* false when tl has no (valid) attribution section. Free with attr_view_free. */
bool attr_view_decode(const struct timeline *tl, struct attr_view *v);
void attr_view_free(struct attr_view *v);

#endif
