/* report: the `report` verb's work: load a saved timeline, render it in
 * one format of the renderer table (render.h), to stdout or atomically to
 * a file. */
#ifndef TTS_REPORT_H
#define TTS_REPORT_H

#include "render.h"

/* path rendered by r onto stdout, or into output (temp file + rename,
 * 0644). 0; 1 when writing failed; 2 (bad usage) when path cannot be
 * loaded as a timeline. Messages on stderr. */
int report_write(const char *path, const struct renderer *r, const char *output);

#endif
