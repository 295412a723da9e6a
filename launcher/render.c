/* render: the renderer table (render.h). A new format: a render_<fmt>.c
 * with one function over the model, one row in RENDERERS below, a test in
 * tests/e2e/test_report.py (docs/hacking.md). */
#include <stdio.h>
#include <string.h>

#include "render.h"
#include "render_attrib.h"
#include "render_perfetto.h"
#include "render_prom.h"
#include "render_svg.h"

/* The one list: the table and the synopsis string are made from it. */
#define RENDERERS(X)                                                                               \
	X(text, render_text)                                                                       \
	X(json, render_json)                                                                       \
	X(perfetto, render_perfetto)                                                               \
	X(svg, render_svg)                                                                         \
	X(html, render_html)                                                                       \
	X(prom, render_prom)                                                                       \
	X(folded, render_folded)                                                                   \
	X(flamegraph, render_flamegraph)

#define ROW(name, fn) {#name, fn},
const struct renderer renderers[] = {RENDERERS(ROW)};
const size_t n_renderers = sizeof(renderers) / sizeof(renderers[0]);

#define PIPED(name, fn) "|" #name
const char render_formats_piped[] = RENDERERS(PIPED);

const struct renderer *render_find(const char *name)
{
	for (size_t i = 0; name && i < n_renderers; i++)
		if (!strcmp(name, renderers[i].name))
			return &renderers[i];
	return NULL;
}

void render_format_choices(char *buf, size_t len)
{
	size_t used = 0;

	if (!len)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < n_renderers && used < len; i++) {
		const char *sep = !i ? "" : i + 1 == n_renderers ? " or " : ", ";
		int n = snprintf(buf + used, len - used, "%s%s", sep, renderers[i].name);

		if (n < 0)
			break;
		used += (size_t)n;
	}
}

/* text: the end-of-start-up summary */
int render_text(const struct timeline *tl, FILE *out)
{
	timeline_print_summary(tl, out);
	return ferror(out) ? -1 : 0;
}

/* json: the model, indented for reading */
int render_json(const struct timeline *tl, FILE *out) { return timeline_dump(tl, out); }
