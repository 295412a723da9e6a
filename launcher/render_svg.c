/* render_svg: the start-up as a plot, after `systemd-analyze plot`.
 *
 * Layout, top to bottom: a title, the marks (labels staggered on three rows
 * so neighbours never overlap), one row per phase in order of start (a
 * download's row says its size and rate), the page-fault rate under them,
 * and a legend. A bar's label goes right of the bar, left of it when the
 * right side is too short, inside it as a last resort; each bar has its own
 * row, so labels of different bars cannot collide. The ready line crosses
 * everything. Text widths are estimated (no font metrics in C): the estimate
 * is generous for DejaVu Sans, the font Debian's chromium falls back to. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "render_svg.h"
#include "timeline_internal.h"
#include "util.h"

#define WIDTH	  1400
#define MARGIN	  20
#define ROW_H	  22
#define BAR_H	  16
#define FONT_PX	  12
#define CHAR_W	  7.2 /* px per character at 12px, a little over DejaVu Sans */
#define MARK_ROWS 3
#define FAULT_H	  120
#define TITLE_H	  56

static double num(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : NAN;
}

void svg_escape(FILE *out, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	for (size_t i = 0, l; i < n; i += l) {
		const unsigned char *p = (const unsigned char *)s + i;

		l = utf8_char_len(s + i, n - i);
		if (!l) {
			/* not UTF-8 (a label cut inside a character): U+FFFD, so the
			 * file stays well-formed XML */
			fputs("\xef\xbf\xbd", out);
			l = 1;
			continue;
		}
		if (l == 3 && p[0] == 0xef && p[1] == 0xbf && p[2] >= 0xbe) {
			fputs("\xef\xbf\xbd", out); /* U+FFFE, U+FFFF: not XML characters */
			continue;
		}
		if (l == 2 && p[0] == 0xc2 && p[1] < 0xa0) {
			fputc('?', out); /* C1 controls: allowed by XML 1.0, not wanted in text */
			continue;
		}
		switch (*p) {
		case '&':
			fputs("&amp;", out);
			break;
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		case '\'':
			fputs("&#39;", out);
			break;
		default:
			/* XML 1.0 forbids most control characters, even escaped */
			if ((*p < 0x20 && *p != '\t' && *p != '\n') || *p == 0x7f)
				fputc('?', out);
			else
				fwrite(p, 1, l, out);
		}
	}
}

/* How many bytes of s, at most max, end on a UTF-8 character boundary (a
 * label cut in the middle of a character is not valid XML). */
static int utf8_prefix(const char *s, size_t max) { return (int)utf8_prefix_len(s, max); }

static void fmt_dur(char *buf, size_t len, double ms)
{
	if (ms >= 1000)
		snprintf(buf, len, "%.2f s", ms / 1e3);
	else if (ms >= 10)
		snprintf(buf, len, "%.0f ms", ms);
	else
		snprintf(buf, len, "%.1f ms", ms);
}

static double text_w(const char *s) { return (double)strlen(s) * CHAR_W; }

struct category {
	const char *name, *fill;
};

/* fills chosen to be told apart, also by the PNG test (tests/e2e/test_report.py) */
static const struct category cats[] = {
    {"launcher", "#7b8fc7"}, {"python", "#e0b050"},	{"config / cache", "#3fb8a0"},
    {"download", "#3a9a3a"}, {"model load", "#8e44ad"}, {"mlock", "#f07010"},
    {"ready", "#d62728"},    {"other", "#9a9a9a"},
};

static const struct category *category_of(const char *phase)
{
	static const struct {
		const char *prefix;
		int cat;
	} map[] = {
	    {"launch", 0},   {"spawn", 0},  {"stale", 0},  {"interpreter", 1},
	    {"imports", 1},  {"import", 1}, {"config", 2}, {"cache", 2},
	    {"download", 3}, {"model", 4},  {"mlock", 5},  {"ready", 6},
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strncmp(phase, map[i].prefix, strlen(map[i].prefix)))
			return &cats[map[i].cat];
	return &cats[7];
}

/* downloads[] by the base name of their path (the first of equal ones), for
 * the "download:BASENAME" phases: built once, so many phases and many
 * downloads cost a lookup each, not one scan each. */
static json_t *downloads_by_base(const json_t *root)
{
	json_t *idx = json_object(), *d;
	size_t i;

	json_array_foreach (json_object_get(root, "downloads"), i, d) {
		const char *p = json_string_value(json_object_get(d, "path"));
		const char *b = p ? strrchr(p, '/') : NULL;

		if (idx && p && !json_object_get(idx, b ? b + 1 : p))
			json_object_set(idx, b ? b + 1 : p, d);
	}
	return idx;
}

/* The downloads[] entry behind a "download:BASENAME" phase, if any. */
static json_t *download_of(const json_t *by_base, const char *phase)
{
	return strncmp(phase, "download:", 9) ? NULL : json_object_get(by_base, phase + 9);
}

/* "org/repo 108f71ed… (65.8 MiB, 38.7 MB/s)" for a hub cache blob. */
static void download_label(const json_t *d, char *buf, size_t len)
{
	const char *path = json_string_value(json_object_get(d, "path"));
	const char *m = path ? strstr(path, "models--") : NULL;
	const char *base = path ? strrchr(path, '/') : NULL;
	char repo[160] = "", size[32], rate[32] = "";

	base = base ? base + 1 : path ? path : "?";
	if (m) {
		const char *slash = strchr(m + 8, '/');
		int l = slash ? (int)(slash - m - 8) : (int)strlen(m + 8);
		char *sep;

		snprintf(repo, sizeof(repo), "%.*s ",
			 l > 150 ? (int)utf8_prefix_len(m + 8, 150) : l, m + 8);
		sep = strstr(repo, "--");
		if (sep) {
			sep[0] = '/';
			memmove(sep + 1, sep + 2, strlen(sep + 2) + 1);
		}
	}
	fmt_bytes(size, sizeof(size), num(d, "bytes"));
	if (num(d, "rate_mb_s") >= 0.1)
		snprintf(rate, sizeof(rate), ", %.1f MB/s", num(d, "rate_mb_s"));
	else if (num(d, "rate_mb_s") >= 0)
		snprintf(rate, sizeof(rate), ", %.1f kB/s", num(d, "rate_mb_s") * 1e3);
	snprintf(buf, len, "download %s%.*s%s (%s%s)", repo, utf8_prefix(base, 12), base,
		 strlen(base) > 12 ? "…" : "", size, rate);
	utf8_trim(buf); /* cut to len: at a character boundary */
}

/* A tick step of 1, 2 or 5 times a power of ten giving at most ~12 ticks. */
static double tick_step(double span)
{
	double raw = span / 12, p = pow(10, floor(log10(raw > 0 ? raw : 1)));

	if (raw <= p)
		return p;
	if (raw <= 2 * p)
		return 2 * p;
	if (raw <= 5 * p)
		return 5 * p;
	return 10 * p;
}

struct plot {
	double x0, x1, tmax;
};

static double px(const struct plot *p, double ms)
{
	if (ms < 0)
		ms = 0;
	if (ms > p->tmax)
		ms = p->tmax;
	return p->x0 + (p->x1 - p->x0) * ms / p->tmax;
}

static void text(FILE *out, double x, double y, const char *anchor, const char *cls, const char *s)
{
	fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" class=\"%s\">", x, y, anchor,
		cls);
	svg_escape(out, s);
	fputs("</text>\n", out);
}

int render_svg(const struct timeline *tl, FILE *out)
{
	const json_t *root = timeline_json(tl);
	json_t *phases = json_object_get(root, "phases"), *marks = json_object_get(root, "marks");
	json_t *mem = json_object_get(root, "memory"), *fr = json_object_get(mem, "fault_rate");
	json_t *v, *counts = json_object_get(fr, "counts"), *by_base = downloads_by_base(root);
	size_t i, n = json_array_size(phases);
	double ready = num(marks, "ready"), bucket = num(fr, "bucket_ms"), step, y, top, bottom;
	double fmax = 0;
	struct plot p = {MARGIN, WIDTH - MARGIN, 0};
	double mark_end[MARK_ROWS];
	const char *key;
	char buf[512], dur[32];
	int height;

	/* time span: up to the end of the last phase or ready (not the exit:
	 * a service runs long after its start-up) */
	json_array_foreach (phases, i, v)
		if (num(v, "end_ms") > p.tmax)
			p.tmax = num(v, "end_ms");
	if (ready > p.tmax)
		p.tmax = ready;
	if (p.tmax <= 0)
		p.tmax = 1;
	p.tmax *= 1.02;
	step = tick_step(p.tmax);

	top = TITLE_H + MARK_ROWS * 14 + 8;
	bottom = top + (double)(n ? n : 1) * ROW_H;
	height = (int)(bottom + 20 + FAULT_H + 40 + 30);

	fprintf(out,
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\">\n",
		WIDTH, height, WIDTH, height);
	fprintf(out,
		"<style>\n"
		"text { font-family: 'DejaVu Sans', 'Liberation Sans', Arial, sans-serif; "
		"font-size: %dpx; fill: #222; }\n"
		"text.title { font-size: 16px; font-weight: bold; }\n"
		"text.sub { fill: #555; }\n"
		"text.tick { fill: #777; font-size: 10px; }\n"
		"text.inside { fill: #fff; }\n"
		"text.ready { fill: #d62728; font-weight: bold; }\n"
		"line.grid { stroke: #e4e4e4; stroke-width: 1; }\n"
		"line.mark { stroke: #888; stroke-width: 1; stroke-dasharray: 3,3; }\n"
		"line.ready { stroke: #d62728; stroke-width: 2; }\n"
		"</style>\n",
		FONT_PX);
	fprintf(out,
		"<rect class=\"background\" x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" "
		"fill=\"#ffffff\"/>\n",
		WIDTH, height);

	/* title: the command and the headline figures */
	{
		json_t *cmd = json_object_get(json_object_get(root, "process"), "command");
		size_t off = 0;

		buf[0] = 0;
		json_array_foreach (cmd, i, v)
			off +=
			    (size_t)snprintf(buf + off, off < sizeof(buf) ? sizeof(buf) - off : 0,
					     "%s%s", i ? " " : "", json_string_value(v) ?: "");
		if (off >= sizeof(buf))
			strcpy(buf + utf8_prefix(buf, sizeof(buf) - 4), "...");
		fputs("<text x=\"20\" y=\"24\" class=\"title\">tts-launch start-up: ", out);
		svg_escape(out, buf[0] ? buf : "(no command)");
		fputs("</text>\n", out);
		if (!isnan(ready))
			fmt_dur(dur, sizeof(dur), ready);
		snprintf(
		    buf, sizeof(buf),
		    "ready %s%s · %lld page faults (%lld major) · %zu downloads · %zu missing paths"
		    " · tracing %s",
		    isnan(ready) ? "not reached" : "at ", isnan(ready) ? "" : dur,
		    (long long)json_integer_value(json_object_get(mem, "page_faults")),
		    (long long)json_integer_value(json_object_get(mem, "major_faults")),
		    json_array_size(json_object_get(root, "downloads")),
		    json_array_size(json_object_get(root, "missing_paths")),
		    json_is_true(json_object_get(json_object_get(root, "tracing"), "enabled"))
			? "on"
			: "off");
		text(out, 20, 44, "start", "sub", buf);
	}

	/* time grid with tick labels, over the rows and the fault panel */
	/* about 12 ticks; the count is capped too, whatever tmax and step are */
	for (double t = 0; t <= p.tmax && t / step < 100; t += step) {
		double x = px(&p, t);

		fprintf(out,
			"<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
			x, top - 4, x, bottom + 20 + FAULT_H);
		if (t > 0)
			fmt_dur(dur, sizeof(dur), t);
		else
			snprintf(dur, sizeof(dur), "0");
		if (x + 2 + text_w(dur) <= WIDTH)
			text(out, x + 2, bottom + 12, "start", "tick", dur);
		else
			text(out, x - 2, bottom + 12, "end", "tick", dur);
	}

	/* phase rows */
	json_array_foreach (phases, i, v) {
		const char *name = json_string_value(json_object_get(v, "name")) ?: "?";
		const struct category *c = category_of(name);
		json_t *d = download_of(by_base, name);
		double a = num(v, "start_ms"), b = num(v, "end_ms");
		double xa, xb, w, tw, ry = top + (double)i * ROW_H;

		if (isnan(a))
			continue;
		if (isnan(b) || b < a)
			b = a;
		xa = px(&p, a);
		xb = px(&p, b);
		w = xb - xa < 1 ? 1 : xb - xa; /* a zero-length phase stays visible */
		fmt_dur(dur, sizeof(dur), b - a);
		if (d) {
			download_label(d, buf, sizeof(buf) - 40);
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "  %s", dur);
			utf8_trim(buf);
		} else {
			snprintf(buf, sizeof(buf), "%.*s  %s", utf8_prefix(name, 400), name, dur);
		}
		fprintf(out, "<rect class=\"phase%s\" data-phase=\"", d ? " download" : "");
		svg_escape(out, name);
		fprintf(out,
			"\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
			"<title>",
			xa, ry + (ROW_H - BAR_H) / 2.0, w, BAR_H, c->fill);
		svg_escape(out, buf);
		fputs("</title></rect>\n", out);
		tw = text_w(buf);
		if (xa + w + 4 + tw <= p.x1)
			text(out, xa + w + 4, ry + 15, "start", "label", buf);
		else if (xa - 4 - tw >= p.x0)
			text(out, xa - 4, ry + 15, "end", "label", buf);
		else
			text(out, xa + 4, ry + 15, "start", "inside", buf);
	}

	/* marks: a dashed line each; labels staggered over MARK_ROWS rows */
	for (int r = 0; r < MARK_ROWS; r++)
		mark_end[r] = -1e9;
	{
		/* in time order, so staggering works left to right */
		const char *names[64];
		double at[64];
		size_t nm = 0;

		json_object_foreach (marks, key, v) {
			size_t j;

			if (!json_is_number(v) || nm == 64 || !strcmp(key, "ready") ||
			    json_number_value(v) > p.tmax)
				continue;
			for (j = nm; j > 0 && at[j - 1] > json_number_value(v); j--) {
				at[j] = at[j - 1];
				names[j] = names[j - 1];
			}
			at[j] = json_number_value(v);
			names[j] = key;
			nm++;
		}
		for (size_t j = 0; j < nm; j++) {
			double x = px(&p, at[j]);
			int r;

			fmt_dur(dur, sizeof(dur), at[j]);
			snprintf(buf, sizeof(buf), "%.*s %s", utf8_prefix(names[j], 200), names[j],
				 dur);
			for (r = 0; r < MARK_ROWS - 1 && mark_end[r] > x - 6; r++)
				;
			mark_end[r] = x + text_w(buf);
			fputs("<line class=\"mark\" data-mark=\"", out);
			svg_escape(out, names[j]);
			fprintf(out, "\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x,
				TITLE_H + r * 14.0 + 4, x, bottom);
			text(out, x + 3, TITLE_H + r * 14.0 + 12, "start", "tick", buf);
		}
	}

	/* page faults per second under the rows */
	y = bottom + 20;
	json_array_foreach (counts, i, v)
		if (json_number_value(v) > fmax)
			fmax = json_number_value(v);
	fprintf(out,
		"<rect class=\"panel\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" "
		"fill=\"#f7f7f7\"/>\n",
		p.x0, y, p.x1 - p.x0, FAULT_H);
	if (bucket > 0 && fmax > 0) {
		double scale = (FAULT_H - 18) / fmax;

		fprintf(out,
			"<path class=\"faults\" fill=\"#4a7fc1\" fill-opacity=\"0.55\" "
			"stroke=\"#2a5a9a\" stroke-width=\"1\" d=\"M%.1f %.1f",
			px(&p, 0), y + FAULT_H);
		json_array_foreach (counts, i, v) {
			double t0 = (double)i * bucket,
			       yy = y + FAULT_H - json_number_value(v) * scale;

			if (t0 > p.tmax)
				break;
			fprintf(out, " L%.1f %.1f L%.1f %.1f", px(&p, t0), yy, px(&p, t0 + bucket),
				yy);
		}
		fprintf(out, " L%.1f %.1f Z\"/>\n",
			px(&p, fmin((double)json_array_size(counts) * bucket, p.tmax)),
			y + FAULT_H);
		snprintf(buf, sizeof(buf), "page faults per %.0f ms (max %.0f, %.0f/s)", bucket,
			 fmax, fmax * 1000 / bucket);
	} else {
		snprintf(buf, sizeof(buf), "page faults: no series in this timeline");
	}
	text(out, p.x0 + 4, y + 13, "start", "sub", buf);

	/* ready: across everything */
	if (!isnan(ready)) {
		double x = px(&p, ready);

		fmt_dur(dur, sizeof(dur), ready);
		snprintf(buf, sizeof(buf), "ready %s", dur);
		fprintf(out,
			"<line class=\"ready\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
			x, top - 6, x, y + FAULT_H);
		if (x + 4 + text_w(buf) <= WIDTH)
			text(out, x + 4, top - 8, "start", "ready", buf);
		else
			text(out, x - 4, top - 8, "end", "ready", buf);
	}

	/* legend */
	{
		double x = p.x0, ly = y + FAULT_H + 26;

		for (size_t c = 0; c < sizeof(cats) / sizeof(cats[0]); c++) {
			fprintf(out,
				"<rect class=\"legend\" x=\"%.1f\" y=\"%.1f\" width=\"12\" "
				"height=\"12\" fill=\"%s\"/>\n",
				x, ly - 10, cats[c].fill);
			text(out, x + 16, ly, "start", "label", cats[c].name);
			x += 16 + text_w(cats[c].name) + 18;
		}
	}
	fputs("</svg>\n", out);
	json_decref(by_base);
	return ferror(out) ? -1 : 0;
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
		fmt_dur(dur, sizeof(dur), num(v, "start_ms"));
		fprintf(out, "<td class=\"n\">%s</td>", dur);
		fmt_dur(dur, sizeof(dur), num(v, "end_ms") - num(v, "start_ms"));
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
