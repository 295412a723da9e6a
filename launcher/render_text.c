/* render_text: the end-of-start-up summary (systemd-analyze blame style),
 * `report --format text` and what `run` prints at ready. Reads the typed
 * views only; a missing number counts as 0 here (tl_or0). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hfcache.h"
#include "render_attrib.h"
#include "timeline.h"
#include "timeline_view.h"
#include "util.h"

static void fmt_ms(char *buf, size_t len, double ms)
{
	if (ms >= 1000)
		snprintf(buf, len, "%.3fs", ms / 1000);
	else
		snprintf(buf, len, "%.1fms", ms);
}

/* Compact ("84.5MiB"), for the summary's aligned columns. */
static void fmt_size(char *buf, size_t len, double b);
static const char *esc(const char *s);

/* The GPU summary (issue 18): CUDA init, device memory, copies to the
 * device; or why the service runs on CPU. Nothing when CUDA played no part. */
static void gpu_line(FILE *out, const struct tl_gpu *g)
{
	char a[32], b[32], c[32], d[32];

	if (!g->present)
		return;
	if (g->usable == 1) {
		fmt_ms(a, sizeof(a), g->init_ms);
		fmt_size(b, sizeof(b), tl_or0(g->memory_peak_bytes));
		fmt_size(c, sizeof(c), g->h2d_bytes);
		fmt_ms(d, sizeof(d), g->h2d_ms);
		fprintf(
		    out,
		    "  GPU: CUDA init %s, device memory peak %s, %s copied to the device in %s\n",
		    a, b, c, d);
	} else if (g->reason) {
		fprintf(out, "  GPU: %s, the service runs on CPU: %s\n",
			g->tried ? "CUDA failed" : "not used", esc(g->reason));
	}
}

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

/* Indices of the n largest of key[0..m) (stable for ties: glibc's qsort
 * is a merge sort, and the index breaks ties anyway). */
struct ranked {
	double key;
	size_t at;
};

static int by_desc_key(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;

	if (x->key != y->key)
		return x->key > y->key ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

static size_t top_n(const double *key, size_t m, size_t *out, size_t n)
{
	struct ranked *r = m ? malloc(m * sizeof(*r)) : NULL;
	size_t k = 0;

	if (!r)
		return 0;
	for (size_t i = 0; i < m; i++)
		r[i] = (struct ranked){key[i], i};
	qsort(r, m, sizeof(*r), by_desc_key);
	for (; k < n && k < m; k++)
		out[k] = r[k].at;
	free(r);
	return k;
}

/* a count for "%lld": 0 for none, in range for any loaded value */
static long long count_ll(double v) { return tl_has(v) && fabs(v) < 9e18 ? (long long)v : 0; }

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
	size_t n = app_dir ? strlen(app_dir) : 0, fl;
	const char *f = path ? hf_repo_folder(path, &fl) : NULL;
	char repo[PATH_MAX];

	if (!path)
		return "?";
	if (f && f[fl] == '/' && hf_repo_id(path, repo, sizeof(repo)) && strchr(repo, '/')) {
		const char *file = hf_snapshot_file(path);

		snprintf(buf, len, "%.*s %s", (int)strlen(repo), repo, file ? file : f + fl + 1);
		return buf;
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

/* the heaviest files: what the summary lists of one */
struct heavy {
	const char *path, *class;
	double bytes, span;
	bool mapped;
};

void timeline_print_summary(const struct timeline *tl, FILE *out)
{
	struct tl_view *v;
	const struct tl_memory *mem;
	const char *app_dir;
	char a[32], b[32], c[32], sp[512];
	size_t top[8], n, i, m;
	double ready, exec, *key;

	if (!tl || !out || !(v = tl_view_decode(tl)))
		return;
	m = v->n_phases > v->n_files ? v->n_phases : v->n_files;
	if (v->n_missing > m)
		m = v->n_missing;
	if (v->n_network > m)
		m = v->n_network;
	key = malloc((m ? m : 1) * sizeof(*key));
	if (!key) {
		tl_view_free(v);
		return;
	}
	mem = &v->memory;
	app_dir = v->config_app_dir;
	ready = timeline_mark_ms(tl, "ready");
	exec = timeline_mark_ms(tl, "exec");
	fmt_ms(a, sizeof(a), ready);
	fmt_ms(b, sizeof(b), exec);
	fprintf(out, "tts-launch: start-up: exec at %s, ready %s%s\n", exec >= 0 ? b : "?",
		ready >= 0 ? "at " : "", ready >= 0 ? a : "not reached");
	if (!v->tracing.enabled) {
		fprintf(out, "  tracing: off (%s)\n", esc(v->tracing.reason ?: "disabled"));
		goto done;
	}
	attribution_print(tl, out); /* where the time went (render_attrib.c) */

	/* blame: phases by duration, with when they started */
	for (i = 0; i < v->n_phases; i++)
		key[i] = tl_or0(v->phases[i].dur_ms);
	n = top_n(key, v->n_phases, top, 8);
	if (n)
		fprintf(out, "  phases (spans, overlapping; longest first):\n");
	for (i = 0; i < n; i++) {
		const struct tl_phase *p = &v->phases[top[i]];

		fmt_ms(a, sizeof(a), tl_or0(p->dur_ms));
		fmt_ms(b, sizeof(b), tl_or0(p->start_ms));
		fprintf(out, "    %10s  %-28s @%s\n", a, esc(p->name), b);
	}

	/* files by what they cost: bytes read, written and mapped; model and
	 * cache files only when there are any (a /sys file touched early and
	 * late is no cost) */
	{
		struct heavy *h = calloc(v->n_files ? v->n_files : 1, sizeof(*h));
		size_t nh = 0;

		for (int pass = 0; h && pass < 2 && !nh; pass++) {
			for (i = 0; i < v->n_files; i++) {
				const struct tl_file *f = &v->files[i];
				const char *cls = f->class;
				double bytes = tl_or0(f->bytes_read) + tl_or0(f->bytes_written) +
					       tl_or0(f->mmap_bytes);

				if (!cls || bytes <= 0 ||
				    !strcmp(cls, "download") /* listed under downloads */ ||
				    (pass == 0 && strcmp(cls, "model") && strcmp(cls, "hf_cache")))
					continue;
				h[nh++] = (struct heavy){f->path, cls, bytes,
							 tl_or0(f->last_ms) - tl_or0(f->first_ms),
							 tl_or0(f->mmap_bytes) > 0};
			}
		}
		for (i = 0; i < nh; i++)
			key[i] = h[i].bytes;
		n = top_n(key, nh, top, 5);
		if (n)
			fprintf(
			    out,
			    "  heaviest files (bytes read/written/mapped, open to last use):\n");
		for (i = 0; i < n; i++) {
			const struct heavy *f = &h[top[i]];

			fmt_size(a, sizeof(a), f->bytes);
			fmt_ms(b, sizeof(b), f->span);
			fprintf(out, "    %9s %-6s %9s  %-8s %s\n", a, f->mapped ? "mapped" : "", b,
				esc(f->class), esc(short_path(f->path, app_dir, sp, sizeof(sp))));
		}
		free(h);
	}

	for (i = 0; i < v->n_missing; i++)
		key[i] = tl_or0(v->missing[i].attempts);
	n = top_n(key, v->n_missing, top, 5);
	if (n)
		fprintf(out, "  missing paths (%zu, most tried first):\n", v->n_missing);
	for (i = 0; i < n; i++) {
		const struct tl_missing *mp = &v->missing[top[i]];
		/* a download's temp file or blob, looked for before it: by name */
		const struct tl_download *d = tl_view_download_at(v, mp->path, true);

		fprintf(out, "    %6lld x  %-8s %s%s\n", count_ll(mp->attempts),
			esc(mp->errno_name ?: ""), esc(d ? d->name : mp->path),
			d ? " (download, before it)" : "");
	}

	/* the peers the service contacted, by name; its own clients apart */
	{
		size_t clients = 0;
		double cin = 0, cout = 0;

		for (i = 0; i < v->n_network; i++) {
			const struct tl_peer *p = &v->network[i];

			/* a client ranks last: never listed among the peers */
			key[i] = p->inbound ? -1
					    : tl_or0(p->bytes_in) + tl_or0(p->bytes_out) +
						  tl_or0(p->connect_ms);
			if (p->inbound) {
				clients++;
				cin += tl_or0(p->bytes_in);
				cout += tl_or0(p->bytes_out);
			}
		}
		n = top_n(key, v->n_network, top, 6);
		while (n && v->network[top[n - 1]].inbound)
			n--;
		if (n)
			fprintf(out, "  network peers:\n");
		for (i = 0; i < n; i++) {
			const struct tl_peer *p = &v->network[top[i]];

			fmt_size(a, sizeof(a), tl_or0(p->bytes_in));
			fmt_size(b, sizeof(b), tl_or0(p->bytes_out));
			fmt_ms(c, sizeof(c), tl_or0(p->connect_ms));
			fprintf(out,
				"    %-30s %-10s %lld connects, %lld failed%s%s, %s in, %s out, %s "
				"connecting\n",
				esc(p->label), esc(p->role ?: ""), count_ll(p->connects),
				count_ll(p->failures), p->errno_name ? " " : "",
				esc(p->errno_name ?: ""), a, b, c);
		}
		if (clients) {
			fmt_size(a, sizeof(a), cin);
			fmt_size(b, sizeof(b), cout);
			fprintf(out, "  clients of the service: %zu peer%s, %s in, %s out\n",
				clients, clients == 1 ? "" : "s", a, b);
		}
	}

	if (v->n_downloads) {
		double total = 0;
		size_t done = 0;

		for (i = 0; i < v->n_downloads; i++) {
			total += tl_or0(v->downloads[i].bytes);
			done += v->downloads[i].complete || v->downloads[i].completed;
		}
		fmt_size(a, sizeof(a), total);
		fprintf(out, "  downloads (%zu, %s, %zu complete):\n", v->n_downloads, a, done);
	}
	for (i = 0; i < v->n_downloads; i++) {
		const struct tl_download *p = &v->downloads[i];
		const char *name = p->link;
		double d = tl_or0(p->last_ms) - tl_or0(p->first_ms);

		/* by the file it becomes; older timelines: by where it ended */
		if (!name)
			name = p->final_path;
		if (!name)
			name = p->path;
		fmt_size(a, sizeof(a), tl_or0(p->bytes));
		fmt_ms(b, sizeof(b), d);
		if (d > 0)
			snprintf(c, sizeof(c), "%.1fMB/s", tl_or0(p->bytes) / 1e3 / d);
		else
			snprintf(c, sizeof(c), "-");
		fprintf(out, "    %9s in %9s %11s  %-10s %s\n", a, b, c,
			p->complete || p->completed ? "complete" : "INCOMPLETE",
			p->name ? esc(p->name)
				: esc(short_path(name ? name : "?", app_dir, sp, sizeof(sp))));
	}
	/* copies (copy2, a migrated cache): not downloads, named the same way */
	for (i = 0; i < v->n_copies; i++) {
		const struct tl_copy *p = &v->copies[i];

		if (!i)
			fprintf(out, "  copies (%zu, not downloads):\n", v->n_copies);
		fmt_size(a, sizeof(a), tl_or0(p->bytes));
		fmt_ms(b, sizeof(b), tl_or0(p->last_ms) - tl_or0(p->first_ms));
		fprintf(out, "    %9s in %9s  %-22s %s\n", a, b,
			p->from_cache ? "from the old cache" : "copied", esc(p->label));
	}

	/* requests after ready */
	if (v->n_requests) {
		size_t nr = v->n_requests;
		double *lat = malloc(nr * sizeof(*lat)), faults = 0, major = 0;

		for (i = 0; i < nr; i++) {
			if (lat)
				lat[i] = tl_or0(v->requests[i].latency_ms);
			faults += tl_or0(v->requests[i].faults);
			major += tl_or0(v->requests[i].major_faults);
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

	fprintf(out, "  page faults: %lld (%lld major, %lld in model files)\n",
		count_ll(mem->page_faults), count_ll(mem->major_faults),
		count_ll(mem->model_file_faults));
	if (mem->has_mlock) {
		/* the shim's outcome (docs/mlock.md) */
		fmt_ms(a, sizeof(a), tl_or0(mem->mlock_dur_ms));
		if (mem->mlock_status && !strcmp(mem->mlock_status, "armed"))
			/* not yet triggered when this timeline was taken: no
			 * outcome to give (a later snapshot has it) */
			fprintf(out, "  mlock shim (%s, at %s): armed, not yet triggered%s%s\n",
				esc(mem->mlock_mode ?: "?"), esc(mem->mlock_trigger ?: "?"),
				mem->mlock_fix ? "; fix: " : "", esc(mem->mlock_fix ?: ""));
		else
			fprintf(out, "  mlock shim (%s, at %s): %s, %.1f MiB locked in %s%s%s\n",
				esc(mem->mlock_mode ?: "?"), esc(mem->mlock_trigger ?: "?"),
				esc(mem->mlock_status ?: "?"),
				tl_or0(mem->mlock_bytes_locked) / 1048576.0, a,
				mem->mlock_fix ? "; fix: " : "", esc(mem->mlock_fix ?: ""));
	}
	/* the traced mlock calls: with the shim, its outcome line above says
	 * it all; without, they are the service's own (a library locking a
	 * page or two), said as such, once */
	if (!mem->has_mlock && mem->n_mlock_calls) {
		size_t failed = 0;

		for (i = 0; i < mem->n_mlock_calls; i++)
			failed += mem->mlock_calls[i].failed;
		fprintf(
		    out,
		    "  the service's own mlock calls (not --mlock): %zu (first: %s), %zu failed\n",
		    mem->n_mlock_calls, esc(mem->mlock_calls[0].call ?: "?"), failed);
	}
	fmt_ms(a, sizeof(a), tl_or0(v->sched.io_wait_ms));
	fmt_ms(b, sizeof(b), tl_or0(v->sched.sleep_ms));
	fmt_ms(c, sizeof(c), tl_or0(v->sched.runqueue_ms));
	fprintf(out, "  off-CPU: %s I/O wait, %s sleeping, %s waiting for a CPU\n", a, b, c);
	gpu_line(out, &v->gpu);
	fprintf(out, "  events lost: %lld\n", count_ll(v->tracing.events_lost));
done:
	free(key);
	tl_view_free(v);
}
