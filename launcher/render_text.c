/* render_text: the end-of-start-up summary (systemd-analyze blame style),
 * `report --format text` and what `run` prints at ready. Still on the raw
 * tree (timeline_internal.h), with the summary's own rule for a missing
 * number (0, as jansson's json_number_value reads it); to move to the
 * typed views next. */
#include <stdlib.h>
#include <string.h>

#include "timeline.h"
#include "timeline_internal.h"
#include "util.h"

static double num(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

static const char *sort_key;

static void fmt_ms(char *buf, size_t len, double ms)
{
	if (ms >= 1000)
		snprintf(buf, len, "%.3fs", ms / 1000);
	else
		snprintf(buf, len, "%.1fms", ms);
}

/* Compact ("84.5MiB"), for the summary's aligned columns. */
static void fmt_size(char *buf, size_t len, double b)
{
	const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int i = 0;

	while (b >= 1024 && i < 4) {
		b /= 1024;
		i++;
	}
	snprintf(buf, len, i ? "%.1f%s" : "%.0f%s", b, u[i]);
}

static int by_desc_key(const void *a, const void *b)
{
	double x = json_number_value(json_object_get(*(json_t *const *)a, sort_key));
	double y = json_number_value(json_object_get(*(json_t *const *)b, sort_key));

	return x > y ? -1 : x < y;
}

/* The n largest entries of an array by a numeric key (borrowed refs). */
static size_t top_n(json_t *arr, const char *key, json_t **out, size_t n)
{
	size_t m = json_array_size(arr), k = 0;
	json_t **v = m ? malloc(m * sizeof(*v)) : NULL;

	if (!v)
		return 0;
	for (size_t i = 0; i < m; i++)
		v[i] = json_array_get(arr, i);
	sort_key = key;
	qsort(v, m, sizeof(*v), by_desc_key);
	for (; k < n && k < m; k++)
		out[k] = v[k];
	free(v);
	return k;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted values. */
/* Nearest rank, ceil(p * n / 100), in integers: exact for any p and n (as
 * compare.c's; a double product can land just above an integer). */
static double pct(const double *v, size_t n, int p)
{
	size_t k = ((size_t)p * n + 99) / 100;

	return v[k ? k - 1 : 0];
}

/* A path for the terminal: a hub cache file as "ORG/NAME FILE" (the
 * snapshot's commit and the blob's hash left out), else relative to the app
 * dir when under it. Returns buf or path. */
static const char *short_path(const char *path, const char *app_dir, char *buf, size_t len)
{
	const char *m = path ? strstr(path, "/models--") : NULL;
	size_t n = app_dir ? strlen(app_dir) : 0;

	if (!path)
		return "?";
	if (m) {
		const char *repo = m + 9, *sep = strstr(repo, "--"), *end = strchr(repo, '/');
		const char *file = end, *snap = end ? strstr(end, "/snapshots/") : NULL;

		if (sep && end && sep < end) {
			if (snap && (file = strchr(snap + 11, '/')))
				file++;
			else
				file = end + 1;
			snprintf(buf, len, "%.*s/%.*s %s", (int)(sep - repo), repo,
				 (int)(end - sep - 2), sep + 2, file);
			return buf;
		}
	}
	if (n > 1 && !strncmp(path, app_dir, n) && path[n] == '/')
		return path + n + 1;
	return path;
}

/* A string from the timeline for the terminal (text_esc): a path that
 * holds ESC or BEL cannot drive it. Eight results may be in use at once. */
static const char *esc(const char *s)
{
	static char ring[8][4096];
	static unsigned next;

	return text_esc(s, ring[next++ % 8], sizeof(ring[0]));
}

void timeline_print_summary(const struct timeline *tl, FILE *out)
{
	json_t *root, *tr, *top[8], *mem, *arr, *p;
	const char *app_dir;
	char a[32], b[32], c[32], sp[512];
	size_t n, i;
	double ready, exec;

	if (!tl || !out)
		return;
	root = timeline_json(tl);
	tr = json_object_get(root, "tracing");
	app_dir = json_string_value(json_object_get(
	    json_object_get(json_object_get(json_object_get(root, "launcher"), "config"), "app"),
	    "dir"));
	ready = timeline_mark_ms(tl, "ready");
	exec = timeline_mark_ms(tl, "exec");
	fmt_ms(a, sizeof(a), ready);
	fmt_ms(b, sizeof(b), exec);
	fprintf(out, "tts-launch: start-up: exec at %s, ready %s%s\n", exec >= 0 ? b : "?",
		ready >= 0 ? "at " : "", ready >= 0 ? a : "not reached");
	if (!json_is_true(json_object_get(tr, "enabled"))) {
		fprintf(out, "  tracing: off (%s)\n",
			esc(json_string_value(json_object_get(tr, "reason")) ?: "disabled"));
		return;
	}

	/* blame: phases by duration, with when they started */
	arr = json_object_get(root, "phases");
	n = top_n(arr, "dur_ms", top, 8);
	if (n)
		fprintf(out, "  phases (longest first):\n");
	for (i = 0; i < n; i++) {
		fmt_ms(a, sizeof(a), num(top[i], "dur_ms"));
		fmt_ms(b, sizeof(b), num(top[i], "start_ms"));
		fprintf(out, "    %10s  %-28s @%s\n", a,
			esc(json_string_value(json_object_get(top[i], "name"))), b);
	}

	/* files by what they cost: bytes read, written and mapped; model and
	 * cache files only when there are any (a /sys file touched early and
	 * late is no cost) */
	arr = json_array();
	for (int pass = 0; pass < 2 && !json_array_size(arr); pass++) {
		json_array_foreach (json_object_get(root, "files"), i, p) {
			const char *cls = json_string_value(json_object_get(p, "class"));
			double bytes =
			    num(p, "bytes_read") + num(p, "bytes_written") + num(p, "mmap_bytes");

			if (!cls || bytes <= 0 ||
			    !strcmp(cls, "download") /* listed under downloads */ ||
			    (pass == 0 && strcmp(cls, "model") && strcmp(cls, "hf_cache")))
				continue;
			json_array_append_new(arr, json_pack("{s:O, s:s, s:f, s:f, s:b}", "path",
							     json_object_get(p, "path"), "class",
							     cls, "bytes", bytes, "span",
							     num(p, "last_ms") - num(p, "first_ms"),
							     "mapped", num(p, "mmap_bytes") > 0));
		}
	}
	n = top_n(arr, "bytes", top, 5);
	if (n)
		fprintf(out, "  heaviest files (bytes read/written/mapped, open to last use):\n");
	for (i = 0; i < n; i++) {
		fmt_size(a, sizeof(a), num(top[i], "bytes"));
		fmt_ms(b, sizeof(b), num(top[i], "span"));
		fprintf(out, "    %9s %-6s %9s  %-8s %s\n", a,
			json_is_true(json_object_get(top[i], "mapped")) ? "mapped" : "", b,
			esc(json_string_value(json_object_get(top[i], "class"))),
			esc(short_path(json_string_value(json_object_get(top[i], "path")), app_dir,
				       sp, sizeof(sp))));
	}
	json_decref(arr);

	arr = json_object_get(root, "missing_paths");
	n = top_n(arr, "attempts", top, 5);
	if (n)
		fprintf(out, "  missing paths (%zu, most tried first):\n", json_array_size(arr));
	for (i = 0; i < n; i++)
		fprintf(out, "    %6lld x  %-8s %s\n",
			(long long)json_integer_value(json_object_get(top[i], "attempts")),
			esc(json_string_value(json_object_get(top[i], "errno")) ?: ""),
			esc(json_string_value(json_object_get(top[i], "path"))));

	arr = json_object_get(root, "network");
	n = top_n(arr, "connect_ms", top, 5);
	if (n)
		fprintf(out, "  network peers:\n");
	for (i = 0; i < n; i++) {
		fmt_size(a, sizeof(a), num(top[i], "bytes_in"));
		fmt_size(b, sizeof(b), num(top[i], "bytes_out"));
		fmt_ms(c, sizeof(c), num(top[i], "connect_ms"));
		fprintf(out,
			"    %-24s %lld connects, %lld failed%s%s, %s in, %s out, %s connecting\n",
			esc(json_string_value(json_object_get(top[i], "peer"))),
			(long long)json_integer_value(json_object_get(top[i], "connects")),
			(long long)json_integer_value(json_object_get(top[i], "failures")),
			json_is_string(json_object_get(top[i], "errno")) ? " " : "",
			esc(json_string_value(json_object_get(top[i], "errno")) ?: ""), a, b, c);
	}

	arr = json_object_get(root, "downloads");
	if (json_array_size(arr)) {
		double total = 0;
		size_t done = 0;

		json_array_foreach (arr, i, p) {
			total += num(p, "bytes");
			done += json_is_true(json_object_get(p, "complete")) ||
				json_is_true(json_object_get(p, "completed"));
		}
		fmt_size(a, sizeof(a), total);
		fprintf(out, "  downloads (%zu, %s, %zu complete):\n", json_array_size(arr), a,
			done);
	}
	json_array_foreach (arr, i, p) {
		const char *name = json_string_value(json_object_get(p, "link"));
		double d = num(p, "last_ms") - num(p, "first_ms");

		if (!name)
			name = json_string_value(json_object_get(p, "final_path"));
		if (!name)
			name = json_string_value(json_object_get(p, "path"));
		fmt_size(a, sizeof(a), num(p, "bytes"));
		fmt_ms(b, sizeof(b), d);
		if (d > 0)
			snprintf(c, sizeof(c), "%.1fMB/s", num(p, "bytes") / 1e3 / d);
		else
			snprintf(c, sizeof(c), "-");
		fprintf(out, "    %9s in %9s %11s  %-10s %s\n", a, b, c,
			json_is_true(json_object_get(p, "complete")) ||
				json_is_true(json_object_get(p, "completed"))
			    ? "complete"
			    : "INCOMPLETE",
			esc(short_path(name ? name : "?", app_dir, sp, sizeof(sp))));
	}

	/* requests after ready */
	arr = json_object_get(root, "requests");
	if (json_array_size(arr)) {
		size_t nr = json_array_size(arr);
		double *lat = malloc(nr * sizeof(*lat)), faults = 0, major = 0;

		json_array_foreach (arr, i, p) {
			if (lat)
				lat[i] = num(p, "latency_ms");
			faults += num(p, "faults");
			major += num(p, "major_faults");
		}
		if (lat) {
			qsort(lat, nr, sizeof(*lat), dbl_cmp);
			fmt_ms(a, sizeof(a), pct(lat, nr, 50));
			fmt_ms(b, sizeof(b), pct(lat, nr, 90));
			fmt_ms(c, sizeof(c), pct(lat, nr, 99));
			fprintf(out,
				"  requests: %zu, latency p50 %s, p90 %s, p99 %s; per request %.0f "
				"faults "
				"(%.1f major)\n",
				nr, a, b, c, faults / nr, major / nr);
		}
		free(lat);
	}

	mem = json_object_get(root, "memory");
	fprintf(out, "  page faults: %lld (%lld major, %lld in model files)\n",
		(long long)json_integer_value(json_object_get(mem, "page_faults")),
		(long long)json_integer_value(json_object_get(mem, "major_faults")),
		(long long)json_integer_value(json_object_get(mem, "model_file_faults")));
	p = json_object_get(mem, "mlock");
	if (json_is_object(p)) {
		/* the shim's outcome (docs/mlock.md) */
		fmt_ms(a, sizeof(a), num(p, "dur_ms"));
		fprintf(out, "  mlock shim (%s, at %s): %s, %.1f MiB locked in %s%s%s\n",
			esc(json_string_value(json_object_get(p, "mode")) ?: "?"),
			esc(json_string_value(json_object_get(p, "trigger")) ?: "?"),
			esc(json_string_value(json_object_get(p, "status")) ?: "?"),
			num(p, "bytes_locked") / 1048576.0, a,
			json_string_value(json_object_get(p, "fix")) ? "; fix: " : "",
			esc(json_string_value(json_object_get(p, "fix")) ?: ""));
	}
	json_array_foreach (json_object_get(mem, "mlock_calls"), i, p) {
		fmt_ms(a, sizeof(a), num(p, "dur_ms"));
		fprintf(out, "  %s: %s in %s\n", esc(json_string_value(json_object_get(p, "call"))),
			json_integer_value(json_object_get(p, "result")) < 0
			    ? esc(json_string_value(json_object_get(p, "errno")) ?: "failed")
			    : "ok",
			a);
	}
	p = json_object_get(root, "sched");
	fmt_ms(a, sizeof(a), num(p, "io_wait_ms"));
	fmt_ms(b, sizeof(b), num(p, "sleep_ms"));
	fmt_ms(c, sizeof(c), num(p, "runqueue_ms"));
	fprintf(out, "  off-CPU: %s I/O wait, %s sleeping, %s waiting for a CPU\n", a, b, c);
	fprintf(out, "  events lost: %lld\n",
		(long long)json_integer_value(json_object_get(tr, "events_lost")));
}
