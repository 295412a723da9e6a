/* render_attrib: the attribution's views: "where the time went" at the top
 * of the start-up summary (attribution_print, called by render_text.c) and
 * `report --format folded` (Brendan Gregg's folded stacks, wall-clock: the
 * cause's kind as the root frame, its `what` below, microseconds as the
 * count; for flamegraph.pl, inferno and speedscope). Reads the section's
 * typed view only. */
#include "render_attrib.h"

#include <string.h>

#include "attrib_build.h"
#include "util.h"

#define SHOWN 10 /* causes listed in the summary */

static void fmt_ms(char *buf, size_t len, double ms)
{
	if (ms >= 1000)
		snprintf(buf, len, "%.3fs", ms / 1000);
	else
		snprintf(buf, len, "%.1fms", ms);
}

static double pct(long long part, long long whole)
{
	return whole > 0 ? 100.0 * (double)part / (double)whole : 0;
}

void attribution_print(const struct timeline *tl, FILE *out)
{
	struct attr_view v;
	long long by_kind[AK_N] = {0}, rest = 0;
	char a[32], w[256];
	size_t i, nrest = 0;
	bool first = true;

	if (!tl || !out || !attr_view_decode(tl, &v))
		return;
	if (v.r.window_us <= 0) {
		attr_view_free(&v);
		return;
	}
	fmt_ms(a, sizeof(a), v.window_ms);
	fprintf(out, "  where the time went (exec -> %s, %s, %.1f%% explained):\n",
		v.complete ? "ready or exit" : "now", a, pct(v.r.explained_us, v.r.window_us));
	for (i = 0; i < v.r.n_causes; i++) {
		const struct attr_cause *c = &v.r.causes[i];

		by_kind[c->kind] += c->us;
		if (i >= SHOWN) {
			rest += c->us;
			nrest++;
			continue;
		}
		fmt_ms(a, sizeof(a), c->us / 1000.0);
		fprintf(out, "    %10s %5.1f%%  %-8s  %s\n", a, pct(c->us, v.r.window_us),
			attr_kind_name(c->kind), text_esc(c->what, w, sizeof(w)));
	}
	if (nrest) {
		fmt_ms(a, sizeof(a), rest / 1000.0);
		fprintf(out, "    %10s %5.1f%%  (%zu more)\n", a, pct(rest, v.r.window_us), nrest);
	}
	fprintf(out, "    by kind:");
	for (int pass = 0; pass < AK_N; pass++) {
		/* largest first: pick the largest not yet printed */
		int best = -1;

		for (int k = 0; k < AK_N; k++)
			if (by_kind[k] > 0 && (best < 0 || by_kind[k] > by_kind[best]))
				best = k;
		if (best < 0)
			break;
		fprintf(out, "%s %s %.1f%%", first ? "" : ",", attr_kind_name((enum attr_kind)best),
			pct(by_kind[best], v.r.window_us));
		by_kind[best] = 0;
		first = false;
	}
	fprintf(out, "\n");
	attr_view_free(&v);
}

/* a frame: no ';' (the separator) and no line breaks; escaped for a terminal */
static void put_frame(const char *s, FILE *out)
{
	char buf[256];
	const char *e = text_esc(s && *s ? s : "?", buf, sizeof(buf));

	for (; *e; e++)
		fputc(*e == ';' || *e == '\n' || *e == '\r' ? ':' : *e, out);
}

int render_folded(const struct timeline *tl, FILE *out)
{
	struct attr_view v;

	if (!attr_view_decode(tl, &v)) {
		fprintf(stderr, "tts-launch: report: this timeline has no attribution section "
				"(untraced, or written by an older tts-launch): nothing to fold\n");
		return 0;
	}
	for (size_t i = 0; i < v.r.n_causes; i++) {
		const struct attr_cause *c = &v.r.causes[i];

		if (c->us <= 0)
			continue;
		fputs(attr_kind_name(c->kind), out);
		fputc(';', out);
		put_frame(c->what, out);
		fprintf(out, " %lld\n", c->us);
	}
	attr_view_free(&v);
	return ferror(out) ? -1 : 0;
}
