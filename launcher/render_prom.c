/* render_prom: the timeline in the Prometheus text exposition format.
 * Reference: prometheus.io/docs/instrumenting/exposition_formats/ (label
 * values escape \ " and newline; HELP escapes \ and newline; one HELP and
 * TYPE per family, before its samples; a label set appears once per family). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hfcache.h"
#include "redact.h"
#include "render_prom.h"
#include "timeline_view.h"

const double prom_request_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
				       1,     2.5,  5,	   10,	 30,  60};
const size_t prom_n_request_buckets =
    sizeof(prom_request_buckets) / sizeof(prom_request_buckets[0]);

void prom_header(FILE *out, const char *name, const char *type, const char *help)
{
	fprintf(out, "# HELP %s ", name);
	for (const char *p = help; *p; p++) {
		if (*p == '\\')
			fputs("\\\\", out);
		else if (*p == '\n')
			fputs("\\n", out);
		else
			fputc(*p, out);
	}
	fprintf(out, "\n# TYPE %s %s\n", name, type);
}

void prom_label_value(FILE *out, const char *s)
{
	/* /metrics is readable by anyone who can connect: no secret in a label,
	 * whatever model it was rendered from */
	char *r = redact_text(s ? s : "");

	fputc('"', out);
	for (const char *p = r ? r : REDACTED; *p; p++) {
		if (*p == '\\')
			fputs("\\\\", out);
		else if (*p == '"')
			fputs("\\\"", out);
		else if (*p == '\n')
			fputs("\\n", out);
		else if ((unsigned char)*p < 0x20 || *p == 0x7f)
			/* the text \xNN, as the timeline writes such bytes: no raw
			 * ESC reaches whoever curls /metrics in a terminal */
			fprintf(out, "\\\\x%02x", (unsigned char)*p);
		else
			fputc(*p, out);
	}
	fputc('"', out);
	free(r);
}

void prom_value(FILE *out, double v)
{
	if (isnan(v))
		fputs("NaN", out);
	else if (isinf(v))
		fputs(v > 0 ? "+Inf" : "-Inf", out);
	else if (v == floor(v) && fabs(v) < 1e15)
		fprintf(out, "%.0f", v);
	else
		fprintf(out, "%.10g", v);
}

static void sample(FILE *out, const char *name, const char *label, const char *lvalue, double v)
{
	fputs(name, out);
	if (label) {
		fprintf(out, "{%s=", label);
		prom_label_value(out, lvalue);
		fputc('}', out);
	}
	fputc(' ', out);
	prom_value(out, v);
	fputc('\n', out);
}

static void single(FILE *out, const char *name, const char *type, const char *help, double v)
{
	prom_header(out, name, type, help);
	sample(out, name, NULL, NULL, v);
}

/* Label values once each: a repeated one (two phases or downloads of one
 * name) adds to the first. slot (an open-addressing table of positions + 1,
 * by the label's FNV-1a hash) keeps that linear in the number of labels on
 * any input. */
struct lv {
	char **label;
	double *v;
	size_t n, cap;
	size_t *slot, nslot; /* nslot: a power of two, over twice n */
};

static size_t lv_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return (size_t)h;
}

/* the slot of label: where it is, or the empty one where it goes */
static size_t *lv_find(struct lv *l, const char *label)
{
	size_t m = l->nslot - 1, i = lv_hash(label) & m;

	while (l->slot[i] && strcmp(l->label[l->slot[i] - 1], label))
		i = (i + 1) & m;
	return &l->slot[i];
}

static int lv_grow(struct lv *l)
{
	size_t nslot = l->nslot ? l->nslot * 2 : 64, *old = l->slot, oldn = l->nslot;

	if (!(l->slot = calloc(nslot, sizeof(*l->slot)))) {
		l->slot = old;
		return -1;
	}
	l->nslot = nslot;
	for (size_t i = 0; i < oldn; i++)
		if (old[i])
			*lv_find(l, l->label[old[i] - 1]) = old[i];
	free(old);
	return 0;
}

static void lv_add(struct lv *l, const char *label, double v)
{
	size_t *at;

	if ((l->n + 1) * 2 > l->nslot && lv_grow(l) < 0)
		return;
	at = lv_find(l, label);
	if (*at) {
		l->v[*at - 1] += v;
		return;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char **nl = realloc(l->label, cap * sizeof(*nl));
		double *nv;

		if (!nl)
			return;
		l->label = nl;
		nv = realloc(l->v, cap * sizeof(*nv));
		if (!nv)
			return;
		l->v = nv;
		l->cap = cap;
	}
	l->label[l->n] = strdup(label);
	if (!l->label[l->n])
		return;
	l->v[l->n++] = v;
	*at = l->n;
}

static void lv_write(FILE *out, struct lv *l, const char *name, const char *type, const char *help,
		     const char *label)
{
	prom_header(out, name, type, help);
	for (size_t i = 0; i < l->n; i++) {
		sample(out, name, label, l->label[i], l->v[i]);
		free(l->label[i]);
	}
	free(l->label);
	free(l->v);
	free(l->slot);
	*l = (struct lv){0};
}

/* A download's file label: its name (the file it becomes); in a timeline
 * older than names, its path without the ".incomplete" of a partial one. */
static void download_file(const struct tl_download *d, char *buf, size_t len)
{
	const char *path = d->path;

	if (d->name) {
		snprintf(buf, len, "%s", d->name);
		return;
	}
	snprintf(buf, len, "%.*s", (int)hf_hub_temp_stem(path), path ? path : "");
}

int render_prom(const struct timeline *tl, FILE *out)
{
	struct tl_view *v = tl_view_decode(tl);
	const struct tl_memory *mem;
	double ready, launch;
	struct lv l = {0};
	int ok = 0, ok_all = 0, failed = 0;

	if (!v)
		return -1;
	mem = &v->memory;
	ready = tl_view_mark(v, "ready");
	launch = tl_or0(tl_view_mark(v, "launch"));

	/* start-up */
	single(out, "indextts2_ready", "gauge",
	       "1 when the service became ready (listened on its port) during the trace, else 0.",
	       tl_has(ready) ? 1 : 0);
	if (tl_has(ready))
		single(out, "indextts2_startup_seconds", "gauge",
		       "Seconds from tts-launch's start to the service being ready.",
		       (ready - launch) / 1e3);
	for (size_t i = 0; i < v->n_marks; i++)
		lv_add(&l, v->marks[i].name, v->marks[i].ms / 1e3);
	lv_write(out, &l, "indextts2_mark_seconds", "gauge",
		 "When each mark of the timeline happened, seconds since tts-launch started.",
		 "mark");
	for (size_t i = 0; i < v->n_phases; i++) {
		const struct tl_phase *p = &v->phases[i];
		double d = p->end_ms - p->start_ms;

		if (p->name && tl_has(d))
			lv_add(&l, p->name, d / 1e3);
	}
	lv_write(out, &l, "indextts2_phase_seconds", "gauge",
		 "Duration of each start-up phase in seconds (phases may nest).", "phase");

	/* memory */
	single(out, "indextts2_page_faults_total", "counter",
	       "Page faults taken by the service's process tree during the trace.",
	       tl_or0(mem->page_faults));
	single(out, "indextts2_major_page_faults_total", "counter",
	       "Major page faults (that needed I/O) during the trace.", tl_or0(mem->major_faults));
	single(out, "indextts2_model_file_page_faults_total", "counter",
	       "Page faults on mappings of model files during the trace.",
	       tl_or0(mem->model_file_faults));
	for (size_t i = 0; i < mem->n_mlock_calls; i++) {
		if (mem->mlock_calls[i].ok) {
			ok++;
			if (!strcmp(mem->mlock_calls[i].call ?: "", "mlockall"))
				ok_all++;
		} else {
			failed++;
		}
	}
	prom_header(out, "indextts2_mlock_calls_total", "counter",
		    "mlock/mlockall calls seen, by result.");
	sample(out, "indextts2_mlock_calls_total", "result", "ok", ok);
	sample(out, "indextts2_mlock_calls_total", "result", "failed", failed);
	{
		const char *st = mem->mlock_status;
		/* the shim's word; else an mlockall that worked (libraries mlock
		 * a page or two for themselves: that is not the model) */
		bool locked = st ? !strcmp(st, "locked") : ok_all > 0;

		single(
		    out, "indextts2_mlock_locked", "gauge",
		    "1 when the model was locked in memory (the mlock shim reported it locked, or "
		    "an mlock/mlockall call succeeded), else 0.",
		    locked ? 1 : 0);
		if (st) {
			prom_header(
			    out, "indextts2_mlock_shim_status", "gauge",
			    "The mlock shim's state (docs/mlock.md): 1 for the current one.");
			sample(out, "indextts2_mlock_shim_status", "status", st, 1);
			single(out, "indextts2_mlock_locked_bytes", "gauge",
			       "Bytes the mlock shim locked.", tl_or0(mem->mlock_bytes_locked));
		}
	}

	/* files, missing paths, downloads, network */
	{
		double attempts = 0, read = 0, failures = 0;

		for (size_t i = 0; i < v->n_missing; i++)
			attempts += tl_or0(v->missing[i].attempts);
		for (size_t i = 0; i < v->n_files; i++)
			read += tl_or0(v->files[i].bytes_read);
		for (size_t i = 0; i < v->n_network; i++)
			failures += tl_or0(v->network[i].failures);
		single(out, "indextts2_missing_path_attempts_total", "counter",
		       "Failed attempts to open or stat paths that do not exist.", attempts);
		single(out, "indextts2_missing_paths", "gauge", "Distinct paths found missing.",
		       (double)v->n_missing);
		single(out, "indextts2_files", "gauge", "Distinct files opened or read.",
		       (double)v->n_files);
		single(out, "indextts2_file_read_bytes_total", "counter",
		       "Bytes read from files with read(2) and friends (mmap not included).", read);
		single(out, "indextts2_connect_failures_total", "counter",
		       "Failed connect(2) calls, all peers.", failures);
	}
	for (size_t i = 0; i < v->n_downloads; i++) {
		char file[4096];

		download_file(&v->downloads[i], file, sizeof(file));
		lv_add(&l, file, tl_or0(v->downloads[i].bytes));
	}
	lv_write(out, &l, "indextts2_download_bytes_total", "counter",
		 "Bytes written to each downloaded file during the trace.", "file");
	for (size_t i = 0; i < v->n_downloads; i++) {
		const struct tl_download *d = &v->downloads[i];
		char file[4096];

		download_file(d, file, sizeof(file));
		lv_add(&l, file, (tl_or0(d->last_ms) - tl_or0(d->first_ms)) / 1e3);
	}
	lv_write(out, &l, "indextts2_download_seconds", "gauge",
		 "Seconds from the first to the last write of each downloaded file.", "file");

	/* off-CPU time */
	prom_header(out, "indextts2_offcpu_seconds_total", "counter",
		    "Time the service's threads spent off CPU during the trace, by reason.");
	sample(out, "indextts2_offcpu_seconds_total", "reason", "io_wait",
	       tl_or0(v->sched.io_wait_ms) / 1e3);
	sample(out, "indextts2_offcpu_seconds_total", "reason", "sleep",
	       tl_or0(v->sched.sleep_ms) / 1e3);
	sample(out, "indextts2_offcpu_seconds_total", "reason", "runqueue",
	       tl_or0(v->sched.runqueue_ms) / 1e3);

	/* the GPU (issue 18): only where CUDA was tried */
	if (v->gpu.present && v->gpu.tried) {
		if (tl_has(v->gpu.memory_peak_bytes)) {
			prom_header(
			    out, "indextts2_gpu_memory_bytes", "gauge",
			    "Device memory the service allocated through CUDA (peak, at ready).");
			sample(out, "indextts2_gpu_memory_bytes", "at", "peak",
			       v->gpu.memory_peak_bytes);
			if (tl_has(v->gpu.memory_at_ready_bytes))
				sample(out, "indextts2_gpu_memory_bytes", "at", "ready",
				       v->gpu.memory_at_ready_bytes);
		}
		single(out, "indextts2_gpu_init_seconds", "gauge",
		       "Time in CUDA device init calls (cudaGetDeviceCount, cudaSetDevice, "
		       "cudaFree(0), cuInit, contexts).",
		       v->gpu.init_ms / 1e3);
		single(out, "indextts2_h2d_bytes_total", "counter",
		       "Bytes copied from host to device memory (cudaMemcpy*, cuMemcpyHtoD*).",
		       v->gpu.h2d_bytes);
		single(out, "indextts2_gpu_usable", "gauge",
		       "1 when CUDA found a usable GPU, 0 when the service runs on CPU.",
		       v->gpu.usable == 1);
	}

	/* requests after ready */
	{
		size_t nb = prom_n_request_buckets, *count = calloc(nb, sizeof(size_t)), n = 0;
		double sum = 0, faults = 0, major = 0;

		for (size_t i = 0; i < v->n_requests; i++) {
			const struct tl_request *r = &v->requests[i];
			double d = r->dur_ms;

			if (!tl_has(d))
				d = r->end_ms - r->start_ms;
			faults += tl_or0(r->page_faults);
			major += tl_or0(r->major_faults);
			if (!tl_has(d))
				continue;
			d /= 1e3;
			n++;
			sum += d;
			for (size_t b = 0; count && b < nb; b++)
				if (d <= prom_request_buckets[b])
					count[b]++;
		}
		prom_header(out, "indextts2_request_duration_seconds", "histogram",
			    "Requests handled after ready: accept to last response byte, seconds.");
		for (size_t b = 0; count && b < nb; b++) {
			char le[32];

			snprintf(le, sizeof(le), "%g", prom_request_buckets[b]);
			sample(out, "indextts2_request_duration_seconds_bucket", "le", le,
			       (double)count[b]);
		}
		sample(out, "indextts2_request_duration_seconds_bucket", "le", "+Inf", (double)n);
		sample(out, "indextts2_request_duration_seconds_sum", NULL, NULL, sum);
		sample(out, "indextts2_request_duration_seconds_count", NULL, NULL, (double)n);
		free(count);
		single(out, "indextts2_request_page_faults_total", "counter",
		       "Page faults taken while handling requests.", faults);
		single(out, "indextts2_request_major_page_faults_total", "counter",
		       "Major page faults taken while handling requests.", major);
	}

	/* the tracing itself */
	single(out, "tts_launch_tracing_enabled", "gauge",
	       "1 when the start-up was traced, 0 when it ran untraced.",
	       v->tracing.enabled ? 1 : 0);
	single(out, "tts_launch_events_lost_total", "counter",
	       "Trace events or records dropped (ring buffer full, maps full).",
	       tl_or0(v->tracing.events_lost));
	single(out, "tts_launch_findings", "gauge",
	       "Findings of the diagnosis rules in the timeline.", (double)v->n_findings);
	tl_view_free(v);
	return ferror(out) ? -1 : 0;
}
