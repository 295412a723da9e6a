/* timeline_build: the one writer of the model's trace sections (tracing,
 * marks exec/ready, files, missing_paths, downloads, renames, symlinks,
 * locks, network, connects, listens, processes, memory, sched, block,
 * python, requests) from what the collector gathered and the tracer's
 * status. Replaces those sections on every call, so it may be called again
 * as the trace grows; it changes nothing in the tracer. */
#ifndef TTS_TIMELINE_BUILD_H
#define TTS_TIMELINE_BUILD_H

#include "collector.h"
#include "timeline.h"
#include "tracer.h"

void timeline_build(struct timeline *tl, struct collector *c, const struct tracer_status *st);

#endif
