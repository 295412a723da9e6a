/* attribution: the exclusive breakdown of the start-up window; see
 * attribution.h. */
#include "attribution.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "attrib_native.h"

static const char *const kind_names[AK_N] = {
    [AK_CPU] = "cpu",	    [AK_DISK] = "disk",	  [AK_FAULT] = "fault", [AK_NET] = "net",
    [AK_SLEEP] = "sleep",   [AK_LOCK] = "lock",	  [AK_CHILD] = "child", [AK_GPU] = "gpu",
    [AK_RUNQ] = "runqueue", [AK_OTHER] = "other",
};

const char *attr_kind_name(enum attr_kind k) { return k < AK_N ? kind_names[k] : "other"; }

enum attr_kind attr_kind_of(const char *s)
{
	for (int k = 0; s && k < AK_N; k++)
		if (!strcmp(s, kind_names[k]))
			return (enum attr_kind)k;
	return AK_N;
}

/* ---- the records as they came ---- */

#define ATTR_STORE_MAX (1u << 20) /* records kept: 112 MiB at most */

/* Append one record of size sz to *v (n, cap), growing it. */
static bool keep(void **v, size_t *n, size_t *cap, const void *data, size_t sz)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 1024;
		void *nv = *n < ATTR_STORE_MAX ? realloc(*v, c * sz) : NULL;

		if (!nv)
			return false;
		*v = nv;
		*cap = c;
	}
	memcpy((char *)*v + (*n)++ * sz, data, sz);
	return true;
}

void attr_store_add(struct attr_store *s, const void *data, size_t size)
{
	const struct tl_head *h = data;
	bool ok = true;

	if (size < sizeof(*h))
		return;
	if (h->type == EV_OFFCPU && size >= sizeof(*s->recs)) {
		ok = keep((void **)&s->recs, &s->n, &s->cap, data, sizeof(*s->recs));
		if (s->note)
			s->note(s->note_ctx, (int)h->pid);
	} else if (h->type == EV_PYCODE && size >= sizeof(*s->codes))
		ok = keep((void **)&s->codes, &s->n_codes, &s->cap_codes, data, sizeof(*s->codes));
	else if (h->type == EV_PYSAMPLE && size >= sizeof(*s->samples)) {
		struct tl_pysample_event e;

		memcpy(&e, data, sizeof(e));
		/* a native ip: named now, while its process is alive */
		if (e.pad == PYSAMPLE_NATIVE) {
			int idx;

			if (!s->natives)
				s->natives = natives_new();
			idx = natives_lookup(s->natives, (int)e.pid, e.code);
			e.code = idx < 0 ? UINT64_MAX : (__u64)idx;
		}
		ok = keep((void **)&s->samples, &s->n_samples, &s->cap_samples, &e,
			  sizeof(*s->samples));
	}
	if (!ok)
		s->lost++;
}

bool attr_store_pyname(const struct attr_store *s, int pid, __u64 code, char *out, size_t len)
{
	for (size_t i = s->n_codes; code && i-- > 0;) {
		const struct tl_pycode_event *c = &s->codes[i];
		const char *file = c->file, *cut, *p;

		if (c->code != code || (int)c->pid != pid)
			continue;
		/* the file's last two components: enough to find it, short */
		cut = memrchr(c->file, '/', strnlen(c->file, sizeof(c->file)));
		if (cut) {
			for (p = cut; p > c->file && p[-1] != '/'; p--)
				;
			file = p > c->file ? p : c->file;
		}
		snprintf(out, len, "%.*s (%.*s:%u)", (int)strnlen(c->name, sizeof(c->name)),
			 c->name, (int)strnlen(file, sizeof(c->file) - (size_t)(file - c->file)),
			 file, c->line);
		return c->name[0] != 0;
	}
	return false;
}

const char *attr_store_native(const struct attr_store *s, __u64 code)
{
	return code < UINT64_MAX ? natives_name(s->natives, (int)code) : NULL;
}

void attr_store_free(struct attr_store *s)
{
	natives_free(s->natives);
	free(s->recs);
	free(s->codes);
	free(s->samples);
	if (s->note_free)
		s->note_free(s->note_ctx);
	memset(s, 0, sizeof(*s));
}

/* ---- classification ---- */

static bool is_sleep_call(int nr)
{
	return nr == SYS_nanosleep || nr == SYS_clock_nanosleep || nr == SYS_pause ||
	       nr == SYS_rt_sigsuspend || nr == SYS_rt_sigtimedwait;
}

static bool is_epoll(int nr)
{
	return nr == SYS_epoll_wait || nr == SYS_epoll_pwait || nr == SYS_epoll_pwait2;
}

static void set(struct attr_off *o, enum attr_kind k, enum attr_hop hop, const char *what)
{
	o->kind = k;
	o->hop = hop;
	snprintf(o->what, sizeof(o->what), "%s", what);
}

/* Who woke it: another thread of its process, another process of the
 * tree, or neither (an interrupt, a process outside the tree). */
enum waker { W_NONE, W_THREAD, W_PROCESS };

static enum waker waker_of(const struct tl_off_event *e, const struct attr_names *nm)
{
	if (!(e->flags & OFFF_WOKEN) || !e->waker_tid || e->waker_tid == e->tid)
		return W_NONE;
	if (e->waker_pid == e->pid)
		return W_THREAD;
	if (nm && nm->in_tree && nm->in_tree(nm->ctx, (int)e->waker_pid))
		return W_PROCESS;
	return W_NONE;
}

static void waker_comm(const struct tl_off_event *e, char *out, size_t len)
{
	snprintf(out, len, "%.*s", (int)strnlen(e->waker_comm, sizeof(e->waker_comm)),
		 e->waker_comm);
	if (!out[0])
		snprintf(out, len, "pid %u", e->waker_pid);
}

void attr_classify(const struct tl_off_event *e, double start_ms, double end_ms, double wake_ms,
		   const struct attr_names *nm, struct attr_off *o)
{
	const char *call = attr_syscall_name(e->nr);
	enum waker w = waker_of(e, nm);
	char name[96], buf[96];

	memset(o, 0, sizeof(*o));
	o->start = start_ms;
	o->end = end_ms;
	o->wake = (e->flags & OFFF_WOKEN) ? wake_ms : -1;
	o->pid = (int)e->pid;
	o->tid = (int)e->tid;
	o->waker_pid = (int)e->waker_pid;
	o->waker_tid = (int)e->waker_tid;
	if (e->pycode && nm && nm->pyfunc)
		nm->pyfunc(nm->ctx, (int)e->pid, e->pycode, o->py, sizeof(o->py));
	if (!call) {
		snprintf(buf, sizeof(buf), "syscall %d", e->nr);
		call = e->nr == TRACE_SYSNR_NONE ? "no syscall" : buf;
	}
	if (e->reason == OFF_RUNQ) {
		set(o, AK_RUNQ, HOP_NONE, "cpu contention");
		return;
	}
	if (e->flags & OFFF_FAULT) {
		if (e->obj == OFFOBJ_FILE && nm && nm->file &&
		    nm->file(nm->ctx, e->dev, e->ino, name, sizeof(name)))
			set(o, AK_FAULT, HOP_NONE, name);
		else
			set(o, AK_FAULT, HOP_NONE, "mapped memory (not a model file)");
		return;
	}
	if (e->obj == OFFOBJ_SOCKET) {
		if (e->family == AF_UNIX)
			set(o, AK_NET, HOP_NONE, "unix socket");
		else if (e->port && nm && nm->peer &&
			 nm->peer(nm->ctx, e->family, e->addr, e->port, name, sizeof(name)))
			set(o, AK_NET, HOP_NONE, name);
		else
			set(o, AK_NET, HOP_NONE, "socket (no peer)");
		return;
	}
	if (e->nr == SYS_wait4 || e->nr == SYS_waitid) {
		if (w == W_PROCESS) {
			waker_comm(e, name, sizeof(name));
			set(o, AK_CHILD, HOP_PROCESS, name);
		} else {
			set(o, AK_CHILD, HOP_NONE, "child process");
		}
		return;
	}
	if (e->nr == SYS_futex) {
		set(o, AK_LOCK, w == W_THREAD ? HOP_WAKER : HOP_NONE, "futex");
		return;
	}
	if (e->obj == OFFOBJ_PIPE || is_epoll(e->nr)) {
		const char *what = e->obj == OFFOBJ_PIPE ? "pipe" : call;

		if (w == W_PROCESS) {
			waker_comm(e, name, sizeof(name));
			set(o, AK_CHILD, HOP_PROCESS, name);
		} else if (w == W_THREAD) {
			set(o, AK_LOCK, HOP_WAKER, what);
		} else {
			/* an epoll loop woken from outside or by its timeout */
			set(o, is_epoll(e->nr) ? AK_SLEEP : AK_OTHER, HOP_NONE, what);
		}
		return;
	}
	if (e->obj == OFFOBJ_FILE) {
		bool lock = e->nr == SYS_flock || e->nr == SYS_fcntl;

		if (!(nm && nm->file && nm->file(nm->ctx, e->dev, e->ino, name, sizeof(name))))
			snprintf(name, sizeof(name), "file %llu:%llu", (unsigned long long)e->dev,
				 (unsigned long long)e->ino);
		set(o, lock ? AK_LOCK : AK_DISK, HOP_NONE, name);
		return;
	}
	if (is_sleep_call(e->nr) || (e->flags & OFFF_NOFDS)) {
		/* a sleep is its Python caller's (a retry back-off says where) */
		set(o, AK_SLEEP, HOP_NONE, o->py[0] ? o->py : call);
		return;
	}
	if (e->reason == OFF_IO) {
		set(o, AK_DISK, HOP_NONE, call);
		return;
	}
	set(o, AK_OTHER, HOP_NONE, call);
}

/* ---- the breakdown ---- */

struct slot {
	enum attr_kind kind;
	char what[96];
	long long us;
	unsigned long long pieces;
	bool used;
};

struct walk {
	const struct attr_input *in;
	const struct attr_off **offs;	/* sorted by tid, then start */
	const struct attr_proc **procs; /* sorted by pid */
	size_t n;
	struct attr_gpu_call *gpu; /* in->gpu made disjoint: sorted by tid, then start */
	size_t n_gpu;
	struct slot *tab; /* open addressing by (kind, what) */
	size_t cap, used;
	struct attr_seg *segs;
	size_t n_segs;
	bool segs_cut;
	double seg_min; /* the strip's shortest run once it was compacted (ms) */
	bool oom;
	/* naming: emit only says what [a, b) would be (named), adds nothing */
	bool naming;
	char named[ATTR_SAMPLE_FRAME_MAX];
	struct attr_samples samples;
};

static uint64_t hash_cause(enum attr_kind k, const char *what)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)k;

	for (; *what; what++)
		h = (h ^ (unsigned char)*what) * 1099511628211ull;
	return h;
}

static struct slot *slot_of(struct walk *w, enum attr_kind k, const char *what)
{
	size_t i;

	if (w->used * 2 >= w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 256;
		struct slot *t = calloc(cap, sizeof(*t));

		if (!t) {
			w->oom = true;
			return NULL;
		}
		for (size_t j = 0; j < w->cap; j++) {
			if (!w->tab[j].used)
				continue;
			i = hash_cause(w->tab[j].kind, w->tab[j].what) & (cap - 1);
			while (t[i].used)
				i = (i + 1) & (cap - 1);
			t[i] = w->tab[j];
		}
		free(w->tab);
		w->tab = t;
		w->cap = cap;
	}
	i = hash_cause(k, what) & (w->cap - 1);
	while (w->tab[i].used && (w->tab[i].kind != k || strcmp(w->tab[i].what, what)))
		i = (i + 1) & (w->cap - 1);
	if (!w->tab[i].used) {
		w->tab[i].used = true;
		w->tab[i].kind = k;
		snprintf(w->tab[i].what, sizeof(w->tab[i].what), "%s", what);
		w->used++;
	}
	return &w->tab[i];
}

static long long us_of(double ms) { return llround(ms * 1000); }

/* The strip is full (ATTR_MAX_SEGS runs: a busy machine cuts a start-up
 * into thousands of runs of cpu and runqueue): a run shorter than
 * seg_min, doubled each time from the window's length / ATTR_MAX_SEGS,
 * joins the run before it (which keeps its kind and name), and runs of
 * one kind that then touch are one; until a quarter of the strip is free.
 * The strip stays whole, the window tiled; the causes stay exact. */
static void strip_compact(struct walk *w)
{
	double span = w->in->end - w->in->start;

	if (!(w->seg_min > 0))
		w->seg_min = span / ATTR_MAX_SEGS;
	while (w->n_segs > ATTR_MAX_SEGS * 3 / 4 && w->seg_min < span) {
		size_t n = 0;

		w->seg_min *= 2;
		for (size_t i = 0; i < w->n_segs; i++) {
			struct attr_seg *g = &w->segs[i], *last = n ? &w->segs[n - 1] : NULL;
			bool tiny = g->end - g->start < w->seg_min && i + 1 < w->n_segs;

			if (last && (tiny || last->kind == g->kind)) {
				last->end = g->end;
				if (last->kind == g->kind && g->longest > last->longest) {
					last->longest = g->longest;
					memcpy(last->what, g->what, sizeof(last->what));
				}
				continue;
			}
			w->segs[n++] = *g;
		}
		w->n_segs = n;
	}
}

/* [a, b) belongs to (k, what). Pieces tile the window with shared
 * boundaries, so their rounded lengths add up to the window's exactly. */
static void emit(struct walk *w, enum attr_kind k, const char *what, double a, double b)
{
	struct slot *s;

	if (!(b > a))
		return;
	if (w->naming) {
		snprintf(w->named, sizeof(w->named), "%s",
			 what && *what ? what : attr_kind_name(k));
		return;
	}
	s = slot_of(w, k, what && *what ? what : attr_kind_name(k));
	if (!s)
		return;
	s->us += us_of(b) - us_of(a);
	s->pieces++;
	/* the strip: pieces come in time order */
	if (w->segs && w->n_segs == ATTR_MAX_SEGS)
		strip_compact(w);
	if (w->n_segs && w->segs[w->n_segs - 1].kind == k && w->segs[w->n_segs - 1].end == a) {
		struct attr_seg *g = &w->segs[w->n_segs - 1];

		g->end = b;
		if (b - a > g->longest) {
			g->longest = b - a;
			memcpy(g->what, s->what, sizeof(g->what));
		}
	} else if (w->segs && w->n_segs < ATTR_MAX_SEGS) {
		struct attr_seg *g = &w->segs[w->n_segs++];

		*g = (struct attr_seg){.start = a, .end = b, .kind = k, .longest = b - a};
		memcpy(g->what, s->what, sizeof(g->what));
	} else {
		w->segs_cut = true;
	}
}

/* the process pid (a binary search: a tree may have thousands) */
static const struct attr_proc *proc_of(const struct walk *w, int pid)
{
	size_t lo = 0, hi = w->in->n_procs;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (w->procs[mid]->pid == pid)
			return w->procs[mid];
		if (w->procs[mid]->pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* cpu of process pid in [a, b): inside a top-level import it is the
 * import's, else the process's (imports sorted by start) */
static void emit_cpu_plain(struct walk *w, int pid, bool main_thread, double a, double b,
			   const char *outside)
{
	const struct attr_proc *p = proc_of(w, pid);
	char what[96];
	double t = a;

	/* outside the imports: the given name, else the process's */
	if (outside)
		snprintf(what, sizeof(what), "%s", outside);
	else
		snprintf(what, sizeof(what), "%s%s", p && p->comm && *p->comm ? p->comm : "process",
			 main_thread ? "" : " (thread)");
	for (size_t i = 0; main_thread && i < w->in->n_imports && t < b; i++) {
		const struct attr_import *im = &w->in->imports[i];
		char iw[96];
		double s = im->start > t ? im->start : t, e = im->end < b ? im->end : b;

		if (im->pid != pid || !(e > s))
			continue;
		emit(w, AK_CPU, what, t, s);
		snprintf(iw, sizeof(iw), "import %s", im->name ? im->name : "?");
		emit(w, AK_CPU, iw, s, e);
		t = e;
	}
	emit(w, AK_CPU, what, t, b);
}

/* the first sample of tid at or after a */
static size_t first_sample(const struct attr_input *in, int tid, double a)
{
	size_t lo = 0, hi = in->n_samples;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct attr_sample *s = &in->samples[mid];

		if (s->tid < tid || (s->tid == tid && s->t < a))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void emit_func(struct walk *w, int pid, bool main_thread, const char *func, double a,
		      double b);

/* cpu in [a, b) seen last in the native library lib (a thread with no
 * Python frame): the import in progress, else the library's */
static void emit_native(struct walk *w, int pid, bool main_thread, const char *lib, double a,
			double b)
{
	char what[96];

	snprintf(what, sizeof(what), "%s%s", lib, main_thread ? "" : " (thread)");
	emit_cpu_plain(w, pid, main_thread, a, b, what);
}

static void emit_seen(struct walk *w, int pid, bool main_thread, const struct attr_sample *s,
		      double a, double b)
{
	if (s->native && s->func && *s->func)
		emit_native(w, pid, main_thread, s->func, a, b);
	else
		emit_func(w, pid, main_thread, s->func, a, b);
}

static void emit_func(struct walk *w, int pid, bool main_thread, const char *func, double a,
		      double b)
{
	/* inside the import machinery, or running a module's body, the
	 * top-level import in progress says more (one "import torch", not a
	 * hundred of its modules); a module body outside imports (the script
	 * itself) keeps its name */
	if (!func || !*func || strstr(func, "(<frozen importlib"))
		emit_cpu_plain(w, pid, main_thread, a, b, NULL);
	else if (!strncmp(func, "<module> (", 10))
		emit_cpu_plain(w, pid, main_thread, a, b, func);
	else
		emit(w, AK_CPU, func, a, b);
}

/* Sample s of thread tid on the critical path, kept named by the cause the
 * nanosecond before it counts for (what emit_seen makes of the stretch
 * it ends) */
static void keep_sample(struct walk *w, int pid, int tid, bool main_thread,
			const struct attr_sample *s)
{
	if (!attr_samples_room(&w->samples))
		return;
	w->naming = true;
	w->named[0] = 0;
	emit_seen(w, pid, main_thread, s, s->t - 1e-6, s->t);
	w->naming = false;
	attr_samples_add(&w->samples, s->t, pid, tid, w->named);
}

/* cpu of thread tid in [a, b): each stretch up to an observation of its
 * Python function is that function's: the samples in [a, b), then at_end
 * (the frame read when it left the CPU at b); the stretch after the last
 * one, when nothing was seen at b, the last sample's, else before (the
 * frame it left the CPU in at a); without any, emit_cpu_plain */
static void emit_cpu(struct walk *w, int pid, int tid, bool main_thread, double a, double b,
		     const char *at_end, const char *before)
{
	const struct attr_input *in = w->in;
	const struct attr_sample *last = NULL;
	size_t at = first_sample(in, tid, a);
	double t = a;

	/* no Python frame seen here: the library its last sample was in
	 * (a native program's cpu between two of its waits) */
	if (!before && at > 0 && in->samples[at - 1].tid == tid && in->samples[at - 1].native)
		last = &in->samples[at - 1];
	for (size_t i = at; i < in->n_samples && in->samples[i].tid == tid && in->samples[i].t < b;
	     i++) {
		emit_seen(w, pid, main_thread, &in->samples[i], t, in->samples[i].t);
		keep_sample(w, pid, tid, main_thread, &in->samples[i]);
		t = in->samples[i].t;
		last = &in->samples[i];
	}
	if (!at_end && last)
		emit_seen(w, pid, main_thread, last, t, b);
	else
		emit_func(w, pid, main_thread, at_end ? at_end : before, t, b);
}

/* the first interval of tid that ends after a */
static size_t first_off(const struct walk *w, int tid, double a)
{
	size_t lo = 0, hi = w->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct attr_off *o = w->offs[mid];

		if (o->tid < tid || (o->tid == tid && o->end <= a))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void walk_thread(struct walk *w, int pid, int tid, double a, double b, int depth);

/* the first CUDA call of tid that ends after a (w->gpu: disjoint, sorted) */
static size_t first_gpu(const struct walk *w, int tid, double a)
{
	size_t lo = 0, hi = w->n_gpu;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct attr_gpu_call *g = &w->gpu[mid];

		if (g->tid < tid || (g->tid == tid && g->end <= a))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The wait [a, b) of o: its own cause, or what the task that ended it did. */
static void emit_wait(struct walk *w, const struct attr_off *o, double a, double b, int depth)
{
	const struct attr_proc *p;

	/* a thread that waited on a third one (a pool waiting on its
	 * workers: Xet's tokio threads) is followed on, up to ATTR_HOPS, never
	 * back to the main thread it started from */
	if (o->hop == HOP_WAKER && depth < ATTR_HOPS && !(depth > 0 && o->waker_tid == o->pid)) {
		walk_thread(w, o->pid, o->waker_tid, a, b, depth + 1);
		return;
	}
	if (o->hop == HOP_PROCESS && depth == 0 && (p = proc_of(w, o->waker_pid)) && p->followed &&
	    p->start <= a) {
		walk_thread(w, p->pid, p->pid, a, b, depth + 1);
		return;
	}
	/* the main thread waits while the thread that will listen makes
	 * progress towards ready: that thread is followed */
	if (depth == 0 && w->in->listen_tid && o->pid == w->in->listen_pid && o->tid == o->pid &&
	    a >= w->in->listen_from && o->hop != HOP_PROCESS &&
	    (o->kind == AK_SLEEP || o->kind == AK_LOCK || o->kind == AK_OTHER)) {
		walk_thread(w, o->pid, w->in->listen_tid, a, b, depth + 1);
		return;
	}
	emit(w, o->kind, o->what, a, b);
}

/* Thread tid of process pid over [a, b): its intervals, cpu between them. */
static void walk_plain(struct walk *w, int pid, int tid, double a, double b, int depth)
{
	const struct attr_proc *p = proc_of(w, pid);
	bool main_thread = pid == tid;
	const char *prev_py = NULL;
	double t = a;

	/* a main thread exists from its exec (or fork) to its exit */
	if (main_thread && p && p->start > t) {
		double s = p->start < b ? p->start : b;

		emit(w, AK_OTHER, "process not started", t, s);
		t = s;
	}
	if (main_thread && p && p->end >= 0 && p->end < b) {
		walk_plain(w, pid, tid, t, p->end > t ? p->end : t, depth);
		emit(w, AK_OTHER, "process exited", p->end > t ? p->end : t, b);
		return;
	}
	for (size_t i = first_off(w, tid, t); i < w->n && t < b; i++) {
		const struct attr_off *o = w->offs[i];
		double s = o->start > t ? o->start : t, e = o->end < b ? o->end : b, wk;

		if (o->tid != tid || o->start >= b)
			break;
		if (!(e > s))
			continue;
		emit_cpu(w, pid, tid, main_thread, t, s, o->py[0] ? o->py : NULL, prev_py);
		if (o->py[0])
			prev_py = o->py;
		/* woken: runnable from then on, waiting for a CPU */
		wk = o->kind != AK_RUNQ && o->wake >= s && o->wake < e ? o->wake : e;
		emit_wait(w, o, s, wk, depth);
		emit(w, AK_RUNQ, "woken, waiting for a CPU", wk, e);
		t = e;
	}
	emit_cpu(w, pid, tid, main_thread, t, b, NULL, prev_py);
}

/* Thread tid over [a, b): inside its CUDA calls gpu, whatever it did there
 * (on a CPU in the driver, or waiting on it: decided before any hop to a
 * waker), the rest walked by walk_plain. */
static void walk_thread(struct walk *w, int pid, int tid, double a, double b, int depth)
{
	double t = a;

	for (size_t i = first_gpu(w, tid, a); i < w->n_gpu && w->gpu[i].tid == tid && t < b; i++) {
		const struct attr_gpu_call *g = &w->gpu[i];
		double s = g->start > t ? g->start : t, e = g->end < b ? g->end : b;

		if (g->start >= b)
			break;
		if (!(e > s))
			continue;
		walk_plain(w, pid, tid, t, s, depth);
		emit(w, AK_GPU, g->what && *g->what ? g->what : "CUDA call", s, e);
		t = e;
	}
	walk_plain(w, pid, tid, t, b, depth);
}

static int off_cmp(const void *pa, const void *pb)
{
	const struct attr_off *a = *(const struct attr_off *const *)pa;
	const struct attr_off *b = *(const struct attr_off *const *)pb;

	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return a->start < b->start ? -1 : a->start > b->start ? 1 : 0;
}

static int proc_cmp(const void *pa, const void *pb)
{
	const struct attr_proc *a = *(const struct attr_proc *const *)pa;
	const struct attr_proc *b = *(const struct attr_proc *const *)pb;

	return (a->pid > b->pid) - (a->pid < b->pid);
}

static int cause_cmp(const void *pa, const void *pb)
{
	const struct attr_cause *a = pa, *b = pb;

	if (a->us != b->us)
		return a->us > b->us ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	return strcmp(a->what, b->what);
}

/* The followed chain: the deepest followed process started by t (the one
 * that gets ready, from its start on; its ancestors before), else root. */
static int critical_at(const struct attr_input *in, double t)
{
	int best = in->root;
	double best_start = -1;

	for (size_t i = 0; i < in->n_procs; i++) {
		const struct attr_proc *p = &in->procs[i];

		if (p->followed && p->start <= t && p->start > best_start) {
			best = p->pid;
			best_start = p->start;
		}
	}
	return best;
}

static int gpu_cmp(const void *pa, const void *pb)
{
	const struct attr_gpu_call *a = pa, *b = pb;

	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->end > b->end ? -1 : a->end < b->end; /* the outer call first */
}

/* in's CUDA calls made disjoint: a call nested in another (a runtime call
 * into the driver) or overlapping it keeps only what sticks out of it, so
 * the outer call names the time. false when out of memory. */
static bool gpu_flatten(struct walk *w, const struct attr_input *in)
{
	size_t n = 0;

	if (!in->n_gpu)
		return true;
	w->gpu = malloc(in->n_gpu * sizeof(*w->gpu));
	if (!w->gpu)
		return false;
	memcpy(w->gpu, in->gpu, in->n_gpu * sizeof(*w->gpu));
	qsort(w->gpu, in->n_gpu, sizeof(*w->gpu), gpu_cmp);
	for (size_t i = 0; i < in->n_gpu; i++) {
		struct attr_gpu_call g = w->gpu[i];

		if (n && w->gpu[n - 1].tid == g.tid && g.start < w->gpu[n - 1].end)
			g.start = w->gpu[n - 1].end;
		if (g.end > g.start)
			w->gpu[n++] = g;
	}
	w->n_gpu = n;
	return true;
}

int attr_breakdown(const struct attr_input *in, struct attr_result *out)
{
	struct walk w = {.in = in};
	double t;
	size_t n = 0;

	memset(out, 0, sizeof(*out));
	if (!(in->end > in->start))
		return 0;
	w.offs = malloc((in->n_offs ? in->n_offs : 1) * sizeof(*w.offs));
	if (!w.offs)
		return -1;
	for (size_t i = 0; i < in->n_offs; i++)
		w.offs[i] = &in->offs[i];
	w.n = in->n_offs;
	qsort(w.offs, w.n, sizeof(*w.offs), off_cmp);
	w.segs = malloc(ATTR_MAX_SEGS * sizeof(*w.segs));
	w.procs = malloc((in->n_procs ? in->n_procs : 1) * sizeof(*w.procs));
	if (!w.segs || !w.procs || !gpu_flatten(&w, in)) {
		free(w.offs);
		free(w.segs);
		free(w.procs);
		return -1;
	}
	for (size_t i = 0; i < in->n_procs; i++)
		w.procs[i] = &in->procs[i];
	qsort(w.procs, in->n_procs, sizeof(*w.procs), proc_cmp);

	/* the window, by critical process: each from its start to the next's */
	t = in->start;
	while (t < in->end) {
		int pid = critical_at(in, t);
		double next = in->end;

		for (size_t i = 0; i < in->n_procs; i++) {
			const struct attr_proc *p = &in->procs[i];

			if (p->followed && p->start > t && p->start < next)
				next = p->start;
		}
		walk_thread(&w, pid, pid, t, next, 0);
		t = next;
	}
	free(w.offs);
	free(w.procs);
	free(w.gpu);

	out->window_us = us_of(in->end) - us_of(in->start);
	out->segs = w.segs;
	out->n_segs = w.n_segs;
	out->segs_cut = w.segs_cut;
	out->samples = w.samples;
	out->causes = calloc(w.used ? w.used : 1, sizeof(*out->causes));
	if (!out->causes || w.oom) {
		free(w.tab);
		attr_result_free(out);
		return -1;
	}
	for (size_t i = 0; i < w.cap; i++) {
		if (!w.tab[i].used || !w.tab[i].us)
			continue;
		out->causes[n].kind = w.tab[i].kind;
		memcpy(out->causes[n].what, w.tab[i].what, sizeof(out->causes[n].what));
		out->causes[n].us = w.tab[i].us;
		out->causes[n++].pieces = w.tab[i].pieces;
	}
	free(w.tab);
	qsort(out->causes, n, sizeof(*out->causes), cause_cmp);
	/* the small ones summed per kind */
	if (n > ATTR_MAX_CAUSES) {
		struct attr_cause rest[AK_N] = {0};
		unsigned counts[AK_N] = {0};
		size_t keep = ATTR_MAX_CAUSES - AK_N, m = keep;

		for (size_t i = keep; i < n; i++) {
			rest[out->causes[i].kind].us += out->causes[i].us;
			rest[out->causes[i].kind].pieces += out->causes[i].pieces;
			counts[out->causes[i].kind]++;
		}
		for (int k = 0; k < AK_N; k++) {
			if (!counts[k])
				continue;
			rest[k].kind = (enum attr_kind)k;
			snprintf(rest[k].what, sizeof(rest[k].what), "%u more", counts[k]);
			out->causes[m++] = rest[k];
		}
		n = m;
		qsort(out->causes, n, sizeof(*out->causes), cause_cmp);
	}
	out->n_causes = n;
	out->explained_us = out->window_us;
	for (size_t i = 0; i < n; i++)
		if (out->causes[i].kind == AK_OTHER)
			out->explained_us -= out->causes[i].us;
	return 0;
}

void attr_result_free(struct attr_result *r)
{
	free(r->causes);
	free(r->segs);
	attr_samples_free(&r->samples);
	memset(r, 0, sizeof(*r));
}
