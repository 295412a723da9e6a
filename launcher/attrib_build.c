/* attrib_build: the `attribution` section from the collector, and its
 * typed view; see attrib_build.h. */
#include "attrib_build.h"

#include <bpf/libbpf.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "attrib_live.h"
#include "clock.h"
#include "collector.h"
#include "gpu.h"
#include "mapwalk.h"
#include "timeline_internal.h"
#include "trace.skel.h"
#include "util.h"

/* the files the records name: dev/ino -> the path it was opened by */
struct fname {
	__u64 dev, ino;
	char *path;
};

struct names {
	struct collector *c;
	json_t *network; /* the model's network section: host names of peers */
	struct fname *f;
	size_t nf;
};

static void file_names(struct names *n)
{
	struct bpf_map *m = n->c->skel->maps.paths;
	struct path_key k;
	struct path_val v;
	struct map_walk mw;
	size_t left = 0;

	for (size_t i = 0; i < n->nf; i++)
		left += !n->f[i].path;
	map_walk_begin(&mw, bpf_map__fd(m), sizeof(k), sizeof(v), false);
	while (left && map_walk_next(&mw, &k, &v)) {
		for (size_t i = 0; i < n->nf; i++) {
			if (n->f[i].path || n->f[i].dev != v.dev || n->f[i].ino != v.ino)
				continue;
			k.path[sizeof(k.path) - 1] = 0;
			n->f[i].path = strdup(k.path);
			left--;
		}
	}
	map_walk_end(&mw);
	/* never opened by path (an inherited or passed fd): its dentry name */
	for (size_t i = 0; i < n->nf; i++) {
		struct file_key fk = {n->f[i].dev, n->f[i].ino};
		struct file_val fv;

		if (n->f[i].path || bpf_map__lookup_elem(n->c->skel->maps.files, &fk, sizeof(fk),
							 &fv, sizeof(fv), 0))
			continue;
		fv.name[sizeof(fv.name) - 1] = 0;
		if (fv.name[0])
			n->f[i].path = strdup(fv.name);
	}
}

static bool name_file(void *ctx, __u64 dev, __u64 ino, char *out, size_t len)
{
	struct names *n = ctx;

	for (size_t i = 0; i < n->nf; i++) {
		if (n->f[i].dev == dev && n->f[i].ino == ino && n->f[i].path) {
			snprintf(out, len, "%s", n->f[i].path);
			return true;
		}
	}
	return false;
}

/* host:port when the network section names the peer's host */
static bool name_peer(void *ctx, int family, const __u8 *addr, int port, char *out, size_t len)
{
	struct names *n = ctx;
	static const char *const host_keys[] = {"host", "hostname", "name"};
	size_t i;
	json_t *e;

	collector_peer_string(family, addr, port, out, len);
	json_array_foreach (n->network, i, e) {
		if (!json_is_string(json_object_get(e, "peer")) ||
		    strcmp(json_string_value(json_object_get(e, "peer")), out))
			continue;
		for (size_t k = 0; k < sizeof(host_keys) / sizeof(host_keys[0]); k++) {
			const char *h = json_string_value(json_object_get(e, host_keys[k]));

			if (h && *h) {
				snprintf(out, len, "%s:%d", h, port);
				return true;
			}
		}
	}
	return true;
}

static bool in_tree(void *ctx, int pid)
{
	struct names *n = ctx;

	return collector_proc_find(n->c, pid) != NULL;
}

/* when p started: its exec, else its fork, else dflt */
static double proc_start(const struct coll_proc *p, double dflt)
{
	return !p ? dflt : p->exec_ms >= 0 ? p->exec_ms : p->fork_ms >= 0 ? p->fork_ms : dflt;
}

static const char *proc_comm(const struct coll_proc *p)
{
	return p && p->has_comm ? p->comm : NULL;
}

static bool py_func(void *ctx, int pid, __u64 code, char *out, size_t len)
{
	struct names *n = ctx;

	return attr_store_pyname(&n->c->off, pid, code, out, len);
}

/* A net wait during exactly one download (its first to last write) is
 * that download's: "host:port (NAME)", the file it becomes. */
static void name_download(json_t *downloads, struct attr_off *o)
{
	const char *only = NULL;
	size_t i, n = 0;
	json_t *d;

	if (o->kind != AK_NET)
		return;
	json_array_foreach (downloads, i, d) {
		json_t *a = json_object_get(d, "first_ms"), *b = json_object_get(d, "last_ms");
		const char *name = json_string_value(json_object_get(d, "name"));

		if (!name || !json_is_number(a) || !json_is_number(b) ||
		    json_number_value(a) >= o->end || json_number_value(b) <= o->start)
			continue;
		only = name;
		n++;
	}
	if (n == 1) {
		char what[sizeof(o->what)];

		/* cut when long: the file's name is the end of it */
		if (snprintf(what, sizeof(what), "%s (%s)", o->what, only) > 0)
			memcpy(o->what, what, sizeof(what));
	}
}

static int sample_cmp(const void *pa, const void *pb)
{
	const struct attr_sample *a = pa, *b = pb;

	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return a->t < b->t ? -1 : a->t > b->t ? 1 : 0;
}

static double num(json_t *o, const char *key, double dflt)
{
	json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : dflt;
}

/* the listen that made it ready */
static const struct coll_listen *ready_listen(struct collector *c)
{
	if (c->ready_ms < 0 || c->ready_listen < 0 || (size_t)c->ready_listen >= c->n_listens)
		return NULL;
	return &c->listens[c->ready_listen];
}

static int gpu_call_cmp(const void *pa, const void *pb)
{
	const struct attr_gpu_call *a = pa, *b = pb;

	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return a->start < b->start ? -1 : a->start > b->start ? 1 : 0;
}

/* The tree's time inside CUDA calls (gpu.c's spans) that meets the window,
 * sorted by tid then start; NULL when none (or out of memory). */
static struct attr_gpu_call *gpu_calls(struct collector *c, const struct attr_input *in, size_t *n)
{
	size_t ns;
	const struct gpu_span *sp = gpu_spans(c->gpu, &ns);
	struct attr_gpu_call *g = ns ? calloc(ns, sizeof(*g)) : NULL;

	*n = 0;
	for (size_t i = 0; g && i < ns; i++) {
		if (sp[i].end <= in->start || sp[i].start >= in->end || !(sp[i].end > sp[i].start))
			continue;
		g[(*n)++] = (struct attr_gpu_call){sp[i].tid, sp[i].start, sp[i].end,
						   sp[i].init ? "CUDA init" : sp[i].call};
	}
	if (g)
		qsort(g, *n, sizeof(*g), gpu_call_cmp);
	return g;
}

#define HOLDS_MAX 16

/* A process stopped while tts-launch attached CUDA probes for it (gpu.c):
 * its wait (other, in the mmap or clone it was stopped at) is named so. */
static void name_hold(const struct gpu_hold *h, size_t n, struct attr_off *o)
{
	for (size_t i = 0; i < n && o->kind == AK_OTHER; i++)
		if (h[i].pid == o->pid && o->start >= h[i].start - 1 && o->start < h[i].end)
			snprintf(o->what, sizeof(o->what),
				 "held by tts-launch (CUDA probes attach)");
}

static int import_cmp(const void *pa, const void *pb)
{
	const struct attr_import *a = pa, *b = pb;

	return a->start < b->start ? -1 : a->start > b->start ? 1 : 0;
}

static json_t *section_json(const struct attr_result *r, double start, double end, bool complete,
			    size_t records, size_t samples, unsigned long long lost)
{
	json_t *causes = json_array(), *strip = json_array();

	for (size_t i = 0; i < r->n_causes; i++)
		json_array_append_new(causes, json_pack("{s:s, s:o, s:f, s:I}", "kind",
							attr_kind_name(r->causes[i].kind), "what",
							json_text(r->causes[i].what), "ms",
							r->causes[i].us / 1000.0, "pieces",
							(json_int_t)r->causes[i].pieces));
	for (size_t i = 0; i < r->n_segs; i++)
		json_array_append_new(strip, json_pack("{s:o, s:o, s:s, s:o}", "start_ms",
						       ms_json(r->segs[i].start), "end_ms",
						       ms_json(r->segs[i].end), "kind",
						       attr_kind_name(r->segs[i].kind), "what",
						       json_text(r->segs[i].what)));
	return json_pack("{s:o, s:o, s:f, s:f, s:b, s:I, s:I, s:I, s:o, s:o, s:b}", "start_ms",
			 ms_json(start), "end_ms", ms_json(end), "window_ms", r->window_us / 1000.0,
			 "explained_ms", r->explained_us / 1000.0, "complete", complete, "records",
			 (json_int_t)records, "samples", (json_int_t)samples, "lost",
			 (json_int_t)lost, "causes", causes, "strip", strip, "strip_cut",
			 r->segs_cut);
}

/* The thread that listened when it is not its process's main thread (the
 * listen event names it): followed from its first interval or sample on
 * (in->listen_*). A guess from who was waiting at ready is not enough: a
 * main thread polling with short sleeps (gradio's launch()) is as often
 * on a CPU at that instant as in its sleep. */
static void find_listener(struct attr_input *in, const struct coll_listen *l)
{
	double first = in->end;

	if (!l || !l->tid || l->tid == l->pid)
		return;
	for (size_t i = 0; i < in->n_offs; i++)
		if (in->offs[i].tid == l->tid && in->offs[i].pid == l->pid &&
		    in->offs[i].start < first)
			first = in->offs[i].start;
	for (size_t i = 0; i < in->n_samples; i++)
		if (in->samples[i].tid == l->tid && in->samples[i].t < first)
			first = in->samples[i].t;
	in->listen_pid = l->pid;
	in->listen_tid = l->tid;
	in->listen_from = first;
}

void attribution_build(struct timeline *tl, struct collector *c)
{
	json_t *root = timeline_json(tl);
	const struct coll_proc *rootp;
	struct names nm = {.c = c};
	struct attr_names an = {name_file, name_peer, in_tree, py_func, &nm};
	struct attr_input in = {0};
	struct attr_result r;
	struct attr_proc *procs = NULL;
	struct attr_import *imps = NULL;
	struct attr_off *offs = NULL;
	struct attr_sample *samples = NULL;
	struct attr_gpu_call *gpu = NULL;
	struct gpu_hold holds[HOLDS_MAX];
	size_t n_holds;
	char(*funcs)[96] = NULL;
	const struct attr_store *st;
	const struct coll_listen *rl;
	__u64 cnt[CNT_MAX];
	bool complete = true;
	int rp;
	size_t i;

	if (!root || !c || c->exec_ms < 0)
		return;
	rl = ready_listen(c);
	st = &c->off;
	nm.network = json_object_get(root, "network");
	in.start = c->exec_ms;
	rootp = collector_proc(c, c->root);
	in.end = c->ready_ms >= 0 ? c->ready_ms : rootp ? rootp->exit_ms : -1;
	if (in.end < 0) {
		in.end = clock_ms(); /* so far */
		complete = false;
	}
	in.root = c->root;

	/* processes, and the chain to the one that got ready */
	procs = calloc(c->n_procs + 1, sizeof(*procs));
	imps = calloc(c->n_imports + 1, sizeof(*imps));
	offs = calloc(st->n + c->n_procs + 1, sizeof(*offs));
	nm.f = calloc(st->n + 1, sizeof(*nm.f));
	samples = calloc(st->n_samples + 1, sizeof(*samples));
	funcs = calloc(st->n_samples + 1, sizeof(*funcs));
	if (!procs || !imps || !offs || !nm.f || !samples || !funcs)
		goto out;
	for (i = 0; i < c->n_procs; i++) {
		const struct coll_proc *p = c->procs[i];
		struct attr_proc *a = &procs[in.n_procs++];

		a->pid = p->pid;
		a->ppid = p->has_ppid ? p->ppid : 0;
		a->start = proc_start(p, 0);
		a->end = p->exit_ms;
		a->comm = proc_comm(p);
	}
	rp = rl ? rl->pid : 0;
	for (int hops = 0; rp && rp != c->root && hops < 64; hops++) {
		struct attr_proc *a = NULL;

		for (i = 0; i < in.n_procs; i++)
			if (procs[i].pid == rp)
				a = &procs[i];
		if (!a)
			break;
		a->followed = true;
		rp = a->ppid;
	}
	for (i = 0; i < c->n_imports; i++) {
		const struct coll_import *m = &c->imports[i];

		if (m->depth != 0)
			continue;
		imps[in.n_imports++] =
		    (struct attr_import){m->pid, m->start_ms, m->end_ms, m->name};
	}
	qsort(imps, in.n_imports, sizeof(*imps), import_cmp);

	/* the records, classified (the files they name looked up once) */
	for (i = 0; i < st->n; i++) {
		const struct tl_off_event *e = &st->recs[i];
		bool seen = false;

		if (e->obj != OFFOBJ_FILE)
			continue;
		for (size_t j = 0; j < nm.nf && !seen; j++)
			seen = nm.f[j].dev == e->dev && nm.f[j].ino == e->ino;
		if (!seen)
			nm.f[nm.nf++] = (struct fname){e->dev, e->ino, NULL};
	}
	file_names(&nm);
	n_holds = gpu_holds(c->gpu, holds, HOLDS_MAX);
	for (i = 0; i < st->n; i++) {
		const struct tl_off_event *e = &st->recs[i];
		double a = clock_ns_to_ms(e->ts_ns);

		if (a > in.end || clock_ns_to_ms(e->ts_ns + e->dur_ns) < in.start)
			continue;
		attr_classify(e, a, clock_ns_to_ms(e->ts_ns + e->dur_ns),
			      e->wake_ns ? clock_ns_to_ms(e->wake_ns) : -1, &an, &offs[in.n_offs]);
		name_hold(holds, n_holds, &offs[in.n_offs]);
		name_download(json_object_get(root, "downloads"), &offs[in.n_offs++]);
	}
	/* main threads still in a wait the window's end falls in: their
	 * record comes when they are back on a CPU; the kernel's entry now */
	for (size_t j = 0; j < c->n_procs; j++) {
		const struct coll_proc *p = c->procs[j];
		__u32 tid = (__u32)p->pid;
		struct tl_off_event e;
		double a, now = clock_ms();

		if (!tid || p->exit_ms >= 0 ||
		    bpf_map__lookup_elem(c->skel->maps.attroff, &tid, sizeof(tid), &e, sizeof(e),
					 0))
			continue;
		a = clock_ns_to_ms(e.ts_ns);
		if (a >= in.end)
			continue;
		attr_classify(&e, a, now > in.end ? now : in.end,
			      e.wake_ns ? clock_ns_to_ms(e.wake_ns) : -1, &an, &offs[in.n_offs]);
		name_download(json_object_get(root, "downloads"), &offs[in.n_offs++]);
	}
	/* the Python functions seen on CPU */
	for (i = 0; i < st->n_samples; i++) {
		const struct tl_pysample_event *e = &st->samples[i];
		bool native = e->pad == PYSAMPLE_NATIVE;

		if (native) {
			const char *lib = attr_store_native(st, e->code);

			if (!lib)
				continue;
			snprintf(funcs[in.n_samples], sizeof(funcs[0]), "%s", lib);
		} else if (!attr_store_pyname(st, (int)e->pid, e->code, funcs[in.n_samples],
					      sizeof(funcs[0]))) {
			continue;
		}
		samples[in.n_samples] = (struct attr_sample){(int)e->tid, clock_ns_to_ms(e->ts_ns),
							     funcs[in.n_samples], native};
		in.n_samples++;
	}
	qsort(samples, in.n_samples, sizeof(*samples), sample_cmp);
	in.samples = samples;
	in.offs = offs;
	in.procs = procs;
	in.imports = imps;
	gpu = gpu_calls(c, &in, &in.n_gpu);
	in.gpu = gpu;
	find_listener(&in, rl);
	if (attr_breakdown(&in, &r) == 0) {
		collector_counters(c, cnt);
		json_object_set_new(root, "attribution",
				    section_json(&r, in.start, in.end, complete, st->n,
						 st->n_samples, st->lost + cnt[CNT_OFF_DROPS]));
		attr_samples_write(tl, &r.samples);
		attr_result_free(&r);
	}
out:
	for (i = 0; nm.f && i < nm.nf; i++)
		free(nm.f[i].path);
	free(nm.f);
	free(procs);
	free(imps);
	free(offs);
	free(samples);
	free(funcs);
	free(gpu);
}

/* ---- live: what the critical thread waits on now ---- */

/* the newest living process of the tree whose parent is pid, or 0 */
static int living_child(struct collector *c, int pid)
{
	double best = -1;
	int child = 0;

	for (size_t i = 0; i < c->n_procs; i++) {
		const struct coll_proc *p = c->procs[i];
		double t = proc_start(p, -1);

		if ((p->has_ppid ? p->ppid : 0) != pid || p->exit_ms >= 0 || t < best)
			continue;
		best = t;
		child = p->pid;
	}
	return child;
}

/* when tid was last seen leaving a wait (its newest interval's end), or -1 */
static double last_back(const struct attr_store *st, int tid)
{
	for (size_t i = st->n; i-- > 0;)
		if ((int)st->recs[i].tid == tid)
			return clock_ns_to_ms(st->recs[i].ts_ns + st->recs[i].dur_ns);
	return -1;
}

/* the Python function last sampled on CPU in tid, if any */
static void last_func(const struct attr_store *st, int pid, int tid, char *out, size_t len)
{
	out[0] = 0;
	for (size_t i = st->n_samples; i-- > 0;)
		if ((int)st->samples[i].tid == tid) {
			if (!attr_store_pyname(st, pid, st->samples[i].code, out, len))
				out[0] = 0;
			return;
		}
}

/* The state now of thread tid of pid (its record p) into h: from its
 * off-CPU entry (ev, else looked up; none: on a CPU). True when it waits
 * for a child of the tree, *child set to it. */
static bool live_hop(struct collector *c, const struct attr_names *an, int pid, int tid,
		     const struct coll_proc *p, double now, struct attr_live_hop *h, int *child,
		     const struct tl_off_event *ev)
{
	struct tl_off_event e;
	struct attr_off o;
	__u32 key = (__u32)tid;
	const char *call;

	memset(h, 0, sizeof(*h));
	h->pid = pid;
	h->tid = tid;
	snprintf(h->comm, sizeof(h->comm), "%s", proc_comm(p) ?: "process");
	if (ev)
		e = *ev;
	else if (bpf_map__lookup_elem(c->skel->maps.attroff, &key, sizeof(key), &e, sizeof(e), 0)) {
		/* not off CPU: running since its last wait */
		h->state = LIVE_CPU;
		h->kind = AK_CPU;
		h->since_ms = last_back(&c->off, tid);
		if (h->since_ms < 0)
			h->since_ms = proc_start(p, now);
		last_func(&c->off, pid, tid, h->what, sizeof(h->what));
		return false;
	}
	h->since_ms = clock_ns_to_ms(e.ts_ns);
	/* the file it waits on, by the path it was opened by */
	if (e.obj == OFFOBJ_FILE) {
		struct names *nm = an->ctx;
		struct fname f = {e.dev, e.ino, NULL};

		nm->f = &f;
		nm->nf = 1;
		file_names(nm);
		attr_classify(&e, h->since_ms, now, e.wake_ns ? clock_ns_to_ms(e.wake_ns) : -1, an,
			      &o);
		free(f.path);
		nm->f = NULL;
		nm->nf = 0;
	} else {
		attr_classify(&e, h->since_ms, now, e.wake_ns ? clock_ns_to_ms(e.wake_ns) : -1, an,
			      &o);
	}
	call = attr_syscall_name(e.nr);
	snprintf(h->call, sizeof(h->call), "%s", call ? call : "");
	memcpy(h->py, o.py, sizeof(h->py));
	memcpy(h->what, o.what, sizeof(h->what));
	h->kind = o.kind;
	if (e.reason == OFF_RUNQ || (e.flags & OFFF_WOKEN)) {
		h->state = LIVE_RUNNABLE;
		return false;
	}
	h->state = LIVE_BLOCKED;
	if (e.obj == OFFOBJ_SOCKET && e.family != AF_UNIX && e.port)
		collector_peer_string(e.family, e.addr, e.port, h->peer, sizeof(h->peer));
	/* wait4/waitid, or a pipe read while a child runs (subprocess with
	 * captured output): what the child does */
	if (tid == pid && (o.kind == AK_CHILD || e.obj == OFFOBJ_PIPE) &&
	    (*child = living_child(c, pid))) {
		const struct coll_proc *cp = collector_proc_find(c, *child);

		h->kind = AK_CHILD;
		snprintf(h->what, sizeof(h->what), "%s", proc_comm(cp) ?: "child process");
		return true;
	}
	return false;
}

/* how much a thread's wait says about what a process waits for: a
 * socket, then a file or fault, then a child (0: a wait on yet another
 * thread, a sleep, a lock: says nothing of its own) */
static int wait_rank(enum attr_kind k)
{
	return k == AK_NET ? 3 : k == AK_DISK || k == AK_FAULT ? 2 : k == AK_CHILD ? 1 : 0;
}

/* The main thread of pid waits on another thread of its process (a futex:
 * a join, a pool, a queue; an event loop): the one of its threads blocked
 * in the wait that says most (wait_rank), the longest so, into h. The
 * waker is not known until it wakes it: this is the attribution's hop
 * taken ahead. */
static bool live_thread(struct collector *c, const struct attr_names *an, int pid, double now,
			const struct attr_live_hop *main, struct attr_live_hop *h)
{
	struct bpf_map *m = c->skel->maps.attroff;
	struct tl_off_event e, best;
	struct map_walk mw;
	__u32 k;
	int rank = 0;
	double since = 0;

	map_walk_begin(&mw, bpf_map__fd(m), sizeof(k), sizeof(e), false);
	while (map_walk_next(&mw, &k, &e)) {
		struct attr_off o;
		int r;

		if ((int)e.pid != pid || (int)e.tid == pid || e.reason == OFF_RUNQ ||
		    (e.flags & OFFF_WOKEN))
			continue;
		attr_classify(&e, clock_ns_to_ms(e.ts_ns), now, -1, an, &o);
		r = wait_rank(o.kind);
		if (r > rank || (r == rank && r && clock_ns_to_ms(e.ts_ns) < since)) {
			rank = r;
			since = clock_ns_to_ms(e.ts_ns);
			best = e;
		}
	}
	map_walk_end(&mw);
	if (!rank)
		return false;
	live_hop(c, an, pid, (int)best.tid, collector_proc_find(c, pid), now, h, &rank, &best);
	memcpy(h->comm, main->comm, sizeof(h->comm));
	return true;
}

void attribution_live(struct timeline *tl, struct collector *c)
{
	struct names nm = {.c = c};
	struct attr_names an = {name_file, name_peer, in_tree, py_func, &nm};
	struct attr_live l = {0};
	int pid;

	if (!tl || !c || !c->skel || c->exec_ms < 0 || c->ready_ms >= 0) {
		attr_live_set(NULL);
		return;
	}
	nm.network = json_object_get(timeline_json(tl), "network");
	l.valid = true;
	l.at_ms = clock_ms();
	for (pid = c->root; pid > 0 && l.n_hops < ATTR_LIVE_HOPS;) {
		const struct coll_proc *p = collector_proc_find(c, pid);
		int child = 0;

		if (!p || p->exit_ms >= 0)
			break;
		if (!live_hop(c, &an, pid, pid, p, l.at_ms, &l.hop[l.n_hops++], &child, NULL))
			break;
		pid = child;
	}
	/* waiting on a thread of its own (a futex: a join, a pool; an event
	 * loop): the thread that is blocked on something */
	if (l.n_hops && l.n_hops < ATTR_LIVE_HOPS) {
		const struct attr_live_hop *m = &l.hop[l.n_hops - 1];

		if (m->state == LIVE_BLOCKED &&
		    ((m->kind == AK_LOCK && !strcmp(m->what, "futex")) ||
		     (m->kind == AK_SLEEP && strstr(m->call, "poll"))) &&
		    live_thread(c, &an, m->pid, l.at_ms, m, &l.hop[l.n_hops]))
			l.n_hops++;
	}
	attr_live_set(&l);
}

/* ---- the view ---- */

bool attr_view_decode(const struct timeline *tl, struct attr_view *v)
{
	json_t *a = json_object_get(timeline_json(tl), "attribution"), *c;
	size_t i, n = 0;

	memset(v, 0, sizeof(*v));
	if (!json_is_object(a) || !json_is_array(json_object_get(a, "causes")))
		return false;
	v->start_ms = num(a, "start_ms", 0);
	v->end_ms = num(a, "end_ms", 0);
	v->window_ms = num(a, "window_ms", v->end_ms - v->start_ms);
	v->explained_ms = num(a, "explained_ms", 0);
	v->complete = !json_is_false(json_object_get(a, "complete"));
	v->r.causes =
	    calloc(json_array_size(json_object_get(a, "causes")) + 1, sizeof(*v->r.causes));
	if (!v->r.causes)
		return false;
	json_array_foreach (json_object_get(a, "causes"), i, c) {
		struct attr_cause *k = &v->r.causes[n];
		enum attr_kind kind = attr_kind_of(json_string_value(json_object_get(c, "kind")));
		double ms = num(c, "ms", -1);

		if (kind == AK_N || !(ms >= 0))
			continue;
		k->kind = kind;
		snprintf(k->what, sizeof(k->what), "%s",
			 json_string_value(json_object_get(c, "what")) ?: "");
		k->us = llround(ms * 1000);
		k->pieces = (unsigned long long)num(c, "pieces", 0);
		n++;
	}
	v->r.n_causes = n;
	/* the strip (for a plot's state track); absent in older sections */
	n = 0;
	v->r.segs = calloc(json_array_size(json_object_get(a, "strip")) + 1, sizeof(*v->r.segs));
	json_array_foreach (json_object_get(a, "strip"), i, c) {
		enum attr_kind kind = attr_kind_of(json_string_value(json_object_get(c, "kind")));
		double s = num(c, "start_ms", -1), e = num(c, "end_ms", -1);

		if (!v->r.segs || kind == AK_N || !(s >= 0) || !(e >= s))
			continue;
		v->r.segs[n] = (struct attr_seg){.start = s, .end = e, .kind = kind};
		snprintf(v->r.segs[n++].what, sizeof(v->r.segs[0].what), "%s",
			 json_string_value(json_object_get(c, "what")) ?: "");
	}
	v->r.n_segs = n;
	v->r.segs_cut = json_is_true(json_object_get(a, "strip_cut"));
	v->r.window_us = llround(v->window_ms * 1000);
	v->r.explained_us = llround(v->explained_ms * 1000);
	return true;
}

void attr_view_free(struct attr_view *v) { attr_result_free(&v->r); }
