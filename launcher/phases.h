/* phases: phase inference over the timeline model (pipeline stage after
 * timeline_build). */
#ifndef TTS_PHASES_H
#define TTS_PHASES_H

#include "timeline.h"

/* Phases derived from marks, files, imports, downloads and mlock calls
 * (docs/timeline.md); replaces earlier inferred phases (source "trace"),
 * keeps the launcher's own. Works on a loaded timeline too. */
void phases_infer(struct timeline *tl);

#endif
