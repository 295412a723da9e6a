/* render_perfetto: a timeline as Chrome trace-event JSON (the object form,
 * {"traceEvents": [...]}), which ui.perfetto.dev and chrome://tracing open.
 * Format: "Trace Event Format" (Google doc, linked from docs/views.md). */
#ifndef TTS_RENDER_PERFETTO_H
#define TTS_RENDER_PERFETTO_H

#include <stddef.h>
#include <stdio.h>

#include "timeline.h"

/* Write the trace to out. 0, or -1 with errno when writing failed. */
int render_perfetto(const struct timeline *tl, FILE *out);

/* Complete ("X") events on one track must nest: a span either contains the
 * next one or ends before it starts. Give each of n spans a lane (0, 1, ...)
 * so that the spans of every lane nest; a span goes to the lowest lane it
 * fits. Spans are taken in order of start (longer first on ties), whatever
 * their order in the arrays. Returns the number of lanes used. */
#define PERFETTO_MAX_LANES 64 /* lanes per track at most: the rest share the last */
int perfetto_assign_lanes(const double *start, const double *end, size_t n, int *lane);

#endif
