/* gpu_snap: the timeline's `gpu` section (gpu.h; docs/gpu.md, docs/timeline.md)
 * from what gpu.c gathered: the libraries, each process's calls, the
 * device's answers, and why the service runs on CPU when it does. */
#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector.h"
#include "gpu.h"
#include "gpu_internal.h"
#include "timeline_internal.h"
#include "timeline_sections.h"

const char *gpu_error_name(int code, bool driver)
{
	static const struct {
		int code;
		const char *rt, *drv;
	} names[] = {
	    {0, "cudaSuccess", "CUDA_SUCCESS"},
	    {1, "cudaErrorInvalidValue", "CUDA_ERROR_INVALID_VALUE"},
	    {2, "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY"},
	    {3, "cudaErrorInitializationError", "CUDA_ERROR_NOT_INITIALIZED"},
	    {4, "cudaErrorCudartUnloading", "CUDA_ERROR_DEINITIALIZED"},
	    {34, "cudaErrorStubLibrary", "CUDA_ERROR_STUB_LIBRARY"},
	    {35, "cudaErrorInsufficientDriver", NULL},
	    {36, "cudaErrorCallRequiresNewerDriver", NULL},
	    {46, "cudaErrorDevicesUnavailable", NULL},
	    {100, "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE"},
	    {101, "cudaErrorInvalidDevice", "CUDA_ERROR_INVALID_DEVICE"},
	    {803, "cudaErrorSystemDriverMismatch", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
	    {804, "cudaErrorCompatNotSupportedOnDevice", NULL},
	    {999, "cudaErrorUnknown", "CUDA_ERROR_UNKNOWN"},
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].code == code)
			return driver ? names[i].drv : names[i].rt;
	return NULL;
}

static json_t *ms_or_null(double ms) { return ms < 0 ? json_null() : ms_json(ms); }

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

/* /dev/nvidia* now: evidence only (a fake node must not decide anything) */
static json_t *device_nodes(void)
{
	json_t *a = json_array();
	glob_t gl;

	if (glob("/dev/nvidia*", 0, NULL, &gl) == 0)
		for (size_t i = 0; i < gl.gl_pathc && i < 16; i++)
			json_array_append_new(a, json_string(gl.gl_pathv[i]));
	globfree(&gl);
	return a;
}

static bool torch_imported(const struct tl_sections *s)
{
	for (size_t i = 0; i < s->l[TLS_IMPORTS].n; i++) {
		const char *n = TLS_IMPORTS_OF(s)[i].name;

		if (n && (!strcmp(n, "torch") || !strncmp(n, "torch.", 6)))
			return true;
	}
	return false;
}

/* torch/lib of the service: next to the torch package the tree opened
 * (the model's files), else where its root maps libtorch*, else the app's
 * venv, else Debian's python3-torch. */
static bool torch_lib(const struct tl_sections *s, pid_t root, const struct config *cfg, char *out,
		      size_t len, bool *opened)
{
	char p[64], line[PATH_MAX + 128], pat[PATH_MAX + 96];
	glob_t gl;
	bool found = false;
	FILE *f;

	for (size_t i = 0; i < s->l[TLS_FILES].n; i++) {
		const char *path = TLS_FILES_OF(s)[i].path;
		const char *at = path && path[0] == '/' ? strstr(path, "/torch/") : NULL;

		if (at &&
		    (!strncmp(at, "/torch/lib/", 11) || !strncmp(at, "/torch/__init__.", 16))) {
			snprintf(out, len, "%.*s/torch/lib", (int)(at - path), path);
			*opened = true; /* the tree read the package: imported */
			return true;
		}
	}

	snprintf(p, sizeof(p), "/proc/%d/maps", (int)root);
	f = root > 0 ? fopen(p, "re") : NULL;
	while (f && !found && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/'),
		     *at = path ? strstr(path, "/torch/lib/libtorch") : NULL;

		if (at) {
			snprintf(out, len, "%.*s", (int)(at - path) + 10, path);
			found = true;
		}
	}
	if (f)
		fclose(f);
	for (int v = 0; !found && v < 3; v++) {
		if (v < 2 && (!cfg || !cfg->app_dir))
			continue;
		if (v < 2)
			snprintf(pat, sizeof(pat), "%s/%s/lib/python3*/site-packages/torch/lib",
				 cfg->app_dir, v ? "venv" : ".venv");
		else
			snprintf(pat, sizeof(pat), "/usr/lib/python3/dist-packages/torch/lib");
		if (glob(pat, 0, NULL, &gl) == 0 && gl.gl_pathc) {
			snprintf(out, len, "%s", gl.gl_pathv[0]);
			found = true;
		}
		globfree(&gl);
	}
	return found;
}

/* Why the service runs on CPU (code, message), or none: it used a GPU, or
 * nothing says it ever meant to. */
static json_t *cpu_reason(struct gpu_trace *g, bool tried, bool usable, bool torch,
			  const char *tlib, bool cuda_build, size_t n_nodes)
{
	const struct gpu_proc *p = NULL;
	char msg[PATH_MAX + 256];
	const char *code;

	if (usable)
		return json_null();
	for (int i = 0; i < g->n_procs && !p; i++)
		if (g->procs[i].first_error)
			p = &g->procs[i];
	if (tried && p) {
		const char *en = gpu_error_name(p->first_error, p->first_error_driver);

		code = p->first_error == 35    ? "insufficient-driver"
		       : p->first_error == 100 ? "no-device"
		       : p->first_error == 34  ? "stub-library"
		       : p->first_error == 803 ? "driver-mismatch"
					       : "cuda-error";
		snprintf(msg, sizeof(msg), "CUDA calls failed with %s (%d)%s", en ? en : "an error",
			 p->first_error, n_nodes ? "" : "; there is no /dev/nvidia* device node");
	} else if (tried) {
		bool none = false;

		for (int i = 0; i < g->n_procs; i++)
			none |= g->procs[i].device_count == 0;
		if (!none)
			return json_null(); /* a CUDA library loaded, no answer yet */
		code = "no-device";
		snprintf(msg, sizeof(msg), "the CUDA runtime reports no device");
	} else if (torch && tlib && !cuda_build) {
		code = "cpu-torch";
		snprintf(msg, sizeof(msg),
			 "PyTorch is a CPU-only build: no libtorch_cuda.so in %s, and no CUDA "
			 "library was loaded",
			 tlib);
	} else if (torch) {
		code = "no-cuda-library";
		snprintf(msg, sizeof(msg), "PyTorch never loaded a CUDA library");
	} else {
		return json_null();
	}
	return json_pack("{s:s, s:s}", "code", code, "message", msg);
}

static json_t *bytes_or_null(bool known, __u64 v)
{
	return known ? json_integer((json_int_t)v) : json_null();
}

/* What the device said, from the first process that asked: its name and
 * total memory (cudaGetDeviceProperties), total and free memory
 * (cudaMemGetInfo, cuMemGetInfo: the first answer, the last before ready);
 * null when no such call succeeded (no GPU, or never asked). */
static json_t *device_json(const struct gpu_trace *g)
{
	for (int i = 0; g && i < g->n_procs; i++) {
		const struct gpu_proc *p = &g->procs[i];

		if (p->device < 0 && p->free_first_ms < 0)
			continue;
		return json_pack(
		    "{s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "pid", (int)p->pid, "index",
		    p->device >= 0 ? json_integer(p->device) : json_null(), "name",
		    p->device_name[0] ? json_string(p->device_name) : json_null(), "total_bytes",
		    bytes_or_null(p->device_total > 0, p->device_total), "free_first_bytes",
		    bytes_or_null(p->free_first_ms >= 0, p->free_first), "free_first_ms",
		    ms_or_null(p->free_first_ms), "free_before_ready_bytes",
		    bytes_or_null(p->free_ready_ms >= 0, p->free_ready), "free_before_ready_ms",
		    ms_or_null(p->free_ready_ms));
	}
	return json_null();
}

#define LOW_VRAM_BYTES (10ULL << 30)

/* IndexTTS2's own decision below 10 GB of VRAM (half precision, QwenEmotion
 * skipped), as far as the trace shows it: the device's total (the answer
 * it read) against 10 GiB, and whether the QwenEmotion model's folder
 * (qwen0.6bemo4-merge) was opened. null without a total. */
static json_t *low_vram_json(const struct gpu_trace *g, const struct tl_sections *s)
{
	__u64 total = 0;
	bool qwen = false;

	for (int k = 0; g && k < g->n_procs && !total; k++)
		total = g->procs[k].device_total;
	if (!total)
		return json_null();
	for (size_t i = 0; i < s->l[TLS_FILES].n; i++) {
		const char *path = TLS_FILES_OF(s)[i].path;

		qwen |= path && strstr(path, "/qwen0.6bemo4-merge/") != NULL;
	}
	return json_pack("{s:I, s:I, s:b, s:b}", "total_bytes", (json_int_t)total,
			 "threshold_bytes", (json_int_t)LOW_VRAM_BYTES, "below",
			 total < LOW_VRAM_BYTES, "qwen_emotion_opened", qwen);
}

json_t *gpu_snap(struct gpu_trace *g, const json_t *model, const struct config *cfg,
		 double ready_ms)
{
	/* files[] and python.imports[]: the model's records, or a raw tree's */
	struct tl_sections tmp, *s = timeline_sections_of(model);
	json_t *o, *libs, *procs, *calls, *nodes, *torch;
	bool tried = false, usable = false, imported, cuda_build = false;
	char tlib[PATH_MAX];
	/* the service's value: [env], else what it inherits from tts-launch */
	const char *cvd = config_service_env(cfg, "CUDA_VISIBLE_DEVICES");
	bool have_tlib;

	if (!s && tl_sections_decode(model, &tmp) == 0)
		s = &tmp;
	if (!s)
		return NULL;
	o = json_object();
	libs = json_array();
	procs = json_array();
	calls = json_array();
	nodes = device_nodes();
	imported = torch_imported(s);

	for (int i = 0; g && i < g->n_libs; i++) {
		const struct gpu_lib *l = &g->libs[i];

		tried |= l->ms >= 0;
		json_array_append_new(
		    libs, json_pack("{s:s, s:s, s:i, s:s, s:o, s:o, s:i}", "path", l->path, "kind",
				    l->kind == LIB_DRIVER ? "driver" : "runtime", "pid",
				    (int)l->pid, "attached", l->forked ? "forked" : "mapped",
				    "mapped_ms", ms_or_null(l->ms), "held_ms", ms_json(l->held_ms),
				    "probes", l->n_probes));
	}
	for (int i = 0; g && i < g->n_procs; i++) {
		const struct gpu_proc *p = &g->procs[i];
		__u64 at_ready = p->ready_seen ? p->mem_ready : p->mem;

		tried = true;
		usable |= p->ok;
		json_array_append_new(
		    procs,
		    json_pack("{s:i, s:o, s:I, s:I, s:o, s:I, s:o, s:I, s:I, s:I, s:o, s:o, s:o}",
			      "pid", (int)p->pid, "init_ms", ms_json(p->init_ms), "memory_bytes",
			      (json_int_t)p->mem, "memory_peak_bytes", (json_int_t)p->peak,
			      "memory_at_ready_bytes",
			      ready_ms >= 0 ? json_integer((json_int_t)at_ready) : json_null(),
			      "h2d_bytes", (json_int_t)p->h2d_bytes, "h2d_ms", ms_json(p->h2d_ms),
			      "h2d_copies", (json_int_t)p->h2d_copies, "allocations",
			      (json_int_t)p->allocs, "errors", (json_int_t)p->errors,
			      "device_count",
			      p->device_count >= 0 ? json_integer(p->device_count) : json_null(),
			      "driver_version",
			      p->driver_version ? json_integer(p->driver_version) : json_null(),
			      "runtime_version",
			      p->runtime_version ? json_integer(p->runtime_version) : json_null()));
	}
	for (int i = 0; g && i < g->n_calls; i++) {
		const struct gpu_call_rec *c = &g->calls[i];
		const struct gpu_fn *f = gpu_fn_of(c->fn),
				    *w = c->within ? gpu_fn_of(c->within) : NULL;

		json_array_append_new(
		    calls,
		    json_pack("{s:i, s:s, s:o, s:o, s:i, s:o, s:I, s:o}", "pid", (int)c->pid,
			      "call", f ? f->name : "?", "ms", ms_json(c->ms), "dur_ms",
			      ms_json(c->dur_ms), "ret", c->ret, "error",
			      str_or_null(gpu_error_name(c->ret, f && f->kind == LIB_DRIVER)),
			      "bytes", (json_int_t)c->bytes, "within",
			      w ? json_string(w->name) : json_null()));
	}
	have_tlib = torch_lib(s, g ? g->root : 0, cfg, tlib, sizeof(tlib), &imported);
	if (have_tlib) {
		char p[PATH_MAX + 32];

		snprintf(p, sizeof(p), "%s/libtorch_cuda.so", tlib);
		cuda_build = access(p, F_OK) == 0;
	}
	torch = json_pack("{s:b, s:o, s:o}", "imported", imported, "lib",
			  have_tlib ? json_string(tlib) : json_null(), "cuda_build",
			  have_tlib ? json_boolean(cuda_build) : json_null());
	json_object_set_new(o, "libraries", libs);
	json_object_set_new(o, "processes", procs);
	json_object_set_new(o, "calls", calls);
	json_object_set_new(o, "calls_total", json_integer(g ? (json_int_t)g->calls_total : 0));
	json_object_set_new(o, "tried", json_boolean(tried));
	json_object_set_new(o, "usable", tried ? json_boolean(usable) : json_null());
	json_object_set_new(o, "cpu_reason",
			    g ? cpu_reason(g, tried, usable, imported, have_tlib ? tlib : NULL,
					   cuda_build, json_array_size(nodes))
			      : json_null());
	json_object_set_new(o, "device", device_json(g));
	json_object_set_new(o, "low_vram", low_vram_json(g, s));
	json_object_set_new(o, "device_nodes", nodes);
	json_object_set_new(o, "cuda_visible_devices", str_or_null(cvd));
	json_object_set_new(o, "torch", torch);
	if (s == &tmp)
		tl_sections_free(&tmp);
	return o;
}
