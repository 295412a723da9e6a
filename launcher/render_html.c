/* render_html: the plot of render_svg with tables of the findings, phases,
 * downloads, the top files and the missing paths, in one HTML page. Reads
 * the model through its typed views (timeline_view.h): a member that is
 * missing or of the wrong type is an empty cell (a number: "-"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attrib_build.h"
#include "render_svg.h"
#include "timeline_view.h"
#include "util.h"

static double file_bytes(const struct tl_file *f)
{
	return tl_or0(f->bytes_read) + tl_or0(f->mmap_bytes) + tl_or0(f->bytes_written);
}

static int files_desc(const void *x, const void *y)
{
	double p = file_bytes(*(const struct tl_file *const *)x);
	double q = file_bytes(*(const struct tl_file *const *)y);

	return p > q ? -1 : p < q;
}

static int missing_desc(const void *x, const void *y)
{
	double p = tl_or0((*(const struct tl_missing *const *)x)->attempts);
	double q = tl_or0((*(const struct tl_missing *const *)y)->attempts);

	return p > q ? -1 : p < q;
}

/* Pointers to the first max of the n elements (size sz) at arr, largest
 * first by cmp, into out; how many. */
static size_t top_n(const void *arr, size_t n, size_t sz, int (*cmp)(const void *, const void *),
		    const void **out, size_t max)
{
	const void **all = calloc(n ? n : 1, sizeof(*all));

	if (!all)
		return 0;
	for (size_t i = 0; i < n; i++)
		all[i] = (const char *)arr + i * sz;
	qsort(all, n, sizeof(*all), cmp);
	if (n > max)
		n = max;
	memcpy(out, all, n * sizeof(*out));
	free(all);
	return n;
}

static void td(FILE *out, const char *s)
{
	fputs("<td>", out);
	svg_escape(out, s ? s : "");
	fputs("</td>", out);
}

static void td_num(FILE *out, double v, int bytes)
{
	char buf[64];

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

#define HTML_MAX_ROWS 200

static void findings(const struct tl_view *v, FILE *out)
{
	fprintf(out, "<h2 id=\"findings\">Findings (%zu)</h2>\n", v->n_findings);
	if (!v->n_findings) {
		fputs("<p class=\"note\">None recorded in this timeline.</p>\n", out);
		return;
	}
	fputs("<table class=\"findings\"><tr><th>severity</th><th>rule</th><th>finding</th>"
	      "<th>fix</th></tr>\n",
	      out);
	for (size_t i = 0; i < v->n_findings; i++) {
		const struct tl_finding *f = &v->findings[i];

		fputs("<tr>", out);
		td(out, f->severity);
		td(out, f->rule ? f->rule : f->id);
		td(out, f->message ? f->message : f->title);
		td(out, f->fix);
		fputs("</tr>\n", out);
	}
	fputs("</table>\n", out);
}

/* "where the time went": the attribution's causes, largest first (only
 * when the timeline has the section) */
static void attribution_table(const struct timeline *tl, FILE *out)
{
	struct attr_view a;
	char dur[32];

	if (!attr_view_decode(tl, &a))
		return;
	fprintf(out,
		"<h2 id=\"attribution\">Where the time went (%zu causes, %.1f%% explained)</h2>\n"
		"<table class=\"attribution\"><tr><th>kind</th><th>what</th><th>time</th>"
		"<th>share</th></tr>\n",
		a.r.n_causes,
		a.r.window_us > 0 ? 100.0 * (double)a.r.explained_us / (double)a.r.window_us : 0);
	for (size_t i = 0; i < a.r.n_causes; i++) {
		const struct attr_cause *c = &a.r.causes[i];

		fputs("<tr>", out);
		td(out, attr_kind_name(c->kind));
		td(out, c->what);
		svg_fmt_dur(dur, sizeof(dur), (double)c->us / 1000);
		fprintf(out, "<td class=\"n\">%s</td><td class=\"n\">%.1f%%</td></tr>\n", dur,
			a.r.window_us > 0 ? 100.0 * (double)c->us / (double)a.r.window_us : 0);
	}
	fputs("</table>\n", out);
	attr_view_free(&a);
}

static void phases_downloads(const struct tl_view *v, FILE *out)
{
	char dur[32];

	fputs("<h2 id=\"phases\">Phases</h2>\n<table class=\"phases\"><tr><th>phase</th>"
	      "<th>start</th><th>duration</th></tr>\n",
	      out);
	for (size_t i = 0; i < v->n_phases; i++) {
		const struct tl_phase *p = &v->phases[i];

		fputs("<tr>", out);
		td(out, p->name);
		svg_fmt_dur(dur, sizeof(dur), p->start_ms);
		fprintf(out, "<td class=\"n\">%s</td>", dur);
		svg_fmt_dur(dur, sizeof(dur), p->end_ms - p->start_ms);
		fprintf(out, "<td class=\"n\">%s</td></tr>\n", dur);
	}
	fputs("</table>\n", out);

	if (!v->n_downloads)
		return;
	fputs("<h2 id=\"downloads\">Downloads</h2>\n<table class=\"downloads\"><tr>"
	      "<th>file</th><th>bytes</th><th>MB/s</th><th>completed</th></tr>\n",
	      out);
	for (size_t i = 0; i < v->n_downloads; i++) {
		const struct tl_download *d = &v->downloads[i];

		fputs("<tr>", out);
		td(out, d->name ? d->name : d->path); /* older timelines: the path */
		td_num(out, d->bytes, 1);
		td_num(out, d->rate_mb_s, 0);
		td(out, d->completed ? "yes" : "no");
		fputs("</tr>\n", out);
	}
	fputs("</table>\n", out);
}

/* A download's temp file, or with blobs a hub cache blob it became (which
 * the client looks for before it downloads), by the download's name: "NAME
 * (what)" in buf; else path itself */
static const char *as_download(const struct tl_view *v, const char *path, bool blobs,
			       const char *what, char *buf, size_t len)
{
	const struct tl_download *d = tl_view_download_at(v, path, blobs);

	if (!d)
		return path;
	snprintf(buf, len, "%.4000s (%s)", d->name, what);
	return buf;
}

static void files_missing(const struct tl_view *v, FILE *out)
{
	const void *rows[HTML_MAX_ROWS];
	size_t n;

	n = top_n(v->files, v->n_files, sizeof(*v->files), files_desc, rows, HTML_MAX_ROWS);
	fprintf(out, "<h2 id=\"files\">Files (%zu; the %zu with the most bytes)</h2>\n", v->n_files,
		n);
	fputs("<table class=\"files\"><tr><th>path</th><th>class</th><th>opens</th><th>read</th>"
	      "<th>mapped</th><th>written</th><th>faults</th><th>first ms</th><th>last "
	      "ms</th></tr>\n",
	      out);
	for (size_t i = 0; i < n; i++) {
		const struct tl_file *f = rows[i];
		char buf[4200];

		fputs("<tr>", out);
		td(out, as_download(v, f->path, false, "download", buf, sizeof(buf)));
		td(out, f->class);
		td_num(out, f->opens, 0);
		td_num(out, f->bytes_read, 1);
		td_num(out, f->mmap_bytes, 1);
		td_num(out, f->bytes_written, 1);
		td_num(out, f->faults, 0);
		td_num(out, f->first_ms, 0);
		td_num(out, f->last_ms, 0);
		fputs("</tr>\n", out);
	}
	fputs("</table>\n", out);

	n = top_n(v->missing, v->n_missing, sizeof(*v->missing), missing_desc, rows, HTML_MAX_ROWS);
	fprintf(out, "<h2 id=\"missing\">Missing paths (%zu; the %zu tried most)</h2>\n",
		v->n_missing, n);
	fputs("<table class=\"missing\"><tr><th>path</th><th>attempts</th><th>errno</th>"
	      "<th>first ms</th></tr>\n",
	      out);
	for (size_t i = 0; i < n; i++) {
		const struct tl_missing *m = rows[i];
		char buf[4200];

		fputs("<tr>", out);
		td(out, as_download(v, m->path, true, "download, before it", buf, sizeof(buf)));
		td_num(out, m->attempts, 0);
		td(out, m->errno_name);
		td_num(out, m->first_ms, 0);
		fputs("</tr>\n", out);
	}
	fputs("</table>\n", out);
}

int render_html(const struct timeline *tl, FILE *out)
{
	struct tl_view *v;

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
	v = tl_view_decode(tl);
	if (!v)
		return -1;
	/* findings first: they are the point of a diagnosis */
	findings(v, out);
	attribution_table(tl, out);
	phases_downloads(v, out);
	files_missing(v, out);
	fputs("</body></html>\n", out);
	tl_view_free(v);
	return ferror(out) ? -1 : 0;
}
