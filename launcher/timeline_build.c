/* timeline_build: the collector's records and the maps into the model's
 * trace sections; see timeline_build.h.
 *
 * The file sections are timeline_files.c's. Requests still carry dur_ms
 * and page_faults, the older names of latency_ms and faults, for saved
 * readers; the typed view resolves both, so in-tree readers need neither
 * (dropping them is a schema change: a version bump). */
#include "timeline_build.h"

#include <bpf/libbpf.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "imports.h"
#include "mapwalk.h"
#include "procfs.h"
#include "redact.h"
#include "timeline_files.h"
#include "timeline_internal.h"
#include "timeline_parts.h"
#include "timeline_sections.h"
#include "trace.skel.h"
#include "util.h"

/* argv as the model has it: one string per word, the word cut at the BPF
 * side's limit redacted as a cut text, the list redacted as a command line */
static json_t *argv_json(const char *buf, size_t len)
{
	json_t *a = json_array();
	size_t i = 0;

	while (i < len && buf[i]) {
		size_t n = strnlen(buf + i, len - i);

		if (i + n == len) {
			/* cut at the BPF side's limit: a URL's userinfo may lack its '@' */
			char *part = strndup(buf + i, n), *r = part ? redact_text_cut(part) : NULL;

			json_array_append_new(a, r ? json_text(r) : json_string(REDACTED));
			free(part);
			free(r);
		} else {
			json_array_append_new(a, json_bytes(buf + i, n));
		}
		i += n + 1;
	}
	redact_json(a); /* an exec'd --token abc is no more readable than ours */
	return a;
}

static json_t *ms_or_null(double ms) { return ms < 0 ? json_null() : json_real(ms); }

/* processes[] element: keys in the order the model always had them */
static json_t *proc_json(const struct coll_proc *p)
{
	json_t *o =
	    json_pack("{s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "pid", p->pid, "ppid",
		      p->has_ppid ? json_integer(p->ppid) : json_null(), "command",
		      p->command ? json_text(p->command) : json_null(), "argv",
		      p->has_argv ? argv_json(p->argv ? p->argv : "", p->argv ? p->argv_len : 0)
				  : json_null(),
		      "fork_ms", ms_or_null(p->fork_ms), "exec_ms", ms_or_null(p->exec_ms),
		      "exit_ms", ms_or_null(p->exit_ms), "exit",
		      !p->exited  ? json_null()
		      : p->signal ? json_pack("{s:n, s:i}", "code", "signal", p->signal)
				  : json_pack("{s:i, s:n}", "code", p->code, "signal"));

	if (o && p->has_comm)
		json_object_set_new(o, "comm", json_text(p->comm));
	if (o && p->execs)
		json_object_set_new(o, "execs", json_integer(p->execs));
	return o;
}

static void snap_procs(struct collector *t, json_t *root)
{
	struct bpf_map *m = t->skel->maps.procstat;
	json_t *mem = json_object_get(root, "memory"), *per = json_array(), *sched = json_array();
	json_t *procs = json_array();
	const struct coll_proc *p;
	__u64 faults = 0, maj = 0, minr = 0, io = 0, sl = 0, rq = 0;
	struct map_walk mw;
	__u32 k;
	struct proc_stat s;

	map_walk_begin(&mw, bpf_map__fd(m), sizeof(k), sizeof(s), false);
	while (map_walk_next(&mw, &k, &s)) {
		unsigned long long mi = 0, ma = 0;
		json_t *cmd;

		p = collector_proc(t, (pid_t)k);
		cmd = p && p->command ? json_text(p->command) : json_null();
		if (s.exited || !proc_faults((pid_t)k, &mi, &ma)) {
			/* exited: the sum over its threads, taken at each thread's exit */
			mi = s.exited_min_flt;
			ma = s.exited_maj_flt;
		}
		faults += s.faults;
		maj += ma;
		minr += mi;
		io += s.io_wait_ns;
		sl += s.sleep_ns;
		rq += s.runq_ns;
		json_array_append_new(
		    per, json_pack("{s:i, s:O, s:I, s:I, s:I}", "pid", (int)k, "command", cmd,
				   "page_faults", (json_int_t)s.faults, "minor_faults",
				   (json_int_t)mi, "major_faults", (json_int_t)ma));
		json_array_append_new(
		    sched, json_pack("{s:i, s:O, s:o, s:o, s:o, s:I}", "pid", (int)k, "command",
				     cmd, "io_wait_ms", ms_json(s.io_wait_ns / 1e6), "sleep_ms",
				     ms_json(s.sleep_ns / 1e6), "runqueue_ms",
				     ms_json(s.runq_ns / 1e6), "switches", (json_int_t)s.switches));
		json_decref(cmd);
	}
	map_walk_end(&mw);
	json_object_set_new(mem, "page_faults", json_integer((json_int_t)faults));
	json_object_set_new(mem, "major_faults", json_integer((json_int_t)maj));
	json_object_set_new(mem, "minor_faults", json_integer((json_int_t)minr));
	json_object_set_new(mem, "per_process", per);
	json_object_set_new(root, "sched",
			    json_pack("{s:o, s:o, s:o, s:o}", "io_wait_ms", ms_json(io / 1e6),
				      "sleep_ms", ms_json(sl / 1e6), "runqueue_ms",
				      ms_json(rq / 1e6), "processes", sched));
	for (size_t i = 0; i < t->n_procs; i++) /* by pid */
		json_array_append_new(procs, proc_json(t->by_pid[i]));
	json_object_set_new(root, "processes", procs);
}

/* memory.mlock_calls[] of the collector's records */
static json_t *mlock_calls_json(const struct collector *t)
{
	json_t *a = json_array();

	for (size_t i = 0; i < t->n_mlocks; i++) {
		const struct coll_mlock *m = &t->mlocks[i];

		json_array_append_new(
		    a, json_pack("{s:i, s:s, s:I, s:i, s:i, s:s?, s:o, s:o}", "pid", m->pid, "call",
				 m->call, "len", (json_int_t)m->len, "flags", m->flags, "result",
				 m->result, "errno", m->errno_name, "start_ms",
				 ms_json(m->start_ms), "dur_ms", ms_json(m->dur_ms)));
	}
	return a;
}

/* requests[] of the collector's records; dur_ms and page_faults: the older
 * names of latency_ms and faults, the same values */
static json_t *requests_json(const struct collector *t)
{
	json_t *a = json_array();

	for (size_t i = 0; i < t->n_requests; i++) {
		const struct coll_request *q = &t->requests[i];
		json_t *r = json_pack(
		    "{s:o, s:o, s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:i, s:i, s:i, s:I, s:I}",
		    "start_ms", ms_json(q->start_ms), "end_ms", ms_json(q->end_ms), "latency_ms",
		    ms_json(q->end_ms - q->start_ms), "close_ms", ms_json(q->close_ms), "faults",
		    (json_int_t)q->faults, "major_faults", (json_int_t)q->major_faults, "bytes_out",
		    (json_int_t)q->bytes_out, "bytes_in", (json_int_t)q->bytes_in, "writes",
		    (json_int_t)q->writes, "pid", q->pid, "tid", q->tid, "port", q->port,
		    "model_faults", (json_int_t)q->model_faults, "model_major_faults",
		    (json_int_t)q->model_major_faults);

		json_object_set(r, "dur_ms", json_object_get(r, "latency_ms"));
		json_object_set(r, "page_faults", json_object_get(r, "faults"));
		json_array_append_new(a, r);
	}
	return a;
}

static void snap_memory(struct collector *t, json_t *root, const struct tl_sections *s)
{
	json_t *mem = json_object_get(root, "memory"), *series = json_array();
	__u64 model_faults = 0, *counts;
	__u32 last = 0;

	/* the series up to its last non-empty bucket, each the sum over CPUs
	 * (a per-CPU array: the fault probe adds without an atomic); batch
	 * reads of FAULT_CHUNK buckets, not thousands of lookups */
	counts = calloc(TRACE_BUCKETS, sizeof(*counts));
	if (counts && collector_fault_series(t, counts) == 0) {
		for (__u32 b = 0; b < TRACE_BUCKETS; b++)
			if (counts[b])
				last = b + 1;
		for (__u32 b = 0; b < last; b++)
			json_array_append_new(series, json_integer((json_int_t)counts[b]));
	}
	free(counts);
	json_object_set_new(mem, "fault_rate",
			    json_pack("{s:i, s:o}", "bucket_ms", (int)(TRACE_BUCKET_NS / 1000000),
				      "counts", series));
	for (size_t i = 0; i < s->l[TLS_FILES].n; i++) {
		const struct tl_file *f = &TLS_FILES_OF(s)[i];

		if (f->class && !strcmp(f->class, "model"))
			model_faults += (__u64)tl_or0(f->faults);
	}
	json_object_set_new(mem, "model_file_faults", json_integer((json_int_t)model_faults));
	json_object_set_new(mem, "mlock_calls", mlock_calls_json(t));
}

static void snap_block(struct collector *t, json_t *root, const __u64 *cnt)
{
	json_t *hist = json_array();

	for (__u32 i = 0; i < TRACE_HIST_SLOTS; i++) {
		__u64 v = 0;

		if (bpf_map__lookup_elem(t->skel->maps.blockhist, &i, sizeof(i), &v, sizeof(v),
					 0) ||
		    !v)
			continue;
		/* slot i holds latencies below 2^i us */
		json_array_append_new(hist, json_pack("{s:I, s:I}", "lt_us", (json_int_t)1 << i,
						      "count", (json_int_t)v));
	}
	json_object_set_new(root, "block",
			    json_pack("{s:I, s:I, s:o}", "requests",
				      (json_int_t)cnt[CNT_BLOCK_REQS], "bytes",
				      (json_int_t)cnt[CNT_BLOCK_BYTES], "latency_hist", hist));
}

/* python.imports[] records of the collector's finished imports (USDT) */
static void imports_recs(const struct collector *t, struct tl_sections *s)
{
	tl_list_clear(s, TLS_IMPORTS);
	for (size_t i = 0; i < t->n_imports; i++) {
		const struct coll_import *m = &t->imports[i];
		struct tl_import *r = tl_list_push(s, TLS_IMPORTS);

		if (!r)
			break;
		r->name = tl_strdup(m->name);
		r->pid = m->pid;
		r->start_ms = coll_ms(m->start_ms);
		r->end_ms = coll_ms(m->end_ms);
		r->dur_ms = coll_ms(m->dur_ms);
		r->depth = m->depth;
		r->found = m->found;
		tl_rec_seal(TLS_IMPORTS, r);
	}
}

static json_t *strv_json(char *const *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

void timeline_build(struct timeline *tl, struct collector *t, const struct tracer_status *st)
{
	json_t *root, *tr, *fb;
	struct tl_sections *s;
	__u64 cnt[CNT_MAX];
	__u64 lost;

	if (!t || !st || !tl)
		return;
	root = timeline_json(tl);
	s = timeline_sections(tl);
	collector_counters(t, cnt);
	lost = cnt[CNT_RB_DROPS] + cnt[CNT_PATHS_FULL] + cnt[CNT_FILES_FULL] + cnt[CNT_PEERS_FULL] +
	       cnt[CNT_PROCS_FULL] + cnt[CNT_FAILOPS_FULL] + cnt[CNT_LOCKS_FULL] +
	       cnt[CNT_THREADS_FULL] + cnt[CNT_OFFCPU_LOST] + t->user_lost;

	tr = json_object_get(root, "tracing");
	json_object_set_new(tr, "enabled", json_true());
	json_object_set_new(tr, "probes", strv_json(st->probes, st->n_probes));
	fb = json_array();
	for (size_t i = 0; i < st->n_fallbacks; i++)
		json_array_append_new(fb, json_pack("{s:s, s:s}", "probe", st->fallbacks[i].probe,
						    "reason", st->fallbacks[i].reason));
	json_object_set_new(tr, "fallbacks", fb);
	json_object_set_new(tr, "tracefs", json_string(st->tracefs));
	/* [trace] syscalls (tracer_syscalls.h): which figures are approximate */
	json_object_set_new(tr, "syscalls", json_string(st->syscalls ? st->syscalls : "exact"));
	/* [trace] keep_loaded: verified in this run, or kept since an earlier one */
	if (st->programs)
		json_object_set_new(tr, "programs", json_string(st->programs));
	json_object_set_new(tr, "approximate", json_array());
	for (size_t i = 0; st->approximate && st->approximate[i]; i++)
		json_array_append_new(json_object_get(tr, "approximate"),
				      json_string(st->approximate[i]));
	json_object_set_new(tr, "events_lost", json_integer((json_int_t)lost));
	json_object_set_new(
	    tr, "lost",
	    json_pack("{s:I, s:I, s:I, s:I, s:I}", "ring_buffer", (json_int_t)cnt[CNT_RB_DROPS],
		      "paths", (json_int_t)cnt[CNT_PATHS_FULL], "files",
		      (json_int_t)cnt[CNT_FILES_FULL], "peers", (json_int_t)cnt[CNT_PEERS_FULL],
		      "processes", (json_int_t)cnt[CNT_PROCS_FULL]));
	json_object_set_new(json_object_get(tr, "lost"), "failed_ops",
			    json_integer((json_int_t)cnt[CNT_FAILOPS_FULL]));
	json_object_set_new(json_object_get(tr, "lost"), "locks",
			    json_integer((json_int_t)cnt[CNT_LOCKS_FULL]));
	json_object_set_new(json_object_get(tr, "lost"), "threads",
			    json_integer((json_int_t)cnt[CNT_THREADS_FULL]));
	/* off-CPU spans whose start could not be kept: sched's sums are short
	 * by them (the attribution's own count as its lost) */
	json_object_set_new(json_object_get(tr, "lost"), "off_cpu",
			    json_integer((json_int_t)cnt[CNT_OFFCPU_LOST]));

	if (t->exec_ms >= 0)
		timeline_mark(tl, "exec", t->exec_ms);
	if (t->ready_ms >= 0)
		timeline_mark(tl, "ready", t->ready_ms);

	timeline_snap_files(t, root, s);
	snap_network(t, root);
	snap_procs(t, root);
	snap_memory(t, root, s);
	snap_block(t, root, cnt);
	imports_recs(t, s);
	imports_snapshot(root, s, st->usdt); /* python: USDT or derived imports */
	json_object_set_new(root, "gpu", gpu_snap(t->gpu, root, t->cfg, t->ready_ms));
	json_object_set_new(root, "requests", requests_json(t));
	json_object_set_new(tr, "requests_window_s",
			    t->req_window_ms < 0 ? json_null()
						 : json_real(t->req_window_ms / 1000));
	json_object_set_new(tr, "requests_after_window",
			    json_integer((json_int_t)t->req_after_window));
	json_object_set_new(tr, "light",
			    !st->light
				? json_null()
				: json_pack("{s:o, s:o, s:o}", "ms", ms_json(st->light_ms),
					    "detached", strv_json(st->detached, st->n_detached),
					    "kept", strv_json(st->kept, st->n_kept)));
}
