/* timeline_files: the file side of the trace sections (files,
 * missing_paths, downloads, copies, xet, renames, symlinks, locks,
 * failed_ops) from the paths, files, wranges, copies, locks and failops
 * maps and the collector's renames; called by timeline_build. */
#ifndef TTS_TIMELINE_FILES_H
#define TTS_TIMELINE_FILES_H

#include <jansson.h>

#include "collector.h"

struct tl_sections;

/* Writes the file sections into root (replacing them); files[] and
 * missing_paths[] as s's records (timeline_sections.h), their
 * placeholders put in root. */
void timeline_snap_files(struct collector *t, json_t *root, struct tl_sections *s);

/* An errno as its name ("ENOENT"), JSON null for none. */
json_t *errno_json(int e);

#endif
