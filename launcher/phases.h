/* phases: phase inference over the timeline model (pipeline stage after
 * timeline_build). */
#ifndef TTS_PHASES_H
#define TTS_PHASES_H

#include "timeline.h"

/* Phases derived from marks, files, imports, downloads and mlock calls
 * (docs/timeline.md); replaces earlier inferred phases (source "trace"),
 * keeps the launcher's own. Works on a loaded timeline too. */
void phases_infer(struct timeline *tl);

/* What a download is called in its phase ("download:LABEL") and in every
 * output: its name (the file it becomes, downloads[].name: ORG/NAME:FILE in
 * a hub cache, else relative to model_dir), else, in a timeline older than
 * names, the base name of its path; "?" for neither. Borrowed from the
 * arguments. */
const char *phases_download_label(const char *name, const char *path);

#endif
