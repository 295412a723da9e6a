/* timeline_view: the decoders of timeline_view.h, one per section, over
 * the model's tree. The only reader of section keys for renderers and
 * compare; the missing-field rule lives in num(), str() and flag(). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hfcache.h"
#include "phases.h"
#include "timeline_internal.h"
#include "timeline_view.h"
#include "util.h"

/* the one rule (timeline_view.h): absent, null or mistyped is "none" */
static double num(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : TL_NONE;
}

static const char *str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static bool flag(const json_t *o, const char *key) { return json_is_true(json_object_get(o, key)); }

/* An array of n elements of size sz for the list arr (NULL for none);
 * *n is set to its length. */
static void *list_alloc(const json_t *arr, size_t sz, size_t *n)
{
	*n = json_is_array(arr) ? json_array_size(arr) : 0;
	return *n ? calloc(*n, sz) : NULL;
}

#define LIST(arr, ptr, n) ((ptr) = list_alloc((arr), sizeof(*(ptr)), &(n)), !(n) || (ptr) ? 0 : -1)

static int decode_marks(const json_t *root, struct tl_view *v)
{
	const json_t *marks = json_object_get(root, "marks"), *m;
	struct tl_mark *out;
	const char *k;
	size_t n = json_is_object(marks) ? json_object_size(marks) : 0, i = 0;

	if (!n)
		return 0;
	if (!(out = calloc(n, sizeof(*out))))
		return -1;
	json_object_foreach ((json_t *)marks, k, m)
		if (json_is_number(m))
			out[i++] = (struct tl_mark){k, json_number_value(m)};
	v->marks = out;
	v->n_marks = i;
	return 0;
}

static int decode_phases(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "phases"), *e;
	struct tl_phase *out;
	size_t i;

	if (LIST(arr, out, v->n_phases) < 0)
		return -1;
	json_array_foreach (arr, i, e) {
		out[i] = (struct tl_phase){str(e, "name"), num(e, "start_ms"), num(e, "end_ms"),
					   num(e, "dur_ms"), str(e, "source")};
		/* the fallback lives here: a phase without dur_ms lasts end - start */
		if (!tl_has(out[i].dur_ms))
			out[i].dur_ms = out[i].end_ms - out[i].start_ms;
	}
	v->phases = out;
	return 0;
}

static int decode_files(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "files"), *e;
	struct tl_file *out;
	size_t i;

	if (LIST(arr, out, v->n_files) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_file){
		    .path = str(e, "path"),
		    .class = str(e, "class"),
		    .errno_name = str(e, "errno"),
		    .opens = num(e, "opens"),
		    .bytes_read = num(e, "bytes_read"),
		    .bytes_written = num(e, "bytes_written"),
		    .mmap_bytes = num(e, "mmap_bytes"),
		    .faults = num(e, "faults"),
		    .first_ms = num(e, "first_ms"),
		    .last_ms = num(e, "last_ms"),
		    .size = num(e, "size"),
		    .mmaps = num(e, "mmaps"),
		    .reads = num(e, "reads"),
		    .writes = num(e, "writes"),
		    .failed_opens = num(e, "failed_opens"),
		    .write_errors = num(e, "write_errors"),
		    .write_errno = str(e, "write_errno"),
		};
	v->files = out;
	return 0;
}

static int decode_missing(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "missing_paths"), *e;
	struct tl_missing *out;
	size_t i;

	if (LIST(arr, out, v->n_missing) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] =
		    (struct tl_missing){str(e, "path"),	    str(e, "errno"),   num(e, "attempts"),
					num(e, "first_ms"), num(e, "last_ms"), str(e, "class")};
	v->missing = out;
	return 0;
}

static int decode_downloads(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "downloads"), *e;
	struct tl_download *out;
	size_t i;

	if (LIST(arr, out, v->n_downloads) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_download){
		    .path = str(e, "path"),
		    .name = str(e, "name"),
		    .label = phases_download_label(str(e, "name"), str(e, "path")),
		    .bytes = num(e, "bytes"),
		    .first_ms = num(e, "first_ms"),
		    .last_ms = num(e, "last_ms"),
		    .rate_mb_s = num(e, "rate_mb_s"),
		    .completed = flag(e, "completed"),
		    .complete = flag(e, "complete"),
		    .final_path = str(e, "final_path"),
		    .link = str(e, "link"),
		    .writer = str(e, "writer"),
		    .expected_size = num(e, "expected_size"),
		    .expected_from = str(e, "expected_from"),
		    .bytes_written = num(e, "bytes_written"),
		    .size = num(e, "size"),
		    .dur_ms = num(e, "dur_ms"),
		    .rename_ms = num(e, "rename_ms"),
		    .percent = num(e, "percent"),
		    .threads = num(e, "threads"),
		    .resumed_from = num(e, "resumed_from"),
		    .kind = str(e, "kind"),
		    .also_in = str(e, "also_in"),
		};
	v->downloads = out;
	return 0;
}

static int decode_copies(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "copies"), *e;
	struct tl_copy *out;
	size_t i;

	if (LIST(arr, out, v->n_copies) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_copy){
		    .path = str(e, "path"),
		    .source = str(e, "source"),
		    .name = str(e, "name"),
		    .label = phases_download_label(str(e, "name"), str(e, "path")),
		    .bytes = num(e, "bytes"),
		    .size = num(e, "size"),
		    .first_ms = num(e, "first_ms"),
		    .last_ms = num(e, "last_ms"),
		    .from_cache = flag(e, "from_cache"),
		};
	v->copies = out;
	return 0;
}

/* "host:port" for a named peer, else its address */
static void peer_label(struct tl_peer *p)
{
	if (p->host && tl_has(p->port) && fabs(p->port) < 1e6)
		snprintf(p->label, sizeof(p->label), "%s:%lld", p->host, (long long)p->port);
	else
		snprintf(p->label, sizeof(p->label), "%s", p->peer ? p->peer : "");
}

/* network[] by peer (then by position: the last of equals is the one a
 * lookup gives), for tl_view_peer */
static int peer_cmp(const void *a, const void *b, void *arg)
{
	const struct tl_peer *net = arg;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	const char *p = net[x].peer, *q = net[y].peer;
	int r = strcmp(p ? p : "", q ? q : "");

	return r ? r : (x > y) - (x < y);
}

static int peer_index(struct tl_view *v)
{
	size_t *order;

	if (!v->n_network)
		return 0;
	if (!(order = calloc(v->n_network, sizeof(*order))))
		return -1;
	for (size_t i = 0; i < v->n_network; i++)
		order[i] = i;
	qsort_r(order, v->n_network, sizeof(*order), peer_cmp, (void *)v->network);
	v->peer_order = order;
	return 0;
}

static int decode_network(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "network"), *e;
	struct tl_peer *out;
	size_t i;

	if (LIST(arr, out, v->n_network) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_peer){
		    .peer = str(e, "peer"),
		    .errno_name = str(e, "errno"),
		    .connects = num(e, "connects"),
		    .failures = num(e, "failures"),
		    .bytes_in = num(e, "bytes_in"),
		    .bytes_out = num(e, "bytes_out"),
		    .connect_ms = num(e, "connect_ms"),
		    .host = str(e, "host"),
		    .role = str(e, "role"),
		    .port = num(e, "port"),
		    .inbound =
			flag(e, "inbound") || (str(e, "role") && !strcmp(str(e, "role"), "client")),
		    .first_ms = num(e, "first_ms"),
		    .last_ms = num(e, "last_ms"),
		    .dns = flag(e, "dns"),
		};
	for (i = 0; i < v->n_network; i++)
		peer_label(&out[i]);
	v->network = out;
	return peer_index(v);
}

static int decode_connects(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "connects"), *e;
	struct tl_connect *out;
	size_t i;

	if (LIST(arr, out, v->n_connects) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_connect){
		    .peer = str(e, "peer"),
		    .port = num(e, "port"),
		    .pid = num(e, "pid"),
		    .start_ms = num(e, "start_ms"),
		    .pending = flag(e, "pending"),
		    .host = str(e, "host"),
		    .established_ms = num(e, "established_ms"),
		    .closed_ms = num(e, "closed_ms"),
		    .bytes_in = num(e, "bytes_in"),
		    .bytes_out = num(e, "bytes_out"),
		    .writes = num(e, "writes"),
		    .reply_max = num(e, "reply_max"),
		    .tls = flag(e, "tls"),
		    .ret = num(e, "ret"),
		    .family = num(e, "family"),
		    .ms_to_result = num(e, "ms_to_result"),
		    .dur_ms = num(e, "dur_ms"),
		    .result = str(e, "result"),
		};
	v->connects = out;
	return 0;
}

static int decode_renames(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "renames"), *e;
	struct tl_rename *out;
	size_t i;

	if (LIST(arr, out, v->n_renames) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_rename){str(e, "old"), str(e, "new"), num(e, "result")};
	v->renames = out;
	return 0;
}

static int decode_symlinks(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "symlinks"), *e;
	struct tl_symlink *out;
	size_t i;

	if (LIST(arr, out, v->n_symlinks) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_symlink){str(e, "path"), str(e, "resolved"), num(e, "result")};
	v->symlinks = out;
	return 0;
}

static int decode_locks(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "locks"), *e;
	struct tl_lock *out;
	size_t i;

	if (LIST(arr, out, v->n_locks) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_lock){
		    .path = str(e, "path"),
		    .waiting = flag(e, "waiting"),
		    .waiting_ms = num(e, "waiting_ms"),
		    .calls = num(e, "calls"),
		    .blocking_calls = num(e, "blocking_calls"),
		    .failures = num(e, "failures"),
		    .wait_ms = num(e, "wait_ms"),
		    .max_wait_ms = num(e, "max_wait_ms"),
		    .contended_ms = num(e, "contended_ms"),
		    .acquired_ms = num(e, "acquired_ms"),
		    .first_ms = num(e, "first_ms"),
		    .last_ms = num(e, "last_ms"),
		    .holder_pid = num(e, "holder_pid"),
		    .holder_command = str(e, "holder_command"),
		    .errno_name = str(e, "errno"),
		};
	v->locks = out;
	return 0;
}

static int decode_failed_ops(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "failed_ops"), *e;
	struct tl_failed_op *out;
	size_t i;

	if (LIST(arr, out, v->n_failed_ops) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_failed_op){
		    .op = str(e, "op"),
		    .path = str(e, "path"),
		    .old = str(e, "old"),
		    .errno_name = str(e, "errno"),
		    .count = num(e, "count"),
		    .first_ms = num(e, "first_ms"),
		    .last_ms = num(e, "last_ms"),
		    .pid = num(e, "pid"),
		};
	v->failed_ops = out;
	return 0;
}

static int tri(const json_t *o, const char *key);

static int decode_cache_fs(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "cache_fs"), *e, *g;
	struct tl_cache_fs *out;
	size_t i, j;

	if (LIST(arr, out, v->n_cache_fs) < 0)
		return -1;
	v->cache_fs = out;
	json_array_foreach (arr, i, e) {
		const json_t *inc = json_object_get(e, "incomplete");
		struct tl_on_disk *d;

		out[i] = (struct tl_cache_fs){
		    .dir = str(e, "dir"),
		    .role = str(e, "role"),
		    .statfs_path = str(e, "statfs_path"),
		    .fs_type = str(e, "fs_type"),
		    .fs_magic = str(e, "fs_magic"),
		    .lost = str(e, "lost"),
		    .exists = tri(e, "exists"),
		    .read_only = tri(e, "read_only"),
		    .persistent = tri(e, "persistent"),
		    .has_incomplete = json_is_array(inc),
		};
		if (LIST(inc, d, out[i].n_incomplete) < 0)
			return -1;
		json_array_foreach (inc, j, g)
			d[j] = (struct tl_on_disk){str(g, "path"), num(g, "size")};
		out[i].incomplete = d;
	}
	return 0;
}

static int decode_requests(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "requests"), *e;
	struct tl_request *out;
	size_t i;

	if (LIST(arr, out, v->n_requests) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_request){
		    .start_ms = num(e, "start_ms"),
		    .end_ms = num(e, "end_ms"),
		    .dur_ms = num(e, "dur_ms"),
		    .latency_ms = num(e, "latency_ms"),
		    .close_ms = num(e, "close_ms"),
		    .faults = num(e, "faults"),
		    .page_faults = num(e, "page_faults"),
		    .major_faults = num(e, "major_faults"),
		    .model_faults = num(e, "model_faults"),
		    .model_major_faults = num(e, "model_major_faults"),
		    .bytes_out = num(e, "bytes_out"),
		    .bytes_in = num(e, "bytes_in"),
		    .writes = num(e, "writes"),
		    .pid = num(e, "pid"),
		    .tid = num(e, "tid"),
		    .port = num(e, "port"),
		    .method = str(e, "method"),
		    .path = str(e, "path"),
		};
	/* the aliases resolved here, one way for every reader: latency_ms is
	 * dur_ms (older name), else end - start; faults is page_faults */
	for (i = 0; i < v->n_requests; i++) {
		struct tl_request *r = &out[i];

		if (!tl_has(r->latency_ms))
			r->latency_ms = tl_has(r->dur_ms) ? r->dur_ms : r->end_ms - r->start_ms;
		if (!tl_has(r->dur_ms))
			r->dur_ms = r->latency_ms;
		if (!tl_has(r->faults))
			r->faults = r->page_faults;
		if (!tl_has(r->page_faults))
			r->page_faults = r->faults;
	}
	v->requests = out;
	v->has_requests = json_is_array(arr);
	return 0;
}

static int decode_findings(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "findings"), *e;
	struct tl_finding *out;
	size_t i;

	if (LIST(arr, out, v->n_findings) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_finding){str(e, "id"),	str(e, "severity"), str(e, "title"),
					     str(e, "message"), str(e, "fix"),	    str(e, "rule")};
	v->findings = out;
	return 0;
}

static int decode_memory(const json_t *root, struct tl_view *v)
{
	const json_t *mem = json_object_get(root, "memory"), *arr, *e, *shim;
	struct tl_memory *m = &v->memory;
	struct tl_mlock_call *calls;
	size_t i;

	const json_t *fr = json_object_get(mem, "fault_rate"), *counts;
	double *series;

	m->fault_rate.bucket_ms = num(fr, "bucket_ms");
	counts = json_object_get(fr, "counts");
	if (LIST(counts, series, m->fault_rate.n) < 0)
		return -1;
	json_array_foreach (counts, i, e)
		series[i] = json_is_number(e) ? json_number_value(e) : TL_NONE;
	m->fault_rate.counts = series;
	m->page_faults = num(mem, "page_faults");
	m->major_faults = num(mem, "major_faults");
	m->model_file_faults = num(mem, "model_file_faults");
	shim = json_object_get(mem, "mlock");
	m->has_mlock = json_is_object(shim);
	m->mlock_mode = str(shim, "mode");
	m->mlock_status = str(shim, "status");
	m->mlock_trigger = str(shim, "trigger");
	m->mlock_fix = str(shim, "fix");
	m->mlock_dur_ms = num(shim, "dur_ms");
	m->mlock_bytes_locked = num(shim, "bytes_locked");
	arr = json_object_get(mem, "mlock_calls");
	m->has_mlock_calls = json_is_array(arr);
	if (LIST(arr, calls, m->n_mlock_calls) < 0)
		return -1;
	json_array_foreach (arr, i, e) {
		json_t *r = json_object_get(e, "result");

		calls[i] = (struct tl_mlock_call){
		    .call = str(e, "call"),
		    .errno_name = str(e, "errno"),
		    .ok = json_is_integer(r) && !json_integer_value(r),
		    .failed = json_is_integer(r) && json_integer_value(r) < 0,
		    .pid = num(e, "pid"),
		    .len = num(e, "len"),
		    .flags = num(e, "flags"),
		    .result = num(e, "result"),
		    .start_ms = num(e, "start_ms"),
		    .dur_ms = num(e, "dur_ms"),
		};
	}
	m->mlock_calls = calls;
	return 0;
}

static int decode_sched(const json_t *root, struct tl_view *v)
{
	const json_t *s = json_object_get(root, "sched"), *arr = json_object_get(s, "processes"),
		     *e;
	struct tl_sched_proc *out;
	size_t i;

	v->sched = (struct tl_sched){num(s, "io_wait_ms"), num(s, "sleep_ms"),
				     num(s, "runqueue_ms"), NULL, 0};
	if (LIST(arr, out, v->sched.n_processes) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_sched_proc){num(e, "pid"), num(e, "io_wait_ms"),
						num(e, "sleep_ms"), num(e, "runqueue_ms")};
	v->sched.processes = out;
	return 0;
}

static int decode_tracing(const json_t *root, struct tl_view *v)
{
	const json_t *t = json_object_get(root, "tracing");

	v->tracing =
	    (struct tl_tracing){flag(t, "enabled"), str(t, "reason"), num(t, "events_lost")};
	return 0;
}

/* a list of strings (NULL for an element that is not one) */
static int words(const json_t *arr, const char *const **out, size_t *n)
{
	const char **w;
	const json_t *e;
	size_t i;

	if (LIST(arr, w, *n) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		w[i] = json_string_value(e);
	*out = w;
	return 0;
}

static struct tl_exit exit_of(const json_t *x)
{
	return (struct tl_exit){
	    json_is_object(x), num(x, "code"),	num(x, "signal"),	  num(x, "ms"),
	    str(x, "code_of"), str(x, "error"), flag(x, "stop_requested")};
}

static int decode_process(const json_t *root, struct tl_view *v)
{
	const json_t *p = json_object_get(root, "process");

	v->schema = str(root, "schema");
	v->process.pid = num(p, "pid");
	v->process.exit = exit_of(json_object_get(p, "exit"));
	if (words(json_object_get(p, "output_tail"), &v->process.output_tail,
		  &v->process.n_output_tail) < 0)
		return -1;
	return words(json_object_get(p, "command"), &v->process.command, &v->process.n_command);
}

static int decode_procs(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "processes"), *e;
	struct tl_proc *out;
	size_t i;

	if (LIST(arr, out, v->n_procs) < 0)
		return -1;
	v->procs = out;
	json_array_foreach (arr, i, e) {
		const json_t *argv = json_object_get(e, "argv");

		out[i] = (struct tl_proc){
		    .pid = num(e, "pid"),
		    .ppid = num(e, "ppid"),
		    .command = str(e, "command"),
		    .has_argv = json_is_array(argv),
		    .fork_ms = num(e, "fork_ms"),
		    .exec_ms = num(e, "exec_ms"),
		    .exit_ms = num(e, "exit_ms"),
		    .exit = exit_of(json_object_get(e, "exit")),
		};
		if (words(argv, &out[i].argv, &out[i].n_argv) < 0)
			return -1;
	}
	return 0;
}

static int decode_imports(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(json_object_get(root, "python"), "imports"), *e;
	struct tl_import *out;
	size_t i;

	if (LIST(arr, out, v->n_imports) < 0)
		return -1;
	json_array_foreach (arr, i, e) {
		const json_t *f = json_object_get(e, "found");

		out[i] =
		    (struct tl_import){str(e, "name"), num(e, "pid"), num(e, "start_ms"),
				       num(e, "end_ms"), json_is_boolean(f) ? json_is_true(f) : -1};
	}
	v->imports = out;
	return 0;
}

static int decode_launcher(const json_t *root, struct tl_view *v)
{
	const json_t *cfg = json_object_get(json_object_get(root, "launcher"), "config");

	const json_t *vars = json_object_get(json_object_get(cfg, "env"), "vars"), *e;
	struct tl_env *env;
	const char *k;
	size_t i = 0;

	v->config_mlock_mode = str(json_object_get(cfg, "mlock"), "mode");
	v->config_app_dir = str(json_object_get(cfg, "app"), "dir");
	v->config_app_port = num(json_object_get(cfg, "app"), "port");
	v->config_model_dir = str(json_object_get(cfg, "app"), "model_dir");
	v->config_command_null = json_is_null(json_object_get(cfg, "command"));
	v->n_env = json_is_object(vars) ? json_object_size(vars) : 0;
	if (!v->n_env)
		return 0;
	if (!(env = calloc(v->n_env, sizeof(*env))))
		return -1;
	json_object_foreach ((json_t *)vars, k, e)
		env[i++] = (struct tl_env){k, json_string_value(e)};
	v->env = env;
	return 0;
}

static int tri(const json_t *o, const char *key)
{
	const json_t *b = json_object_get(o, key);

	return json_is_boolean(b) ? json_is_true(b) : -1;
}

static int decode_gpu(const json_t *root, struct tl_view *v)
{
	const json_t *g = json_object_get(root, "gpu"), *e, *r = json_object_get(g, "cpu_reason");
	const json_t *torch = json_object_get(g, "torch");
	struct tl_gpu *o = &v->gpu;
	size_t i;

	o->present = json_is_object(g);
	o->tried = json_is_true(json_object_get(g, "tried"));
	o->usable = tri(g, "usable");
	o->reason_code = str(r, "code");
	o->reason = str(r, "message");
	o->n_libraries = json_array_size(json_object_get(g, "libraries"));
	json_array_foreach (json_object_get(g, "libraries"), i, e)
		if (!o->library && json_is_number(json_object_get(e, "mapped_ms")))
			o->library = str(e, "path"); /* the first one mapped */
	if (!o->library)
		o->library = str(json_array_get(json_object_get(g, "libraries"), 0), "path");
	o->calls_total = num(g, "calls_total");
	o->memory_peak_bytes = o->memory_at_ready_bytes = TL_NONE;
	o->init_ms = o->h2d_bytes = o->h2d_ms = 0;
	json_array_foreach (json_object_get(g, "processes"), i, e) {
		double peak = num(e, "memory_peak_bytes"), ready = num(e, "memory_at_ready_bytes");

		o->init_ms += tl_or0(num(e, "init_ms"));
		o->h2d_bytes += tl_or0(num(e, "h2d_bytes"));
		o->h2d_ms += tl_or0(num(e, "h2d_ms"));
		if (tl_has(peak))
			o->memory_peak_bytes = tl_or0(o->memory_peak_bytes) + peak;
		if (tl_has(ready))
			o->memory_at_ready_bytes = tl_or0(o->memory_at_ready_bytes) + ready;
	}
	o->error_ret = TL_NONE;
	json_array_foreach (json_object_get(g, "calls"), i, e)
		if (json_integer_value(json_object_get(e, "ret")) && !tl_has(o->error_ret)) {
			o->error_ret = num(e, "ret");
			o->error = str(e, "error");
			o->error_call = str(e, "call");
		}
	o->n_device_nodes = json_array_size(json_object_get(g, "device_nodes"));
	o->cuda_visible_devices = str(g, "cuda_visible_devices");
	o->torch_imported = json_is_true(json_object_get(torch, "imported"));
	o->torch_lib = str(torch, "lib");
	o->torch_cuda_build = tri(torch, "cuda_build");
	return 0;
}

static int (*const decoders[])(const json_t *root, struct tl_view *v) = {
    decode_marks,    decode_phases,	decode_files,	 decode_missing, decode_downloads,
    decode_network,  decode_requests,	decode_findings, decode_memory,	 decode_sched,
    decode_tracing,  decode_process,	decode_launcher, decode_procs,	 decode_imports,
    decode_connects, decode_locks,	decode_copies,	 decode_gpu,	 decode_renames,
    decode_symlinks, decode_failed_ops, decode_cache_fs,
};

struct tl_view *tl_view_decode(const struct timeline *tl)
{
	return tl_view_decode_tree(timeline_json(tl));
}

struct tl_view *tl_view_decode_tree(const json_t *root)
{
	struct tl_view *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	for (size_t i = 0; i < sizeof(decoders) / sizeof(decoders[0]); i++)
		if (decoders[i](root, v) < 0) {
			tl_view_free(v);
			return NULL;
		}
	return v;
}

void tl_view_free(struct tl_view *v)
{
	if (!v)
		return;
	free((void *)v->marks);
	free((void *)v->phases);
	free((void *)v->files);
	free((void *)v->missing);
	free((void *)v->downloads);
	free((void *)v->copies);
	free((void *)v->network);
	free((void *)v->connects);
	free((void *)v->locks);
	free((void *)v->requests);
	free((void *)v->findings);
	free((void *)v->memory.mlock_calls);
	free((void *)v->memory.fault_rate.counts);
	free((void *)v->process.command);
	free((void *)v->process.output_tail);
	free((void *)v->env);
	free((void *)v->renames);
	free((void *)v->symlinks);
	free((void *)v->peer_order);
	free((void *)v->failed_ops);
	for (size_t i = 0; v->cache_fs && i < v->n_cache_fs; i++)
		free((void *)v->cache_fs[i].incomplete);
	free((void *)v->cache_fs);
	free((void *)v->sched.processes);
	for (size_t i = 0; v->procs && i < v->n_procs; i++)
		free((void *)v->procs[i].argv);
	free((void *)v->procs);
	free((void *)v->imports);
	free(v);
}

double tl_view_mark(const struct tl_view *v, const char *name)
{
	for (size_t i = 0; v && name && i < v->n_marks; i++)
		if (!strcmp(v->marks[i].name, name))
			return v->marks[i].ms;
	return TL_NONE;
}

const struct tl_download *tl_view_download_at(const struct tl_view *v, const char *path, bool blobs)
{
	for (size_t i = 0; v && path && i < v->n_downloads; i++) {
		const struct tl_download *d = &v->downloads[i];

		if (d->name &&
		    ((d->path && !strcmp(d->path, path)) ||
		     (blobs && d->link && d->final_path && !strcmp(d->final_path, path))))
			return d;
	}
	return NULL;
}

const struct tl_peer *tl_view_peer(const struct tl_view *v, const char *peer)
{
	size_t lo = 0, hi, found = (size_t)-1;

	if (!v || !peer || !v->peer_order)
		return NULL;
	/* the last of the equal names: the rightmost match */
	hi = v->n_network;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const char *p = v->network[v->peer_order[mid]].peer;
		int r = strcmp(p ? p : "", peer);

		if (r <= 0) {
			if (!r)
				found = mid;
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	if (found == (size_t)-1 || !v->network[v->peer_order[found]].peer)
		return NULL;
	return &v->network[v->peer_order[found]];
}

const char *tl_view_env(const struct tl_view *v, const char *name)
{
	for (size_t i = 0; v && name && i < v->n_env; i++)
		if (!strcmp(v->env[i].name, name))
			return v->env[i].value;
	return NULL;
}

bool tl_view_renamed(const struct tl_view *v, const char *path)
{
	for (size_t i = 0; v && path && i < v->n_renames; i++)
		if (v->renames[i].old && !strcmp(v->renames[i].old, path) &&
		    tl_or0(v->renames[i].result) == 0)
			return true;
	return false;
}

int tl_view_downloads_in_flight(const struct tl_view *v, const struct tl_file **last)
{
	int n = 0;

	*last = NULL;
	for (size_t i = 0; v && i < v->n_files; i++) {
		const struct tl_file *f = &v->files[i];

		/* a download's temp file, whichever client writes it (the class
		 * timeline_files gives it), or an older timeline's *.incomplete */
		if (!f->path || f->path[0] != '/' ||
		    !(hf_hub_temp(f->path) || (f->class && !strcmp(f->class, "download"))) ||
		    tl_or0(f->opens) <= 0 || tl_view_renamed(v, f->path))
			continue;
		n++;
		if (!*last || tl_or0(f->first_ms) > tl_or0((*last)->first_ms))
			*last = f;
	}
	return n;
}

const struct tl_cache_fs *tl_view_cache_fs_of(const struct tl_view *v, const char *abs)
{
	const struct tl_cache_fs *best = NULL;

	for (size_t i = 0; v && abs && i < v->n_cache_fs; i++) {
		const char *dir = v->cache_fs[i].dir;

		if (dir && path_under(abs, dir) && (!best || strlen(dir) > strlen(best->dir)))
			best = &v->cache_fs[i];
	}
	return best;
}
