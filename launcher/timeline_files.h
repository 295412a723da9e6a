/* timeline_files: the file side of the trace sections (files,
 * missing_paths, downloads, copies, xet, renames, symlinks, locks,
 * failed_ops) from the paths, files, wranges, copies, locks and failops
 * maps and the collector's renames; called by timeline_build. */
#ifndef TTS_TIMELINE_FILES_H
#define TTS_TIMELINE_FILES_H

#include <jansson.h>

#include "collector.h"

/* Writes the file sections into root (replacing them). */
void timeline_snap_files(struct collector *t, json_t *root);

/* An errno as its name ("ENOENT"), JSON null for none. */
json_t *errno_json(int e);

#endif
