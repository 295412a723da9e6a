/* diagnose_download: the --check-download rules (docs/diagnose.md):
 * interrupted, slow and misplaced
 * downloads; and what a download is (diag_find_downloads, and the facts the
 * live display and the stall explanation share). Rows at the end; the engine
 * is diagnose.c. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose_rules.h"
#include "hfcache.h"
#include "util.h"

/* Thresholds (docs/diagnose.md explains each). */
#define SLOW_MIN_MS   2000.0
#define SLOW_RATE_BPS (1024.0 * 1024.0)

/* ---- downloads in flight: shared with progress.c and stall.c ---- */

bool diagnose_download_done(const json_t *root, const char *path)
{
	const json_t *r;
	size_t i;

	json_array_foreach (json_object_get(root, "renames"), i, r)
		if (jstr(r, "old") && !strcmp(jstr(r, "old"), path) && jnum(r, "result") == 0)
			return true;
	return false;
}

int diagnose_downloads_in_flight(const json_t *root, const json_t **last)
{
	const json_t *f;
	size_t i;
	int n = 0;

	*last = NULL;
	json_array_foreach (json_object_get(root, "files"), i, f) {
		const char *path = jstr(f, "path");

		if (!path || strncmp(path, "/", 1) || !str_ends_with(path, ".incomplete") ||
		    jnum(f, "opens") <= 0 || diagnose_download_done(root, path))
			continue;
		n++;
		if (!*last || jnum(f, "first_ms") > jnum(*last, "first_ms"))
			*last = f;
	}
	return n;
}

/* ---- what a download is, for the rules ---- */

/* The downloads: each blobs/ETAG.incomplete opened, with the bytes written
 * to its inode whichever name the trace gave them (the .incomplete path,
 * the blob it was renamed to, or "[fd] NAME" for writes seen only by inode),
 * plus any other file written inside a models--* folder. */
void diag_find_downloads(struct diag_ctx *c)
{
	json_t *files = json_object_get(c->root, "files"), *f, *g, *by_name = json_object();
	size_t i, j;

	/* every file by its name (the dentry's for "[fd] NAME"), 16 to 255
	 * bytes: a download's other names are then found by looking up each
	 * prefix of its base name, not by a scan of all files per download */
	json_array_foreach (files, i, f) {
		const char *q = jstr(f, "path"), *name;
		json_t *l;

		if (!q || !by_name)
			continue;
		name = !strncmp(q, "[fd] ", 5) ? q + 5 : base_name(q);
		if (strlen(name) < 16 || strlen(name) > 255)
			continue;
		l = json_object_get(by_name, name);
		if (!l)
			json_object_set_new(by_name, name, l = json_array());
		json_array_append(l, f);
	}
	c->dls = json_array();
	json_array_foreach (files, i, f) {
		const char *path = jstr(f, "path"), *b;
		double bytes, last;
		char abs[PATH_MAX];
		size_t bl;

		if (!path || !strncmp(path, "[fd] ", 5) || !str_ends_with(path, ".incomplete"))
			continue;
		b = base_name(path);
		bl = strlen(b);
		bytes = jnum(f, "bytes_written");
		last = jnum(f, "last_ms");
		/* dentry names are cut at TRACE_NAME_MAX: a prefix will do */
		for (size_t l = 16; l <= bl && l <= 255; l++) {
			json_array_foreach (json_object_getn(by_name, b, l), j, g) {
				if (g == f)
					continue;
				bytes += jnum(g, "bytes_written");
				if (jnum(g, "last_ms") > last)
					last = jnum(g, "last_ms");
			}
		}
		path_resolve(c->app_dir, path, abs, sizeof(abs));
		json_array_append_new(c->dls,
				      json_pack("{s:s, s:f, s:f, s:f}", "path", abs, "bytes", bytes,
						"first_ms", jnum(f, "first_ms"), "last_ms", last));
	}
	json_array_foreach (files, i, f) {
		const char *path = jstr(f, "path");
		char abs[PATH_MAX];

		if (!path || !strncmp(path, "[fd] ", 5) || str_ends_with(path, ".incomplete") ||
		    !hf_repo_folder(path, NULL) || hf_cache_meta(path) ||
		    jnum(f, "bytes_written") <= 0)
			continue;
		path_resolve(c->app_dir, path, abs, sizeof(abs));
		json_array_append_new(c->dls, json_pack("{s:s, s:f, s:f, s:f}", "path", abs,
							"bytes", jnum(f, "bytes_written"),
							"first_ms", jnum(f, "first_ms"), "last_ms",
							jnum(f, "last_ms")));
	}
	json_decref(by_name);
}

static void cache_root(const char *abs, char *out, size_t len)
{
	snprintf(out, len, "%.*s", (int)hf_cache_root_len(abs), abs);
}

static void rule_wrong_cache(struct diag_ctx *c)
{
	json_t *roots, *f, *g;
	const char *root;
	size_t i;

	if (!c->n_caches)
		return;
	roots = json_object();
	json_array_foreach (c->dls, i, f) {
		char abs[PATH_MAX], r[PATH_MAX];
		bool ok = false;

		snprintf(abs, sizeof(abs), "%s", jstr(f, "path"));
		for (int k = 0; k < c->n_caches; k++)
			ok |= path_under(abs, c->caches[k]);
		if (ok)
			continue;
		cache_root(abs, r, sizeof(r));
		g = json_object_get(roots, r);
		if (!g) {
			g = json_pack("{s:s, s:[], s:f}", "written_to", r, "files", "bytes", 0.0);
			json_object_set_new(roots, r, g);
		}
		json_array_append_new(json_object_get(g, "files"), json_string(abs));
		json_object_set_new(g, "bytes", json_real(jnum(g, "bytes") + jnum(f, "bytes")));
	}
	json_object_foreach (roots, root, g) {
		char b[32], fix[3 * PATH_MAX + 512];
		const char *want = c->caches[0];

		fmt_bytes(b, sizeof(b), jnum(g, "bytes"));
		snprintf(fix, sizeof(fix),
			 "the cache was chosen after huggingface_hub read its settings (IndexTTS2 "
			 "sets HF_HUB_CACHE too late, index-tts#690): set it in the service's "
			 "environment instead, [env] HF_HUB_CACHE = %s in tts-launch.ini (or --set "
			 "env.HF_HUB_CACHE=%s), and move what was downloaded: mv %s/" HF_REPO_PREFIX
			 "* %s/",
			 want, want, root, want);
		json_object_set_new(g, "configured_cache", json_string(want));
		diag_add(
		    c, DIAG_WARNING, "models written outside the configured cache", json_incref(g),
		    -1, fix,
		    "%zu file%s (%s) downloaded into %s, but the configured cache is %s: every "
		    "start "
		    "from another environment downloads them again",
		    json_array_size(json_object_get(g, "files")),
		    json_array_size(json_object_get(g, "files")) == 1 ? "" : "s", b, root, want);
	}
	json_decref(roots);
}

/* Start times of the connects to a hub (any port but 53), sorted: how many
 * fall in a window is then two binary searches. */
static double *hub_connect_starts(struct diag_ctx *c, size_t *n)
{
	json_t *arr = json_object_get(c->root, "connects"), *e;
	double *v = calloc(json_array_size(arr) + 1, sizeof(*v));
	size_t i;

	*n = 0;
	json_array_foreach (arr, i, e) {
		int port = (int)json_integer_value(json_object_get(e, "port"));

		if (v && port && port != 53)
			v[(*n)++] = jnum(e, "start_ms");
	}
	if (v)
		qsort(v, *n, sizeof(*v), diag_cmp_double);
	return v;
}

/* First index in sorted v[0..n) whose value is >= x (after: > x). */
static size_t bound(const double *v, size_t n, double x, bool after)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (after ? v[mid] <= x : v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int hub_connects_between(const double *v, size_t n, double a, double b)
{
	return v && b >= a ? (int)(bound(v, n, b, true) - bound(v, n, a, false)) : 0;
}

/* What diagnose_record_cache_fs saw on disk when the timeline was written:
 * the *.incomplete files still there under each cache ({path: size}), and
 * whether abs lies under a cache where that was recorded at all. It writes
 * at most HF_MAX_CACHE_DIRS entries: more (a hand-made timeline) are not
 * looked at, so the look-up per file stays constant. */
static json_t *incomplete_recorded(const struct diag_ctx *c)
{
	json_t *idx = json_object(), *e, *g;
	size_t i, j;

	json_array_foreach (json_object_get(c->root, "cache_fs"), i, e)
		json_array_foreach (i < HF_MAX_CACHE_DIRS ? json_object_get(e, "incomplete") : NULL,
				    j, g)
			if (jstr(g, "path") && idx)
				json_object_set(idx, jstr(g, "path"),
						json_object_get(g, "size") ?: json_null());
	return idx;
}

static bool recorded_under(const struct diag_ctx *c, const char *abs)
{
	json_t *e;
	size_t i;

	json_array_foreach (json_object_get(c->root, "cache_fs"), i, e)
		if (i < HF_MAX_CACHE_DIRS && jstr(e, "dir") &&
		    json_is_array(json_object_get(e, "incomplete")) &&
		    path_under(abs, jstr(e, "dir")))
			return true;
	return false;
}

static void rule_interrupted(struct diag_ctx *c)
{
	/* indexes built once: lookups per file stay O(log n) on any input */
	json_t *f, *by_path = json_index(json_object_get(c->root, "downloads"), "path", false);
	json_t *dls_by_path = json_index(c->dls, "path", true);
	json_t *on_disk_idx = incomplete_recorded(c);
	size_t i, n_hub;
	double *hub = hub_connect_starts(c, &n_hub);

	json_array_foreach (json_object_get(c->root, "files"), i, f) {
		const char *path = jstr(f, "path");
		char abs[PATH_MAX], a[32];
		double on_disk = -1, written = jnum(f, "bytes_written");
		json_t *d, *size;
		bool left;

		if (!path || !str_ends_with(path, ".incomplete"))
			continue;
		path_resolve(c->app_dir, path, abs, sizeof(abs));
		/* recorded answers only, so that diagnose on a saved timeline says
		 * the same anywhere and later: the rename that completes a download
		 * (downloads[].complete, from the trace), else whether the file was
		 * on disk when the timeline was written (cache_fs[].incomplete),
		 * else the tracer's downloads[].completed */
		d = json_object_get(by_path, path);
		size = json_object_get(on_disk_idx, abs);
		if (d && json_is_boolean(json_object_get(d, "complete")))
			left = json_is_false(json_object_get(d, "complete"));
		else if (recorded_under(c, abs))
			left = size != NULL;
		else
			left = d && json_is_false(json_object_get(d, "completed"));
		if (!left)
			continue;
		if (json_is_number(size))
			on_disk = json_number_value(size); /* evidence: the size when written */
		if (json_object_get(dls_by_path, abs))
			written = jnum(json_object_get(dls_by_path, abs), "bytes");
		fmt_bytes(a, sizeof(a), written);
		diag_add(
		    c, c->failed ? DIAG_ERROR : DIAG_WARNING, "interrupted download left behind",
		    json_pack("{s:s, s:f, s:o, s:f, s:f, s:i}", "path", abs, "bytes_written",
			      written, "size_on_disk",
			      on_disk >= 0 ? json_real(on_disk) : json_null(), "first_ms",
			      jnum(f, "first_ms"), "last_ms", jnum(f, "last_ms"), "connects",
			      hub_connects_between(hub, n_hub, jnum(f, "first_ms"),
						   jnum(f, "last_ms") + 1)),
		    -1,
		    "start again: the download resumes from the .incomplete file (HTTP Range); if "
		    "it "
		    "keeps breaking, the connection to the hub is cut mid-stream (proxy, VPN, "
		    "unstable "
		    "link): raise HF_HUB_DOWNLOAD_TIMEOUT or set HF_ENDPOINT to a mirror; delete "
		    "the "
		    "file to start that download over",
		    "%s: %s written this run, never completed", abs, a);
	}
	json_decref(by_path);
	json_decref(dls_by_path);
	json_decref(on_disk_idx);
	free(hub);
}

static void rule_slow_download(struct diag_ctx *c)
{
	json_t *files = json_array(), *f;
	double bytes = 0, a = -1, b = -1;
	size_t i;
	char rate[32], total[32], msg_files[1024] = "";

	json_array_foreach (c->dls, i, f) {
		double w = jnum(f, "bytes"), dur = jnum(f, "last_ms") - jnum(f, "first_ms");
		char abs[PATH_MAX];

		if (w <= 0 || dur < SLOW_MIN_MS || w / (dur / 1000) >= SLOW_RATE_BPS)
			continue;
		snprintf(abs, sizeof(abs), "%s", jstr(f, "path"));
		json_array_append_new(files, json_pack("{s:s, s:f, s:f, s:f}", "path", abs, "bytes",
						       w, "seconds", diag_round3(dur / 1000),
						       "rate_bps", diag_round3(w / (dur / 1000))));
		bytes += w;
		if (a < 0 || jnum(f, "first_ms") < a)
			a = jnum(f, "first_ms");
		if (jnum(f, "last_ms") > b)
			b = jnum(f, "last_ms");
		if (strlen(msg_files) < 600) {
			char one[64];

			fmt_bytes(one, sizeof(one), w / (dur / 1000));
			snprintf(msg_files + strlen(msg_files),
				 sizeof(msg_files) - strlen(msg_files), "%s%.80s at %s/s",
				 *msg_files ? ", " : "", base_name(abs), one);
		}
	}
	if (!json_array_size(files)) {
		json_decref(files);
		return;
	}
	fmt_bytes(rate, sizeof(rate), bytes / ((b - a) / 1000));
	fmt_bytes(total, sizeof(total), bytes);
	diag_add(
	    c, DIAG_WARNING, "slow model download",
	    json_pack("{s:o, s:f, s:f, s:f, s:s?, s:n}", "files", files, "bytes", bytes, "seconds",
		      diag_round3((b - a) / 1000), "rate_bps",
		      diag_round3(bytes / ((b - a) / 1000)), "endpoint", c->endpoint, "time_left"),
	    (b - a) / 1000,
	    "the hub delivers slowly: set HF_ENDPOINT to a closer mirror ([env] HF_ENDPOINT = "
	    "https://hf-mirror.com, or a local proxy), or download the models once ahead of time "
	    "into the cache and start with HF_HUB_OFFLINE=1",
	    "%s in %.1f s (%s/s) from %s: %s; time left unknown (the trace does not see the "
	    "expected size)",
	    total, (b - a) / 1000, rate, c->endpoint ? c->endpoint : "the hub", msg_files);
}

const struct diag_rule diag_download_rules[] = {
    {"download-interrupted", rule_interrupted},
    {"download-slow", rule_slow_download},
    {"wrong-cache", rule_wrong_cache},
    {NULL, NULL},
};
