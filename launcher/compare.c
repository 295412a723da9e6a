/* compare: two saved timelines side by side. Every figure is computed once,
 * into a struct compare (compare_build), from the typed views of the two
 * timelines; the text table and the JSON output (written with jsonw) are
 * both rendered from it, so `--format text` and `--format json` always
 * agree.
 *
 * A figure missing on one side (no ready mark, no requests, a phase that only
 * one start-up had) is null in JSON and "-" in the table; its difference and
 * ratio are then null/"-" too. diff = after - before, ratio = after / before
 * (null when before is 0). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "compare_attrib.h"
#include "jsonw.h"
#include "timeline.h"
#include "timeline_view.h"
#include "util.h"

#define EXIT_USAGE 2

/* one figure on both sides (NAN: that side lacks it) */
struct row {
	double b, a;
};

static double row_diff(struct row r) { return isfinite(r.a) && isfinite(r.b) ? r.a - r.b : NAN; }

static double row_ratio(struct row r)
{
	return isfinite(r.a) && isfinite(r.b) && r.b != 0 ? r.a / r.b : NAN;
}

bool compare_is_noise(double b, double a)
{
	if (!isfinite(a) || !isfinite(b))
		return false;
	if (b < COMPARE_NOISE_FLOOR_MS && a < COMPARE_NOISE_FLOOR_MS)
		return true;
	return fabs(a - b) < fmax(COMPARE_NOISE_MIN_MS, COMPARE_NOISE_SHARE * fabs(b));
}

double compare_percentile(const double *sorted, size_t n, double p)
{
	double rank;
	size_t k;

	if (!n)
		return NAN;
	/* p * n first: exact for integral p and n, so p50 of 10 is rank 5 */
	rank = ceil(p * (double)n / 100.0);
	k = rank < 1 ? 1 : rank > (double)n ? n : (size_t)rank;
	return sorted[k - 1];
}

/* Duration of a phase entry: dur_ms (the view's: else end_ms - start_ms). */
static double phase_dur(const struct tl_phase *p) { return p->dur_ms; }

/* Phase names are unique in a timeline tts-launch wrote; a hand-made one may
 * repeat a name: the durations add. */
struct phase_total {
	const char *name; /* borrowed from the timeline */
	double total[2];  /* before, after; NAN: not on that side */
};

/* name -> position in the totals: open addressing by FNV-1a, positions + 1
 * (0: empty), nslot a power of two over twice the names */
struct name_index {
	size_t *slot, nslot;
};

static size_t *name_slot(const struct name_index *x, const struct phase_total *t, const char *name)
{
	uint64_t h = 1469598103934665603ull;
	size_t i;

	for (const char *c = name; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ull;
	for (i = (size_t)h & (x->nslot - 1); x->slot[i] && strcmp(t[x->slot[i] - 1].name, name);
	     i = (i + 1) & (x->nslot - 1))
		;
	return &x->slot[i];
}

/* Adds side s's phases into t (n so far, the order of first appearance),
 * with index x: one pass, so 20,000 phases cost 20,000 lookups, not 20,000
 * squared. */
static size_t phase_totals(const struct tl_view *v, int s, struct phase_total *t, size_t n,
			   struct name_index *x)
{
	for (size_t i = 0; i < v->n_phases; i++) {
		const struct tl_phase *p = &v->phases[i];
		double d = phase_dur(p);
		size_t *at, k;

		if (!p->name)
			continue;
		at = name_slot(x, t, p->name);
		if (*at) {
			k = *at - 1;
		} else {
			k = n++;
			t[k] = (struct phase_total){p->name, {NAN, NAN}};
			*at = n;
		}
		if (isfinite(d))
			t[k].total[s] = isfinite(t[k].total[s]) ? t[k].total[s] + d : d;
	}
	return n;
}

/* Start-up: launch to the ready mark, else to the exit mark (a command that
 * never listened). *mark names which one. */
static double startup(const struct tl_view *tl, const char **mark)
{
	double v = tl_view_mark(tl, "ready");

	*mark = "ready";
	if (!isfinite(v)) {
		v = tl_view_mark(tl, "exit");
		*mark = isfinite(v) ? "exit" : NULL;
	}
	return v;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Latency of a request: latency_ms (the view's: else dur_ms, else
 * end_ms - start_ms, the shapes the tracer wrote, or writes). */
static double req_latency(const struct tl_request *r) { return r->latency_ms; }

struct mlock_side {
	const char *mode, *status;
	double bytes_locked, calls;
};

struct req_rows {
	struct row count, probes, first, p50, p99, spread, faults, major, model;
};

struct compare {
	struct tl_view *v[2]; /* before, after: the names below are borrowed from them */
	const char *name[2];
	struct phase_total *phases;
	size_t n_phases;
	struct row startup;
	const char *mark[2];
	struct row page_faults, major_faults;
	struct req_rows rq;
	struct mlock_side ml[2];
	struct row bytes_locked;
	struct cattr at; /* the attributions, by kind and by cause */
	char verdict[512];
};

/* A readiness probe: a connection that carried nothing in (a "does the
 * port accept" check connects and closes). tts-launch itself sends none:
 * it sees ready from the traced listen(2), or /proc/net/tcp untraced. */
static bool is_probe(const struct tl_request *r) { return tl_has(r->bytes_in) && !r->bytes_in; }

struct req_stats {
	double count, probes, first, p50, p99, spread, faults, major, model;
};

/* the mean of the finite values of one member over the requests kept */
static double req_mean(const struct tl_view *tl, size_t off)
{
	double sum = 0;
	size_t n = 0;

	for (size_t i = 0; i < tl->n_requests; i++) {
		const struct tl_request *r = &tl->requests[i];
		double v = *(const double *)((const char *)r + off);

		if (is_probe(r) || !isfinite(v))
			continue;
		sum += v;
		n++;
	}
	return n ? sum / (double)n : NAN;
}

static void req_stats(const struct tl_view *tl, struct req_stats *s)
{
	size_t n = tl->n_requests, nl = 0, probes = 0;
	double *lat = n ? calloc(n, sizeof(*lat)) : NULL, first_start = INFINITY;

	*s = (struct req_stats){.first = NAN, .p50 = NAN, .p99 = NAN, .spread = NAN};
	for (size_t i = 0; i < n; i++) {
		const struct tl_request *r = &tl->requests[i];
		double l = req_latency(r), st = r->start_ms;

		if (is_probe(r)) {
			probes++;
			continue;
		}
		if (isfinite(l) && lat) {
			lat[nl++] = l;
			/* first request: the earliest start, else the first listed */
			if (isfinite(st) ? st < first_start : !isfinite(s->first)) {
				first_start = isfinite(st) ? st : first_start;
				s->first = l;
			}
		}
	}
	s->count = tl->has_requests ? (double)(n - probes) : NAN;
	s->probes = tl->has_requests ? (double)probes : NAN;
	if (nl) {
		qsort(lat, nl, sizeof(*lat), dbl_cmp);
		s->p50 = compare_percentile(lat, nl, 50);
		s->p99 = compare_percentile(lat, nl, 99);
		s->spread = s->p50 > 0 ? s->p99 / s->p50 : NAN;
	}
	s->faults = req_mean(tl, offsetof(struct tl_request, faults));
	s->major = req_mean(tl, offsetof(struct tl_request, major_faults));
	s->model = req_mean(tl, offsetof(struct tl_request, model_faults));
	free(lat);
}

static void requests(struct compare *c)
{
	struct req_stats b, a;

	req_stats(c->v[0], &b);
	req_stats(c->v[1], &a);
	c->rq = (struct req_rows){
	    {b.count, a.count},	  {b.probes, a.probes}, {b.first, a.first},
	    {b.p50, a.p50},	  {b.p99, a.p99},	{b.spread, a.spread},
	    {b.faults, a.faults}, {b.major, a.major},	{b.model, a.model},
	};
}

/* The shim's outcome (memory.mlock) and the traced calls (memory.mlock_calls).
 * Without the shim, the mode the launcher was configured with. */
static struct mlock_side mlock_side(const struct tl_view *tl)
{
	const struct tl_memory *m = &tl->memory;
	struct mlock_side s = {m->mlock_mode, m->mlock_status, m->mlock_bytes_locked,
			       m->has_mlock_calls ? (double)m->n_mlock_calls : NAN};

	if (!m->has_mlock && tl->config_mlock_mode) {
		s.mode = tl->config_mlock_mode;
		if (!strcmp(s.mode, "off"))
			s.status = "off";
	}
	return s;
}

/* "with --mlock: request p99 50.9 -> 25.4 ms, model-file faults per request
 * 499 -> 0": what changed, and the figures that tell whether it helped */
static void verdict(struct compare *c)
{
	const char *mb = c->ml[0].mode ? c->ml[0].mode : "off";
	const char *ma = c->ml[1].mode ? c->ml[1].mode : "off";
	char *o = c->verdict;
	size_t len = sizeof(c->verdict), k = 0;
	const char *sep = ": ";

#define ADD(...)                                                                                   \
	do {                                                                                       \
		int w_ = snprintf(o + k, len - k, __VA_ARGS__);                                    \
		if (w_ > 0)                                                                        \
			k = k + (size_t)w_ < len ? k + (size_t)w_ : len - 1;                       \
	} while (0)
	if (strcmp(mb, ma) && strcmp(ma, "off"))
		ADD(strcmp(ma, "all") ? "with --mlock=%.20s" : "with --mlock", ma);
	else if (strcmp(mb, ma))
		ADD("without --mlock (before: %.20s)", mb);
	else
		ADD("after vs before");
	if (isfinite(c->rq.p99.b) && isfinite(c->rq.p99.a)) {
		ADD("%srequest p99 %.1f -> %.1f ms", sep, c->rq.p99.b, c->rq.p99.a);
		sep = ", ";
	}
	if (isfinite(c->rq.model.b) && isfinite(c->rq.model.a)) {
		ADD("%smodel-file faults per request %.0f -> %.0f", sep, c->rq.model.b,
		    c->rq.model.a);
		sep = ", ";
	}
	if (!strcmp(sep, ": ") && isfinite(c->startup.b) && isfinite(c->startup.a)) {
		ADD("%sstart-up %.1f -> %.1f ms", sep, c->startup.b, c->startup.a);
		sep = ", ";
	}
	if (!strcmp(sep, ": "))
		ADD(": no figure on both sides");
#undef ADD
	utf8_trim(c->verdict);
}

void compare_free(struct compare *c)
{
	if (!c)
		return;
	tl_view_free(c->v[0]);
	tl_view_free(c->v[1]);
	free(c->phases);
	cattr_free(&c->at);
	free(c);
}

struct compare *compare_build(const struct timeline *before, const struct timeline *after,
			      const char *before_name, const char *after_name)
{
	struct compare *c = calloc(1, sizeof(*c));
	size_t cap, nslot = 16;
	struct name_index x;

	if (!c)
		return NULL;
	c->v[0] = tl_view_decode(before);
	c->v[1] = tl_view_decode(after);
	if (!c->v[0] || !c->v[1]) {
		compare_free(c);
		return NULL;
	}
	c->name[0] = before_name ? before_name : "before";
	c->name[1] = after_name ? after_name : "after";

	/* one row per phase name: before's in before's order, then after's own */
	cap = c->v[0]->n_phases + c->v[1]->n_phases;
	while (nslot < cap * 2)
		nslot *= 2;
	c->phases = calloc(cap ? cap : 1, sizeof(*c->phases));
	x = (struct name_index){calloc(nslot, sizeof(size_t)), nslot};
	if (!c->phases || !x.slot) {
		free(x.slot);
		compare_free(c);
		return NULL;
	}
	c->n_phases = phase_totals(c->v[0], 0, c->phases, 0, &x);
	c->n_phases = phase_totals(c->v[1], 1, c->phases, c->n_phases, &x);
	free(x.slot);

	c->startup = (struct row){startup(c->v[0], &c->mark[0]), startup(c->v[1], &c->mark[1])};
	c->page_faults = (struct row){c->v[0]->memory.page_faults, c->v[1]->memory.page_faults};
	c->major_faults = (struct row){c->v[0]->memory.major_faults, c->v[1]->memory.major_faults};
	requests(c);
	c->ml[0] = mlock_side(c->v[0]);
	c->ml[1] = mlock_side(c->v[1]);
	c->bytes_locked = (struct row){c->ml[0].bytes_locked, c->ml[1].bytes_locked};
	if (cattr_build(&c->at, before, after) < 0) {
		compare_free(c);
		return NULL;
	}
	verdict(c);
	return c;
}

const char *compare_verdict(const struct compare *c) { return c->verdict; }

/* ---- JSON ---- */

/* "before", "after", "diff", "ratio": integral values as integers */
static void row_members(struct jsonw *w, struct row r)
{
	jw_knum(w, "before", r.b);
	jw_knum(w, "after", r.a);
	jw_knum(w, "diff", row_diff(r));
	jw_knum(w, "ratio", row_ratio(r));
}

static void row_json(struct jsonw *w, const char *key, struct row r)
{
	jw_key(w, key);
	jw_obj(w);
	row_members(w, r);
	jw_obj_end(w);
}

static void mlock_json(struct jsonw *w, const char *key, const struct mlock_side *s)
{
	jw_key(w, key);
	jw_obj(w);
	jw_kstr(w, "mode", s->mode);
	jw_kstr(w, "status", s->status);
	jw_knum(w, "bytes_locked", s->bytes_locked);
	jw_knum(w, "calls", s->calls);
	jw_obj_end(w);
}

/* one attribution row: before/after/diff/ratio, the shares, noise */
static void attr_row_json(struct jsonw *w, const struct cattr *at, const struct cattr_row *r)
{
	jw_obj(w);
	jw_kstr(w, "kind", attr_kind_name(r->kind));
	if (r->what)
		jw_kstr(w, "what", r->what);
	row_members(w, (struct row){r->b, r->a});
	jw_key(w, "share_before");
	jw_num(w, cattr_share(at, 0, r->b));
	jw_key(w, "share_after");
	jw_num(w, cattr_share(at, 1, r->a));
	jw_key(w, "noise");
	jw_bool(w, compare_is_noise(r->b, r->a));
	jw_obj_end(w);
}

/* "attribution": null when neither side has the section */
static void attribution_json(struct jsonw *w, const struct cattr *at)
{
	jw_key(w, "attribution");
	if (!at->has[0] && !at->has[1]) {
		jw_null(w);
		return;
	}
	jw_obj(w);
	row_json(w, "window_ms", (struct row){at->window[0], at->window[1]});
	row_json(w, "explained_ms", (struct row){at->explained[0], at->explained[1]});
	jw_key(w, "kinds");
	jw_arr(w);
	for (size_t i = 0; i < at->n_kinds; i++)
		attr_row_json(w, at, &at->kinds[i]);
	jw_arr_end(w);
	jw_key(w, "causes");
	jw_arr(w);
	for (size_t i = 0; i < at->n_causes; i++)
		attr_row_json(w, at, &at->causes[i]);
	jw_arr_end(w);
	jw_obj_end(w);
}

int compare_write_json(const struct compare *c, FILE *out)
{
	struct jsonw w;

	jw_init(&w, out, 2, 12);
	jw_obj(&w);
	jw_kstr(&w, "schema", "tts-launch.compare/1");
	jw_kstr(&w, "before", c->name[0]);
	jw_kstr(&w, "after", c->name[1]);
	jw_key(&w, "phases");
	jw_arr(&w);
	for (size_t i = 0; i < c->n_phases; i++) {
		struct row r = {c->phases[i].total[0], c->phases[i].total[1]};

		jw_obj(&w);
		row_members(&w, r);
		jw_kstr(&w, "name", c->phases[i].name);
		jw_key(&w, "noise");
		jw_bool(&w, compare_is_noise(r.b, r.a));
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	jw_key(&w, "startup_ms");
	jw_obj(&w);
	row_members(&w, c->startup);
	jw_kstr(&w, "before_mark", c->mark[0]);
	jw_kstr(&w, "after_mark", c->mark[1]);
	jw_obj_end(&w);
	row_json(&w, "page_faults", c->page_faults);
	row_json(&w, "major_faults", c->major_faults);
	jw_key(&w, "requests");
	jw_obj(&w);
	row_json(&w, "count", c->rq.count);
	row_json(&w, "first_ms", c->rq.first);
	row_json(&w, "p50_ms", c->rq.p50);
	row_json(&w, "p99_ms", c->rq.p99);
	row_json(&w, "spread", c->rq.spread);
	row_json(&w, "faults_per_request", c->rq.faults);
	row_json(&w, "major_faults_per_request", c->rq.major);
	row_json(&w, "model_faults_per_request", c->rq.model);
	row_json(&w, "probes_excluded", c->rq.probes);
	jw_obj_end(&w);
	jw_key(&w, "mlock");
	jw_obj(&w);
	mlock_json(&w, "before", &c->ml[0]);
	mlock_json(&w, "after", &c->ml[1]);
	row_json(&w, "bytes_locked", c->bytes_locked);
	jw_obj_end(&w);
	attribution_json(&w, &c->at);
	jw_kstr(&w, "verdict", c->verdict);
	jw_obj_end(&w);
	fputc('\n', out);
	return jw_error(&w);
}

/* ---- the text table ---- */

/* longer phase names are cut in the table (not in JSON) */
#define NAME_MAX_TEXT  40
#define NAME_TAIL_TEXT 24 /* of which the end of the name */

enum unit { U_MS, U_COUNT, U_MEAN, U_RATIO, U_BYTES };

static void fmt(char *buf, size_t len, double v, enum unit u, bool sign)
{
	const char *sg = sign ? "+" : "";

	if (!isfinite(v)) {
		snprintf(buf, len, "-");
		return;
	}
	switch (u) {
	case U_MS:
		snprintf(buf, len, sign ? "%+.1f ms" : "%.1f ms", v);
		break;
	case U_COUNT:
		snprintf(buf, len, sign ? "%+.0f" : "%.0f", v);
		break;
	case U_MEAN:
		snprintf(buf, len, sign ? "%+.1f" : "%.1f", v);
		break;
	case U_RATIO:
		snprintf(buf, len, sign ? "%+.2f" : "%.2f", v);
		break;
	case U_BYTES:
		snprintf(buf, len, "%s%.1f MiB", v < 0 ? "-" : sg, fabs(v) / 1048576.0);
		break;
	}
}

static void print_row(FILE *out, int width, const char *label, struct row r, enum unit u)
{
	char b[32], a[32], d[32], x[32];
	double ratio = row_ratio(r);

	fmt(b, sizeof(b), r.b, u, false);
	fmt(a, sizeof(a), r.a, u, false);
	fmt(d, sizeof(d), row_diff(r), u, true);
	if (isfinite(ratio))
		snprintf(x, sizeof(x), "%.2fx", ratio);
	else
		snprintf(x, sizeof(x), "-");
	fprintf(out, "  %-*s %12s %12s %12s %8s\n", width, label, b, a, d, x);
}

static void print_strs(FILE *out, int width, const char *label, const char *b, const char *a)
{
	char eb[64], ea[64];

	/* values from the timelines: escaped for the terminal (text_esc) */
	fprintf(out, "  %-*s %12s %12s\n", width, label, b ? text_esc(b, eb, sizeof(eb)) : "-",
		a ? text_esc(a, ea, sizeof(ea)) : "-");
}

/* A long name (download:nvidia/bigvgan_v2_22khz_80band_256x:
 * bigvgan_generator.pt) would widen the whole table: cut in the middle, at
 * character boundaries, so its end (the file) stays; after indent. */
static void cut_label(char *label, size_t len, const char *indent, const char *name)
{
	if (strlen(name) > NAME_MAX_TEXT) {
		const char *tail = name + strlen(name) - NAME_TAIL_TEXT;

		while ((*tail & 0xC0) == 0x80)
			tail++;
		snprintf(label, len, "%s%.*s...%s", indent,
			 (int)utf8_prefix_len(name, NAME_MAX_TEXT - 3 - NAME_TAIL_TEXT), name,
			 tail);
	} else {
		snprintf(label, len, "%s%s", indent, name);
	}
}

/* an attribution row: the ms columns, then the shares of each window */
static void print_attr_row(FILE *out, int width, const char *label, const struct cattr *at,
			   const struct cattr_row *r)
{
	double sb = cattr_share(at, 0, r->b), sa = cattr_share(at, 1, r->a);
	struct row w = {r->b, r->a};
	char b[32], a[32], d[32], x[32], shb[16], sha[16];

	fmt(b, sizeof(b), w.b, U_MS, false);
	fmt(a, sizeof(a), w.a, U_MS, false);
	fmt(d, sizeof(d), row_diff(w), U_MS, true);
	snprintf(x, sizeof(x), isfinite(row_ratio(w)) ? "%.2fx" : "-", row_ratio(w));
	snprintf(shb, sizeof(shb), isfinite(sb) ? "%.1f%%" : "-", sb);
	snprintf(sha, sizeof(sha), isfinite(sa) ? "%.1f%%" : "-", sa);
	fprintf(out, "  %-*s %12s %12s %12s %8s  %6s -> %s\n", width, label, b, a, d, x, shb, sha);
}

/* "where the time went": per kind, then per cause, noise left out */
static void print_attribution(FILE *out, int width, const struct cattr *at)
{
	char label[320], en[NAME_MAX_TEXT * 6 + 8], what[400];
	size_t noise = 0;

	fprintf(out, "  where the time went (attribution)\n");
	if (!at->has[0] && !at->has[1]) {
		fprintf(out, "    (neither timeline has an attribution section)\n");
		return;
	}
	fprintf(out, "  %-*s %12s %12s %12s %8s  %s\n", width, "", "", "", "", "",
		"share before -> after");
	print_row(out, width, "  window", (struct row){at->window[0], at->window[1]}, U_MS);
	print_row(out, width, "  explained", (struct row){at->explained[0], at->explained[1]},
		  U_MS);
	for (size_t i = 0; i < at->n_kinds; i++) {
		const struct cattr_row *r = &at->kinds[i];

		if (compare_is_noise(r->b, r->a)) {
			noise++;
			continue;
		}
		snprintf(label, sizeof(label), "  %s (all)", attr_kind_name(r->kind));
		print_attr_row(out, width, label, at, r);
	}
	for (size_t i = 0; i < at->n_causes; i++) {
		const struct cattr_row *r = &at->causes[i];

		if (compare_is_noise(r->b, r->a)) {
			noise++;
			continue;
		}
		snprintf(what, sizeof(what), "%s %s", attr_kind_name(r->kind), r->what);
		cut_label(label, sizeof(label), "    ", text_esc(what, en, sizeof(en)));
		print_attr_row(out, width, label, at, r);
	}
	if (noise)
		fprintf(out,
			"    (%zu row%s left out as noise: both under %.0f ms, or a difference "
			"under max(%.0f ms, %.0f%%))\n",
			noise, noise == 1 ? "" : "s", COMPARE_NOISE_FLOOR_MS, COMPARE_NOISE_MIN_MS,
			COMPARE_NOISE_SHARE * 100);
}

void compare_print_text(const struct compare *c, FILE *out)
{
	char label[320], eb[1024], ea[1024], en[NAME_MAX_TEXT * 6 + 8];
	const char *mb = c->mark[0], *ma = c->mark[1];
	int width = 32; /* "  model-file faults per request" */
	size_t noise = 0;

	/* the attribution's rows: "    KIND WHAT", cut as a phase name */
	for (size_t i = 0; i < c->at.n_causes; i++) {
		int n = (int)(strlen(attr_kind_name(c->at.causes[i].kind)) + 1 +
			      strlen(c->at.causes[i].what));

		if (compare_is_noise(c->at.causes[i].b, c->at.causes[i].a))
			continue;
		if (n > NAME_MAX_TEXT)
			n = NAME_MAX_TEXT;
		if (n + 4 > width)
			width = n + 4;
	}

	for (size_t i = 0; i < c->n_phases; i++) {
		int n = (int)strlen(c->phases[i].name);

		if (n > NAME_MAX_TEXT)
			n = NAME_MAX_TEXT;

		if (n + 2 > width)
			width = n + 2;
	}
	fprintf(out, "before: %s\nafter:  %s\n\n", text_esc(c->name[0], eb, sizeof(eb)),
		text_esc(c->name[1], ea, sizeof(ea)));
	fprintf(out, "  %-*s %12s %12s %12s %8s\n", width, "", "before", "after", "diff", "ratio");

	fprintf(out, "  phases\n");
	for (size_t i = 0; i < c->n_phases; i++) {
		const struct phase_total *p = &c->phases[i];
		const char *name = text_esc(p->name, en, sizeof(en));

		if (compare_is_noise(p->total[0], p->total[1])) {
			noise++;
			continue;
		}
		cut_label(label, sizeof(label), "  ", name);
		print_row(out, width, label, (struct row){p->total[0], p->total[1]}, U_MS);
	}
	if (!c->n_phases)
		fprintf(out, "    (none)\n");
	else if (noise)
		fprintf(out,
			"    (%zu phase%s left out as noise: both under %.0f ms, or a difference "
			"under max(%.0f ms, %.0f%%))\n",
			noise, noise == 1 ? "" : "s", COMPARE_NOISE_FLOOR_MS, COMPARE_NOISE_MIN_MS,
			COMPARE_NOISE_SHARE * 100);
	/* "to ready" unless a side ended at exit */
	if (mb && ma && strcmp(mb, ma))
		snprintf(label, sizeof(label), "start-up (%s / %s)", mb, ma);
	else
		snprintf(label, sizeof(label), "start-up (to %s)", mb ? mb : ma ? ma : "ready");
	print_row(out, width, label, c->startup, U_MS);
	print_row(out, width, "page faults (start-up)", c->page_faults, U_COUNT);
	print_row(out, width, "major faults (start-up)", c->major_faults, U_COUNT);
	if (c->at.has[0] || c->at.has[1])
		print_attribution(out, width, &c->at);

	fprintf(out, "  requests\n");
	print_row(out, width, "  count", c->rq.count, U_COUNT);
	if (c->rq.probes.b > 0 || c->rq.probes.a > 0)
		print_row(out, width, "  readiness probes (left out)", c->rq.probes, U_COUNT);
	print_row(out, width, "  first latency", c->rq.first, U_MS);
	print_row(out, width, "  latency p50", c->rq.p50, U_MS);
	print_row(out, width, "  latency p99", c->rq.p99, U_MS);
	print_row(out, width, "  spread (p99/p50)", c->rq.spread, U_RATIO);
	print_row(out, width, "  faults per request", c->rq.faults, U_MEAN);
	print_row(out, width, "  major faults per request", c->rq.major, U_MEAN);
	print_row(out, width, "  model-file faults per request", c->rq.model, U_MEAN);

	fprintf(out, "  mlock\n");
	print_strs(out, width, "  mode", c->ml[0].mode, c->ml[1].mode);
	print_strs(out, width, "  result", c->ml[0].status, c->ml[1].status);
	print_row(out, width, "  locked", c->bytes_locked, U_BYTES);
	fprintf(out, "\n%s\n", c->verdict);
}

/* ---- the command ---- */

static int usage(const char *fmt_, const char *arg)
{
	fprintf(stderr, "tts-launch: compare: ");
	fprintf(stderr, fmt_, arg);
	fprintf(stderr,
		"\nUsage: tts-launch compare BEFORE.json AFTER.json [--format text|json]\n");
	return EXIT_USAGE;
}

int compare_command(int argc, char **argv)
{
	const char *files[2] = {NULL, NULL}, *format = "text";
	struct timeline *tl[2] = {NULL, NULL};
	struct compare *cmp = NULL;
	char err[512];
	int nfiles = 0, rc = EXIT_USAGE, opts = 1;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (opts && !strcmp(a, "--")) {
			opts = 0;
		} else if (opts && !strcmp(a, "--format")) {
			if (++i >= argc)
				return usage("%s", "--format needs text or json");
			format = argv[i];
		} else if (opts && !strncmp(a, "--format=", 9)) {
			format = a + 9;
		} else if (opts && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
			printf("Usage: tts-launch compare BEFORE.json AFTER.json [--format "
			       "text|json]\n"
			       "Phase durations, start-up, page faults, request latency "
			       "(nearest-rank\n"
			       "p50/p99, spread p99/p50) and mlock outcome of two saved timelines, "
			       "with\n"
			       "after - before and after / before (docs/compare.md).\n");
			return 0;
		} else if (opts && a[0] == '-' && a[1]) {
			return usage("unknown option '%s'", a);
		} else if (nfiles < 2) {
			files[nfiles++] = a;
		} else {
			return usage("unexpected argument '%s' (compare takes two timelines)", a);
		}
	}
	if (strcmp(format, "text") && strcmp(format, "json"))
		return usage("unknown --format '%s': expected text or json", format);
	if (nfiles < 2)
		return usage("%s", "needs two timelines, BEFORE.json and AFTER.json");

	for (int i = 0; i < 2; i++) {
		FILE *f = fopen(files[i], "r");

		/* a plainer message than the JSON parser's for the common case */
		if (!f) {
			fprintf(stderr, "tts-launch: compare: cannot read %s timeline %s: %s\n",
				i ? "AFTER" : "BEFORE", files[i], strerror(errno));
			goto cleanup;
		}
		fclose(f);
		tl[i] = timeline_load(files[i], err, sizeof(err));
		if (!tl[i]) {
			fprintf(stderr, "tts-launch: compare: %s timeline: %s\n",
				i ? "AFTER" : "BEFORE", err);
			goto cleanup;
		}
	}
	cmp = compare_build(tl[0], tl[1], files[0], files[1]);
	if (!cmp) {
		fprintf(stderr, "tts-launch: compare: failed to build the comparison: %s\n",
			strerror(ENOMEM));
		rc = 1;
		goto cleanup;
	}
	if (!strcmp(format, "json")) {
		compare_write_json(cmp, stdout);
	} else {
		compare_print_text(cmp, stdout);
	}
	rc = fflush(stdout) == EOF || ferror(stdout) ? 1 : 0;
	if (rc)
		fprintf(stderr, "tts-launch: compare: failed to write the output: %s\n",
			strerror(errno));

cleanup:
	compare_free(cmp);
	timeline_free(tl[1]);
	timeline_free(tl[0]);
	return rc;
}
