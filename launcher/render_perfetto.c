/* render_perfetto: the timeline model as Chrome trace-event JSON.
 *
 * Tracks: the launcher is one process ("tts-launch") holding the phases and
 * the marks; each traced process is one process holding its lifetime and its
 * Python imports. Complete events ("X") must nest on a thread, so spans that
 * would overlap partially go to extra threads of the same process ("lanes").
 * Downloads and requests are async spans ("b"/"e", one id each) on the
 * service; the fault rate, the download rate and off-CPU time are counters
 * ("C"); marks and mlock calls are instants ("i"). Times in microseconds
 * since tts-launch started. Reference: the Trace Event Format document
 * (docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hfcache.h"
#include "render_perfetto.h"
#include "timeline_internal.h"
#include "util.h"

/* Extra lanes get thread ids above any real one (pid_max is at most 2^22,
 * see proc(5)), so they never collide with a traced thread. */
#define LANE_TID_BASE (1 << 22)

struct events {
	json_t **v;
	size_t n, cap;
	int next_lane_tid;
};

static double num(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : NAN;
}

static json_int_t us(double ms) { return (json_int_t)llround(ms * 1000.0); }

static int ev_add(struct events *e, json_t *ev)
{
	if (!ev)
		return -1;
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 256;
		json_t **v = realloc(e->v, cap * sizeof(*v));

		if (!v) {
			json_decref(ev);
			return -1;
		}
		e->v = v;
		e->cap = cap;
	}
	e->v[e->n++] = ev;
	return 0;
}

static void meta(struct events *e, const char *what, int pid, int tid, const char *key, json_t *val)
{
	ev_add(e, json_pack("{s:s, s:s, s:i, s:i, s:{s:o}}", "name", what, "ph", "M", "pid", pid,
			    "tid", tid, "args", key, val));
}

struct span_order {
	const double *start, *end;
};

static struct span_order order_ctx;

static int span_cmp(const void *a, const void *b)
{
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	const double *s = order_ctx.start, *f = order_ctx.end;

	if (s[i] != s[j])
		return s[i] < s[j] ? -1 : 1;
	if (f[i] != f[j])
		return f[i] > f[j] ? -1 : 1; /* the longer one first: it is the parent */
	return i < j ? -1 : i > j;
}

int perfetto_assign_lanes(const double *start, const double *end, size_t n, int *lane)
{
	size_t *order = calloc(n ? n : 1, sizeof(*order));
	/* one stack of open span ends per lane */
	double **stack = NULL;
	size_t *depth = NULL, *cap = NULL;
	int lanes = 0;

	if (!order)
		return -1;
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	order_ctx = (struct span_order){start, end};
	qsort(order, n, sizeof(*order), span_cmp);
	for (size_t o = 0; o < n; o++) {
		size_t i = order[o];
		int k;

		for (k = 0; k < lanes; k++) {
			while (depth[k] && stack[k][depth[k] - 1] <= start[i])
				depth[k]--;
			if (!depth[k] || end[i] <= stack[k][depth[k] - 1])
				break;
		}
		/* bounded work on any input: past the last lane, spans share it
		 * (they may then overlap there) */
		if (k == lanes && lanes >= PERFETTO_MAX_LANES)
			k = lanes - 1;
		if (k == lanes) {
			double **s2 = realloc(stack, (size_t)(lanes + 1) * sizeof(*s2));
			size_t *d2, *c2;

			if (!s2)
				goto fail;
			stack = s2;
			stack[lanes] = NULL;
			d2 = realloc(depth, (size_t)(lanes + 1) * sizeof(*d2));
			if (!d2)
				goto fail;
			depth = d2;
			c2 = realloc(cap, (size_t)(lanes + 1) * sizeof(*c2));
			if (!c2)
				goto fail;
			cap = c2;
			depth[lanes] = cap[lanes] = 0;
			lanes++;
		}
		if (depth[k] == cap[k]) {
			size_t nc = cap[k] ? cap[k] * 2 : 16;
			double *s2 = realloc(stack[k], nc * sizeof(double));

			if (!s2)
				goto fail;
			stack[k] = s2;
			cap[k] = nc;
		}
		stack[k][depth[k]++] = end[i];
		lane[i] = k;
	}
	for (int k = 0; k < lanes; k++)
		free(stack[k]);
	free(stack);
	free(depth);
	free(cap);
	free(order);
	return lanes;
fail:
	for (int k = 0; k < lanes; k++)
		free(stack[k]);
	free(stack);
	free(depth);
	free(cap);
	free(order);
	return -1;
}

/* One track of complete events: n spans (name, start, end, args) placed on
 * the thread tid of pid, and on extra lane threads when they do not nest. */
struct xspan {
	const char *name, *cat;
	double start, end;
	json_t *args; /* stolen */
};

static void emit_track(struct events *e, int pid, int tid, const char *lane_name, struct xspan *x,
		       size_t n)
{
	double *s = calloc(n ? n : 1, sizeof(double)), *f = calloc(n ? n : 1, sizeof(double));
	int *lane = calloc(n ? n : 1, sizeof(int)), lanes;
	int *tids = NULL;

	if (!s || !f || !lane)
		goto out;
	for (size_t i = 0; i < n; i++) {
		/* decide nesting on the rounded values that are written */
		s[i] = (double)us(x[i].start);
		f[i] = (double)us(x[i].end);
		if (f[i] < s[i])
			f[i] = s[i];
	}
	lanes = perfetto_assign_lanes(s, f, n, lane);
	if (lanes < 0)
		goto out;
	tids = calloc((size_t)lanes + 1, sizeof(int));
	if (!tids)
		goto out;
	for (int k = 0; k < lanes; k++) {
		char name[128];

		tids[k] = k == 0 ? tid : e->next_lane_tid++;
		if (k > 0) {
			snprintf(name, sizeof(name), "%.*s (%d)",
				 (int)utf8_prefix_len(lane_name, 100), lane_name, k + 1);
			meta(e, "thread_name", pid, tids[k], "name", json_string(name));
			meta(e, "thread_sort_index", pid, tids[k], "sort_index", json_integer(k));
		}
	}
	for (size_t i = 0; i < n; i++) {
		json_t *ev = json_pack("{s:s, s:s, s:s, s:I, s:I, s:i, s:i}", "name", x[i].name,
				       "cat", x[i].cat, "ph", "X", "ts", (json_int_t)s[i], "dur",
				       (json_int_t)(f[i] - s[i]), "pid", pid, "tid", tids[lane[i]]);

		if (ev && x[i].args) {
			json_object_set(ev, "args", x[i].args);
		}
		ev_add(e, ev);
	}
out:
	for (size_t i = 0; i < n; i++)
		json_decref(x[i].args);
	free(tids);
	free(s);
	free(f);
	free(lane);
}

static void instant(struct events *e, const char *name, const char *cat, const char *scope, int pid,
		    int tid, double ms, json_t *args)
{
	json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:I, s:i, s:i}", "name", name, "cat", cat,
			       "ph", "i", "s", scope, "ts", us(ms), "pid", pid, "tid", tid);

	if (ev && args)
		json_object_set_new(ev, "args", args);
	else
		json_decref(args);
	ev_add(e, ev);
}

static void counter(struct events *e, const char *name, int pid, double ms, json_t *args)
{
	ev_add(e, json_pack("{s:s, s:s, s:s, s:I, s:i, s:i, s:o}", "name", name, "cat", "counter",
			    "ph", "C", "ts", us(ms), "pid", pid, "tid", pid, "args", args));
}

static void async_span(struct events *e, const char *name, const char *cat, int pid, const char *id,
		       double a, double b, json_t *args)
{
	json_t *beg = json_pack("{s:s, s:s, s:s, s:s, s:I, s:i, s:i}", "name", name, "cat", cat,
				"ph", "b", "id", id, "ts", us(a), "pid", pid, "tid", pid);
	json_t *end =
	    json_pack("{s:s, s:s, s:s, s:s, s:I, s:i, s:i}", "name", name, "cat", cat, "ph", "e",
		      "id", id, "ts", us(b < a ? a : b), "pid", pid, "tid", pid);

	if (beg && args)
		json_object_set_new(beg, "args", args);
	else
		json_decref(args);
	ev_add(e, beg);
	ev_add(e, end);
}

/* "org/repo 108f71ed" for a hub cache blob, else the file name. */
static void download_label(const char *path, char *buf, size_t len)
{
	const char *base = path ? strrchr(path, '/') : NULL;
	char repo[200];

	base = base ? base + 1 : path ? path : "?";
	/* cut at a character boundary: a JSON string must be UTF-8 */
	if (hf_repo_id(path, repo, sizeof(repo))) {
		snprintf(buf, len, "%s %.*s", repo, (int)utf8_prefix_len(base, 8), base);
	} else {
		snprintf(buf, len, "%s", base);
	}
	utf8_trim(buf);
}

static double ts_key(const json_t *ev)
{
	json_t *ts = json_object_get(ev, "ts");

	return json_is_integer(ts) ? (double)json_integer_value(ts) : -1.0; /* metadata first */
}

/* by time, then by position in the list (qsort is not stable) */
static int ord_cmp_ptr(const void *a, const void *b)
{
	json_t **x = *(json_t * *const *)a, **y = *(json_t * *const *)b;
	double p = ts_key(*x), q = ts_key(*y);

	if (p != q)
		return p < q ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* A download's rate at its start or end time, and the running sum of the
 * rates up to it once sorted by time. */
struct rate_at {
	double at, rate, sum;
};

static int rate_cmp(const void *x, const void *y)
{
	const struct rate_at *a = x, *b = y;

	return a->at < b->at ? -1 : a->at > b->at;
}

static void rates_prefix(struct rate_at *r, size_t n)
{
	double sum = 0;

	qsort(r, n, sizeof(*r), rate_cmp);
	for (size_t i = 0; i < n; i++)
		r[i].sum = sum += r[i].rate;
}

/* How many of sorted r[0..n) are at or before t. */
static size_t rates_upto(const struct rate_at *r, size_t n, double t)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r[mid].at <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int render_perfetto(const struct timeline *tl, FILE *out)
{
	const json_t *root = timeline_json(tl), *v;
	json_t *procs = json_object_get(root, "processes"), *mem = json_object_get(root, "memory");
	json_t *marks = json_object_get(root, "marks"), *trace = NULL, *arr;
	struct events e = {.next_lane_tid = LANE_TID_BASE};
	struct xspan *x = NULL;
	int spid = 0, lpid = 0, rc = -1;
	double end_ms = 0;
	const char *key;
	size_t i, n;

	/* the service and the launcher (its parent) */
	v = json_object_get(json_object_get(root, "process"), "pid");
	if (json_is_integer(v))
		spid = (int)json_integer_value(v);
	json_array_foreach (procs, i, v) {
		int pid = (int)json_integer_value(json_object_get(v, "pid"));

		if (!spid)
			spid = pid;
		if (pid == spid && json_is_integer(json_object_get(v, "ppid")))
			lpid = (int)json_integer_value(json_object_get(v, "ppid"));
	}
	if (!lpid)
		lpid = spid > 1 ? spid - 1 : 1;
	if (!spid)
		spid = lpid + 1;

	/* how far the trace goes: the last thing seen */
	json_object_foreach (marks, key, v)
		if (json_number_value(v) > end_ms)
			end_ms = json_number_value(v);
	json_array_foreach (json_object_get(root, "phases"), i, v)
		if (num(v, "end_ms") > end_ms)
			end_ms = num(v, "end_ms");

	/* the launcher: phases and marks */
	meta(&e, "process_name", lpid, lpid, "name", json_string("tts-launch"));
	meta(&e, "process_sort_index", lpid, lpid, "sort_index", json_integer(0));
	meta(&e, "thread_name", lpid, lpid, "name", json_string("phases"));
	arr = json_object_get(root, "phases");
	n = json_array_size(arr);
	x = calloc(n ? n : 1, sizeof(*x));
	if (!x)
		goto out;
	json_array_foreach (arr, i, v) {
		x[i] = (struct xspan){json_string_value(json_object_get(v, "name")) ?: "?", "phase",
				      num(v, "start_ms"), num(v, "end_ms"),
				      json_pack("{s:O?}", "source", json_object_get(v, "source"))};
		if (isnan(x[i].start))
			x[i].start = 0;
		if (isnan(x[i].end))
			x[i].end = x[i].start;
	}
	emit_track(&e, lpid, lpid, "phases", x, n);
	free(x);
	x = NULL;
	json_object_foreach (marks, key, v)
		if (json_is_number(v))
			instant(&e, key, "mark", "g", lpid, lpid, json_number_value(v), NULL);

	/* each traced process: its lifetime and its Python imports */
	json_array_foreach (procs, i, v) {
		int pid = (int)json_integer_value(json_object_get(v, "pid"));
		const char *cmd = json_string_value(json_object_get(v, "command"));
		json_t *imp = json_object_get(json_object_get(root, "python"), "imports"), *m;
		double a = num(v, "exec_ms"), b = num(v, "exit_ms");
		size_t j, k = 0;
		char name[256];

		if (isnan(a))
			a = num(v, "fork_ms");
		if (isnan(a))
			continue;
		if (isnan(b))
			b = end_ms;
		snprintf(name, sizeof(name), "%.*s (%d)", (int)utf8_prefix_len(base_name(cmd), 200),
			 base_name(cmd), pid);
		meta(&e, "process_name", pid, pid, "name", json_string(name));
		meta(&e, "process_sort_index", pid, pid, "sort_index",
		     json_integer(pid == spid ? 1 : 2));
		meta(&e, "thread_name", pid, pid, "name", json_string(base_name(cmd)));
		x = calloc(json_array_size(imp) + 1, sizeof(*x));
		if (!x)
			goto out;
		x[k++] =
		    (struct xspan){base_name(cmd), "process", a, b < a ? a : b,
				   json_pack("{s:O?, s:O?}", "argv", json_object_get(v, "argv"),
					     "exit", json_object_get(v, "exit"))};
		json_array_foreach (imp, j, m) {
			if (json_integer_value(json_object_get(m, "pid")) != pid ||
			    isnan(num(m, "start_ms")) || isnan(num(m, "end_ms")))
				continue;
			x[k++] = (struct xspan){
			    json_string_value(json_object_get(m, "name")) ?: "?", "import",
			    num(m, "start_ms"), num(m, "end_ms"),
			    json_pack("{s:O?}", "found", json_object_get(m, "found"))};
		}
		emit_track(&e, pid, pid, base_name(cmd), x, k);
		free(x);
		x = NULL;
	}
	if (!json_array_size(procs)) {
		meta(&e, "process_name", spid, spid, "name", json_string("service"));
		meta(&e, "process_sort_index", spid, spid, "sort_index", json_integer(1));
	}

	/* downloads: async spans, and the summed download rate as a counter */
	arr = json_object_get(root, "downloads");
	{
		size_t nd = json_array_size(arr);
		double *t = calloc(2 * nd + 1, sizeof(double));

		json_array_foreach (arr, i, v) {
			char label[256], id[32];
			double a = num(v, "first_ms"), b = num(v, "last_ms");

			if (isnan(a) || isnan(b))
				continue;
			download_label(json_string_value(json_object_get(v, "path")), label,
				       sizeof(label));
			snprintf(id, sizeof(id), "download-%zu", i);
			async_span(&e, label, "download", spid, id, a, b,
				   json_pack("{s:O?, s:O?, s:O?, s:O?}", "path",
					     json_object_get(v, "path"), "bytes",
					     json_object_get(v, "bytes"), "rate_mb_s",
					     json_object_get(v, "rate_mb_s"), "completed",
					     json_object_get(v, "completed")));
			if (t) {
				t[2 * i] = a;
				t[2 * i + 1] = b;
			}
		}
		/* a step function: at each start or end, the sum of the average
		 * rates of the downloads running from then on (a <= at < b): the
		 * rates started by then minus those ended by then, from prefix
		 * sums over the sorted starts and ends (n log n, not n squared) */
		struct rate_at *st = calloc(nd + 1, sizeof(*st)), *en = calloc(nd + 1, sizeof(*en));
		size_t ns = 0;

		json_array_foreach (arr, i, v) {
			double a = num(v, "first_ms"), b = num(v, "last_ms");

			if (st && en && a < b) { /* false for NaN: such a download adds nothing */
				double r = num(v, "bytes") / 1e3 / (b - a);

				if (!isfinite(r))
					r = 0; /* no byte count: no rate */

				st[ns] = (struct rate_at){a, r, 0};
				en[ns++] = (struct rate_at){b, r, 0};
			}
		}
		if (st && en) {
			rates_prefix(st, ns);
			rates_prefix(en, ns);
		}
		for (size_t p = 0; t && st && en && p < 2 * nd; p++) {
			double at = t[p], mbs = 0;
			size_t ks, ke;

			if (isnan(at))
				continue;
			ks = rates_upto(st, ns, at);
			ke = rates_upto(en, ns, at);
			if (ks > ke) /* some running: else exactly 0 */
				mbs = (ks ? st[ks - 1].sum : 0) - (ke ? en[ke - 1].sum : 0);
			if (mbs < 0)
				mbs = 0;
			counter(&e, "download MB/s", spid, at, json_pack("{s:f}", "MB/s", mbs));
		}
		free(st);
		free(en);
		free(t);
	}

	/* requests after ready: async spans */
	json_array_foreach (json_object_get(root, "requests"), i, v) {
		double a = num(v, "start_ms"), b = num(v, "end_ms");
		char id[32], name[256];
		const char *method = json_string_value(json_object_get(v, "method"));
		const char *path = json_string_value(json_object_get(v, "path"));

		if (isnan(b))
			b = a + num(v, "dur_ms");
		if (isnan(a) || isnan(b))
			continue;
		snprintf(id, sizeof(id), "request-%zu", i);
		if (method || path)
			snprintf(name, sizeof(name), "%s %s", method ?: "", path ?: "");
		else
			snprintf(name, sizeof(name), "request %zu", i + 1);
		utf8_trim(name);
		async_span(&e, name, "request", spid, id, a, b, json_deep_copy(v));
	}

	/* page faults per second, one point per bucket of the series */
	{
		json_t *fr = json_object_get(mem, "fault_rate");
		double bucket = num(fr, "bucket_ms");

		if (bucket > 0) {
			json_array_foreach (json_object_get(fr, "counts"), i, v)
				counter(&e, "page faults/s", spid, (double)i * bucket,
					json_pack("{s:f}", "faults/s",
						  (double)json_integer_value(v) * 1000.0 / bucket));
			if (json_array_size(json_object_get(fr, "counts")))
				counter(&e, "page faults/s", spid,
					(double)json_array_size(json_object_get(fr, "counts")) *
					    bucket,
					json_pack("{s:f}", "faults/s", 0.0));
		}
	}

	/* off-CPU time: the trace keeps totals per process, not a series, so
	 * the counter goes from 0 at exec to the totals at exit */
	json_array_foreach (json_object_get(json_object_get(root, "sched"), "processes"), i, v) {
		int pid = (int)json_integer_value(json_object_get(v, "pid"));
		double a = NAN, b = NAN;
		json_t *p;
		size_t j;

		json_array_foreach (procs, j, p)
			if (json_integer_value(json_object_get(p, "pid")) == pid) {
				a = num(p, "exec_ms");
				b = num(p, "exit_ms");
			}
		if (isnan(a))
			continue;
		if (isnan(b) || b < a)
			b = end_ms > a ? end_ms : a;
		counter(
		    &e, "off-CPU ms", pid, a,
		    json_pack("{s:f, s:f, s:f}", "io_wait", 0.0, "sleep", 0.0, "runqueue", 0.0));
		counter(&e, "off-CPU ms", pid, b,
			json_pack("{s:f, s:f, s:f}", "io_wait", num(v, "io_wait_ms"), "sleep",
				  num(v, "sleep_ms"), "runqueue", num(v, "runqueue_ms")));
	}

	/* mlock calls: instants on the process that made them */
	json_array_foreach (json_object_get(mem, "mlock_calls"), i, v) {
		int pid = json_is_integer(json_object_get(v, "pid"))
			      ? (int)json_integer_value(json_object_get(v, "pid"))
			      : spid;
		const char *call = json_string_value(json_object_get(v, "call"));

		if (isnan(num(v, "start_ms")))
			continue;
		instant(&e, call ? call : "mlock", "mlock", "p", pid, pid, num(v, "start_ms"),
			json_deep_copy(v));
	}

	/* sort by time (metadata first); equal times keep their order, so a
	 * zero-length async span still has its "b" before its "e" */
	{
		json_t ***ord = calloc(e.n ? e.n : 1, sizeof(*ord));

		if (!ord)
			goto out;
		/* sort pointers into e.v so that ev_cmp can break ties by position */
		for (i = 0; i < e.n; i++)
			ord[i] = &e.v[i];
		qsort(ord, e.n, sizeof(*ord), ord_cmp_ptr);
		trace = json_array();
		for (i = 0; i < e.n; i++)
			json_array_append(trace, *ord[i]);
		free(ord);
	}
	{
		json_t *doc = json_pack("{s:o, s:s, s:{s:s, s:O?}}", "traceEvents", trace,
					"displayTimeUnit", "ms", "otherData", "generator",
					"tts-launch", "schema", json_object_get(root, "schema"));

		trace = NULL;
		if (doc && json_dumpf(doc, out, JSON_COMPACT) == 0 && fputc('\n', out) != EOF)
			rc = 0;
		json_decref(doc);
	}
out:
	json_decref(trace);
	for (i = 0; i < e.n; i++)
		json_decref(e.v[i]);
	free(e.v);
	free(x);
	if (rc < 0 && !errno)
		errno = EIO;
	return rc;
}
