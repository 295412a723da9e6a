/* render_perfetto: the timeline model as Chrome trace-event JSON.
 *
 * Tracks: the launcher is one process ("tts-launch") holding the phases and
 * the marks; each traced process is one process holding its lifetime and its
 * Python imports. Complete events ("X") must nest on a thread, so spans that
 * would overlap partially go to extra threads of the same process ("lanes").
 * Downloads and requests are async spans ("b"/"e", one id each) on the
 * service; the fault rate, the download rate and off-CPU time are counters
 * ("C"); marks and mlock calls are instants ("i"). The attribution's state
 * track and CPU samples: render_perfetto_attr.c. Times in microseconds
 * since tts-launch started. Reference: the Trace Event Format document
 * (docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hfcache.h"
#include "jsonw.h"
#include "render_perfetto.h"
#include "render_perfetto_internal.h"
#include "timeline_view.h"
#include "util.h"

/* Extra lanes get thread ids above any real one (pid_max is at most 2^22,
 * see proc(5)), so they never collide with a traced thread. */
#define LANE_TID_BASE (1 << 22)

long long pf_us(double ms) { return llround(ms * 1000.0); }

struct jsonw *pf_args_begin(struct args *a)
{
	*a = (struct args){0};
	a->f = open_memstream(&a->buf, &a->len);
	if (!a->f)
		return NULL;
	jw_init(&a->w, a->f, 0, 0);
	jw_obj(&a->w);
	return &a->w;
}

/* the object's text (owned), or NULL when out of memory */
char *pf_args_end(struct args *a)
{
	if (!a->f)
		return NULL;
	jw_obj_end(&a->w);
	if (fclose(a->f) != 0) {
		free(a->buf);
		return NULL;
	}
	return a->buf;
}

/* ev's strings are taken over (args) or copied (name, id) */
void pf_ev_add(struct events *e, struct event ev, const char *name, const char *id)
{
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 256;
		struct event *v = realloc(e->v, cap * sizeof(*v));

		if (!v) {
			free(ev.args);
			e->failed = true;
			return;
		}
		e->v = v;
		e->cap = cap;
	}
	ev.name = strdup(name ? name : "?");
	ev.id = id ? strdup(id) : NULL;
	if (!ev.name || (id && !ev.id)) {
		free(ev.name);
		free(ev.id);
		free(ev.args);
		e->failed = true;
		return;
	}
	e->v[e->n++] = ev;
}

/* metadata: {"name": what, "ph": "M", ..., "args": {key: s or i}} */
void pf_meta_str(struct events *e, const char *what, int pid, int tid, const char *key,
		 const char *val)
{
	struct args a;
	struct jsonw *w = pf_args_begin(&a);

	if (w)
		jw_kstr(w, key, val);
	pf_ev_add(e, (struct event){.ph = 'M', .pid = pid, .tid = tid, .args = pf_args_end(&a)},
		  what, NULL);
}

void pf_meta_int(struct events *e, const char *what, int pid, int tid, const char *key,
		 long long val)
{
	struct args a;
	struct jsonw *w = pf_args_begin(&a);

	if (w)
		jw_kint(w, key, val);
	pf_ev_add(e, (struct event){.ph = 'M', .pid = pid, .tid = tid, .args = pf_args_end(&a)},
		  what, NULL);
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
	char *args; /* taken over */
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
		s[i] = (double)pf_us(x[i].start);
		f[i] = (double)pf_us(x[i].end);
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
			pf_meta_str(e, "thread_name", pid, tids[k], "name", name);
			pf_meta_int(e, "thread_sort_index", pid, tids[k], "sort_index", k);
		}
	}
	for (size_t i = 0; i < n; i++) {
		pf_ev_add(e,
			  (struct event){.cat = x[i].cat,
					 .ph = 'X',
					 .has_ts = true,
					 .ts = (long long)s[i],
					 .has_dur = true,
					 .dur = (long long)(f[i] - s[i]),
					 .pid = pid,
					 .tid = tids[lane[i]],
					 .args = x[i].args},
			  x[i].name, NULL);
		x[i].args = NULL;
	}
out:
	for (size_t i = 0; i < n; i++)
		free(x[i].args);
	free(tids);
	free(s);
	free(f);
	free(lane);
}

static void instant(struct events *e, const char *name, const char *cat, const char *scope, int pid,
		    int tid, double ms, char *args)
{
	pf_ev_add(e,
		  (struct event){.cat = cat,
				 .scope = scope,
				 .ph = 'i',
				 .has_ts = true,
				 .ts = pf_us(ms),
				 .pid = pid,
				 .tid = tid,
				 .args = args},
		  name, NULL);
}

static void counter(struct events *e, const char *name, int pid, double ms, char *args)
{
	pf_ev_add(e,
		  (struct event){.cat = "counter",
				 .ph = 'C',
				 .has_ts = true,
				 .ts = pf_us(ms),
				 .pid = pid,
				 .tid = pid,
				 .args = args},
		  name, NULL);
}

/* a counter of one value, {key: v} */
static void counter1(struct events *e, const char *name, int pid, double ms, const char *key,
		     double v)
{
	struct args a;
	struct jsonw *w = pf_args_begin(&a);

	if (w)
		jw_kreal(w, key, v);
	counter(e, name, pid, ms, pf_args_end(&a));
}

static void async_span(struct events *e, const char *name, const char *cat, int pid, const char *id,
		       double a, double b, char *args)
{
	pf_ev_add(e,
		  (struct event){.cat = cat,
				 .ph = 'b',
				 .has_ts = true,
				 .ts = pf_us(a),
				 .pid = pid,
				 .tid = pid,
				 .args = args},
		  name, id);
	pf_ev_add(e,
		  (struct event){.cat = cat,
				 .ph = 'e',
				 .has_ts = true,
				 .ts = pf_us(b < a ? a : b),
				 .pid = pid,
				 .tid = pid},
		  name, id);
}

/* In a timeline older than download names: "org/repo 108f71ed" for a hub
 * cache blob, else the file name. */
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

/* by time (metadata, without one, first), then by position in the list
 * (qsort is not stable) */
static int ev_cmp(const void *a, const void *b)
{
	const struct event *x = *(const struct event *const *)a,
			   *y = *(const struct event *const *)b;
	long long p = x->has_ts ? x->ts : -1, q = y->has_ts ? y->ts : -1;

	if (p != q)
		return p < q ? -1 : 1;
	return x < y ? -1 : x > y;
}

static void ev_write(struct jsonw *w, const struct event *ev)
{
	char ph[2] = {ev->ph, 0};

	jw_obj(w);
	jw_kstr(w, "name", ev->name);
	if (ev->cat)
		jw_kstr(w, "cat", ev->cat);
	jw_kstr(w, "ph", ph);
	if (ev->scope)
		jw_kstr(w, "s", ev->scope);
	if (ev->id)
		jw_kstr(w, "id", ev->id);
	if (ev->has_ts)
		jw_kint(w, "ts", ev->ts);
	if (ev->has_dur)
		jw_kint(w, "dur", ev->dur);
	jw_kint(w, "pid", ev->pid);
	jw_kint(w, "tid", ev->tid);
	if (ev->args) {
		jw_key(w, "args");
		jw_raw(w, ev->args);
	}
	jw_obj_end(w);
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

/* request args: its members in the order the collector writes them */
static char *request_args(const struct tl_request *r)
{
	struct args a;
	struct jsonw *w = pf_args_begin(&a);
	const struct {
		const char *key;
		double v;
		bool ms;
	} m[] = {
	    {"start_ms", r->start_ms, true},
	    {"end_ms", r->end_ms, true},
	    {"latency_ms", r->latency_ms, true},
	    {"close_ms", r->close_ms, true},
	    {"faults", r->faults, false},
	    {"major_faults", r->major_faults, false},
	    {"bytes_out", r->bytes_out, false},
	    {"bytes_in", r->bytes_in, false},
	    {"writes", r->writes, false},
	    {"pid", r->pid, false},
	    {"tid", r->tid, false},
	    {"port", r->port, false},
	    {"model_faults", r->model_faults, false},
	    {"model_major_faults", r->model_major_faults, false},
	    {"dur_ms", r->dur_ms, true},
	    {"page_faults", r->page_faults, false},
	};

	if (!w)
		return NULL;
	if (r->method)
		jw_kstr(w, "method", r->method);
	if (r->path)
		jw_kstr(w, "path", r->path);
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		if (!tl_has(m[i].v))
			continue;
		jw_key(w, m[i].key);
		if (m[i].ms)
			jw_real(w, m[i].v);
		else
			jw_num(w, m[i].v);
	}
	return pf_args_end(&a);
}

static char *mlock_args(const struct tl_mlock_call *c)
{
	struct args a;
	struct jsonw *w = pf_args_begin(&a);

	if (!w)
		return NULL;
	if (tl_has(c->pid))
		jw_knum(w, "pid", c->pid);
	if (c->call)
		jw_kstr(w, "call", c->call);
	if (tl_has(c->len))
		jw_knum(w, "len", c->len);
	if (tl_has(c->flags))
		jw_knum(w, "flags", c->flags);
	if (tl_has(c->result))
		jw_knum(w, "result", c->result);
	jw_kstr(w, "errno", c->errno_name);
	jw_kreal(w, "start_ms", c->start_ms);
	if (tl_has(c->dur_ms))
		jw_kreal(w, "dur_ms", c->dur_ms);
	return pf_args_end(&a);
}

static void exit_json(struct jsonw *w, const struct tl_exit *x)
{
	if (!x->has) {
		jw_null(w);
		return;
	}
	jw_obj(w);
	jw_knum(w, "code", x->code);
	jw_knum(w, "signal", x->signal);
	if (tl_has(x->ms))
		jw_kreal(w, "ms", x->ms);
	jw_obj_end(w);
}

static char *process_args(const struct tl_proc *p)
{
	struct args a;
	struct jsonw *w = pf_args_begin(&a);

	if (!w)
		return NULL;
	jw_key(w, "argv");
	if (p->has_argv) {
		jw_arr(w);
		for (size_t i = 0; i < p->n_argv; i++)
			jw_str(w, p->argv[i]);
		jw_arr_end(w);
	} else {
		jw_null(w);
	}
	jw_key(w, "exit");
	exit_json(w, &p->exit);
	return pf_args_end(&a);
}

static char *one_str_args(const char *key, const char *val)
{
	struct args a;
	struct jsonw *w = pf_args_begin(&a);

	if (w)
		jw_kstr(w, key, val);
	return pf_args_end(&a);
}

int render_perfetto(const struct timeline *tl, FILE *out)
{
	struct tl_view *v = tl_view_decode(tl);
	struct events e = {.next_lane_tid = LANE_TID_BASE};
	struct xspan *x = NULL;
	int spid = 0, lpid = 0, rc = -1;
	double end_ms = 0;
	size_t i, n;

	if (!v) {
		errno = ENOMEM;
		return -1;
	}
	/* the service and the launcher (its parent) */
	spid = tl_id(v->process.pid);
	for (i = 0; i < v->n_procs; i++) {
		int pid = tl_id(v->procs[i].pid);

		if (!spid)
			spid = pid;
		if (pid == spid && tl_id(v->procs[i].ppid))
			lpid = tl_id(v->procs[i].ppid);
	}
	if (!lpid)
		lpid = spid > 1 ? spid - 1 : 1;
	if (!spid)
		spid = lpid + 1;

	/* how far the trace goes: the last thing seen */
	for (i = 0; i < v->n_marks; i++)
		if (v->marks[i].ms > end_ms)
			end_ms = v->marks[i].ms;
	for (i = 0; i < v->n_phases; i++)
		if (v->phases[i].end_ms > end_ms)
			end_ms = v->phases[i].end_ms;

	/* the launcher: phases and marks */
	pf_meta_str(&e, "process_name", lpid, lpid, "name", "tts-launch");
	pf_meta_int(&e, "process_sort_index", lpid, lpid, "sort_index", 0);
	pf_meta_str(&e, "thread_name", lpid, lpid, "name", "phases");
	n = v->n_phases;
	x = calloc(n ? n : 1, sizeof(*x));
	if (!x)
		goto out;
	for (i = 0; i < n; i++) {
		const struct tl_phase *p = &v->phases[i];

		x[i] = (struct xspan){p->name ?: "?", "phase", p->start_ms, p->end_ms,
				      one_str_args("source", p->source)};
		if (isnan(x[i].start))
			x[i].start = 0;
		if (isnan(x[i].end))
			x[i].end = x[i].start;
	}
	emit_track(&e, lpid, lpid, "phases", x, n);
	free(x);
	x = NULL;
	for (i = 0; i < v->n_marks; i++)
		instant(&e, v->marks[i].name, "mark", "g", lpid, lpid, v->marks[i].ms, NULL);

	/* each traced process: its lifetime and its Python imports */
	for (i = 0; i < v->n_procs; i++) {
		const struct tl_proc *p = &v->procs[i];
		int pid = tl_id(p->pid);
		const char *cmd = p->command;
		double a = p->exec_ms, b = p->exit_ms;
		size_t k = 0;
		char name[256];

		if (isnan(a))
			a = p->fork_ms;
		if (isnan(a))
			continue;
		if (isnan(b))
			b = end_ms;
		snprintf(name, sizeof(name), "%.*s (%d)", (int)utf8_prefix_len(base_name(cmd), 200),
			 base_name(cmd), pid);
		pf_meta_str(&e, "process_name", pid, pid, "name", name);
		pf_meta_int(&e, "process_sort_index", pid, pid, "sort_index", pid == spid ? 1 : 2);
		pf_meta_str(&e, "thread_name", pid, pid, "name", base_name(cmd));
		x = calloc(v->n_imports + 1, sizeof(*x));
		if (!x)
			goto out;
		x[k++] =
		    (struct xspan){base_name(cmd), "process", a, b < a ? a : b, process_args(p)};
		for (size_t j = 0; j < v->n_imports; j++) {
			const struct tl_import *m = &v->imports[j];
			struct args fa;
			struct jsonw *w;

			if (tl_id(m->pid) != pid || isnan(m->start_ms) || isnan(m->end_ms))
				continue;
			w = pf_args_begin(&fa);
			if (w) {
				jw_key(w, "found");
				if (m->found < 0)
					jw_null(w);
				else
					jw_bool(w, m->found);
			}
			x[k++] = (struct xspan){m->name ?: "?", "import", m->start_ms, m->end_ms,
						pf_args_end(&fa)};
		}
		emit_track(&e, pid, pid, base_name(cmd), x, k);
		free(x);
		x = NULL;
	}
	if (!v->n_procs) {
		pf_meta_str(&e, "process_name", spid, spid, "name", "service");
		pf_meta_int(&e, "process_sort_index", spid, spid, "sort_index", 1);
	}
	perfetto_attribution(&e, tl, spid);

	/* downloads: async spans, and the summed download rate as a counter */
	{
		size_t nd = v->n_downloads;
		double *t = calloc(2 * nd + 1, sizeof(double));

		for (i = 0; i < nd; i++) {
			const struct tl_download *d = &v->downloads[i];
			char label[256], id[32];
			double a = d->first_ms, b = d->last_ms;
			struct args da;
			struct jsonw *w;

			if (isnan(a) || isnan(b))
				continue;
			/* by the file it becomes; older timelines: by the path */
			if (d->name)
				snprintf(label, sizeof(label), "%s", d->name);
			else
				download_label(d->path, label, sizeof(label));
			utf8_trim(label);
			snprintf(id, sizeof(id), "download-%zu", i);
			w = pf_args_begin(&da);
			if (w && d->name) {
				jw_kstr(w, "name", d->name);
				/* a hub cache blob by its snapshot link */
				if (d->link || d->final_path)
					jw_kstr(w, "file", d->link ? d->link : d->final_path);
			} else if (w) {
				jw_kstr(w, "path", d->path);
			}
			if (w) {
				jw_knum(w, "bytes", d->bytes);
				jw_kreal(w, "rate_mb_s", d->rate_mb_s);
				jw_key(w, "completed");
				jw_bool(w, d->completed);
			}
			async_span(&e, label, "download", spid, id, a, b, pf_args_end(&da));
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

		for (i = 0; i < nd; i++) {
			double a = v->downloads[i].first_ms, b = v->downloads[i].last_ms;

			if (st && en && a < b) { /* false for NaN: such a download adds nothing */
				double r = v->downloads[i].bytes / 1e3 / (b - a);

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
			counter1(&e, "download MB/s", spid, at, "MB/s", mbs);
		}
		free(st);
		free(en);
		free(t);
	}

	/* requests after ready: async spans */
	for (i = 0; i < v->n_requests; i++) {
		const struct tl_request *r = &v->requests[i];
		double a = r->start_ms, b = r->end_ms;
		char id[32], name[256];

		if (isnan(b))
			b = a + r->dur_ms;
		if (isnan(a) || isnan(b))
			continue;
		snprintf(id, sizeof(id), "request-%zu", i);
		if (r->method || r->path)
			snprintf(name, sizeof(name), "%s %s", r->method ?: "", r->path ?: "");
		else
			snprintf(name, sizeof(name), "request %zu", i + 1);
		utf8_trim(name);
		async_span(&e, name, "request", spid, id, a, b, request_args(r));
	}

	/* page faults per second, one point per bucket of the series */
	{
		const struct tl_series *fr = &v->memory.fault_rate;
		double bucket = fr->bucket_ms;

		if (bucket > 0) {
			for (i = 0; i < fr->n; i++)
				counter1(&e, "page faults/s", spid, (double)i * bucket, "faults/s",
					 tl_or0(fr->counts[i]) * 1000.0 / bucket);
			if (fr->n)
				counter1(&e, "page faults/s", spid, (double)fr->n * bucket,
					 "faults/s", 0.0);
		}
	}

	/* off-CPU time: the trace keeps totals per process, not a series, so
	 * the counter goes from 0 at exec to the totals at exit */
	for (i = 0; i < v->sched.n_processes; i++) {
		const struct tl_sched_proc *s = &v->sched.processes[i];
		int pid = tl_id(s->pid);
		double a = NAN, b = NAN;

		for (size_t j = 0; j < v->n_procs; j++)
			if (tl_id(v->procs[j].pid) == pid) {
				a = v->procs[j].exec_ms;
				b = v->procs[j].exit_ms;
			}
		if (isnan(a))
			continue;
		if (isnan(b) || b < a)
			b = end_ms > a ? end_ms : a;
		for (int end = 0; end < 2; end++) {
			struct args ca;
			struct jsonw *w;

			/* totals that are not numbers: no point (JSON has no NaN) */
			if (end &&
			    (isnan(s->io_wait_ms) || isnan(s->sleep_ms) || isnan(s->runqueue_ms)))
				break;
			w = pf_args_begin(&ca);
			if (w) {
				jw_kreal(w, "io_wait", end ? s->io_wait_ms : 0.0);
				jw_kreal(w, "sleep", end ? s->sleep_ms : 0.0);
				jw_kreal(w, "runqueue", end ? s->runqueue_ms : 0.0);
			}
			counter(&e, "off-CPU ms", pid, end ? b : a, pf_args_end(&ca));
		}
	}

	/* mlock calls: instants on the process that made them */
	for (i = 0; i < v->memory.n_mlock_calls; i++) {
		const struct tl_mlock_call *c = &v->memory.mlock_calls[i];
		int pid = tl_id(c->pid) ? tl_id(c->pid) : spid;

		if (isnan(c->start_ms))
			continue;
		instant(&e, c->call ? c->call : "mlock", "mlock", "p", pid, pid, c->start_ms,
			mlock_args(c));
	}

	if (e.failed) {
		errno = ENOMEM;
		goto out;
	}
	/* sort by time (metadata first); equal times keep their order, so a
	 * zero-length async span still has its "b" before its "e" */
	{
		struct event **ord = calloc(e.n ? e.n : 1, sizeof(*ord));
		struct jsonw w;

		if (!ord)
			goto out;
		for (i = 0; i < e.n; i++)
			ord[i] = &e.v[i];
		qsort(ord, e.n, sizeof(*ord), ev_cmp);
		jw_init(&w, out, 0, 0);
		jw_obj(&w);
		jw_key(&w, "traceEvents");
		jw_arr(&w);
		for (i = 0; i < e.n; i++)
			ev_write(&w, ord[i]);
		jw_arr_end(&w);
		jw_kstr(&w, "displayTimeUnit", "ms");
		jw_key(&w, "otherData");
		jw_obj(&w);
		jw_kstr(&w, "generator", "tts-launch");
		jw_kstr(&w, "schema", v->schema);
		jw_obj_end(&w);
		jw_obj_end(&w);
		free(ord);
		if (fputc('\n', out) != EOF && !jw_error(&w))
			rc = 0;
	}
out:
	for (i = 0; i < e.n; i++) {
		free(e.v[i].name);
		free(e.v[i].id);
		free(e.v[i].args);
	}
	free(e.v);
	free(x);
	tl_view_free(v);
	if (rc < 0 && !errno)
		errno = EIO;
	return rc;
}
