/* tracer_lighten: the end of the requests window: the heavy probes go
 * (lighten), the syscall exit program once the calls begun before have
 * ended (the drain). */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "gpu.h"
#include "trace.h"
#include "trace.skel.h"
#include "tracer_internal.h"
#include "tracer_libcio.h"
#include "tracer_load.h"
#include "ukeeper.h"

static void strv_remove(char **v, size_t *n, const char *s)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(v[i], s)) {
			free(v[i]);
			memmove(v + i, v + i + 1, (*n - i - 1) * sizeof(*v));
			(*n)--;
			return;
		}
}

/* sys_exit (syscall_exit), kept after the window only to finish the calls
 * sys_enter saved before it (a blocking lock, a connect): detached once
 * none is left, or a while after the window; what is still in flight then
 * is dropped (docs/timeline.md, "Light probes"). Asked on every poll (the
 * supervisor's 100 ms tick). */
void tr_drain_check(struct tracer *t)
{
	const struct probe *p = tr_probe_of(t->drain.program);

	if (!tracer_drain_done(&t->drain, t->skel->maps.inflight, clock_ms()))
		return;
	if (t->uprobes_kept) /* the keeper's copies (cheap): detached there */
		ukeeper_release(t->keeper_sock, &t->drain.prog_id, 1);
	strv_remove(t->st.kept, &t->st.n_kept, p->light);
	tr_strv_add(&t->st.detached, &t->st.n_detached, p->program);
}

/* The uprobe links of prog go (lighten): this process's copies first (not
 * the last references while the keeper holds its own), then the keeper's,
 * whose close waits for the grace periods. true when one was attached. */
static bool ulinks_drop(struct tracer *t, const struct bpf_program *prog, unsigned int id)
{
	bool had = false;

	for (size_t i = 0; i < t->n_ulinks; i++)
		if (t->ulinks[i] && t->uprogs[i] == prog) {
			bpf_link__destroy(t->ulinks[i]);
			t->ulinks[i] = NULL;
			had = true;
		}
	tr_followers_close(t, prog);
	if (had && t->uprobes_kept)
		ukeeper_release(t->keeper_sock, &id, 1);
	return had;
}

/* [trace] requests_window is over: requests are no longer kept, so the
 * heavy probes go: block, TCP states, and everything that runs on every
 * syscall or context switch of the host (sys_enter now, sys_exit once the
 * calls begun before have ended, sched_switch: faults are then counted at
 * threads' exits and on fault_tick), every user page fault
 * (page_fault_user: faults per model file) and every process of the host
 * that runs the probed python or libc (the import USDT, getaddrinfo). The
 * process tree, fault_tick, major faults and the CUDA pairs stay. mlock
 * calls after the window are the shim's to report (memory.mlock), not
 * traced. */
static void lighten(struct tracer *t)
{
	struct bpf_program *it;

	t->skel->bss->light = 1;
	t->st.light = true;
	t->st.light_ms = clock_ms();
	bpf_object__for_each_program (it, t->skel->obj) {
		/* in the copy it was loaded in */
		struct bpf_program *prog =
		    tracer_load_prog(NULL, t->heavy, bpf_program__name(it)) ?: it;
		const struct probe *p = tr_probe_of(bpf_program__name(prog));
		bool drop = p && p->heavy, linked = false, usdt, drained = false;
		unsigned int id = tr_prog_id(prog); /* 0: not loaded (autoload off) */

		if (!id)
			continue;
		for (size_t i = 0; i < t->n_links; i++) {
			struct bpf_link_info li;
			__u32 ll = sizeof(li);

			memset(&li, 0, sizeof(li));
			if (!t->links[i] ||
			    bpf_obj_get_info_by_fd(bpf_link__fd(t->links[i]), &li, &ll) ||
			    li.prog_id != id)
				continue;
			linked = true;
			if (drop && p->drain) {
				/* kept until its saved calls end (drain_check) */
				tracer_drain_add(&t->drain, t->links[i]);
				t->drain.program = p->program;
				t->drain.prog_id = id;
				t->drain.since_ms = t->st.light_ms;
				drained = true;
			} else if (drop) {
				bpf_link__destroy(t->links[i]);
			}
			if (drop)
				t->links[i] = NULL;
		}
		/* the keeper's copies of the links just destroyed here */
		if (drop && linked && !drained && t->uprobes_kept)
			ukeeper_release(t->keeper_sock, &id, 1);
		/* only what is attached: not a probe that fell back */
		usdt = tr_probe_kind(prog) == PROBE_USDT;
		/* getaddrinfo and the imports go, each pair listed once; the CUDA
		 * pairs stay (gpu.c, below) */
		if (tr_probe_kind(prog) == PROBE_UPROBE || usdt) {
			if (drop && ulinks_drop(t, prog, id) && p->light)
				tr_strv_add(&t->st.detached, &t->st.n_detached, p->light);
			continue;
		}
		if (drained)
			tr_strv_add(&t->st.kept, &t->st.n_kept, p->light);
		else if (drop && linked)
			tr_strv_add(&t->st.detached, &t->st.n_detached, bpf_program__name(prog));
		else if (!drop && (linked || (usdt && t->st.usdt))) {
			const char *name = p && p->light ? p->light : bpf_program__name(prog);

			tr_strv_add(&t->st.kept, &t->st.n_kept, name);
		}
	}
	/* the CUDA pairs stay (gpu.c) */
	if (gpu_trace_attached(t->col.gpu))
		tr_strv_add(&t->st.kept, &t->st.n_kept, "cuda");
	/* sys_enter is gone: no call is saved from now on */
	if (tracer_draining(&t->drain))
		tr_drain_check(t);
}

void tracer_lighten_now(struct tracer *t)
{
	if (t && !t->st.light)
		lighten(t);
}

bool tracer_lighten_due(struct tracer *t)
{
	if (!t || t->st.light)
		return false;
	if (t->col.req_window_ms < 0 || t->col.ready_ms < 0 ||
	    clock_ms() < t->col.ready_ms + t->col.req_window_ms)
		return false;
	lighten(t);
	return true;
}
