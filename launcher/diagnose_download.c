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
/* refused polls that make a wait without a holder seen (20: a second of
 * filelock's 50 ms polling) */
#define LOCK_WAIT_POLLS_UNSEEN 20

/* ---- what a download is, for the rules ---- */

/* The download whose final path is abs, or NULL */
static const struct diag_dl *dl_by_final(const struct diag_ctx *c, const char *abs)
{
	for (size_t i = 0; i < c->n_dls; i++)
		if (c->dls[i].final && !strcmp(c->dls[i].final, abs))
			return &c->dls[i];
	return NULL;
}

static bool fd_name(const char *path) { return !strncmp(path, "[fd] ", 5); }

/* downloads[] by temp path: those a timeline names (with a writer) */
static const char *named_key(size_t i, const void *arg)
{
	const struct tl_download *d = &((const struct tl_view *)arg)->downloads[i];

	return d->path && d->writer && !fd_name(d->path) ? d->path : NULL;
}

/* files[] by name (the dentry's for "[fd] NAME"), 16 to 255 bytes */
static const char *name_key(size_t i, const void *arg)
{
	const char *q = ((const struct tl_view *)arg)->files[i].path, *name;

	if (!q)
		return NULL;
	name = fd_name(q) ? q + 5 : base_name(q);
	return strlen(name) < 16 || strlen(name) > 255 ? NULL : name;
}

static bool dl_add(struct diag_ctx *c, size_t *cap, struct diag_dl d, const char *abs,
		   const char *fin)
{
	if (c->n_dls == *cap) {
		size_t n = *cap ? 2 * *cap : 16;
		struct diag_dl *g = realloc(c->dls, n * sizeof(*g));

		if (!g)
			return false;
		c->dls = g;
		*cap = n;
	}
	d.path = strdup(abs);
	d.final = fin ? strdup(fin) : NULL;
	if (!d.path || (fin && !d.final)) {
		free(d.path);
		free(d.final);
		return false;
	}
	c->dls[c->n_dls++] = d;
	return true;
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
	const struct tl_view *v = c->view;
	struct diag_index named, by_name; /* temp paths the downloads list gave */
	size_t cap = 0;

	if (!diag_index_build(&named, v->n_downloads, named_key, v) ||
	    !diag_index_build(&by_name, v->n_files, name_key, v)) {
		diag_index_free(&named);
		return;
	}
	for (size_t i = 0; i < v->n_downloads; i++) {
		const struct tl_download *f = &v->downloads[i];
		char abs[PATH_MAX], fabs[PATH_MAX];

		if (!named_key(i, v))
			continue;
		path_resolve(c->app_dir, f->path, abs, sizeof(abs));
		if (f->final_path)
			path_resolve(c->app_dir, f->final_path, fabs, sizeof(fabs));
		dl_add(c, &cap,
		       (struct diag_dl){.bytes = tl_or0(f->bytes),
					.first_ms = tl_or0(f->first_ms),
					.last_ms = tl_or0(f->last_ms),
					.name = f->name,
					.writer = f->writer,
					.complete = f->complete,
					.threads = tl_or0(f->threads),
					/* Xet's highest offset so far is a lower
					 * bound, no total: unknown here */
					.expected_size =
					    f->expected_from &&
						    !strcmp(f->expected_from, "highest_offset")
						? 0
						: tl_or0(f->expected_size)},
		       abs, f->final_path ? fabs : NULL);
	}
	/* a download's other names are found by looking up each prefix of its
	 * base name in by_name, not by a scan of all files per download */
	for (size_t i = 0; i < v->n_files; i++) {
		const struct tl_file *f = &v->files[i];
		const char *b;
		double bytes, last;
		char abs[PATH_MAX];
		size_t bl;

		if (!f->path || fd_name(f->path) || !hf_hub_temp(f->path) ||
		    diag_index_find(&named, f->path, strlen(f->path), false) >= 0)
			continue;
		b = base_name(f->path);
		bl = strlen(b);
		bytes = tl_or0(f->bytes_written);
		last = tl_or0(f->last_ms);
		/* dentry names are cut at TRACE_NAME_MAX: a prefix will do */
		for (size_t l = 16; l <= bl && l <= 255; l++) {
			size_t lo, hi;

			diag_index_range(&by_name, b, l, &lo, &hi);
			for (; lo < hi; lo++) {
				const struct tl_file *g = &v->files[by_name.order[lo]];

				if (g == f)
					continue;
				bytes += tl_or0(g->bytes_written);
				if (tl_or0(g->last_ms) > last)
					last = tl_or0(g->last_ms);
			}
		}
		path_resolve(c->app_dir, f->path, abs, sizeof(abs));
		dl_add(c, &cap,
		       (struct diag_dl){
			   .bytes = bytes, .first_ms = tl_or0(f->first_ms), .last_ms = last},
		       abs, NULL);
	}
	for (size_t i = 0; i < v->n_files; i++) {
		const struct tl_file *f = &v->files[i];
		char abs[PATH_MAX];

		if (!f->path || fd_name(f->path) || hf_hub_temp(f->path) ||
		    !hf_repo_folder(f->path, NULL) || hf_cache_meta(f->path) ||
		    tl_or0(f->bytes_written) <= 0 ||
		    diag_index_find(&named, f->path, strlen(f->path), false) >= 0)
			continue;
		/* the blob a named download was renamed to is that download */
		path_resolve(c->app_dir, f->path, abs, sizeof(abs));
		if (dl_by_final(c, abs))
			continue;
		dl_add(c, &cap,
		       (struct diag_dl){.bytes = tl_or0(f->bytes_written),
					.first_ms = tl_or0(f->first_ms),
					.last_ms = tl_or0(f->last_ms)},
		       abs, NULL);
	}
	diag_index_free(&by_name);
	diag_index_free(&named);
}

void diag_free_downloads(struct diag_ctx *c)
{
	for (size_t i = 0; i < c->n_dls; i++) {
		free(c->dls[i].path);
		free(c->dls[i].final);
	}
	free(c->dls);
	c->dls = NULL;
	c->n_dls = 0;
}

static void cache_root(const char *abs, char *out, size_t len)
{
	snprintf(out, len, "%.*s", (int)hf_cache_root_len(abs), abs);
}

static void rule_wrong_cache(struct diag_ctx *c)
{
	json_t *roots, *g;
	const char *root;

	if (!c->n_caches)
		return;
	roots = json_object();
	for (size_t i = 0; i < c->n_dls; i++) {
		const struct diag_dl *f = &c->dls[i];
		char abs[PATH_MAX], r[PATH_MAX];
		bool ok = false;

		/* local_dir, ModelScope and the mirror write where they were told
		 * (IndexTTS2's flat hf_cache/ layout): deliberate, not a cache */
		if (f->writer && strcmp(f->writer, "hub_cache"))
			continue;
		snprintf(abs, sizeof(abs), "%s", f->final ? f->final : f->path);
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
		json_object_set_new(g, "bytes", json_real(jnum(g, "bytes") + f->bytes));
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
	const struct tl_view *w = c->view;
	double *v = calloc(w->n_connects + 1, sizeof(*v));

	*n = 0;
	for (size_t i = 0; i < w->n_connects; i++) {
		int port = tl_small(tl_or0(w->connects[i].port), 65535);

		if (v && port && port != 53)
			v[(*n)++] = tl_or0(w->connects[i].start_ms);
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

/* What the pipeline's cache_fs stage saw on disk when the timeline was
 * written: the *.incomplete files still there under each cache (their
 * index: on_disk_key over the first HF_MAX_CACHE_DIRS caches' lists, one
 * after the other), and whether abs lies under a cache where that was
 * recorded at all. It writes at most HF_MAX_CACHE_DIRS entries: more (a
 * hand-made timeline) are not looked at, so the look-up per file stays
 * constant. */
struct on_disk {
	const struct tl_on_disk **all;
	size_t n;
	struct diag_index ix;
};

static const char *on_disk_key(size_t i, const void *arg)
{
	return ((const struct on_disk *)arg)->all[i]->path;
}

static void incomplete_recorded(const struct diag_ctx *c, struct on_disk *d)
{
	const struct tl_view *v = c->view;
	size_t n = 0;

	memset(d, 0, sizeof(*d));
	for (size_t i = 0; i < v->n_cache_fs && i < HF_MAX_CACHE_DIRS; i++)
		n += v->cache_fs[i].n_incomplete;
	if (!(d->all = calloc(n + 1, sizeof(*d->all))))
		return;
	for (size_t i = 0; i < v->n_cache_fs && i < HF_MAX_CACHE_DIRS; i++)
		for (size_t j = 0; j < v->cache_fs[i].n_incomplete; j++)
			d->all[d->n++] = &v->cache_fs[i].incomplete[j];
	diag_index_build(&d->ix, d->n, on_disk_key, d);
}

/* The recorded temp file at abs (the last recorded), or NULL */
static const struct tl_on_disk *on_disk_at(const struct on_disk *d, const char *abs)
{
	long k = d->all ? diag_index_find(&d->ix, abs, strlen(abs), true) : -1;

	return k >= 0 ? d->all[k] : NULL;
}

static bool recorded_under(const struct diag_ctx *c, const char *abs)
{
	const struct tl_view *v = c->view;

	for (size_t i = 0; i < v->n_cache_fs && i < HF_MAX_CACHE_DIRS; i++)
		if (v->cache_fs[i].dir && v->cache_fs[i].has_incomplete &&
		    path_under(abs, v->cache_fs[i].dir))
			return true;
	return false;
}

/* The CAS peer (network[].role "cas") the service sent the most to, when
 * Xet is not switched off ([env] HF_HUB_DISABLE_XET): a download of the hub
 * writers with no byte written was a Xet transfer waiting on it. */
static const struct tl_peer *xet_cas_peer(const struct diag_ctx *c)
{
	const char *off = tl_view_env(c->view, "HF_HUB_DISABLE_XET");
	const struct tl_peer *best = NULL;

	if (off && strcmp(off, "0") && strcasecmp(off, "false"))
		return NULL;
	for (size_t i = 0; i < c->view->n_network; i++) {
		const struct tl_peer *n = &c->view->network[i];

		if (n->role && !strcmp(n->role, "cas") && tl_or0(n->bytes_out) > 0 &&
		    (!best || tl_or0(n->bytes_out) > tl_or0(best->bytes_out)))
			best = n;
	}
	return best;
}

/* downloads[] by temp path, all of them */
static const char *dl_path_key(size_t i, const void *arg)
{
	return ((const struct tl_view *)arg)->downloads[i].path;
}

/* c->dls by (absolute) path */
static const char *dls_key(size_t i, const void *arg)
{
	return ((const struct diag_ctx *)arg)->dls[i].path;
}

static void rule_interrupted(struct diag_ctx *c)
{
	/* indexes built once: lookups per file stay O(log n) on any input */
	const struct tl_view *v = c->view;
	struct diag_index by_path, dls_by_path;
	struct on_disk on_disk_idx;
	size_t n_hub;
	double *hub = hub_connect_starts(c, &n_hub);

	diag_index_build(&by_path, v->n_downloads, dl_path_key, v);
	diag_index_build(&dls_by_path, c->n_dls, dls_key, c);
	incomplete_recorded(c, &on_disk_idx);
	for (size_t i = 0; i < v->n_files; i++) {
		const struct tl_file *f = &v->files[i];
		const char *path = f->path;
		char abs[PATH_MAX], a[32];
		double on_disk = -1, written = tl_or0(f->bytes_written);
		const struct tl_download *d;
		const struct tl_on_disk *size;
		const struct tl_peer *cas;
		const char *writer, *fix, *werr;
		char host[300], what[400];
		bool left, xet, hubw;
		long k;

		if (!path)
			continue;
		k = diag_index_find(&by_path, path, strlen(path), false);
		d = k >= 0 ? &v->downloads[k] : NULL;
		if (!hf_hub_temp(path) && !(d && d->writer))
			continue;
		path_resolve(c->app_dir, path, abs, sizeof(abs));
		/* recorded answers only, so that diagnose on a saved timeline says
		 * the same anywhere and later: the rename that completes a download
		 * (downloads[].complete, from the trace), else whether the file was
		 * on disk when the timeline was written (cache_fs[].incomplete),
		 * else the tracer's downloads[].completed */
		size = on_disk_at(&on_disk_idx, abs);
		if (d && d->complete_known)
			left = !d->complete;
		else if (recorded_under(c, abs))
			left = size != NULL;
		else
			left = d && d->completed_known && !d->completed;
		if (!left)
			continue;
		if (size && tl_has(size->size))
			on_disk = size->size; /* evidence: the size when written */
		k = diag_index_find(&dls_by_path, abs, strlen(abs), true);
		if (k >= 0)
			written = c->dls[k].bytes;
		fmt_bytes(a, sizeof(a), written);
		/* Xet (written from several threads) starts over; huggingface_hub's
		 * plain HTTP and ModelScope resume with a Range request. Nothing
		 * written: no byte arrived (a Xet transfer whose CAS failed or
		 * hung before the first chunk; a ModelScope or mirror error) */
		writer = d ? d->writer : NULL;
		hubw = !writer || !strcmp(writer, "local_dir") || !strcmp(writer, "hub_cache");
		cas = written <= 0 && hubw ? xet_cas_peer(c) : NULL;
		xet = (d && tl_or0(d->threads) > 1) || cas;
		if (cas) {
			snprintf(host, sizeof(host), "%s:%lld", cas->host ? cas->host : cas->peer,
				 (long long)tl_or0(cas->port));
			if (!cas->host || tl_or0(cas->port) <= 0)
				snprintf(host, sizeof(host), "%s", cas->peer ?: "?");
		}
		werr = f->write_errno;
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
				   abs, "name", d ? d->name : NULL, "writer", writer,
				   "bytes_written", written, "size_on_disk",
				   on_disk >= 0 ? json_real(on_disk) : json_null(), "first_ms",
				   tl_or0(f->first_ms), "last_ms", tl_or0(f->last_ms), "connects",
				   hub_connects_between(hub, n_hub, tl_or0(f->first_ms),
							tl_or0(f->last_ms) + 1),
				   "xet", xet, "cas_host", cas ? cas->host : NULL),
			 -1, fix, "%s: %s (%s)", d && d->name ? d->name : abs, what, abs);
	}
	diag_index_free(&by_path);
	diag_index_free(&dls_by_path);
	diag_index_free(&on_disk_idx.ix);
	free(on_disk_idx.all);
	free(hub);
}

static void rule_slow_download(struct diag_ctx *c)
{
	json_t *files = json_array();
	double bytes = 0, a = -1, b = -1, left = 0, r;
	int unknown = 0;
	char rate[32], total[32], msg_files[1024] = "", tail[128];
	struct diag_index by_path;
	/* every slow file ModelScope's (downloads[].writer): from ModelScope,
	 * not from the hub HF_ENDPOINT names */
	bool ms = true;

	diag_index_build(&by_path, c->view->n_downloads, dl_path_key, c->view);
	for (size_t i = 0; i < c->n_dls; i++) {
		const struct diag_dl *f = &c->dls[i];
		double w = f->bytes, dur = f->last_ms - f->first_ms;
		char abs[PATH_MAX];
		const char *wr;
		long k;

		if (w <= 0 || dur < SLOW_MIN_MS || w / (dur / 1000) >= SLOW_RATE_BPS)
			continue;
		k = diag_index_find(&by_path, f->path, strlen(f->path), false);
		wr = k >= 0 ? c->view->downloads[k].writer : NULL;
		if (!wr || strcmp(wr, "modelscope"))
			ms = false;
		snprintf(abs, sizeof(abs), "%s", f->path);
		json_array_append_new(files, json_pack("{s:s, s:s?, s:f, s:f, s:f}", "path", abs,
						       "name", f->name, "bytes", w, "seconds",
						       diag_round3(dur / 1000), "rate_bps",
						       diag_round3(w / (dur / 1000))));
		bytes += w;
		/* what is still to come, where the size is known (downloads[]) */
		if (!f->complete) {
			if (f->expected_size > w)
				left += f->expected_size - w;
			else
				unknown++;
		}
		if (a < 0 || f->first_ms < a)
			a = f->first_ms;
		if (f->last_ms > b)
			b = f->last_ms;
		if (strlen(msg_files) < 600) {
			char one[64];

			fmt_bytes(one, sizeof(one), w / (dur / 1000));
			snprintf(msg_files + strlen(msg_files),
				 sizeof(msg_files) - strlen(msg_files), "%s%.80s at %s/s",
				 *msg_files ? ", " : "", f->name ? f->name : base_name(abs), one);
		}
	}
	diag_index_free(&by_path);
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
	const struct tl_xet *x = &c->view->xet;
	const char *dir = x->dir, *err = x->write_errno;
	char b[32], fix[2 * PATH_MAX + 512];

	if (!x->present || !dir || tl_or0(x->bytes_written) <= 0)
		return;
	fmt_bytes(b, sizeof(b), x->bytes_written);
	if (err && (!strcmp(err, "ENOSPC") || !strcmp(err, "EDQUOT"))) {
		snprintf(fix, sizeof(fix),
			 "free space where %s is, or move it to a disk with room: [env] "
			 "HF_XET_CACHE = /var/cache/indextts/xet in tts-launch.ini; a smaller "
			 "cache: HF_XET_CHUNK_CACHE_SIZE_BYTES (0 turns it off); or "
			 "HF_HUB_DISABLE_XET=1 (plain HTTP, no chunk cache)",
			 dir);
		diag_add(
		    c, c->failed ? DIAG_ERROR : DIAG_WARNING, "Xet chunk cache full",
		    json_pack("{s:s, s:f, s:f, s:s}", "dir", dir, "bytes_written", x->bytes_written,
			      "write_errors", tl_or0(x->write_errors), "errno", err),
		    -1, fix, "%.0f write%s into Xet's cache %s failed with %s (%s written there)",
		    tl_or0(x->write_errors), tl_or0(x->write_errors) == 1 ? "" : "s", dir, err, b);
		return;
	}
	if (x->persistent != 0)
		return;
	snprintf(fix, sizeof(fix),
		 "put Xet's cache on a disk: [env] HF_XET_CACHE = /var/cache/indextts/xet in "
		 "tts-launch.ini (HF_HOME moves it too), or turn the chunk cache off with "
		 "HF_XET_CHUNK_CACHE_SIZE_BYTES=0; %s is on %s",
		 dir, x->fs_type ?: "?");
	diag_add(c, DIAG_WARNING, "Xet chunk cache on a file system that is not kept",
		 json_pack("{s:s, s:s?, s:s?, s:f, s:f}", "dir", dir, "fs_type", x->fs_type, "lost",
			   x->lost, "bytes_written", x->bytes_written, "files", tl_or0(x->files)),
		 -1, fix,
		 "Xet wrote %s into its chunk cache %s on %s (%s): every byte downloaded is "
		 "written twice, and the cache is gone on the next start",
		 b, dir, x->fs_type ?: "?", x->lost ?: "not kept");
}

/* The configured model dir, absolute ("" when unset) */
static void model_dir_abs(const struct diag_ctx *c, char *out, size_t len)
{
	const char *md = c->view->config_model_dir;

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
	for (size_t i = 0; i < c->view->n_locks; i++) {
		const struct tl_lock *l = &c->view->locks[i];
		const char *path = l->path, *cmd = l->holder_command;
		char fin[PATH_MAX], name[PATH_MAX], md[PATH_MAX] = "", who[160] = "another process";
		double ms = tl_or0(l->waiting ? l->waiting_ms : l->contended_ms);
		bool still = l->waiting || l->acquired_null;
		json_int_t pid = tl_has(l->holder_pid) ? (json_int_t)l->holder_pid : 0;

		/* one refused poll is no wait on another process: 8 snapshot
		 * workers of the service itself contend for a moment, and on a
		 * loaded machine the 50 ms sleep before the next poll can last
		 * seconds (contended_ms then measures the scheduler). Without a
		 * holder seen in another process, a few refusals are that too (3
		 * polls over 1.5 s, seen in CI): a wait on another process's
		 * download is dozens of polls (one each 50 ms) */
		if (!path || !hf_local_dir_lock(path, fin, sizeof(fin)) || ms < LOCK_WAIT_MS ||
		    tl_or0(l->failures) < (pid > 0 ? 2 : LOCK_WAIT_POLLS_UNSEEN))
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
			      "seconds", diag_round3(ms / 1000), "polls", tl_or0(l->failures),
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
static bool local_dir_metadata(const struct tl_download *d, char *out, size_t len)
{
	const char *temp = d->path, *fin = d->final_path, *slash, *base;

	if (!temp || !fin || !d->writer || strcmp(d->writer, "local_dir"))
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
static const char *file_key(size_t i, const void *arg)
{
	return ((const struct tl_view *)arg)->files[i].path;
}

static const char *missing_key(size_t i, const void *arg)
{
	return ((const struct tl_view *)arg)->missing[i].path;
}

static json_t *downloaded_again(const struct diag_ctx *c, double *bytes)
{
	const struct tl_view *v = c->view;
	json_t *files = json_array();
	struct diag_index by_path, missing;

	diag_index_build(&by_path, v->n_files, file_key, v);
	diag_index_build(&missing, v->n_missing, missing_key, v);
	*bytes = 0;
	for (size_t i = 0; i < v->n_downloads; i++) {
		const struct tl_download *d = &v->downloads[i];
		char meta[PATH_MAX];
		long m, gone;

		if (d->also_in || !d->complete || !local_dir_metadata(d, meta, sizeof(meta)))
			continue;
		m = diag_index_find(&by_path, meta, strlen(meta), false);
		gone = diag_index_find(&missing, d->final_path, strlen(d->final_path), false);
		if (m < 0 || tl_or0(v->files[m].bytes_read) <= 0 || gone < 0 ||
		    !v->missing[gone].errno_name || strcmp(v->missing[gone].errno_name, "ENOENT"))
			continue;
		*bytes += tl_or0(d->bytes);
		json_array_append_new(files, json_pack("{s:s?, s:s, s:s, s:f}", "name", d->name,
						       "final", d->final_path, "metadata", meta,
						       "bytes", tl_or0(d->bytes)));
	}
	diag_index_free(&by_path);
	diag_index_free(&missing);
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
	json_t *files = json_array(), *again;
	double bytes = 0;
	char first_cache[PATH_MAX] = "", b[32], fix[PATH_MAX + 600];

	for (size_t i = 0; i < c->view->n_downloads; i++) {
		const struct tl_download *d = &c->view->downloads[i];
		const char *blob = d->also_in;

		if (!blob || !d->complete)
			continue;
		if (!*first_cache)
			snprintf(first_cache, sizeof(first_cache), "%.*s",
				 (int)hf_cache_root_len(blob), blob);
		bytes += tl_or0(d->bytes);
		json_array_append_new(files, json_pack("{s:s?, s:s, s:f}", "name", d->name,
						       "cached", blob, "bytes", tl_or0(d->bytes)));
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
