/* render_flame: `report --format flamegraph`, the attribution section as a
 * flame graph drawn by tts-launch (no flamegraph.pl needed): wall-clock,
 * the whole window at the bottom, a frame per kind above it, a frame per
 * cause above its kind, widths in proportion to their time, coloured by
 * kind as the plot's strip. Each frame has a tooltip (its stack, time and
 * share); "Search" highlights the frames whose name matches a regular
 * expression and says the share they cover, as flamegraph.pl's do (the
 * function ttsSearch(re) does it from a script: the test calls it). Reads
 * the section's typed view only. */
#include <stdio.h>
#include <string.h>

#include "attrib_build.h"
#include "render_svg.h"
#include "util.h"

#define FW	1200
#define FPAD	10
#define FRAME_H 18
#define FCHAR_W 7.2 /* px per character at 12px (DejaVu Sans, generous) */

static void frame(FILE *out, int level, const char *kind, double x, double y, double w,
		  const char *fill, const char *name, const char *stack, long long us,
		  long long window_us)
{
	char tip[512], dur[32];
	size_t fit = w > 8 ? (size_t)((w - 6) / FCHAR_W) : 0;

	svg_fmt_dur(dur, sizeof(dur), (double)us / 1000);
	snprintf(tip, sizeof(tip), "%s (%s, %.2f%%)", stack, dur,
		 window_us > 0 ? 100.0 * (double)us / (double)window_us : 0);
	fprintf(out, "<g class=\"frame\" data-level=\"%d\" data-kind=\"%s\" data-name=\"", level,
		kind);
	svg_escape(out, name);
	fprintf(out, "\" data-us=\"%lld\"><title>", us);
	svg_escape(out, tip);
	fprintf(out,
		"</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"%s\" "
		"rx=\"2\"/>",
		x, y, w > 0.1 ? w - 0.1 : 0.1, FRAME_H - 1, fill);
	/* the name, cut to the frame (at a character boundary), when two fit */
	if (fit >= 3) {
		char label[256];
		size_t n = strlen(name);

		if (n > fit) {
			snprintf(label, sizeof(label), "%.*s..",
				 (int)utf8_prefix_len(name, fit > 2 ? fit - 2 : 0), name);
		} else {
			snprintf(label, sizeof(label), "%s", name);
		}
		fprintf(out, "<text x=\"%.2f\" y=\"%.1f\">", x + 3, y + 13);
		svg_escape(out, label);
		fputs("</text>", out);
	}
	fputs("</g>\n", out);
}

static const char SCRIPT[] =
    "<script><![CDATA[\n"
    "function ttsSearch(re) {\n"
    "  var r = new RegExp(re), m = 0, all = 0, kinds = {}, root = false;\n"
    "  document.querySelectorAll('g.frame').forEach(function (g) {\n"
    "    var hit = r.test(g.getAttribute('data-name')), lv = g.getAttribute('data-level');\n"
    "    var rect = g.querySelector('rect'), us = +g.getAttribute('data-us');\n"
    "    if (!rect.hasAttribute('data-fill')) rect.setAttribute('data-fill', "
    "rect.getAttribute('fill'));\n"
    "    rect.setAttribute('fill', hit ? '#e03ce0' : rect.getAttribute('data-fill'));\n"
    "    if (lv === '0') { all = us; root = hit; }\n"
    "    /* a frame counts once: a cause not when its kind matched */\n"
    "    if (lv === '1' && hit) { kinds[g.getAttribute('data-kind')] = 1; m += us; }\n"
    "    if (lv === '2' && hit && !kinds[g.getAttribute('data-kind')]) m += us;\n"
    "  });\n"
    "  if (root) m = all;\n"
    "  var pct = all > 0 ? (100 * m / all).toFixed(1) + '%' : '';\n"
    "  document.getElementById('matched').textContent = 'Matched: ' + pct;\n"
    "  return pct;\n"
    "}\n"
    "function ttsAsk() { var re = prompt('Search (regular expression)', ''); if (re) "
    "ttsSearch(re); }\n"
    "]]></script>\n";

int render_flamegraph(const struct timeline *tl, FILE *out)
{
	struct attr_view v;
	long long by_kind[AK_N] = {0};
	double x0 = FPAD, width = FW - 2 * FPAD, kx, y_root, y_kind, y_cause;
	int height = 3 * FRAME_H + 90;
	char stack[400], dur[32];

	if (!attr_view_decode(tl, &v)) {
		fprintf(stderr, "tts-launch: report: this timeline has no attribution section "
				"(untraced, or written by an older tts-launch): no flame graph\n");
		return 0;
	}
	for (size_t i = 0; i < v.r.n_causes; i++)
		by_kind[v.r.causes[i].kind] += v.r.causes[i].us;
	y_root = height - 20 - FRAME_H;
	y_kind = y_root - FRAME_H;
	y_cause = y_kind - FRAME_H;
	fprintf(out,
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\" class=\"flamegraph\">\n<style>\n"
		"text { font-family: 'DejaVu Sans', 'Liberation Sans', Arial, sans-serif; "
		"font-size: 12px; fill: #111; }\n"
		"text.title { font-size: 16px; font-weight: bold; }\n"
		"g.frame:hover rect { stroke: #000; stroke-width: 0.5; }\n"
		"text.button { fill: #2255aa; cursor: pointer; }\n</style>\n",
		FW, height, FW, height);
	fputs(SCRIPT, out);
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", FW,
		height);
	svg_fmt_dur(dur, sizeof(dur), v.window_ms);
	fprintf(out,
		"<text x=\"%d\" y=\"24\" class=\"title\">where the start-up's time went (%s, "
		"%.1f%% explained)</text>\n",
		FPAD, dur,
		v.r.window_us > 0 ? 100.0 * (double)v.r.explained_us / (double)v.r.window_us : 0);
	fprintf(out,
		"<text x=\"%d\" y=\"24\" text-anchor=\"end\" class=\"button\" id=\"search\" "
		"onclick=\"ttsAsk()\">Search</text>\n"
		"<text x=\"%d\" y=\"%d\" text-anchor=\"end\" id=\"matched\"></text>\n",
		FW - FPAD, FW - FPAD, height - 4);
	if (v.r.window_us <= 0) {
		fputs("</svg>\n", out);
		attr_view_free(&v);
		return ferror(out) ? -1 : 0;
	}
	/* the root: the whole window */
	frame(out, 0, "", x0, y_root, width, "#d0d0d0", "all", "all", v.r.window_us, v.r.window_us);
	/* kinds, largest first, each with its causes above it (largest first:
	 * the causes come sorted) */
	kx = x0;
	for (int pass = 0; pass < AK_N; pass++) {
		int best = -1;
		double cx, kw;

		for (int k = 0; k < AK_N; k++)
			if (by_kind[k] > 0 && (best < 0 || by_kind[k] > by_kind[best]))
				best = k;
		if (best < 0)
			break;
		kw = width * (double)by_kind[best] / (double)v.r.window_us;
		snprintf(stack, sizeof(stack), "%s", attr_kind_name((enum attr_kind)best));
		frame(out, 1, attr_kind_name((enum attr_kind)best), kx, y_kind, kw,
		      svg_kind_fill(best), stack, stack, by_kind[best], v.r.window_us);
		cx = kx;
		for (size_t i = 0; i < v.r.n_causes; i++) {
			const struct attr_cause *c = &v.r.causes[i];
			double cw;

			if ((int)c->kind != best || c->us <= 0)
				continue;
			cw = width * (double)c->us / (double)v.r.window_us;
			snprintf(stack, sizeof(stack), "%s;%s", attr_kind_name(c->kind), c->what);
			frame(out, 2, attr_kind_name((enum attr_kind)best), cx, y_cause, cw,
			      svg_kind_fill(best), c->what, stack, c->us, v.r.window_us);
			cx += cw;
		}
		kx += kw;
		by_kind[best] = 0;
	}
	fputs("</svg>\n", out);
	attr_view_free(&v);
	return ferror(out) ? -1 : 0;
}
