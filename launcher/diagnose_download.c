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
#define SLOW_MIN_MS	2000.0
#define SLOW_RATE_BPS	(1024.0 * 1024.0)
#define DROP_MIN_GAP_MS 500.0
#define LOCK_WAIT_MS	1000.0

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

		/* a download's temp file, whichever client writes it (the class
		 * timeline_files gives it), or an older timeline's *.incomplete */
		if (!path || strncmp(path, "/", 1) ||
		    !(str_ends_with(path, ".incomplete") ||
		      (jstr(f, "class") && !strcmp(jstr(f, "class"), "download"))) ||
		    jnum(f, "opens") <= 0 || diagnose_download_done(root, path))
			continue;
		n++;
		if (!*last || jnum(f, "first_ms") > jnum(*last, "first_ms"))
			*last = f;
	}
	return n;
}

/* ---- what a download is, for the rules ---- */

/* The download whose final path is abs, or NULL */
static const json_t *dl_by_final(const struct diag_ctx *c, const char *abs)
{
	const json_t *d;
	size_t i;

	json_array_foreach (c->dls, i, d)
		if (jstr(d, "final") && !strcmp(jstr(d, "final"), abs))
			return d;
	return NULL;
}

/* The downloads. A timeline that names them (downloads[] with a writer:
 * every client's temp file, its final path and name, the distinct bytes)
 * gives them as they are; an older one: each blobs/ETAG.incomplete opened,
 * with the bytes written to its inode whichever name the trace gave them
 * (the .incomplete path, the blob it was renamed to, or "[fd] NAME" for
 * writes seen only by inode). Either way, plus any other file written
 * inside a models--* folder. */
void diag_find_downloads(struct diag_ctx *c)
{
	json_t *files = json_object_get(c->root, "files"), *f, *g, *by_name = json_object();
	json_t *named = json_object(); /* temp paths the downloads list gave */
	size_t i, j;

	c->dls = json_array();
	json_array_foreach (json_object_get(c->root, "downloads"), i, f) {
		const char *path = jstr(f, "path"), *fin = jstr(f, "final_path");
		char abs[PATH_MAX], fabs[PATH_MAX];

		if (!path || !jstr(f, "writer") || !strncmp(path, "[fd] ", 5))
			continue;
		path_resolve(c->app_dir, path, abs, sizeof(abs));
		if (fin)
			path_resolve(c->app_dir, fin, fabs, sizeof(fabs));
		json_object_set_new(named, path, json_true());
		json_array_append_new(
		    c->dls,
		    json_pack("{s:s, s:f, s:f, s:f, s:s?, s:s?, s:s, s:b, s:f, s:f}", "path", abs,
			      "bytes", jnum(f, "bytes"), "first_ms", jnum(f, "first_ms"), "last_ms",
			      jnum(f, "last_ms"), "final", fin ? fabs : NULL, "name",
			      jstr(f, "name"), "writer", jstr(f, "writer"), "complete",
			      json_is_true(json_object_get(f, "complete")), "threads",
			      jnum(f, "threads"), "expected_size", jnum(f, "expected_size")));
	}
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
	json_array_foreach (files, i, f) {
		const char *path = jstr(f, "path"), *b;
		double bytes, last;
		char abs[PATH_MAX];
		size_t bl;

		if (!path || !strncmp(path, "[fd] ", 5) || !str_ends_with(path, ".incomplete") ||
		    json_object_get(named, path))
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
		    jnum(f, "bytes_written") <= 0 || json_object_get(named, path))
			continue;
		/* the blob a named download was renamed to is that download */
		path_resolve(c->app_dir, path, abs, sizeof(abs));
		if (dl_by_final(c, abs))
			continue;
		json_array_append_new(c->dls, json_pack("{s:s, s:f, s:f, s:f}", "path", abs,
							"bytes", jnum(f, "bytes_written"),
							"first_ms", jnum(f, "first_ms"), "last_ms",
							jnum(f, "last_ms")));
	}
	json_decref(by_name);
	json_decref(named);
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

		/* local_dir, ModelScope and the mirror write where they were told
		 * (IndexTTS2's flat hf_cache/ layout): deliberate, not a cache */
		if (jstr(f, "writer") && strcmp(jstr(f, "writer"), "hub_cache"))
			continue;
		snprintf(abs, sizeof(abs), "%s",
			 jstr(f, "final") ? jstr(f, "final") : jstr(f, "path"));
		/* only a hub cache's layout (models--ORG--NAME) can be moved as one */
		if (!hf_repo_folder(abs, NULL))
			continue;
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

/* The CAS peer (network[].role "cas") the service sent the most to, when
 * Xet is not switched off ([env] HF_HUB_DISABLE_XET): a download of the hub
 * writers with no byte written was a Xet transfer waiting on it. */
static const json_t *xet_cas_peer(const struct diag_ctx *c)
{
	const json_t *vars = json_object_get(
	    json_object_get(json_object_get(json_object_get(c->root, "launcher"), "config"), "env"),
	    "vars");
	const char *off = jstr(vars, "HF_HUB_DISABLE_XET");
	const json_t *n, *best = NULL;
	size_t i;

	if (off && strcmp(off, "0") && strcasecmp(off, "false"))
		return NULL;
	json_array_foreach (json_object_get(c->root, "network"), i, n)
		if (jstr(n, "role") && !strcmp(jstr(n, "role"), "cas") &&
		    jnum(n, "bytes_out") > 0 &&
		    (!best || jnum(n, "bytes_out") > jnum(best, "bytes_out")))
			best = n;
	return best;
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
		const json_t *cas;
		const char *writer, *fix, *werr;
		char host[300], what[400];
		bool left, xet, hubw;

		if (!path)
			continue;
		d = json_object_get(by_path, path);
		if (!str_ends_with(path, ".incomplete") && !(d && jstr(d, "writer")))
			continue;
		path_resolve(c->app_dir, path, abs, sizeof(abs));
		/* recorded answers only, so that diagnose on a saved timeline says
		 * the same anywhere and later: the rename that completes a download
		 * (downloads[].complete, from the trace), else whether the file was
		 * on disk when the timeline was written (cache_fs[].incomplete),
		 * else the tracer's downloads[].completed */
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
		/* Xet (written from several threads) starts over; huggingface_hub's
		 * plain HTTP and ModelScope resume with a Range request. Nothing
		 * written: no byte arrived (a Xet transfer whose CAS failed or
		 * hung before the first chunk; a ModelScope or mirror error) */
		writer = d ? jstr(d, "writer") : NULL;
		hubw = !writer || !strcmp(writer, "local_dir") || !strcmp(writer, "hub_cache");
		cas = written <= 0 && hubw ? xet_cas_peer(c) : NULL;
		xet = (d && jnum(d, "threads") > 1) || cas;
		if (cas) {
			snprintf(host, sizeof(host), "%s:%lld",
				 jstr(cas, "host") ? jstr(cas, "host") : jstr(cas, "peer"),
				 (long long)jnum(cas, "port"));
			if (!jstr(cas, "host") || jnum(cas, "port") <= 0)
				snprintf(host, sizeof(host), "%s", jstr(cas, "peer") ?: "?");
		}
		werr = jstr(f, "write_errno");
		if (werr)
			snprintf(what, sizeof(what),
				 "%s written this run, then a write failed (%s): never completed",
				 a, werr);
		else if (written > 0)
			snprintf(what, sizeof(what), "%s written this run, never completed", a);
		else if (cas)
			snprintf(what, sizeof(what),
				 "no byte of it arrived: its Xet transfer from %s failed or hung "
				 "before the first chunk",
				 host);
		else
			snprintf(what, sizeof(what), "no byte of it arrived%s",
				 writer && !strcmp(writer, "modelscope") ? " from ModelScope"
				 : writer && !strcmp(writer, "mirror")	 ? " from the mirror"
									 : "");
		fix =
		    werr ? "the file could not be written (the cache-write-refused finding says "
			   "where and why): once it can, start again; the download resumes from "
			   "the partial file (HTTP Range), or delete it to start over"
		    : cas
			? "the CAS answered with errors or not at all (xet-core retries 5xx with "
			  "back-off for minutes and has no read timeout; the service's last lines "
			  "say which): start again later, or set HF_HUB_DISABLE_XET=1 ([env] "
			  "HF_HUB_DISABLE_XET = 1) to download over plain HTTP, which times out "
			  "and resumes"
		    : xet ? "start again: Xet does not resume a partial file, it fetches it anew; "
			    "if it keeps breaking, the connection to the CAS is cut mid-stream "
			    "(proxy, VPN, unstable link): HF_HUB_DISABLE_XET=1 makes "
			    "huggingface_hub use one resumable HTTP download instead"
		    : !hubw
			? "see the service's last lines for the server's error; start again: "
			  "ModelScope resumes from ._____temp/ (HTTP Range); USE_MODELSCOPE=false "
			  "downloads from huggingface.co instead"
			: "start again: the download resumes from the partial file (HTTP Range); "
			  "if it keeps breaking, the connection is cut mid-stream (proxy, VPN, "
			  "unstable link; with urllib3 2.x huggingface_hub does not retry a "
			  "ChunkedEncodingError): raise HF_HUB_DOWNLOAD_TIMEOUT or set "
			  "HF_ENDPOINT to a mirror; delete the partial file to start that "
			  "download over";
		diag_add(c, c->failed ? DIAG_ERROR : DIAG_WARNING,
			 "interrupted download left behind",
			 json_pack("{s:s, s:s?, s:s?, s:f, s:o, s:f, s:f, s:i, s:b, s:s?}", "path",
				   abs, "name", d ? jstr(d, "name") : NULL, "writer", writer,
				   "bytes_written", written, "size_on_disk",
				   on_disk >= 0 ? json_real(on_disk) : json_null(), "first_ms",
				   jnum(f, "first_ms"), "last_ms", jnum(f, "last_ms"), "connects",
				   hub_connects_between(hub, n_hub, jnum(f, "first_ms"),
							jnum(f, "last_ms") + 1),
				   "xet", xet, "cas_host", cas ? jstr(cas, "host") : NULL),
			 -1, fix, "%s: %s (%s)", d && jstr(d, "name") ? jstr(d, "name") : abs, what,
			 abs);
	}
	json_decref(by_path);
	json_decref(dls_by_path);
	json_decref(on_disk_idx);
	free(hub);
}

static void rule_slow_download(struct diag_ctx *c)
{
	json_t *files = json_array(), *f;
	double bytes = 0, a = -1, b = -1, left = 0, r;
	size_t i;
	int unknown = 0;
	char rate[32], total[32], msg_files[1024] = "", tail[128];
	json_t *by_path = json_index(json_object_get(c->root, "downloads"), "path", false);
	/* every slow file ModelScope's (downloads[].writer): from ModelScope,
	 * not from the hub HF_ENDPOINT names */
	bool ms = true;

	json_array_foreach (c->dls, i, f) {
		double w = jnum(f, "bytes"), dur = jnum(f, "last_ms") - jnum(f, "first_ms");
		char abs[PATH_MAX];
		const char *wr;

		if (w <= 0 || dur < SLOW_MIN_MS || w / (dur / 1000) >= SLOW_RATE_BPS)
			continue;
		wr = jstr(json_object_get(by_path, jstr(f, "path")), "writer");
		if (!wr || strcmp(wr, "modelscope"))
			ms = false;
		snprintf(abs, sizeof(abs), "%s", jstr(f, "path"));
		json_array_append_new(files, json_pack("{s:s, s:s?, s:f, s:f, s:f}", "path", abs,
						       "name", jstr(f, "name"), "bytes", w,
						       "seconds", diag_round3(dur / 1000),
						       "rate_bps", diag_round3(w / (dur / 1000))));
		bytes += w;
		/* what is still to come, where the size is known (downloads[]) */
		if (!json_is_true(json_object_get(f, "complete"))) {
			if (jnum(f, "expected_size") > w)
				left += jnum(f, "expected_size") - w;
			else
				unknown++;
		}
		if (a < 0 || jnum(f, "first_ms") < a)
			a = jnum(f, "first_ms");
		if (jnum(f, "last_ms") > b)
			b = jnum(f, "last_ms");
		if (strlen(msg_files) < 600) {
			char one[64];

			fmt_bytes(one, sizeof(one), w / (dur / 1000));
			snprintf(msg_files + strlen(msg_files),
				 sizeof(msg_files) - strlen(msg_files), "%s%.80s at %s/s",
				 *msg_files ? ", " : "",
				 jstr(f, "name") ? jstr(f, "name") : base_name(abs), one);
		}
	}
	json_decref(by_path);
	if (!json_array_size(files)) {
		json_decref(files);
		return;
	}
	r = bytes / ((b - a) / 1000);
	fmt_bytes(rate, sizeof(rate), r);
	fmt_bytes(total, sizeof(total), bytes);
	if (unknown)
		snprintf(tail, sizeof(tail), "time left unknown (no expected size)");
	else if (left > 0)
		snprintf(tail, sizeof(tail),
			 "about %.0f s left at that rate (from the expected sizes)", left / r);
	else
		snprintf(tail, sizeof(tail), "all of it arrived");
	diag_add(
	    c, DIAG_WARNING, "slow model download",
	    json_pack("{s:o, s:f, s:f, s:f, s:s?, s:o}", "files", files, "bytes", bytes, "seconds",
		      diag_round3((b - a) / 1000), "rate_bps", diag_round3(r), "endpoint",
		      ms ? "ModelScope" : c->endpoint, "time_left",
		      unknown ? json_null() : json_real(diag_round3(left / r))),
	    (b - a) / 1000,
	    ms ? "ModelScope delivers slowly: USE_MODELSCOPE=false ([env] USE_MODELSCOPE = false) "
		 "downloads from huggingface.co when it is reachable; or download the models once "
		 "ahead of time into model_dir"
	       : "the hub delivers slowly: set HF_ENDPOINT to a closer mirror ([env] HF_ENDPOINT = "
		 "https://hf-mirror.com, or a local proxy), or download the models once ahead of "
		 "time into the cache and start with HF_HUB_OFFLINE=1",
	    "%s in %.1f s (%s/s) from %s: %s; %s", total, (b - a) / 1000, rate,
	    ms		  ? "ModelScope"
	    : c->endpoint ? c->endpoint
			  : "the hub",
	    msg_files, tail);
}

/* Xet's chunk cache (the model's xet section, recorded when the timeline
 * was written): on tmpfs or a container's layer every byte of the transfer
 * is written twice, once to the download and once to RAM or the layer; a
 * full disk there fails the transfer's writes. */
static void rule_xet_cache(struct diag_ctx *c)
{
	json_t *x = json_object_get(c->root, "xet");
	const char *dir = jstr(x, "dir"), *err = jstr(x, "write_errno");
	char b[32], fix[2 * PATH_MAX + 512];

	if (!json_is_object(x) || !dir || jnum(x, "bytes_written") <= 0)
		return;
	fmt_bytes(b, sizeof(b), jnum(x, "bytes_written"));
	if (err && (!strcmp(err, "ENOSPC") || !strcmp(err, "EDQUOT"))) {
		snprintf(fix, sizeof(fix),
			 "free space where %s is, or move it to a disk with room: [env] "
			 "HF_XET_CACHE = /var/cache/indextts/xet in tts-launch.ini; a smaller "
			 "cache: HF_XET_CHUNK_CACHE_SIZE_BYTES (0 turns it off); or "
			 "HF_HUB_DISABLE_XET=1 (plain HTTP, no chunk cache)",
			 dir);
		diag_add(
		    c, c->failed ? DIAG_ERROR : DIAG_WARNING, "Xet chunk cache full",
		    json_pack("{s:s, s:f, s:f, s:s}", "dir", dir, "bytes_written",
			      jnum(x, "bytes_written"), "write_errors", jnum(x, "write_errors"),
			      "errno", err),
		    -1, fix, "%.0f write%s into Xet's cache %s failed with %s (%s written there)",
		    jnum(x, "write_errors"), jnum(x, "write_errors") == 1 ? "" : "s", dir, err, b);
		return;
	}
	if (!json_is_false(json_object_get(x, "persistent")))
		return;
	snprintf(fix, sizeof(fix),
		 "put Xet's cache on a disk: [env] HF_XET_CACHE = /var/cache/indextts/xet in "
		 "tts-launch.ini (HF_HOME moves it too), or turn the chunk cache off with "
		 "HF_XET_CHUNK_CACHE_SIZE_BYTES=0; %s is on %s",
		 dir, jstr(x, "fs_type") ?: "?");
	diag_add(c, DIAG_WARNING, "Xet chunk cache on a file system that is not kept",
		 json_pack("{s:s, s:O, s:O, s:f, s:f}", "dir", dir, "fs_type",
			   json_object_get(x, "fs_type"), "lost", json_object_get(x, "lost"),
			   "bytes_written", jnum(x, "bytes_written"), "files", jnum(x, "files")),
		 -1, fix,
		 "Xet wrote %s into its chunk cache %s on %s (%s): every byte downloaded is "
		 "written twice, and the cache is gone on the next start",
		 b, dir, jstr(x, "fs_type") ?: "?", jstr(x, "lost") ?: "not kept");
}

/* The configured model dir, absolute ("" when unset) */
static void model_dir_abs(const struct diag_ctx *c, char *out, size_t len)
{
	const char *md = jstr(
	    json_object_get(json_object_get(json_object_get(c->root, "launcher"), "config"), "app"),
	    "model_dir");

	out[0] = 0;
	if (md && *md)
		path_resolve(c->app_dir, md, out, len);
}

/* A local_dir download waiting on its lock (filelock 3.19 polls it:
 * LOCK_EX|LOCK_NB, 50 ms sleep, again) that another process holds: the
 * holder as the tracer found it (locks[].holder_pid). The hub cache's
 * .locks/ are diagnose_io's lock-wait. */
static void rule_download_lock(struct diag_ctx *c)
{
	json_t *l;
	size_t i;

	json_array_foreach (json_object_get(c->root, "locks"), i, l) {
		const char *path = jstr(l, "path"), *cmd = jstr(l, "holder_command");
		char fin[PATH_MAX], name[PATH_MAX], md[PATH_MAX] = "", who[160] = "another process";
		double ms = json_is_true(json_object_get(l, "waiting")) ? jnum(l, "waiting_ms")
									: jnum(l, "contended_ms");
		bool still = json_is_true(json_object_get(l, "waiting")) ||
			     json_is_null(json_object_get(l, "acquired_ms"));
		json_int_t pid = json_integer_value(json_object_get(l, "holder_pid"));

		/* one refused poll is no wait on another process: 8 snapshot
		 * workers of the service itself contend for a moment, and on a
		 * loaded machine the 50 ms sleep before the next poll can last
		 * seconds (contended_ms then measures the scheduler) */
		if (!path || !hf_local_dir_lock(path, fin, sizeof(fin)) || ms < LOCK_WAIT_MS ||
		    jnum(l, "failures") < 2)
			continue;
		model_dir_abs(c, md, sizeof(md));
		hf_download_name(fin, md, c->app_dir, name, sizeof(name));
		if (pid > 0)
			snprintf(who, sizeof(who), "pid %lld%s%.64s%s", (long long)pid,
				 cmd ? " (" : "", cmd ? cmd : "", cmd ? ")" : "");
		diag_add(
		    c, still && c->ready < 0 ? DIAG_ERROR : DIAG_WARNING,
		    "download waiting for another process's lock",
		    json_pack("{s:s, s:s, s:s, s:o, s:s?, s:f, s:f, s:b}", "lock", path, "name",
			      name, "file", fin, "holder_pid",
			      pid > 0 ? json_integer(pid) : json_null(), "holder_command", cmd,
			      "seconds", diag_round3(ms / 1000), "polls", jnum(l, "failures"),
			      "still_waiting", still),
		    ms / 1000,
		    "another process is downloading the same file into the same folder "
		    "(a second IndexTTS2 instance, a snapshot_download): let it finish, or stop "
		    "it; the lock file itself stays (filelock never removes it) and means "
		    "nothing once its holder is gone",
		    "%s: the start %s %.1f s for its download lock %s, held by %s", name,
		    still ? "was still waiting after" : "waited", ms / 1000, path, who);
	}
}

/* The local_dir metadata huggingface_hub keeps for a download's final name:
 * TEMP's folder (LOCAL/.cache/huggingface/download/SUB/) + NAME.metadata. */
static bool local_dir_metadata(const json_t *d, char *out, size_t len)
{
	const char *temp = jstr(d, "path"), *fin = jstr(d, "final_path"), *slash, *base;

	if (!temp || !fin || !jstr(d, "writer") || strcmp(jstr(d, "writer"), "local_dir"))
		return false;
	slash = strrchr(temp, '/');
	base = strrchr(fin, '/');
	if (!slash || !base)
		return false;
	return snprintf(out, len, "%.*s/%s.metadata", (int)(slash - temp), temp, base + 1) <
	       (int)len;
}

/* Complete local_dir downloads into a place that had the file before: its
 * metadata from an earlier download was read (huggingface_hub reads
 * NAME.metadata, then stats NAME: missing, so it downloads again), and the
 * final name was missing (ENOENT) when the service looked. A file deleted
 * since it was downloaded: a git pull of the IndexTTS2 checkout deleting
 * checkpoints/config.yaml (index-tts#701). A file there but outdated (a new
 * revision) is not missing: no finding. */
static json_t *downloaded_again(const struct diag_ctx *c, double *bytes)
{
	json_t *files = json_array(), *d;
	json_t *by_path = json_index(json_object_get(c->root, "files"), "path", false);
	json_t *missing = json_index(json_object_get(c->root, "missing_paths"), "path", false);
	size_t i;

	*bytes = 0;
	json_array_foreach (json_object_get(c->root, "downloads"), i, d) {
		char meta[PATH_MAX];
		const json_t *m, *gone;

		if (jstr(d, "also_in") || !json_is_true(json_object_get(d, "complete")) ||
		    !local_dir_metadata(d, meta, sizeof(meta)))
			continue;
		m = json_object_get(by_path, meta);
		gone = json_object_get(missing, jstr(d, "final_path"));
		if (jnum(m, "bytes_read") <= 0 || !gone || !jstr(gone, "errno") ||
		    strcmp(jstr(gone, "errno"), "ENOENT"))
			continue;
		*bytes += jnum(d, "bytes");
		json_array_append_new(files,
				      json_pack("{s:s?, s:s, s:s, s:f}", "name", jstr(d, "name"),
						"final", jstr(d, "final_path"), "metadata", meta,
						"bytes", jnum(d, "bytes")));
	}
	json_decref(by_path);
	json_decref(missing);
	return files;
}

/* Models downloaded twice (index-tts#701: the layout change and a deleted
 * config.yaml forced re-downloads), two ways:
 * - files a hub cache on this machine already had (downloads[].also_in:
 *   the same etag under models--ORG--NAME/blobs/, recorded when the
 *   timeline was written): IndexTTS2 (ee40fa7) migrates an old cache only
 *   from model_dir/hf_cache and HF_HUB_CACHE (default
 *   ~/.cache/huggingface/hub, not HF_HOME/hub), so an old cache elsewhere
 *   is downloaded again;
 * - files downloaded again into the same place after they were deleted
 *   (downloaded_again). */
static void rule_downloaded_twice(struct diag_ctx *c)
{
	json_t *files = json_array(), *d, *again;
	double bytes = 0;
	char first_cache[PATH_MAX] = "", b[32], fix[PATH_MAX + 600];
	size_t i;

	json_array_foreach (json_object_get(c->root, "downloads"), i, d) {
		const char *blob = jstr(d, "also_in");

		if (!blob || !json_is_true(json_object_get(d, "complete")))
			continue;
		if (!*first_cache)
			snprintf(first_cache, sizeof(first_cache), "%.*s",
				 (int)hf_cache_root_len(blob), blob);
		bytes += jnum(d, "bytes");
		json_array_append_new(files, json_pack("{s:s?, s:s, s:f}", "name", jstr(d, "name"),
						       "cached", blob, "bytes", jnum(d, "bytes")));
	}
	if (json_array_size(files)) {
		fmt_bytes(b, sizeof(b), bytes);
		snprintf(fix, sizeof(fix),
			 "IndexTTS2 copies an old cache only from model_dir/hf_cache or "
			 "HF_HUB_CACHE: start once with [env] HF_HUB_CACHE = %s so what is there "
			 "is copied, not downloaded; then that cache can go (rm -r %s/models--*) "
			 "to free the space",
			 first_cache, first_cache);
		diag_add(c, DIAG_WARNING, "models downloaded although a cache has them",
			 json_pack("{s:s, s:O, s:f, s:s}", "reason", "old_cache", "files", files,
				   "bytes", bytes, "cache", first_cache),
			 -1, fix,
			 "%zu file%s (%s) downloaded again although the hub cache %s has the same "
			 "file%s (first: %s)",
			 json_array_size(files), json_array_size(files) == 1 ? "" : "s", b,
			 first_cache, json_array_size(files) == 1 ? "" : "s",
			 jstr(json_array_get(files, 0), "name") ?: "?");
	}
	json_decref(files);
	again = downloaded_again(c, &bytes);
	if (!json_array_size(again)) {
		json_decref(again);
		return;
	}
	fmt_bytes(b, sizeof(b), bytes);
	diag_add(c, DIAG_WARNING, "models downloaded again after they were deleted",
		 json_pack("{s:s, s:O, s:f}", "reason", "deleted", "files", again, "bytes", bytes),
		 -1,
		 "keep downloaded files where they are: they are downloaded again whenever "
		 "they go. A `git pull` in the IndexTTS2 checkout deletes checkpoints/config.yaml "
		 "(index-tts#701): keep a copy outside the checkout, or put the models outside "
		 "it ([app] model_dir = /srv/indextts/checkpoints)",
		 "%zu file%s (%s) downloaded again into the same place: an earlier download's "
		 "metadata was there, the file was not (deleted since; first: %s)",
		 json_array_size(again), json_array_size(again) == 1 ? "" : "s", b,
		 jstr(json_array_get(again, 0), "name") ?: "?");
	json_decref(again);
}

const struct diag_rule diag_download_rules[] = {
    {"download-interrupted", rule_interrupted},
    {"download-slow", rule_slow_download},
    {"wrong-cache", rule_wrong_cache},
    {"xet-cache", rule_xet_cache},
    {"download-lock-wait", rule_download_lock},
    {"downloaded-twice", rule_downloaded_twice},
    {NULL, NULL},
};
