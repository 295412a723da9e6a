/* render_html: the plot of render_svg with tables of the findings, phases,
 * downloads, the top files and the missing paths, in one HTML page. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "render_svg.h"
#include "timeline_internal.h"
#include "util.h"

static double num(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : NAN;
}

static double sort_key_bytes(const json_t *f)
{
	double a = num(f, "bytes_read"), b = num(f, "mmap_bytes"), c = num(f, "bytes_written");

	return (isnan(a) ? 0 : a) + (isnan(b) ? 0 : b) + (isnan(c) ? 0 : c);
}

static const json_t *sort_root;
static const char *sort_field;

static int cmp_desc(const void *x, const void *y)
{
	const json_t *a = *(json_t *const *)x, *b = *(json_t *const *)y;
	double p = sort_field ? num(a, sort_field) : sort_key_bytes(a);
	double q = sort_field ? num(b, sort_field) : sort_key_bytes(b);

	(void)sort_root;
	if (isnan(p))
		p = 0;
	if (isnan(q))
		q = 0;
	return p > q ? -1 : p < q;
}

/* The first max elements of arr, largest first by field (NULL: bytes). */
static size_t top_n(json_t *arr, const char *field, json_t **out, size_t max)
{
	size_t n = json_array_size(arr), i;
	json_t **all = calloc(n ? n : 1, sizeof(*all));

	if (!all)
		return 0;
	for (i = 0; i < n; i++)
		all[i] = json_array_get(arr, i);
	sort_field = field;
	qsort(all, n, sizeof(*all), cmp_desc);
	if (n > max)
		n = max;
	memcpy(out, all, n * sizeof(*out));
	free(all);
	return n;
}

static void td(FILE *out, const char *s)
{
	fputs("<td>", out);
	svg_escape(out, s);
	fputs("</td>", out);
}

static void td_num(FILE *out, const json_t *o, const char *key, int bytes)
{
	char buf[64];
	double v = num(o, key);

	if (isnan(v))
		snprintf(buf, sizeof(buf), "-");
	else if (bytes)
		fmt_bytes(buf, sizeof(buf), v);
	else if (v == floor(v))
		snprintf(buf, sizeof(buf), "%.0f", v);
	else
		snprintf(buf, sizeof(buf), "%.1f", v);
	fprintf(out, "<td class=\"n\">%s</td>", buf);
}

static void td_str(FILE *out, const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (json_is_string(v))
		td(out, json_string_value(v));
	else if (!v || json_is_null(v))
		td(out, "");
	else {
		char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

		td(out, s ? s : "?");
		free(s);
	}
}

#define HTML_MAX_ROWS 200

int render_html(const struct timeline *tl, FILE *out)
{
	json_t *root = timeline_json(tl), *v, *rows[HTML_MAX_ROWS];
	json_t *files = json_object_get(root, "files"),
	       *missing = json_object_get(root, "missing_paths");
	json_t *findings = json_object_get(root, "findings");
	size_t i, n;
	char dur[32];

	fputs(
	    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	    "<title>tts-launch start-up timeline</title>\n<style>\n"
	    "body { font-family: 'DejaVu Sans', Arial, sans-serif; font-size: 13px; margin: 16px; "
	    "color: #222; }\n"
	    "h2 { font-size: 15px; margin: 22px 0 6px; }\n"
	    "table { border-collapse: collapse; }\n"
	    "td, th { border: 1px solid #ddd; padding: 2px 6px; text-align: left; "
	    "vertical-align: top; }\n"
	    "th { background: #f0f0f0; }\n"
	    "td.n { text-align: right; font-variant-numeric: tabular-nums; }\n"
	    "p.note { color: #666; }\n"
	    /* no horizontal scroll in a 1400 px window: the plot scales down
	     * (it has a viewBox), long paths wrap */
	    "svg { max-width: 100%; height: auto; }\n"
	    "td { overflow-wrap: anywhere; }\n"
	    "</style></head><body>\n",
	    out);
	if (render_svg(tl, out) < 0)
		return -1;

	/* findings first: they are the point of a diagnosis */
	fprintf(out, "<h2 id=\"findings\">Findings (%zu)</h2>\n", json_array_size(findings));
	if (!json_array_size(findings)) {
		fputs("<p class=\"note\">None recorded in this timeline.</p>\n", out);
	} else {
		fputs("<table class=\"findings\"><tr><th>severity</th><th>rule</th><th>finding</th>"
		      "<th>fix</th></tr>\n",
		      out);
		json_array_foreach (findings, i, v) {
			fputs("<tr>", out);
			td_str(out, v, "severity");
			td_str(out, v, json_object_get(v, "rule") ? "rule" : "id");
			td_str(out, v, json_object_get(v, "message") ? "message" : "title");
			td_str(out, v, "fix");
			fputs("</tr>\n", out);
		}
		fputs("</table>\n", out);
	}

	fputs("<h2 id=\"phases\">Phases</h2>\n<table class=\"phases\"><tr><th>phase</th>"
	      "<th>start</th><th>duration</th></tr>\n",
	      out);
	json_array_foreach (json_object_get(root, "phases"), i, v) {
		fputs("<tr>", out);
		td_str(out, v, "name");
		svg_fmt_dur(dur, sizeof(dur), num(v, "start_ms"));
		fprintf(out, "<td class=\"n\">%s</td>", dur);
		svg_fmt_dur(dur, sizeof(dur), num(v, "end_ms") - num(v, "start_ms"));
		fprintf(out, "<td class=\"n\">%s</td></tr>\n", dur);
	}
	fputs("</table>\n", out);

	if (json_array_size(json_object_get(root, "downloads"))) {
		fputs("<h2 id=\"downloads\">Downloads</h2>\n<table class=\"downloads\"><tr>"
		      "<th>file</th><th>bytes</th><th>MB/s</th><th>completed</th></tr>\n",
		      out);
		json_array_foreach (json_object_get(root, "downloads"), i, v) {
			fputs("<tr>", out);
			td_str(out, v, "path");
			td_num(out, v, "bytes", 1);
			td_num(out, v, "rate_mb_s", 0);
			td(out, json_is_true(json_object_get(v, "completed")) ? "yes" : "no");
			fputs("</tr>\n", out);
		}
		fputs("</table>\n", out);
	}

	n = top_n(files, NULL, rows, HTML_MAX_ROWS);
	fprintf(out, "<h2 id=\"files\">Files (%zu; the %zu with the most bytes)</h2>\n",
		json_array_size(files), n);
	fputs("<table class=\"files\"><tr><th>path</th><th>class</th><th>opens</th><th>read</th>"
	      "<th>mapped</th><th>written</th><th>faults</th><th>first ms</th><th>last "
	      "ms</th></tr>\n",
	      out);
	for (i = 0; i < n; i++) {
		fputs("<tr>", out);
		td_str(out, rows[i], "path");
		td_str(out, rows[i], "class");
		td_num(out, rows[i], "opens", 0);
		td_num(out, rows[i], "bytes_read", 1);
		td_num(out, rows[i], "mmap_bytes", 1);
		td_num(out, rows[i], "bytes_written", 1);
		td_num(out, rows[i], "faults", 0);
		td_num(out, rows[i], "first_ms", 0);
		td_num(out, rows[i], "last_ms", 0);
		fputs("</tr>\n", out);
	}
	fputs("</table>\n", out);

	n = top_n(missing, "attempts", rows, HTML_MAX_ROWS);
	fprintf(out, "<h2 id=\"missing\">Missing paths (%zu; the %zu tried most)</h2>\n",
		json_array_size(missing), n);
	fputs("<table class=\"missing\"><tr><th>path</th><th>attempts</th><th>errno</th>"
	      "<th>first ms</th></tr>\n",
	      out);
	for (i = 0; i < n; i++) {
		fputs("<tr>", out);
		td_str(out, rows[i], "path");
		td_num(out, rows[i], "attempts", 0);
		td_str(out, rows[i], "errno");
		td_num(out, rows[i], "first_ms", 0);
		fputs("</tr>\n", out);
	}
	fputs("</table>\n</body></html>\n", out);
	return ferror(out) ? -1 : 0;
}
