/* render_perfetto_attr: the attribution in the Perfetto export (see
 * docs/views.md, "perfetto"): the critical thread's state track, and the
 * CPU samples of the critical path as thread-scoped instant events on the
 * sampled thread's own track. */
#include <stdlib.h>

#include "attrib_build.h"
#include "render_perfetto_internal.h"

/* The attribution's strip as a thread-state track on the service: one
 * complete event per run of a kind (cat "state", named by the kind, args
 * the run's longest cause), on a thread of its own ("critical thread
 * state", a lane id: no real thread's), first among the service's. Runs
 * tile the window, so they never overlap. */
static void critical_state(struct events *e, const struct timeline *tl, int spid)
{
	struct attr_view a;
	int tid;

	if (!attr_view_decode(tl, &a))
		return;
	if (!a.r.n_segs) {
		attr_view_free(&a);
		return;
	}
	tid = e->next_lane_tid++;
	pf_meta_str(e, "thread_name", spid, tid, "name", "critical thread state");
	pf_meta_int(e, "thread_sort_index", spid, tid, "sort_index", -1);
	for (size_t i = 0; i < a.r.n_segs; i++) {
		const struct attr_seg *g = &a.r.segs[i];
		long long s = pf_us(g->start), f = pf_us(g->end);
		struct args sa;
		struct jsonw *w = pf_args_begin(&sa);

		if (w) {
			jw_kstr(w, "kind", attr_kind_name(g->kind));
			jw_kstr(w, "what", g->what);
		}
		pf_ev_add(e,
			  (struct event){.cat = "state",
					 .ph = 'X',
					 .has_ts = true,
					 .ts = s,
					 .has_dur = true,
					 .dur = f > s ? f - s : 0,
					 .pid = spid,
					 .tid = tid,
					 .args = pf_args_end(&sa)},
			  attr_kind_name(g->kind), NULL);
	}
	attr_view_free(&a);
}

/* The samples of the critical path (attribution.cpu_samples): one instant
 * ("i", "s": "t", cat "sample") per sample on the thread it was taken in,
 * named by what it was in (args "frame"). Not "P" sample events with a
 * stackFrames dictionary: the format calls them deprecated and Perfetto's
 * JSON importer drops them; instants both Perfetto and chrome://tracing
 * show. Two samples of a thread in one microsecond are one instant
 * (zero-length slices at the same time confuse Perfetto's nesting). A
 * sampled thread other than a main one gets a name ("thread TID"). */
static void samples(struct events *e, const struct timeline *tl)
{
	struct attr_samples s;
	long long *last;
	bool *named;

	if (!attr_samples_decode(tl, &s))
		return;
	last = calloc(s.n_threads + 1, sizeof(*last));
	named = calloc(s.n_threads + 1, sizeof(*named));
	for (size_t i = 0; last && named && i < s.n; i++) {
		const struct attr_psample *p = &s.v[i];
		const struct attr_sthread *th = &s.threads[p->thread];
		long long ts = pf_us(p->t);
		struct args a;
		struct jsonw *w;

		if (last[p->thread] == ts + 1)
			continue;
		last[p->thread] = ts + 1;
		if (th->tid != th->pid && !named[p->thread]) {
			char name[32];

			snprintf(name, sizeof(name), "thread %d", th->tid);
			pf_meta_str(e, "thread_name", th->pid, th->tid, "name", name);
			named[p->thread] = true;
		}
		w = pf_args_begin(&a);
		if (w)
			jw_kstr(w, "frame", s.frames[p->frame]);
		pf_ev_add(e,
			  (struct event){.cat = "sample",
					 .scope = "t",
					 .ph = 'i',
					 .has_ts = true,
					 .ts = ts,
					 .pid = th->pid,
					 .tid = th->tid,
					 .args = pf_args_end(&a)},
			  s.frames[p->frame], NULL);
	}
	if (!last || !named)
		e->failed = true;
	free(last);
	free(named);
	attr_samples_free(&s);
}

void perfetto_attribution(struct events *e, const struct timeline *tl, int spid)
{
	critical_state(e, tl, spid);
	samples(e, tl);
}
