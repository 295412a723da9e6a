/* render_svg: the start-up as a plot, after `systemd-analyze plot`.
 *
 * Layout, top to bottom: a title, the marks (labels staggered on three rows
 * so neighbours never overlap), one row per phase in order of start (a
 * download's row says its size and rate), the page-fault rate under them,
 * and a legend. A bar's label goes right of the bar, left of it when the
 * right side is too short, inside it as a last resort; each bar has its own
 * row, so labels of different bars cannot collide. The ready line crosses
 * everything but labels: a label takes the side of its bar the line does
 * not cross, and where it must be crossed the line breaks around it. Text widths are estimated (no
 * font metrics in C): the estimate is generous for DejaVu Sans, the font Debian's chromium falls
 * back to. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "attrib_build.h"
#include "hfcache.h"
#include "render_svg.h"
#include "timeline_view.h"
#include "util.h"

#define WIDTH	    1400
#define MARGIN	    20
#define ROW_H	    22
#define BAR_H	    16
#define FONT_PX	    12
#define CHAR_W	    7.2 /* px per character at 12px, a little over DejaVu Sans */
#define MARK_ROWS   3
#define FAULT_H	    120
#define TITLE_H	    56
#define STRIP_H	    18			   /* the critical thread's state strip */
#define STRIP_BLOCK (8 + 18 + STRIP_H + 8) /* its caption, the strip, a gap */
#define KINDS_H	    22			   /* a row of its legend */

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

void svg_fmt_dur(char *buf, size_t len, double ms)
{
	if (ms >= 1000)
		snprintf(buf, len, "%.2f s", ms / 1e3);
	else if (ms >= 10)
		snprintf(buf, len, "%.0f ms", ms);
	else
		snprintf(buf, len, "%.1f ms", ms);
}

static double text_w(const char *s) { return (double)strlen(s) * CHAR_W; }

/* A label's vertical band the ready line breaks for (ROW_H - 4 of a row). */
#define LABEL_GAP (ROW_H - 4)

/* Would a vertical line at x cross a label from lx, tw wide? */
static bool crosses(double x, double lx, double tw)
{
	return !isnan(x) && x >= lx - 3 && x <= lx + tw + 3;
}

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

/* downloads[] by label (the view's: their name, or in an older timeline
 * the base name of their path), for the "download:LABEL" phases: sorted
 * once, so many phases and many downloads cost a binary search each, not
 * one scan each. */
struct by_base {
	const char *base;
	const struct tl_download *d;
	size_t at; /* position in downloads[]: equal names keep their order */
};

static int by_base_cmp(const void *x, const void *y)
{
	const struct by_base *a = x, *b = y;
	int c = strcmp(a->base, b->base);

	return c ? c : a->at < b->at ? -1 : a->at > b->at;
}

static struct by_base *downloads_by_base(const struct tl_view *v, size_t *n)
{
	struct by_base *idx = calloc(v->n_downloads ? v->n_downloads : 1, sizeof(*idx));

	*n = 0;
	for (size_t i = 0; idx && i < v->n_downloads; i++)
		if (v->downloads[i].path || v->downloads[i].name)
			idx[(*n)++] = (struct by_base){v->downloads[i].label, &v->downloads[i], i};
	if (idx)
		qsort(idx, *n, sizeof(*idx), by_base_cmp);
	return idx;
}

/* The downloads[] entry behind a "download:LABEL" phase, if any: the
 * first of that name. */
static const struct tl_download *download_of(const struct by_base *idx, size_t n, const char *phase)
{
	size_t lo = 0, hi = n;

	if (strncmp(phase, "download:", 9))
		return NULL;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(idx[mid].base, phase + 9) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && !strcmp(idx[lo].base, phase + 9) ? idx[lo].d : NULL;
}

/* "download hf_cache/w2v-bert-2.0/model.safetensors (65.8 MiB, 38.7 MB/s)"
 * by its name; in a timeline older than names, "org/repo 108f71ed… (...)"
 * for a hub cache blob. */
static void download_label(const struct tl_download *d, char *buf, size_t len)
{
	const char *path = d->path;
	const char *base = path ? strrchr(path, '/') : NULL;
	char repo[160] = "", size[32], rate[32] = "";

	base = base ? base + 1 : path ? path : "?";
	if (!d->name && hf_repo_id(path, repo, 151)) /* at most 150 bytes, and a space */
		strcat(repo, " ");
	fmt_bytes(size, sizeof(size), d->bytes);
	if (d->rate_mb_s >= 0.1)
		snprintf(rate, sizeof(rate), ", %.1f MB/s", d->rate_mb_s);
	else if (d->rate_mb_s >= 0)
		snprintf(rate, sizeof(rate), ", %.1f kB/s", d->rate_mb_s * 1e3);
	if (d->name) /* whole, up to 200 bytes: a name says which file it is */
		snprintf(buf, len, "download %.*s%s (%s%s)", utf8_prefix(d->name, 200), d->name,
			 strlen(d->name) > 200 ? "…" : "", size, rate);
	else
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

/* A count for "%lld": as jansson's json_integer_value read it before, 0 for
 * none; in range for any loaded value (they are bounded by 1e19). */
static long long count_ll(double v) { return tl_has(v) && fabs(v) < 9e18 ? (long long)v : 0; }

/* the attribution's kinds (enum attr_kind order): told apart from each
 * other, by the PNG test too */
static const char *const kind_fills[AK_N] = {
    [AK_CPU] = "#1f77b4",   [AK_DISK] = "#8c564b",  [AK_FAULT] = "#e377c2", [AK_NET] = "#2ca02c",
    [AK_SLEEP] = "#bcbd22", [AK_LOCK] = "#9467bd",  [AK_CHILD] = "#17becf", [AK_GPU] = "#ff7f0e",
    [AK_RUNQ] = "#aec7e8",  [AK_OTHER] = "#c7c7c7",
};

const char *svg_kind_fill(int kind)
{
	return kind >= 0 && kind < AK_N ? kind_fills[kind] : kind_fills[AK_OTHER];
}

/* The legend of the strip's kinds, largest first with their share: rows
 * of it from baseline y, wrapped inside the plot; how many rows (out NULL:
 * only counted). */
static int strip_legend(FILE *out, const struct plot *p, const struct attr_view *a, double y)
{
	long long by_kind[AK_N] = {0};
	double x = p->x0;
	int rows = 1;
	char buf[64];

	for (size_t i = 0; i < a->r.n_causes; i++)
		by_kind[a->r.causes[i].kind] += a->r.causes[i].us;
	for (int pass = 0; pass < AK_N; pass++) {
		int best = -1;
		double w;

		for (int k = 0; k < AK_N; k++)
			if (by_kind[k] > 0 && (best < 0 || by_kind[k] > by_kind[best]))
				best = k;
		if (best < 0)
			break;
		snprintf(buf, sizeof(buf), "%s %.1f%%", attr_kind_name((enum attr_kind)best),
			 a->r.window_us > 0 ? 100.0 * (double)by_kind[best] / (double)a->r.window_us
					    : 0);
		by_kind[best] = 0;
		w = 16 + text_w(buf) + 18;
		if (x > p->x0 && x + w - 18 > p->x1) {
			x = p->x0;
			y += KINDS_H;
			rows++;
		}
		if (!out) {
			x += w;
			continue;
		}
		fprintf(out,
			"<rect class=\"kind-legend\" data-kind=\"%s\" x=\"%.1f\" y=\"%.1f\" "
			"width=\"12\" height=\"12\" fill=\"%s\"/>\n",
			attr_kind_name((enum attr_kind)best), x, y - 10, kind_fills[best]);
		text(out, x + 16, y, "start", "label", buf);
		x += w;
	}
	return rows;
}

/* The critical thread's state along the time axis (attribution.strip):
 * a caption at baseline y + 12, the runs under it, coloured by kind, each
 * with a tooltip (its kind, longest cause, span). */
static void strip_draw(FILE *out, const struct plot *p, const struct attr_view *a, double y)
{
	char buf[400], d1[32], d2[32], d3[32];

	svg_fmt_dur(d1, sizeof(d1), a->window_ms);
	snprintf(buf, sizeof(buf),
		 "critical thread: where the time went (exec -> %s, %s, %.1f%% explained%s)",
		 a->complete ? "ready or exit" : "now", d1,
		 a->r.window_us > 0 ? 100.0 * (double)a->r.explained_us / (double)a->r.window_us
				    : 0,
		 a->r.segs_cut ? "; the strip is cut" : "");
	text(out, p->x0 + 4, y + 12, "start", "sub", buf);
	fprintf(out,
		"<rect class=\"strip-panel\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
		"height=\"%d\" fill=\"#f7f7f7\"/>\n",
		p->x0, y + 18, p->x1 - p->x0, STRIP_H);
	for (size_t i = 0; i < a->r.n_segs; i++) {
		const struct attr_seg *g = &a->r.segs[i];
		double xa = px(p, g->start), xb = px(p, g->end);

		svg_fmt_dur(d1, sizeof(d1), g->end - g->start);
		svg_fmt_dur(d2, sizeof(d2), g->start);
		svg_fmt_dur(d3, sizeof(d3), g->end);
		snprintf(buf, sizeof(buf), "%s %s (%s to %s): %.*s", attr_kind_name(g->kind), d1,
			 d2, d3, utf8_prefix(g->what, 200), g->what[0] ? g->what : "?");
		fprintf(out,
			"<rect class=\"state\" data-kind=\"%s\" x=\"%.2f\" y=\"%.1f\" "
			"width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>",
			attr_kind_name(g->kind), xa, y + 18, xb - xa > 0.2 ? xb - xa : 0.2, STRIP_H,
			kind_fills[g->kind]);
		svg_escape(out, buf);
		fputs("</title></rect>\n", out);
	}
}

int render_svg(const struct timeline *tl, FILE *out)
{
	struct tl_view *v = tl_view_decode(tl);
	const struct tl_series *fr;
	struct by_base *by_base;
	size_t i, n, n_base;
	double ready, bucket, step, y, top, bottom;
	double fmax = 0;
	struct plot p = {MARGIN, WIDTH - MARGIN, 0};
	double mark_end[MARK_ROWS];
	double rx, *gaps; /* the ready line's x; where it breaks for a label (top y) */
	size_t n_gaps = 0;
	char buf[512], dur[32];
	struct attr_view av;
	bool strip;
	int height, kind_rows = 0;

	if (!v)
		return -1;
	/* the attribution's strip, when the timeline has one */
	strip = attr_view_decode(tl, &av);
	if (strip && !av.r.n_segs) {
		attr_view_free(&av);
		strip = false;
	}
	by_base = downloads_by_base(v, &n_base);
	fr = &v->memory.fault_rate;
	n = v->n_phases;
	ready = tl_view_mark(v, "ready");
	bucket = fr->bucket_ms;

	/* time span: up to the end of the last phase or ready (not the exit:
	 * a service runs long after its start-up) */
	for (i = 0; i < n; i++)
		if (v->phases[i].end_ms > p.tmax)
			p.tmax = v->phases[i].end_ms;
	if (ready > p.tmax)
		p.tmax = ready;
	/* never ready: the window ends at the exit */
	if (strip && isnan(ready) && av.end_ms > p.tmax)
		p.tmax = av.end_ms;
	if (p.tmax <= 0)
		p.tmax = 1;
	p.tmax *= 1.02;
	step = tick_step(p.tmax);

	top = TITLE_H + MARK_ROWS * 14 + 8;
	bottom = top + (double)(n ? n : 1) * ROW_H;
	height = (int)(bottom + 20 + FAULT_H + 40 + 30);
	if (strip) {
		kind_rows = strip_legend(NULL, &p, &av, 0);
		height += STRIP_BLOCK + kind_rows * KINDS_H;
	}

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
		size_t off = 0;

		buf[0] = 0;
		for (i = 0; i < v->process.n_command; i++)
			off +=
			    (size_t)snprintf(buf + off, off < sizeof(buf) ? sizeof(buf) - off : 0,
					     "%s%s", i ? " " : "", v->process.command[i] ?: "");
		if (off >= sizeof(buf))
			strcpy(buf + utf8_prefix(buf, sizeof(buf) - 4), "...");
		fputs("<text x=\"20\" y=\"24\" class=\"title\">tts-launch start-up: ", out);
		svg_escape(out, buf[0] ? buf : "(no command)");
		fputs("</text>\n", out);
		if (!isnan(ready))
			svg_fmt_dur(dur, sizeof(dur), ready);
		snprintf(
		    buf, sizeof(buf),
		    "ready %s%s · %lld page faults (%lld major) · %zu downloads · %zu missing paths"
		    " · tracing %s",
		    isnan(ready) ? "not reached" : "at ", isnan(ready) ? "" : dur,
		    count_ll(v->memory.page_faults), count_ll(v->memory.major_faults),
		    v->n_downloads, v->n_missing, v->tracing.enabled ? "on" : "off");
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
			svg_fmt_dur(dur, sizeof(dur), t);
		else
			snprintf(dur, sizeof(dur), "0");
		if (x + 2 + text_w(dur) <= WIDTH)
			text(out, x + 2, bottom + 12, "start", "tick", dur);
		else
			text(out, x - 2, bottom + 12, "end", "tick", dur);
	}

	/* phase rows */
	rx = isnan(ready) ? NAN : px(&p, ready);
	gaps = malloc((n + 2) * sizeof(*gaps));
	for (i = 0; i < n; i++) {
		const char *name = v->phases[i].name ?: "?";
		const struct category *c = category_of(name);
		const struct tl_download *d = download_of(by_base, n_base, name);
		double a = v->phases[i].start_ms, b = v->phases[i].end_ms;
		double xa, xb, w, tw, ry = top + (double)i * ROW_H;
		char pdur[32];
		bool past;

		if (isnan(a))
			continue;
		if (isnan(b) || b < a)
			b = a;
		xa = px(&p, a);
		xb = px(&p, b);
		w = xb - xa < 1 ? 1 : xb - xa; /* a zero-length phase stays visible */
		svg_fmt_dur(dur, sizeof(dur), b - a);
		if (d) {
			download_label(d, buf, sizeof(buf) - 40);
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "  %s", dur);
			utf8_trim(buf);
		} else {
			snprintf(buf, sizeof(buf), "%.*s  %s", utf8_prefix(name, 400), name, dur);
		}
		/* with the attribution's strip (which says where the time up
		 * to ready went): a span that runs on past ready is drawn
		 * faded after it, its label says how much of it came after */
		past = strip && !isnan(rx) && a < ready && b > ready && w > 1 && rx - xa >= 1;
		if (past) {
			svg_fmt_dur(pdur, sizeof(pdur), b - ready);
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), " (%s after ready)",
				 pdur);
		}
		fprintf(out, "<rect class=\"phase%s\" data-phase=\"", d ? " download" : "");
		svg_escape(out, name);
		fprintf(out,
			"\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
			"<title>",
			xa, ry + (ROW_H - BAR_H) / 2.0, past ? rx - xa : w, BAR_H, c->fill);
		svg_escape(out, buf);
		fputs("</title></rect>\n", out);
		if (past) {
			fprintf(out,
				"<rect class=\"past-ready\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
				"height=\"%d\" fill=\"%s\" fill-opacity=\"0.3\"/>\n",
				rx, ry + (ROW_H - BAR_H) / 2.0, xa + w - rx, BAR_H, c->fill);
		}
		tw = text_w(buf);
		{
			/* right of the bar, else left, else inside; a side the
			 * ready line would cross gives way to one it does not */
			bool right = xa + w + 4 + tw <= p.x1, left = xa - 4 - tw >= p.x0;
			bool r_hit = crosses(rx, xa + w + 4, tw),
			     l_hit = crosses(rx, xa - 4 - tw, tw);
			double lx;

			if (right && (!r_hit || !left || l_hit)) {
				lx = xa + w + 4;
				text(out, lx, ry + 15, "start", "label", buf);
			} else if (left) {
				lx = xa - 4 - tw;
				text(out, xa - 4, ry + 15, "end", "label", buf);
			} else {
				lx = xa + 4;
				text(out, lx, ry + 15, "start", "inside", buf);
			}
			if (crosses(rx, lx, tw) && gaps)
				gaps[n_gaps++] = ry + 2; /* the ready line breaks there */
		}
	}

	/* marks: a dashed line each; labels staggered over MARK_ROWS rows */
	for (int r = 0; r < MARK_ROWS; r++)
		mark_end[r] = -1e9;
	{
		/* in time order, so staggering works left to right */
		const char *names[64];
		double at[64];
		size_t nm = 0;

		for (size_t k = 0; k < v->n_marks; k++) {
			const struct tl_mark *m = &v->marks[k];
			size_t j;

			if (nm == 64 || !strcmp(m->name, "ready") || m->ms > p.tmax)
				continue;
			for (j = nm; j > 0 && at[j - 1] > m->ms; j--) {
				at[j] = at[j - 1];
				names[j] = names[j - 1];
			}
			at[j] = m->ms;
			names[j] = m->name;
			nm++;
		}
		for (size_t j = 0; j < nm; j++) {
			double x = px(&p, at[j]), w;
			bool left;
			int r;

			svg_fmt_dur(dur, sizeof(dur), at[j]);
			snprintf(buf, sizeof(buf), "%.*s %s", utf8_prefix(names[j], 200), names[j],
				 dur);
			/* a label that would run past the right edge ends at its line */
			w = text_w(buf);
			left = x + 3 + w > WIDTH;
			for (r = 0; r < MARK_ROWS - 1 && mark_end[r] > (left ? x - 3 - w : x) - 6;
			     r++)
				;
			mark_end[r] = left ? x : x + w;
			fputs("<line class=\"mark\" data-mark=\"", out);
			svg_escape(out, names[j]);
			fprintf(out, "\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x,
				TITLE_H + r * 14.0 + 4, x, bottom);
			text(out, left ? x - 3 : x + 3, TITLE_H + r * 14.0 + 12,
			     left ? "end" : "start", "tick", buf);
		}
	}

	/* page faults per second under the rows */
	y = bottom + 20;
	for (i = 0; i < fr->n; i++)
		if (tl_or0(fr->counts[i]) > fmax)
			fmax = tl_or0(fr->counts[i]);
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
		for (i = 0; i < fr->n; i++) {
			double t0 = (double)i * bucket,
			       yy = y + FAULT_H - tl_or0(fr->counts[i]) * scale;

			if (t0 > p.tmax)
				break;
			fprintf(out, " L%.1f %.1f L%.1f %.1f", px(&p, t0), yy, px(&p, t0 + bucket),
				yy);
		}
		fprintf(out, " L%.1f %.1f Z\"/>\n", px(&p, fmin((double)fr->n * bucket, p.tmax)),
			y + FAULT_H);
		snprintf(buf, sizeof(buf), "page faults per %.0f ms (max %.0f, %.0f/s)", bucket,
			 fmax, fmax * 1000 / bucket);
	} else {
		snprintf(buf, sizeof(buf), "page faults: no series in this timeline");
	}
	text(out, p.x0 + 4, y + 13, "start", "sub", buf);
	if (crosses(rx, p.x0 + 4, text_w(buf)) && gaps)
		gaps[n_gaps++] = y + 1;

	/* the critical thread's state under the faults */
	if (strip) {
		double sy = y + FAULT_H + 8;

		strip_draw(out, &p, &av, sy);
		if (crosses(rx, p.x0 + 4,
			    text_w("critical thread: where the time went (exec -> "
				   "ready or exit, 000.00 s, 100.0% explained)")) &&
		    gaps)
			gaps[n_gaps++] = sy + 1;
	}

	/* ready: across everything, broken where it would cross a label */
	if (!isnan(ready)) {
		double x = px(&p, ready), from = top - 6;

		svg_fmt_dur(dur, sizeof(dur), ready);
		snprintf(buf, sizeof(buf), "ready %s", dur);
		for (size_t g = 0; g <= n_gaps; g++) {
			double to = g < n_gaps ? gaps[g] : y + FAULT_H + (strip ? 26 + STRIP_H : 0);

			if (to > from)
				fprintf(out,
					"<line class=\"ready\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
					"y2=\"%.1f\"/>\n",
					x, from, x, to);
			if (g < n_gaps)
				from = gaps[g] + LABEL_GAP;
		}
		if (x + 4 + text_w(buf) <= WIDTH)
			text(out, x + 4, top - 8, "start", "ready", buf);
		else
			text(out, x - 4, top - 8, "end", "ready", buf);
	}

	/* legend: the strip's kinds, then the bars' categories */
	{
		double x = p.x0, ly = y + FAULT_H + 26;

		if (strip) {
			strip_legend(out, &p, &av, ly + STRIP_BLOCK);
			ly += STRIP_BLOCK + kind_rows * KINDS_H;
		}

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
	free(gaps);
	free(by_base);
	if (strip)
		attr_view_free(&av);
	tl_view_free(v);
	return ferror(out) ? -1 : 0;
}
