/* render: the table of report formats, {name, renderer}. Every output of
 * `tts-launch report` is one row; the verb's --format help and its error
 * messages come from this table, so the list is written once (here). */
#ifndef TTS_RENDER_H
#define TTS_RENDER_H

#include <stddef.h>
#include <stdio.h>

#include "timeline.h"

struct renderer {
	const char *name;
	/* 0, or -1 (errno set where known) when writing failed */
	int (*render)(const struct timeline *tl, FILE *out);
};

extern const struct renderer renderers[];
extern const size_t n_renderers;

/* "|text|json|perfetto|svg|html|prom", made from the table; RENDER_FORMATS
 * is the list for a synopsis, an address constant, so a static table (the
 * verb table of main.c) may hold it. */
extern const char render_formats_piped[];
#define RENDER_FORMATS (render_formats_piped + 1)

/* The row of name, or NULL. */
const struct renderer *render_find(const char *name);
/* "text, json, perfetto, svg, html, prom or folded" into buf (for messages). */
void render_format_choices(char *buf, size_t len);

/* The two formats the model gives itself: the summary and the JSON. */
int render_text(const struct timeline *tl, FILE *out);
int render_json(const struct timeline *tl, FILE *out);

#endif
