/* render_prom: the timeline in the Prometheus text exposition format.
 * Reference: prometheus.io/docs/instrumenting/exposition_formats/ (label
 * values escape \ " and newline; HELP escapes \ and newline; one HELP and
 * TYPE per family, before its samples; a label set appears once per family). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "redact.h"
#include "render_prom.h"
#include "timeline_internal.h"

const double prom_request_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
				       1,     2.5,  5,	   10,	 30,  60};
const size_t prom_n_request_buckets =
    sizeof(prom_request_buckets) / sizeof(prom_request_buckets[0]);

static double num(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : NAN;
}

static double num0(const json_t *o, const char *key)
{
	double v = num(o, key);

	return isnan(v) ? 0 : v;
}

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
 * name) adds to the first. idx (label -> position) keeps that linear in the
 * number of labels on any input. */
struct lv {
	char **label;
	double *v;
	size_t n, cap;
	json_t *idx;
};

static void lv_add(struct lv *l, const char *label, double v)
{
	json_t *at;

	if (!l->idx && !(l->idx = json_object()))
		return;
	at = json_object_get(l->idx, label);
	if (at) {
		l->v[json_integer_value(at)] += v;
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
	json_object_set_new(l->idx, label, json_integer((json_int_t)l->n));
	l->v[l->n++] = v;
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
	json_decref(l->idx);
	*l = (struct lv){0};
}

/* A download's file: its path without the ".incomplete" of a partial one. */
static void download_file(const char *path, char *buf, size_t len)
{
	size_t l = path ? strlen(path) : 0;
	static const char suffix[] = ".incomplete";

	if (l > sizeof(suffix) - 1 && !strcmp(path + l - (sizeof(suffix) - 1), suffix))
		l -= sizeof(suffix) - 1;
	snprintf(buf, len, "%.*s", (int)l, path ? path : "");
}

int render_prom(const struct timeline *tl, FILE *out)
{
	const json_t *root = timeline_json(tl);
	json_t *marks = json_object_get(root, "marks"), *mem = json_object_get(root, "memory");
	json_t *tr = json_object_get(root, "tracing"), *sched = json_object_get(root, "sched"), *v;
	double ready = num(marks, "ready"), launch = num(marks, "launch");
	struct lv l = {0};
	const char *key;
	size_t i;
	int ok = 0, ok_all = 0, failed = 0;

	if (isnan(launch))
		launch = 0;

	/* start-up */
	single(out, "indextts2_ready", "gauge",
	       "1 when the service became ready (listened on its port) during the trace, else 0.",
	       isnan(ready) ? 0 : 1);
	if (!isnan(ready))
		single(out, "indextts2_startup_seconds", "gauge",
		       "Seconds from tts-launch's start to the service being ready.",
		       (ready - launch) / 1e3);
	json_object_foreach (marks, key, v)
		if (json_is_number(v))
			lv_add(&l, key, json_number_value(v) / 1e3);
	lv_write(out, &l, "indextts2_mark_seconds", "gauge",
		 "When each mark of the timeline happened, seconds since tts-launch started.",
		 "mark");
	json_array_foreach (json_object_get(root, "phases"), i, v) {
		const char *name = json_string_value(json_object_get(v, "name"));
		double d = num(v, "end_ms") - num(v, "start_ms");

		if (name && !isnan(d))
			lv_add(&l, name, d / 1e3);
	}
	lv_write(out, &l, "indextts2_phase_seconds", "gauge",
		 "Duration of each start-up phase in seconds (phases may nest).", "phase");

	/* memory */
	single(out, "indextts2_page_faults_total", "counter",
	       "Page faults taken by the service's process tree during the trace.",
	       num0(mem, "page_faults"));
	single(out, "indextts2_major_page_faults_total", "counter",
	       "Major page faults (that needed I/O) during the trace.", num0(mem, "major_faults"));
	single(out, "indextts2_model_file_page_faults_total", "counter",
	       "Page faults on mappings of model files during the trace.",
	       num0(mem, "model_file_faults"));
	json_array_foreach (json_object_get(mem, "mlock_calls"), i, v) {
		if (json_is_integer(json_object_get(v, "result")) &&
		    json_integer_value(json_object_get(v, "result")) == 0) {
			ok++;
			if (!strcmp(json_string_value(json_object_get(v, "call")) ?: "",
				    "mlockall"))
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
		json_t *shim = json_object_get(mem, "mlock");
		const char *st = json_string_value(json_object_get(shim, "status"));
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
			       "Bytes the mlock shim locked.", num0(shim, "bytes_locked"));
		}
	}

	/* files, missing paths, downloads, network */
	{
		double attempts = 0, read = 0, failures = 0;

		json_array_foreach (json_object_get(root, "missing_paths"), i, v)
			attempts += num0(v, "attempts");
		json_array_foreach (json_object_get(root, "files"), i, v)
			read += num0(v, "bytes_read");
		json_array_foreach (json_object_get(root, "network"), i, v)
			failures += num0(v, "failures");
		single(out, "indextts2_missing_path_attempts_total", "counter",
		       "Failed attempts to open or stat paths that do not exist.", attempts);
		single(out, "indextts2_missing_paths", "gauge", "Distinct paths found missing.",
		       (double)json_array_size(json_object_get(root, "missing_paths")));
		single(out, "indextts2_files", "gauge", "Distinct files opened or read.",
		       (double)json_array_size(json_object_get(root, "files")));
		single(out, "indextts2_file_read_bytes_total", "counter",
		       "Bytes read from files with read(2) and friends (mmap not included).", read);
		single(out, "indextts2_connect_failures_total", "counter",
		       "Failed connect(2) calls, all peers.", failures);
	}
	json_array_foreach (json_object_get(root, "downloads"), i, v) {
		char file[4096];

		download_file(json_string_value(json_object_get(v, "path")), file, sizeof(file));
		lv_add(&l, file, num0(v, "bytes"));
	}
	lv_write(out, &l, "indextts2_download_bytes_total", "counter",
		 "Bytes written to each downloaded file during the trace.", "file");
	json_array_foreach (json_object_get(root, "downloads"), i, v) {
		char file[4096];

		download_file(json_string_value(json_object_get(v, "path")), file, sizeof(file));
		lv_add(&l, file, (num0(v, "last_ms") - num0(v, "first_ms")) / 1e3);
	}
	lv_write(out, &l, "indextts2_download_seconds", "gauge",
		 "Seconds from the first to the last write of each downloaded file.", "file");

	/* off-CPU time */
	prom_header(out, "indextts2_offcpu_seconds_total", "counter",
		    "Time the service's threads spent off CPU during the trace, by reason.");
	sample(out, "indextts2_offcpu_seconds_total", "reason", "io_wait",
	       num0(sched, "io_wait_ms") / 1e3);
	sample(out, "indextts2_offcpu_seconds_total", "reason", "sleep",
	       num0(sched, "sleep_ms") / 1e3);
	sample(out, "indextts2_offcpu_seconds_total", "reason", "runqueue",
	       num0(sched, "runqueue_ms") / 1e3);

	/* requests after ready */
	{
		json_t *reqs = json_object_get(root, "requests");
		size_t nb = prom_n_request_buckets, *count = calloc(nb, sizeof(size_t)), n = 0;
		double sum = 0, faults = 0, major = 0;

		json_array_foreach (reqs, i, v) {
			double d = num(v, "dur_ms");

			if (isnan(d))
				d = num(v, "end_ms") - num(v, "start_ms");
			faults += num0(v, "page_faults");
			major += num0(v, "major_faults");
			if (isnan(d))
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
	       json_is_true(json_object_get(tr, "enabled")) ? 1 : 0);
	single(out, "tts_launch_events_lost_total", "counter",
	       "Trace events or records dropped (ring buffer full, maps full).",
	       num0(tr, "events_lost"));
	single(out, "tts_launch_findings", "gauge",
	       "Findings of the diagnosis rules in the timeline.",
	       (double)json_array_size(json_object_get(root, "findings")));
	return ferror(out) ? -1 : 0;
}
