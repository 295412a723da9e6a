/* timeline_view: the decoder table of timeline_view.h, the sections of the
 * run itself (marks, phases, findings, memory, sched, tracing, the process
 * and its tree, imports, the config, gpu) and the view's life; the file
 * and network sections are timeline_view_files.c and timeline_view_net.c.
 * The only reader of section keys for renderers, rules and compare; the
 * missing-field rule lives in timeline_view_int.h. */
#include <string.h>

#include "timeline_internal.h"
#include "timeline_sections.h"
#include "timeline_view_int.h"

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
	m->mlock_start_ms = num(shim, "start_ms");
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
	o->low_vram_below = flag(json_object_get(g, "low_vram"), "below");
	o->low_vram_qwen_opened = flag(json_object_get(g, "low_vram"), "qwen_emotion_opened");
	o->low_vram_total_bytes = num(json_object_get(g, "low_vram"), "total_bytes");
	o->low_vram_threshold_bytes = num(json_object_get(g, "low_vram"), "threshold_bytes");
	o->device_name = str(json_object_get(g, "device"), "name");
	return 0;
}

static int decode_attribution(const json_t *root, struct tl_view *v)
{
	const json_t *a = json_object_get(root, "attribution"), *arr = json_object_get(a, "strip"),
		     *e;
	struct tl_attr *o = &v->attribution;
	struct tl_strip_seg *segs;
	size_t i;

	o->window_ms = num(a, "window_ms");
	o->strip_cut = flag(a, "strip_cut");
	o->has_strip = json_is_array(arr);
	if (LIST(arr, segs, o->n_strip) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		segs[i] =
		    (struct tl_strip_seg){num(e, "start_ms"), num(e, "end_ms"), str(e, "kind")};
	o->strip = segs;
	return 0;
}

static int (*const decoders[])(const json_t *root, struct tl_view *v) = {
    decode_marks,	 decode_phases,	      tlv_decode_downloads,  tlv_decode_network,
    tlv_decode_requests, decode_findings,     decode_memory,	     decode_sched,
    decode_tracing,	 decode_process,      decode_launcher,	     decode_procs,
    tlv_decode_connects, tlv_decode_locks,    tlv_decode_copies,     decode_gpu,
    tlv_decode_renames,	 tlv_decode_symlinks, tlv_decode_failed_ops, tlv_decode_cache_fs,
    tlv_decode_xet,	 decode_attribution,
};

struct tl_view *tl_view_decode_config(const json_t *root)
{
	struct tl_view *v = calloc(1, sizeof(*v));

	if (v && decode_launcher(root, v) < 0) {
		tl_view_free(v);
		return NULL;
	}
	return v;
}

/* files, missing_paths and python.imports: the model's records themselves
 * (s), valid while the model lives and takes no new snapshot */
static struct tl_view *decode(const json_t *root, const struct tl_sections *s, struct tl_view *v)
{
	for (size_t i = 0; i < sizeof(decoders) / sizeof(decoders[0]); i++)
		if (decoders[i](root, v) < 0) {
			tl_view_free(v);
			return NULL;
		}
	v->files = TLS_FILES_OF(s);
	v->n_files = s->l[TLS_FILES].n;
	v->missing = TLS_MISSING_OF(s);
	v->n_missing = s->l[TLS_MISSING].n;
	v->imports = TLS_IMPORTS_OF(s);
	v->n_imports = s->l[TLS_IMPORTS].n;
	return v;
}

struct tl_view *tl_view_decode(const struct timeline *tl)
{
	const struct tl_sections *s = timeline_sections(tl);
	struct tl_view *v = s ? calloc(1, sizeof(*v)) : NULL;

	return v ? decode(timeline_json(tl), s, v) : NULL;
}

struct tl_view *tl_view_decode_tree(const json_t *root)
{
	const struct tl_sections *s = timeline_sections_of(root);
	struct tl_view *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	if (!s) {
		/* a raw tree (no model's): its lists decoded for this view */
		if (!(v->own_ = malloc(sizeof(*v->own_))) ||
		    tl_sections_decode(root, v->own_) < 0) {
			free(v->own_);
			free(v);
			return NULL;
		}
		s = v->own_;
	}
	return decode(root, s, v);
}

void tl_view_free(struct tl_view *v)
{
	if (!v)
		return;
	free((void *)v->marks);
	free((void *)v->phases);
	tl_sections_free(v->own_);
	free(v->own_);
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
	free((void *)v->attribution.strip);
	free(v);
}

double tl_view_mark(const struct tl_view *v, const char *name)
{
	for (size_t i = 0; v && name && i < v->n_marks; i++)
		if (!strcmp(v->marks[i].name, name))
			return v->marks[i].ms;
	return TL_NONE;
}

const char *tl_view_env(const struct tl_view *v, const char *name)
{
	for (size_t i = 0; v && name && i < v->n_env; i++)
		if (!strcmp(v->env[i].name, name))
			return v->env[i].value;
	return NULL;
}
