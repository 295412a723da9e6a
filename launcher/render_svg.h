/* render_svg: a timeline as a plot in the spirit of `systemd-analyze plot`:
 * one bar per phase and per download on a time axis, the page-fault rate
 * under it, a line at ready. render_html wraps the same SVG in a page with
 * tables of the phases, downloads, files, missing paths and findings. */
#ifndef TTS_RENDER_SVG_H
#define TTS_RENDER_SVG_H

#include <stdio.h>

#include "timeline.h"

/* 0, or -1 when writing failed. */
int render_svg(const struct timeline *tl, FILE *out);
int render_html(const struct timeline *tl, FILE *out);

/* "1.25 s", "40 ms", "2.5 ms": a duration for a label (render_html too). */
void svg_fmt_dur(char *buf, size_t len, double ms);

/* XML-escape s (& < > " ') onto out. */
void svg_escape(FILE *out, const char *s);

/* The fill of an attribution kind (enum attr_kind), the plot's strip and
 * the flame graph's. */
const char *svg_kind_fill(int kind);

/* `report --format flamegraph` (render_flame.c): the attribution as an
 * SVG flame graph, searchable. */
int render_flamegraph(const struct timeline *tl, FILE *out);

#endif
