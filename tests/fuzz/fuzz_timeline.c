/* Fuzz target: a saved timeline, as `report`, `diagnose` and the HTML view
 * read it. The input is the timeline file: timeline_load, then every report
 * format of the renderer table (launcher/render.c: text, json, perfetto,
 * svg, html, prom, folded), then the diagnose rules and their text and JSON output. Each
 * must take any input without a crash, a sanitizer report or unbounded work. */
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "diagnose.h"
#include "fuzz.h"
#include "render.h"
#include "timeline.h"
#include "timeline_internal.h"

#define FUZZ_MAX_INPUT (256 << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct timeline *tl;
	char err[1024];
	FILE *out;

	if (size > FUZZ_MAX_INPUT)
		return -1;
	tl = timeline_load(fuzz_file(0, data, size), err, sizeof(err));
	if (!tl)
		return 0;
	out = fuzz_out();
	for (size_t i = 0; i < n_renderers; i++)
		renderers[i].render(tl, out);
	diagnose_run(tl, DIAG_ALL);
	diagnose_print(tl, out);
	json_dumpf(json_object_get(timeline_json(tl), "findings"), out,
		   JSON_INDENT(2) | JSON_REAL_PRECISION(12));
	timeline_free(tl);
	return 0;
}
