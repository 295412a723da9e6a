/* diagnose_io: the --check-io rules (docs/diagnose.md): retry loops on a
 * missing path, a cache that refuses writes or is not kept, waits for a
 * cache lock, model files read several times or in small pieces. Rows at
 * the end; the engine is diagnose.c. */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "diagnose_rules.h"
#include "hfcache.h"
#include "util.h"

/* Thresholds (docs/diagnose.md explains each). */
#define RETRY_MIN_ATTEMPTS    5
#define RETRY_MIN_SPAN_MS     2000.0
#define RETRY_SHARE	      0.25  /* or this share of the start-up ... */
#define RETRY_SHARE_MIN_MS    500.0 /* ... and at least this long */
#define LOCK_MIN_WAIT_MS      1000.0
#define REREAD_FACTOR	      3.0
#define REREAD_MIN_EXTRA      (4.0 * 1024 * 1024)
#define SMALL_READS_MIN	      256
#define SMALL_READ_MAX	      (16.0 * 1024)
#define SMALL_READS_MIN_BYTES (1024.0 * 1024)

/* What a retry loop cost the start-up: the critical thread's time asleep
 * between attempts (attribution kinds sleep and lock: nanosleep, a poll
 * without fds, a futex that timed out) inside the loop's span, from the
 * attribution's strip. A loop in a side thread while the critical one
 * works costs nothing. <0: no strip to measure it (untraced attribution,
 * an older timeline, a strip cut short before the loop's end): the
 * caller's fallback is the loop's span. */
static double loop_cost(const struct tl_attr *attr, double first, double last)
{
	double cost = 0, covered = -1;

	if (!attr->n_strip)
		return -1;
	for (size_t i = 0; i < attr->n_strip; i++) {
		const struct tl_strip_seg *sg = &attr->strip[i];
		double a = tl_or0(sg->start_ms), b = tl_or0(sg->end_ms);
		const char *k = sg->kind ?: "";

		if (b > covered)
			covered = b;
		if (b <= first || a >= last)
			continue;
		if (!strcmp(k, "sleep") || !strcmp(k, "lock"))
			cost += (b < last ? b : last) - (a > first ? a : first);
	}
	/* the strip ends at ready (or the exit): a loop going on after it cost
	 * the start-up nothing more; one cut short is not measured */
	if (attr->strip_cut && covered < last)
		return -1;
	return cost;
}

static void rule_missing_retry(struct diag_ctx *c)
{
	json_t *list = json_array(), *top = NULL;
	const struct tl_attr *attr = &c->view->attribution;
	double cost_top = 0;
	/* the start-up the loop is a share of: launch to ready, or to the end;
	 * with the attribution, its window (the exec to ready or the exit) */
	double startup = c->ready >= 0 ? c->ready : c->end;
	const char *from = "span";

	if (tl_or0(attr->window_ms) > 0 && attr->n_strip) {
		startup = attr->window_ms;
		from = "attribution";
	}
	for (size_t i = 0; i < c->view->n_missing; i++) {
		const struct tl_missing *m = &c->view->missing[i];
		const char *path = m->path;
		double first = tl_or0(m->first_ms), last = tl_or0(m->last_ms);
		double span = last - first, cost = span;
		json_int_t attempts = tl_has(m->attempts) ? (json_int_t)m->attempts : 0;
		char abs[PATH_MAX];

		if (!path || diagnose_benign_missing(path, m->class))
			continue;
		if (!strcmp(from, "attribution")) {
			cost = loop_cost(attr, first, last);
			if (cost < 0)
				cost = span; /* past a cut strip: the span stands for it */
		}
		if (attempts < RETRY_MIN_ATTEMPTS ||
		    (cost < RETRY_MIN_SPAN_MS &&
		     (cost < RETRY_SHARE_MIN_MS || startup <= 0 || cost < RETRY_SHARE * startup)))
			continue;
		path_resolve(c->app_dir, path, abs, sizeof(abs));
		json_array_append_new(
		    list, json_pack("{s:s, s:I, s:s?, s:f, s:f, s:f, s:f, s:s}", "path", abs,
				    "attempts", attempts, "errno", m->errno_name, "first_ms", first,
				    "last_ms", last, "seconds", diag_round3(span / 1000), "cost_s",
				    diag_round3(cost / 1000), "cost_from", from));
		if (startup > 0)
			json_object_set_new(json_array_get(list, json_array_size(list) - 1),
					    "share", json_real(diag_round3(cost / startup)));
		if (cost > cost_top) {
			cost_top = cost;
			top = json_array_get(list, json_array_size(list) - 1);
		}
	}
	if (!top) {
		json_decref(list);
		return;
	}
	diag_add(
	    c, c->failed || c->ready < 0 ? DIAG_ERROR : DIAG_WARNING,
	    "retry loop on a missing path", json_pack("{s:O, s:o}", "top", top, "paths", list),
	    cost_top / 1000,
	    "the path never appeared: check that the volume or directory it lives on is mounted "
	    "(a container mount missing, a cache directory on an unmounted disk) or fix the "
	    "setting "
	    "that names it (HF_HUB_CACHE, HF_HOME, [app] model_dir)",
	    "%s was looked up %lld times over %.1f s and never existed (%s); the loop cost "
	    "%.1f s, %.0f%% of the start-up%s%s",
	    jstr(top, "path"), (long long)json_integer_value(json_object_get(top, "attempts")),
	    jnum(top, "seconds"), jstr(top, "errno") ?: "failed", cost_top / 1000,
	    startup > 0 ? 100 * cost_top / startup : 0,
	    strcmp(jstr(top, "cost_from"), "attribution") ? "" : " (asleep between attempts)",
	    json_array_size(list) > 1 ? "; other paths in the loop below" : "");
}

/* Paths whose failures matter for the cache: under the app, a cache, HF_HOME. */
static bool cache_related(struct diag_ctx *c, const char *abs, const char *cls)
{
	if (cls && (!strcmp(cls, "hf_cache") || !strcmp(cls, "download") || !strcmp(cls, "model")))
		return true;
	for (int i = 0; i < c->n_caches; i++)
		if (path_under(abs, c->caches[i]))
			return true;
	return path_under(abs, c->hf_home) || hf_repo_folder(abs, NULL) ||
	       path_under(abs, c->app_dir);
}

/* One entry of files[] (s 0), missing_paths[] (1) or failed_ops[] (2), as
 * the rules over all three see it; false past the section's end. */
struct io_entry {
	const char *path, *err, *werr, *cls, *op;
	double first_ms, last_ms, bytes_written, count; /* 0: none (count: TL_NONE) */
};

static bool io_entry(const struct tl_view *v, int s, size_t i, struct io_entry *e)
{
	if (s == 0 && i < v->n_files) {
		const struct tl_file *f = &v->files[i];

		*e = (struct io_entry){
		    f->path, f->errno_name,	  f->write_errno,     f->class,
		    NULL,    tl_or0(f->first_ms), tl_or0(f->last_ms), tl_or0(f->bytes_written),
		    TL_NONE};
		return true;
	}
	if (s == 1 && i < v->n_missing) {
		const struct tl_missing *m = &v->missing[i];

		*e = (struct io_entry){m->path,
				       m->errno_name,
				       NULL,
				       m->class,
				       NULL,
				       tl_or0(m->first_ms),
				       tl_or0(m->last_ms),
				       0,
				       TL_NONE};
		return true;
	}
	if (s == 2 && i < v->n_failed_ops) {
		const struct tl_failed_op *o = &v->failed_ops[i];

		*e = (struct io_entry){o->path,
				       o->errno_name,
				       NULL,
				       NULL,
				       o->op,
				       tl_or0(o->first_ms),
				       tl_or0(o->last_ms),
				       0,
				       o->count};
		return true;
	}
	return false;
}

/* A flag of the model as evidence: true, false or null */
static json_t *tri_json(int t) { return t < 0 ? json_null() : json_boolean(t); }

/* paths: add abs once (a path can fail in files[] and failed_ops both). */
static void add_path_once(json_t *paths, const char *abs)
{
	json_t *p;
	size_t i;

	json_array_foreach (paths, i, p)
		if (!strcmp(json_string_value(p), abs))
			return;
	json_array_append_new(paths, json_string(abs));
}

static void rule_write_refused(struct diag_ctx *c)
{
	static const struct {
		const char *err, *why, *fix;
	} kinds[] = {
	    {"EROFS", "the file system is read-only",
	     "mount the cache read-write, or point HF_HUB_CACHE (or HF_HOME) at a writable "
	     "directory in [env] of tts-launch.ini; a read-only cache works only with every file "
	     "present and HF_HUB_OFFLINE=1"},
	    {"EACCES", "permission denied: the service's user may not write there",
	     "give the service's user write access to the cache (chown -R USER DIR), or point "
	     "HF_HUB_CACHE at a directory it owns; [service] user must own the cache"},
	    {"EPERM", "the operation is not permitted",
	     "check the directory's owner, immutable flags (lsattr) and the security policy; or "
	     "point HF_HUB_CACHE at another directory"},
	    {"ENOSPC", "no space left on the file system",
	     "free space on the file system holding the cache (df -h DIR), or move the cache "
	     "(HF_HUB_CACHE) to a larger disk; remove leftover *.incomplete files, then start "
	     "again (a download resumes from its partial file)"},
	    {"EDQUOT", "the user's disk quota is exhausted",
	     "raise the service user's quota on that file system (quota -u USER, setquota), "
	     "free space the user owns there, or move the cache (HF_HUB_CACHE) to a file system "
	     "without that quota"},
	};
	/* failed opens, and what refused to be written (failed_ops: mkdir,
	 * rename, unlink, write, ...) */
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		json_t *paths = json_array(), *ops = json_array();
		const struct tl_cache_fs *fs;
		double first = -1;
		const char *first_op = NULL;
		char first_path[PATH_MAX] = "", where[PATH_MAX + 200];
		struct io_entry e;

		for (int s = 0; s < 3; s++) {
			for (size_t i = 0; io_entry(c->view, s, i, &e); i++) {
				const char *path = e.path, *err = e.err;
				const char *op = s == 2 ? e.op : "open";
				char abs[PATH_MAX];

				/* files[]: a failed write to a file counts too */
				if (s == 0 && (!err || strcmp(err, kinds[k].err))) {
					err = e.werr;
					op = "write";
				}
				if (!path || !err || strcmp(err, kinds[k].err))
					continue;
				path_resolve(c->app_dir, path, abs, sizeof(abs));
				if (!cache_related(c, abs, e.cls))
					continue;
				add_path_once(paths, abs);
				if (s == 2)
					json_array_append_new(
					    ops, json_pack("{s:s?, s:s, s:o}", "op", e.op, "path",
							   abs, "count",
							   tl_has(e.count)
							       ? json_integer((json_int_t)e.count)
							       : json_null()));
				if (first < 0 || e.first_ms < first) {
					first = e.first_ms;
					first_op = op;
					snprintf(first_path, sizeof(first_path), "%s", abs);
				}
			}
		}
		if (!json_array_size(paths)) {
			json_decref(paths);
			json_decref(ops);
			continue;
		}
		/* the file system it is on, as recorded (cache_fs) */
		fs = tl_view_cache_fs_of(c->view, first_path);
		if (fs)
			snprintf(where, sizeof(where), "; the cache %s is on %s%s (%s)", fs->dir,
				 fs->fs_type ?: "?",
				 fs->read_only == 1 ? ", mounted read-only" : "",
				 fs->statfs_path ?: "?");
		else
			snprintf(where, sizeof(where), "; its file system was not recorded");
		diag_add(c, DIAG_ERROR, "the cache refuses writes",
			 json_pack("{s:s, s:s, s:s?, s:o, s:o, s:f, s:s?, s:s?, s:s?, s:o}",
				   "errno", kinds[k].err, "path", first_path, "op", first_op,
				   "paths", paths, "ops", ops, "first_ms", first, "cache_dir",
				   fs ? fs->dir : NULL, "fs_type", fs ? fs->fs_type : NULL,
				   "statfs_path", fs ? fs->statfs_path : NULL, "read_only",
				   tri_json(fs ? fs->read_only : -1)),
			 -1, kinds[k].fix,
			 "%s of %s failed with %s: %s (%zu path%s, first at %.1f s)%s",
			 first_op ? first_op : "open", first_path, kinds[k].err, kinds[k].why,
			 json_array_size(paths), json_array_size(paths) > 1 ? "s" : "",
			 first / 1000, where);
	}
}

/* A cache the service used (a file, a failed probe or a download under it)
 * on a file system that does not keep it: tmpfs, a container's layer. */
static void rule_not_persistent(struct diag_ctx *c)
{
	for (size_t i = 0; i < c->view->n_cache_fs; i++) {
		const struct tl_cache_fs *e = &c->view->cache_fs[i];
		const char *dir = e->dir;
		double written = 0;
		int used = 0;
		char b[32], fix[PATH_MAX + 600];

		if (!dir || e->persistent != 0)
			continue;
		for (int s = 0; s < 2; s++) {
			struct io_entry f;

			for (size_t j = 0; io_entry(c->view, s, j, &f); j++) {
				char abs[PATH_MAX];

				if (!f.path)
					continue;
				path_resolve(c->app_dir, f.path, abs, sizeof(abs));
				if (!path_under(abs, dir))
					continue;
				used++;
				written += f.bytes_written;
			}
		}
		if (!used)
			continue;
		fmt_bytes(b, sizeof(b), written);
		if (!strcmp(e->fs_type ?: "", "tmpfs") || !strcmp(e->fs_type ?: "", "ramfs"))
			snprintf(
			    fix, sizeof(fix),
			    "put the cache on a disk: [env] HF_HUB_CACHE = /var/cache/indextts/hub "
			    "(any directory on a persistent file system) in tts-launch.ini, or "
			    "mount "
			    "a disk at %s; otherwise every reboot downloads the models again",
			    dir);
		else
			snprintf(
			    fix, sizeof(fix),
			    "mount a volume at %s (docker run -v hf-cache:%s, a Kubernetes "
			    "persistentVolumeClaim) or point HF_HUB_CACHE at a mounted volume; "
			    "otherwise every new container downloads the models again",
			    dir, dir);
		diag_add(
		    c, DIAG_WARNING, "cache on a file system that is not kept",
		    json_pack("{s:s, s:s?, s:s?, s:o, s:s?, s:i, s:f}", "dir", dir, "role", e->role,
			      "fs_type", e->fs_type, "read_only", tri_json(e->read_only),
			      "statfs_path", e->statfs_path, "paths_used", used, "bytes_written",
			      written),
		    -1, fix,
		    "the cache %s (%s) is on %s, %s; %d path%s used there, %s written this run",
		    dir, e->role, e->fs_type, e->lost ?: "not kept", used, used == 1 ? "" : "s", b);
	}
}

/* The models--ORG--NAME folder a cache path belongs to, copied to out. */
static bool repo_folder(const char *path, char *out, size_t len)
{
	size_t n;
	const char *p = hf_repo_folder(path, &n);

	if (!p)
		return false;
	snprintf(out, len, "%.*s", (int)n, p);
	return true;
}

static void rule_lock_wait(struct diag_ctx *c)
{
	for (size_t i = 0; i < c->view->n_files; i++) {
		const struct tl_file *f = &c->view->files[i];
		const char *path = f->path;
		double t = tl_or0(f->first_ms), next = -1, wait;
		char repo[PATH_MAX], needle[PATH_MAX + 4], abs[PATH_MAX];
		bool stuck;

		if (!path || !hf_lock_file(path) || !repo_folder(path, repo, sizeof(repo)))
			continue;
		/* huggingface_hub opens the lock, flock()s it, then goes on in the
		 * repo's folder: the gap to its next step there is the wait */
		snprintf(needle, sizeof(needle), "/%s/", repo);
		for (int s = 0; s < 2; s++) {
			struct io_entry e;

			for (size_t j = 0; io_entry(c->view, s, j, &e); j++) {
				const char *p = e.path;

				if (!p || hf_in_locks(p) || !strstr(p, needle))
					continue;
				if (e.first_ms > t && (next < 0 || e.first_ms < next))
					next = e.first_ms;
				/* a path opened earlier may be touched again after the wait */
				if (e.last_ms > t && e.first_ms <= t &&
				    (next < 0 || e.last_ms < next))
					next = e.last_ms;
			}
		}
		stuck = next < 0;
		wait = (stuck ? c->end : next) - t;
		if (wait < LOCK_MIN_WAIT_MS)
			continue;
		path_resolve(c->app_dir, path, abs, sizeof(abs));
		diag_add(
		    c, stuck && c->ready < 0 ? DIAG_ERROR : DIAG_WARNING,
		    "waiting for a lock on the cache",
		    json_pack("{s:s, s:s, s:f, s:f, s:b}", "lock", abs, "repo", repo,
			      "locked_at_ms", t, "seconds", diag_round3(wait / 1000),
			      "still_waiting", stuck),
		    wait / 1000,
		    "another process holds the lock (another IndexTTS2 instance, or a download "
		    "sharing this cache): let it finish or stop it (fuser -v LOCKFILE shows the "
		    "holder); the kernel drops the lock of a dead process, so a wait that never "
		    "ends "
		    "means a live holder",
		    "%s %s %.1f s for %s", base_name(abs),
		    stuck ? "was still awaited after" : "was awaited", wait / 1000, abs);
	}
}

/* A model file read, and its size: as the trace saw it, or what a
 * download of this run ended as there (downloads[]: final_path, bytes),
 * whichever is larger. The trace takes a file's size when it first sees
 * it: a file the service reads while its download still grows (the hub
 * client's copy of a finished blob, a verification pass) would otherwise
 * look read many times over. The files the two read-amplification rules
 * look at. */
static bool model_read(struct diag_ctx *c, const struct tl_file *f, double *size, double *rd,
		       double *reads)
{
	const char *cls = f->class, *path = f->path;

	*size = tl_or0(f->size);
	*rd = tl_or0(f->bytes_read);
	*reads = tl_or0(f->reads);
	if (!path || !cls || strcmp(cls, "model") || *rd <= 0)
		return false;
	for (size_t i = 0; i < c->view->n_downloads; i++) {
		const struct tl_download *d = &c->view->downloads[i];

		if (d->final_path && !strcmp(d->final_path, path) && tl_or0(d->bytes) > *size)
			*size = d->bytes;
	}
	if (tl_or0(f->bytes_written) > *size)
		*size = f->bytes_written;
	return true;
}

static bool reread(double size, double rd)
{
	return size > 0 && rd >= REREAD_FACTOR * size && rd - size >= REREAD_MIN_EXTRA;
}

static void rule_io_reread(struct diag_ctx *c)
{
	for (size_t i = 0; i < c->view->n_files; i++) {
		const struct tl_file *f = &c->view->files[i];
		double size, rd, reads;
		char abs[PATH_MAX], a[32], b[32];

		if (!model_read(c, f, &size, &rd, &reads) || !reread(size, rd))
			continue;
		path_resolve(c->app_dir, f->path, abs, sizeof(abs));
		fmt_bytes(a, sizeof(a), rd);
		fmt_bytes(b, sizeof(b), size);
		diag_add(
		    c, DIAG_WARNING, "model file read several times",
		    json_pack("{s:s, s:f, s:f, s:f, s:f}", "path", abs, "bytes_read", rd, "size",
			      size, "factor", diag_round3(rd / size), "reads", reads),
		    -1,
		    "load the file once and share it (cache the loaded object), or mmap it "
		    "(safetensors) so the page cache serves the re-reads; check that no loader "
		    "is called twice for the same file",
		    "%s: %s read for a %s file (%.1fx)", abs, a, b, rd / size);
	}
}

/* Small reads of a file not already said to be read several times. */
static void rule_io_small_reads(struct diag_ctx *c)
{
	for (size_t i = 0; i < c->view->n_files; i++) {
		const struct tl_file *f = &c->view->files[i];
		double size, rd, reads;
		char abs[PATH_MAX], a[32], avg[32];

		if (!model_read(c, f, &size, &rd, &reads) || reread(size, rd) ||
		    reads < SMALL_READS_MIN || rd < SMALL_READS_MIN_BYTES ||
		    rd / reads >= SMALL_READ_MAX)
			continue;
		path_resolve(c->app_dir, f->path, abs, sizeof(abs));
		fmt_bytes(a, sizeof(a), rd);
		fmt_bytes(avg, sizeof(avg), rd / reads);
		diag_add(c, DIAG_WARNING, "model file read in many small pieces",
			 json_pack("{s:s, s:f, s:f, s:f}", "path", abs, "bytes_read", rd, "reads",
				   reads, "avg_read", diag_round3(rd / reads)),
			 -1,
			 "read with a large buffer (open(path, 'rb', buffering=16 << 20)) or mmap "
			 "the file; each small read is a system call",
			 "%s: %.0f reads of %s on average (%s in all)", abs, reads, avg, a);
	}
}

const struct diag_rule diag_io_rules[] = {
    {"missing-path-retry", rule_missing_retry},
    {"cache-write-refused", rule_write_refused},
    {"cache-not-persistent", rule_not_persistent},
    {"cache-lock-wait", rule_lock_wait},
    {"io-reread", rule_io_reread},
    {"io-small-reads", rule_io_small_reads},
    {NULL, NULL},
};
