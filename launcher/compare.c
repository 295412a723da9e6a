/* compare: two saved timelines side by side. Every figure is computed once,
 * into a JSON object (compare_build); the text table is rendered from it, so
 * `--format text` and `--format json` always agree.
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
#include "timeline.h"
#include "timeline_view.h"
#include "util.h"

#define EXIT_USAGE 2

/* The model is read through its typed views (timeline_view.h: a wrong
 * type counts as missing); the comparison itself is built as JSON. */

/* integral values as JSON integers (counts stay 10, not 10.0) */
static json_t *num_json(double v)
{
	if (!isfinite(v))
		return json_null();
	if (v == floor(v) && fabs(v) < 9007199254740992.0)
		return json_integer((json_int_t)v);
	return json_real(v);
}

static double val(const json_t *row, const char *key)
{
	const json_t *v = json_object_get(row, key);

	return json_is_number(v) ? json_number_value(v) : NAN;
}

/* {"before", "after", "diff", "ratio"} */
static json_t *row(double b, double a)
{
	double diff = isfinite(a) && isfinite(b) ? a - b : NAN;
	double ratio = isfinite(a) && isfinite(b) && b != 0 ? a / b : NAN;

	return json_pack("{s:o, s:o, s:o, s:o}", "before", num_json(b), "after", num_json(a),
			 "diff", num_json(diff), "ratio", num_json(ratio));
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

/* Duration of a phase entry: dur_ms, else end_ms - start_ms. */
static double phase_dur(const struct tl_phase *p)
{
	return isfinite(p->dur_ms) ? p->dur_ms : p->end_ms - p->start_ms;
}

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

/* One row per phase name: before's in before's order, then after's own. */
static json_t *phases(const struct tl_view *before, const struct tl_view *after)
{
	size_t cap = before->n_phases + after->n_phases, nslot = 16;
	struct phase_total *t = calloc(cap ? cap : 1, sizeof(*t));
	json_t *out = json_array();
	struct name_index x;
	size_t n = 0;

	while (nslot < cap * 2)
		nslot *= 2;
	x = (struct name_index){calloc(nslot, sizeof(size_t)), nslot};
	if (!t || !out || !x.slot) {
		free(t);
		free(x.slot);
		json_decref(out);
		return NULL;
	}
	n = phase_totals(before, 0, t, n, &x);
	n = phase_totals(after, 1, t, n, &x);
	for (size_t k = 0; k < n; k++) {
		json_t *r = row(t[k].total[0], t[k].total[1]);

		json_object_set_new(r, "name", json_string(t[k].name));
		json_array_append_new(out, r);
	}
	free(x.slot);
	free(t);
	return out;
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

static json_t *startup_row(const struct tl_view *before, const struct tl_view *after)
{
	const char *mb, *ma;
	double b = startup(before, &mb), a = startup(after, &ma);
	json_t *r = row(b, a);

	json_object_set_new(r, "before_mark", mb ? json_string(mb) : json_null());
	json_object_set_new(r, "after_mark", ma ? json_string(ma) : json_null());
	return r;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct req_stats {
	double count, first, p50, p99, spread, faults, major;
};

/* Latency of a request: latency_ms, else dur_ms, else end_ms - start_ms (the
 * shapes the tracer wrote, or writes, for requests[]). */
static double req_latency(const struct tl_request *r)
{
	double v = r->latency_ms;

	if (!isfinite(v))
		v = r->dur_ms;
	if (!isfinite(v))
		v = r->end_ms - r->start_ms;
	return v;
}

static void req_stats(const struct tl_view *tl, struct req_stats *s)
{
	size_t n = tl->n_requests, nl = 0, nf = 0, nm = 0;
	double *lat = n ? calloc(n, sizeof(*lat)) : NULL, first_start = INFINITY;
	double faults = 0, major = 0;

	*s = (struct req_stats){.count = tl->has_requests ? (double)n : NAN,
				.first = NAN,
				.p50 = NAN,
				.p99 = NAN,
				.spread = NAN,
				.faults = NAN,
				.major = NAN};
	for (size_t i = 0; i < n; i++) {
		const struct tl_request *r = &tl->requests[i];
		double l = req_latency(r), f = r->faults, m = r->major_faults;
		double st = r->start_ms;

		if (!isfinite(f))
			f = r->page_faults;
		if (isfinite(l) && lat) {
			lat[nl++] = l;
			/* first request: the earliest start, else the first listed */
			if (isfinite(st) ? st < first_start : !isfinite(s->first)) {
				first_start = isfinite(st) ? st : first_start;
				s->first = l;
			}
		}
		if (isfinite(f))
			faults += f, nf++;
		if (isfinite(m))
			major += m, nm++;
	}
	if (nl) {
		qsort(lat, nl, sizeof(*lat), dbl_cmp);
		s->p50 = compare_percentile(lat, nl, 50);
		s->p99 = compare_percentile(lat, nl, 99);
		s->spread = s->p50 > 0 ? s->p99 / s->p50 : NAN;
	}
	if (nf)
		s->faults = faults / (double)nf;
	if (nm)
		s->major = major / (double)nm;
	free(lat);
}

static json_t *requests(const struct tl_view *before, const struct tl_view *after)
{
	struct req_stats b, a;

	req_stats(before, &b);
	req_stats(after, &a);
	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "count", row(b.count, a.count),
			 "first_ms", row(b.first, a.first), "p50_ms", row(b.p50, a.p50), "p99_ms",
			 row(b.p99, a.p99), "spread", row(b.spread, a.spread), "faults_per_request",
			 row(b.faults, a.faults), "major_faults_per_request",
			 row(b.major, a.major));
}

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

/* The shim's outcome (memory.mlock) and the traced calls (memory.mlock_calls).
 * Without the shim, the mode the launcher was configured with. */
static json_t *mlock_side(const struct tl_view *tl)
{
	const struct tl_memory *m = &tl->memory;
	json_t *out;

	out = json_pack(
	    "{s:o, s:o, s:o, s:o}", "mode", str_or_null(m->mlock_mode), "status",
	    str_or_null(m->mlock_status), "bytes_locked", num_json(m->mlock_bytes_locked), "calls",
	    m->has_mlock_calls ? json_integer((json_int_t)m->n_mlock_calls) : json_null());
	if (!m->has_mlock) {
		const char *mode = tl->config_mlock_mode;

		if (mode) {
			json_object_set_new(out, "mode", json_string(mode));
			if (!strcmp(mode, "off"))
				json_object_set_new(out, "status", json_string("off"));
		}
	}
	return out;
}

static json_t *compare_views(const struct tl_view *before, const struct tl_view *after,
			     const char *before_name, const char *after_name)
{
	json_t *mlock_b = mlock_side(before), *mlock_a = mlock_side(after);

	return json_pack(
	    "{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:{s:o, s:o, s:o}}", "schema",
	    "tts-launch.compare/1", "before", before_name ? before_name : "before", "after",
	    after_name ? after_name : "after", "phases", phases(before, after), "startup_ms",
	    startup_row(before, after), "page_faults",
	    row(before->memory.page_faults, after->memory.page_faults), "major_faults",
	    row(before->memory.major_faults, after->memory.major_faults), "requests",
	    requests(before, after), "mlock", "before", mlock_b, "after", mlock_a, "bytes_locked",
	    row(val(mlock_b, "bytes_locked"), val(mlock_a, "bytes_locked")));
}

json_t *compare_build(const struct timeline *before, const struct timeline *after,
		      const char *before_name, const char *after_name)
{
	struct tl_view *b = tl_view_decode(before), *a = tl_view_decode(after);
	json_t *cmp = b && a ? compare_views(b, a, before_name, after_name) : NULL;

	tl_view_free(a);
	tl_view_free(b);
	return cmp;
}

/* ---- the text table ---- */

/* longer phase names are cut in the table (not in JSON) */
#define NAME_MAX_TEXT 40

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

static void print_row(FILE *out, int width, const char *label, const json_t *r, enum unit u)
{
	char b[32], a[32], d[32], x[32];

	fmt(b, sizeof(b), val(r, "before"), u, false);
	fmt(a, sizeof(a), val(r, "after"), u, false);
	fmt(d, sizeof(d), val(r, "diff"), u, true);
	if (isfinite(val(r, "ratio")))
		snprintf(x, sizeof(x), "%.2fx", val(r, "ratio"));
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

void compare_print_text(const json_t *cmp, FILE *out)
{
	const json_t *ph = json_object_get(cmp, "phases"), *p,
		     *rq = json_object_get(cmp, "requests");
	const json_t *ml = json_object_get(cmp, "mlock"), *st = json_object_get(cmp, "startup_ms");
	const json_t *mlb = json_object_get(ml, "before"), *mla = json_object_get(ml, "after");
	const char *mb = json_string_value(json_object_get(st, "before_mark"));
	const char *ma = json_string_value(json_object_get(st, "after_mark"));
	char label[320], eb[1024], ea[1024], en[NAME_MAX_TEXT * 6 + 8];
	int width = 26;
	size_t i;

	json_array_foreach (ph, i, p) {
		int n = (int)strlen(json_string_value(json_object_get(p, "name")));

		if (n > NAME_MAX_TEXT)
			n = NAME_MAX_TEXT;

		if (n + 2 > width)
			width = n + 2;
	}
	fprintf(out, "before: %s\nafter:  %s\n\n",
		text_esc(json_string_value(json_object_get(cmp, "before")), eb, sizeof(eb)),
		text_esc(json_string_value(json_object_get(cmp, "after")), ea, sizeof(ea)));
	fprintf(out, "  %-*s %12s %12s %12s %8s\n", width, "", "before", "after", "diff", "ratio");

	fprintf(out, "  phases\n");
	json_array_foreach (ph, i, p) {
		const char *name =
		    text_esc(json_string_value(json_object_get(p, "name")), en, sizeof(en));

		/* download:<64 hex digits>.incomplete would widen the whole table;
		 * cut at a character boundary */
		if (strlen(name) > NAME_MAX_TEXT)
			snprintf(label, sizeof(label), "  %.*s...",
				 (int)utf8_prefix_len(name, NAME_MAX_TEXT - 3), name);
		else
			snprintf(label, sizeof(label), "  %s", name);
		print_row(out, width, label, p, U_MS);
	}
	if (!json_array_size(ph))
		fprintf(out, "    (none)\n");
	/* "to ready" unless a side ended at exit */
	if (mb && ma && strcmp(mb, ma))
		snprintf(label, sizeof(label), "start-up (%s / %s)", mb, ma);
	else
		snprintf(label, sizeof(label), "start-up (to %s)", mb ? mb : ma ? ma : "ready");
	print_row(out, width, label, st, U_MS);
	print_row(out, width, "page faults (start-up)", json_object_get(cmp, "page_faults"),
		  U_COUNT);
	print_row(out, width, "major faults (start-up)", json_object_get(cmp, "major_faults"),
		  U_COUNT);

	fprintf(out, "  requests\n");
	print_row(out, width, "  count", json_object_get(rq, "count"), U_COUNT);
	print_row(out, width, "  first latency", json_object_get(rq, "first_ms"), U_MS);
	print_row(out, width, "  latency p50", json_object_get(rq, "p50_ms"), U_MS);
	print_row(out, width, "  latency p99", json_object_get(rq, "p99_ms"), U_MS);
	print_row(out, width, "  spread (p99/p50)", json_object_get(rq, "spread"), U_RATIO);
	print_row(out, width, "  faults per request", json_object_get(rq, "faults_per_request"),
		  U_MEAN);
	print_row(out, width, "  major faults per request",
		  json_object_get(rq, "major_faults_per_request"), U_MEAN);

	fprintf(out, "  mlock\n");
	print_strs(out, width, "  mode", json_string_value(json_object_get(mlb, "mode")),
		   json_string_value(json_object_get(mla, "mode")));
	print_strs(out, width, "  result", json_string_value(json_object_get(mlb, "status")),
		   json_string_value(json_object_get(mla, "status")));
	print_row(out, width, "  locked", json_object_get(ml, "bytes_locked"), U_BYTES);
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
	json_t *cmp = NULL;
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
		if (json_dumpf(cmp, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(12)) == 0)
			putchar('\n');
	} else {
		compare_print_text(cmp, stdout);
	}
	rc = fflush(stdout) == EOF || ferror(stdout) ? 1 : 0;
	if (rc)
		fprintf(stderr, "tts-launch: compare: failed to write the output: %s\n",
			strerror(errno));

cleanup:
	json_decref(cmp);
	timeline_free(tl[1]);
	timeline_free(tl[0]);
	return rc;
}
