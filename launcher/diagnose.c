/* diagnose: rules over the timeline model. Each rule looks at what the
 * trace recorded (files, missing paths, connects, peers, downloads, marks)
 * and adds findings with their evidence and the fix. Rules and thresholds:
 * docs/diagnose.md. Paths in the model may be relative to the service's
 * working directory ([app] dir); they are resolved against it here. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "diagnose.h"
#include "hfcache.h"
#include "timeline_internal.h"
#include "util.h"

/* Thresholds (docs/diagnose.md explains each). */
#define RETRY_MIN_ATTEMPTS    5
#define RETRY_MIN_SPAN_MS     2000.0
#define SLOW_MIN_MS	      2000.0
#define SLOW_RATE_BPS	      (1024.0 * 1024.0)
#define DROP_MIN_GAP_MS	      500.0
#define LOCK_MIN_WAIT_MS      1000.0
#define REREAD_FACTOR	      3.0
#define REREAD_MIN_EXTRA      (4.0 * 1024 * 1024)
#define SMALL_READS_MIN	      256
#define SMALL_READ_MAX	      (16.0 * 1024)
#define SMALL_READS_MIN_BYTES (1024.0 * 1024)

#define MAX_CACHES 4

struct ctx {
	json_t *root;
	json_t *findings;
	char app_dir[PATH_MAX];
	bool app_dir_here; /* the app dir exists on this machine: disk checks mean something */
	char caches[MAX_CACHES][PATH_MAX]; /* where downloads are expected */
	int n_caches;
	char hf_home[PATH_MAX];
	const char *endpoint; /* HF_ENDPOINT, or NULL */
	char ep_peer[300];    /* "host:port" of the endpoint */
	double ready;	      /* ms, <0: never ready */
	double end;	      /* ms: exit, or the last thing seen */
	bool failed;	      /* exited non-zero or by a signal before ready */
	const char *mlock;    /* configured mlock mode */
	json_t *dls;	      /* downloads: {path, bytes, first_ms, last_ms} */
};

/* ---- small helpers ---- */

static double round3(double v) { return round(v * 1000.0) / 1000.0; }

static const char *severity_name(int s) { return s == DIAG_ERROR ? "error" : "warning"; }

/* Adds one finding; evidence is stolen. */
static void add(struct ctx *c, const char *id, int severity, const char *check, const char *title,
		json_t *evidence, double seconds_lost, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 9, 10)));
static void add(struct ctx *c, const char *id, int severity, const char *check, const char *title,
		json_t *evidence, double seconds_lost, const char *fix, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_array_append_new(
	    c->findings,
	    /* message and fix quote paths, cut to fit their buffers: json_text
	     * keeps a finding whose text was cut inside a character */
	    json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o}", "id", id, "severity",
		      severity_name(severity), "check", check, "title", title, "message",
		      json_text(msg), "evidence", evidence ? evidence : json_object(),
		      "seconds_lost",
		      seconds_lost >= 0 ? json_real(round3(seconds_lost)) : json_null(), "fix",
		      json_text(fix)));
}

static const char *env_var(json_t *root, const char *name)
{
	json_t *vars = json_object_get(
	    json_object_get(json_object_get(json_object_get(root, "launcher"), "config"), "env"),
	    "vars");

	return jstr(vars, name);
}

/* hfcache's view of the service's environment: the one recorded */
static const char *timeline_env(const void *root, const char *name)
{
	return env_var((json_t *)root, name);
}

static void ctx_init(struct ctx *c, struct timeline *tl)
{
	json_t *root = timeline_json(tl), *cfg, *app, *exit_o, *v;
	const char *dir;
	struct stat st;
	size_t i;

	memset(c, 0, sizeof(*c));
	c->root = root;
	cfg = json_object_get(json_object_get(root, "launcher"), "config");
	app = json_object_get(cfg, "app");
	dir = jstr(app, "dir");
	snprintf(c->app_dir, sizeof(c->app_dir), "%s", dir ? dir : "/");
	c->app_dir_here = dir && stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
	c->mlock = jstr(json_object_get(cfg, "mlock"), "mode");

	/* the caches IndexTTS2 is meant to use: HF_HUB_CACHE when the service's
	 * environment sets it, and <model_dir>/hf_cache (its own layout) */
	{
		struct hf_cache_dir d[HF_MAX_CACHE_DIRS];
		int n = diagnose_cache_dirs(root, d, HF_MAX_CACHE_DIRS, false);

		for (int k = 0; k < n && c->n_caches < MAX_CACHES; k++)
			if (strcmp(d[k].role, "HF_HOME/hub"))
				snprintf(c->caches[c->n_caches++], sizeof(c->caches[0]), "%.*s",
					 PATH_MAX - 1, d[k].path);
	}
	hf_home(c->app_dir, timeline_env, root, c->hf_home, sizeof(c->hf_home));

	c->endpoint = env_var(root, "HF_ENDPOINT");
	if (c->endpoint) {
		const char *h = strstr(c->endpoint, "://");
		bool tls = !strncmp(c->endpoint, "https", 5);
		size_t hl;

		h = h ? h + 3 : c->endpoint;
		hl = strcspn(h, "/");
		if (memchr(h, ':', hl))
			snprintf(c->ep_peer, sizeof(c->ep_peer), "%.*s", (int)hl, h);
		else
			snprintf(c->ep_peer, sizeof(c->ep_peer), "%.*s:%d", (int)hl, h,
				 tls ? 443 : 80);
	}

	c->ready = timeline_mark_ms(tl, "ready");
	c->end = -1;
	{
		const char *k;
		json_t *m;

		json_object_foreach (json_object_get(root, "marks"), k, m)
			if (json_number_value(m) > c->end)
				c->end = json_number_value(m);
	}
	json_array_foreach (json_object_get(root, "files"), i, v)
		if (jnum(v, "last_ms") > c->end)
			c->end = jnum(v, "last_ms");
	exit_o = json_object_get(json_object_get(root, "process"), "exit");
	if (json_is_object(exit_o)) {
		json_t *code = json_object_get(exit_o, "code");

		c->failed = (json_is_integer(code) && json_integer_value(code) != 0) ||
			    (!json_is_integer(code) && c->ready < 0);
	}
	c->findings = json_array();
}

/* ---- the caches' file systems ---- */

int diagnose_cache_dirs(const json_t *root, struct hf_cache_dir *out, int max, bool with_model_dir)
{
	json_t *app =
	    json_object_get(json_object_get(json_object_get(root, "launcher"), "config"), "app");
	const char *dir = jstr(app, "dir");

	return hf_cache_dirs(dir ? dir : "/", jstr(app, "model_dir"), timeline_env, root,
			     with_model_dir, out, max);
}

/* statfs(2) f_type values (linux/magic.h) and whether what is written
 * there survives a reboot or the container */
static const struct {
	unsigned long magic;
	const char *name;
	const char *lost; /* NULL: persistent */
} fs_types[] = {
    {0x01021994, "tmpfs", "memory: emptied at every reboot"},
    {0x858458f6, "ramfs", "memory: emptied at every reboot"},
    {0x794c7630, "overlay", "a container's writable layer: gone when the container is removed"},
    {0x61756673, "aufs", "a container's writable layer: gone when the container is removed"},
    {0xef53, "ext4", NULL},
    {0x58465342, "xfs", NULL},
    {0x9123683e, "btrfs", NULL},
    {0x2fc12fc1, "zfs", NULL},
    {0x6969, "nfs", NULL},
    {0xff534d42, "cifs", NULL},
    {0xfe534d42, "smb2", NULL},
    {0x65735546, "fuse", NULL},
    {0x01021997, "9p", NULL},
    {0x6a656a63, "virtiofs", NULL},
    {0x73717368, "squashfs", NULL},
    {0x00c36400, "ceph", NULL},
    {0x4d44, "vfat", NULL},
    {0x5346544e, "ntfs", NULL},
    {0xf2f52010, "f2fs", NULL},
};

void diagnose_record_cache_fs(struct timeline *tl)
{
	struct hf_cache_dir dirs[HF_MAX_CACHE_DIRS];
	json_t *list = json_array();
	int n;

	if (!tl || !timeline_json(tl))
		return;
	n = diagnose_cache_dirs(timeline_json(tl), dirs, HF_MAX_CACHE_DIRS, false);
	for (int i = 0; i < n; i++) {
		char at[PATH_MAX], magic[32];
		const char *name = NULL, *lost = NULL;
		struct statfs sf;
		struct statvfs sv;
		bool exists;

		/* a cache not created yet will be created on its nearest parent */
		memcpy(at, dirs[i].path, sizeof(at));
		at[sizeof(at) - 1] = 0;
		exists = access(at, F_OK) == 0;
		while (access(at, F_OK) && strcmp(at, "/")) {
			char *sl = strrchr(at, '/');

			if (sl == at)
				sl[1] = 0;
			else if (sl)
				*sl = 0;
			else
				break;
		}
		if (statfs(at, &sf) < 0 || statvfs(at, &sv) < 0)
			continue;
		for (size_t k = 0; k < sizeof(fs_types) / sizeof(fs_types[0]); k++)
			if ((unsigned long)sf.f_type == fs_types[k].magic) {
				name = fs_types[k].name;
				lost = fs_types[k].lost;
			}
		snprintf(magic, sizeof(magic), "0x%lx", (unsigned long)sf.f_type);
		json_array_append_new(
		    list, json_pack("{s:s, s:s, s:b, s:s, s:s, s:s, s:b, s:b, s:s?}", "dir",
				    dirs[i].path, "role", dirs[i].role, "exists", exists,
				    "statfs_path", at, "fs_type", name ? name : magic, "fs_magic",
				    magic, "read_only", (sv.f_flag & ST_RDONLY) != 0, "persistent",
				    lost == NULL, "lost", lost));
	}
	json_object_set_new(timeline_json(tl), "cache_fs", list);
}

/* ---- rules: I/O ---- */

static bool benign_missing(const char *path, const char *cls)
{
	const char *b = base_name(path);

	/* the interpreter's and libc's own search paths, and requests' netrc
	 * look-up (once per HTTP request): probing them is normal */
	if (cls && (!strcmp(cls, "system") || !strcmp(cls, "python") || !strcmp(cls, "library")))
		return true;
	return !strcmp(b, ".netrc") || !strcmp(b, "_netrc");
}

static void rule_missing_retry(struct ctx *c)
{
	json_t *list = json_array(), *m, *top = NULL;
	double span_top = 0;
	size_t i;

	json_array_foreach (json_object_get(c->root, "missing_paths"), i, m) {
		const char *path = jstr(m, "path");
		double span = jnum(m, "last_ms") - jnum(m, "first_ms");
		char abs[PATH_MAX];

		if (!path || benign_missing(path, jstr(m, "class")))
			continue;
		if (json_integer_value(json_object_get(m, "attempts")) < RETRY_MIN_ATTEMPTS ||
		    span < RETRY_MIN_SPAN_MS)
			continue;
		path_resolve(c->app_dir, path, abs, sizeof(abs));
		json_array_append_new(
		    list, json_pack("{s:s, s:I, s:O, s:f, s:f, s:f}", "path", abs, "attempts",
				    json_integer_value(json_object_get(m, "attempts")), "errno",
				    json_object_get(m, "errno"), "first_ms", jnum(m, "first_ms"),
				    "last_ms", jnum(m, "last_ms"), "seconds", round3(span / 1000)));
		if (span > span_top) {
			span_top = span;
			top = json_array_get(list, json_array_size(list) - 1);
		}
	}
	if (!top) {
		json_decref(list);
		return;
	}
	add(c, "missing-path-retry", c->failed || c->ready < 0 ? DIAG_ERROR : DIAG_WARNING, "io",
	    "retry loop on a missing path", json_pack("{s:O, s:o}", "top", top, "paths", list),
	    span_top / 1000,
	    "the path never appeared: check that the volume or directory it lives on is mounted "
	    "(a container mount missing, a cache directory on an unmounted disk) or fix the "
	    "setting "
	    "that names it (HF_HUB_CACHE, HF_HOME, [app] model_dir)",
	    "%s was looked up %lld times over %.1f s and never existed (%s)%s", jstr(top, "path"),
	    (long long)json_integer_value(json_object_get(top, "attempts")), span_top / 1000,
	    jstr(top, "errno") ?: "failed",
	    json_array_size(list) > 1 ? "; other paths in the loop below" : "");
}

/* Paths whose failures matter for the cache: under the app, a cache, HF_HOME. */
static bool cache_related(struct ctx *c, const char *abs, const char *cls)
{
	if (cls && (!strcmp(cls, "hf_cache") || !strcmp(cls, "download") || !strcmp(cls, "model")))
		return true;
	for (int i = 0; i < c->n_caches; i++)
		if (path_under(abs, c->caches[i]))
			return true;
	return path_under(abs, c->hf_home) || strstr(abs, "/models--") ||
	       path_under(abs, c->app_dir);
}

static void rule_write_refused(struct ctx *c)
{
	static const struct {
		const char *err, *why, *fix;
	} kinds[] = {
	    {"EROFS", "is on a read-only file system",
	     "mount the cache read-write, or point HF_HUB_CACHE (or HF_HOME) at a writable "
	     "directory in [env] of tts-launch.ini; a read-only cache works only with every file "
	     "present and HF_HUB_OFFLINE=1"},
	    {"EACCES", "refuses access (permissions)",
	     "give the service's user write access to the cache (chown -R USER DIR), or point "
	     "HF_HUB_CACHE at a directory it owns; [service] user must own the cache"},
	    {"EPERM", "refuses the operation",
	     "check the directory's owner, immutable flags (lsattr) and the security policy; or "
	     "point HF_HUB_CACHE at another directory"},
	    {"ENOSPC", "is full",
	     "free space on the file system holding the cache (df -h DIR), or move the cache "
	     "(HF_HUB_CACHE) to a larger disk; remove leftover *.incomplete files"},
	    {"EDQUOT", "is over quota", "raise the quota or move the cache (HF_HUB_CACHE)"},
	};
	const char *sections[] = {"files", "missing_paths"};

	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		json_t *paths = json_array(), *e;
		double first = -1;
		size_t i;

		for (size_t s = 0; s < 2; s++) {
			json_array_foreach (json_object_get(c->root, sections[s]), i, e) {
				const char *path = jstr(e, "path"), *err = jstr(e, "errno");
				char abs[PATH_MAX];

				if (!path || !err || strcmp(err, kinds[k].err))
					continue;
				path_resolve(c->app_dir, path, abs, sizeof(abs));
				if (!cache_related(c, abs, jstr(e, "class")))
					continue;
				json_array_append_new(paths, json_string(abs));
				if (first < 0 || jnum(e, "first_ms") < first)
					first = jnum(e, "first_ms");
			}
		}
		if (!json_array_size(paths)) {
			json_decref(paths);
			continue;
		}
		add(c, "cache-write-refused", DIAG_ERROR, "io", "the cache refuses writes",
		    json_pack("{s:s, s:o, s:f}", "errno", kinds[k].err, "paths", paths, "first_ms",
			      first),
		    -1, kinds[k].fix, "%s %s (%s, %zu path%s, first at %.1f s)",
		    json_string_value(json_array_get(paths, 0)), kinds[k].why, kinds[k].err,
		    json_array_size(paths), json_array_size(paths) > 1 ? "s" : "", first / 1000);
	}
}

/* A cache the service used (a file, a failed probe or a download under it)
 * on a file system that does not keep it: tmpfs, a container's layer. */
static void rule_not_persistent(struct ctx *c)
{
	json_t *e;
	size_t i;

	json_array_foreach (json_object_get(c->root, "cache_fs"), i, e) {
		const char *dir = jstr(e, "dir");
		const char *sections[] = {"files", "missing_paths"};
		double written = 0;
		int used = 0;
		char b[32], fix[PATH_MAX + 600];

		if (!dir || !json_is_false(json_object_get(e, "persistent")))
			continue;
		for (size_t s = 0; s < 2; s++) {
			json_t *f;
			size_t j;

			json_array_foreach (json_object_get(c->root, sections[s]), j, f) {
				char abs[PATH_MAX];

				if (!jstr(f, "path"))
					continue;
				path_resolve(c->app_dir, jstr(f, "path"), abs, sizeof(abs));
				if (!path_under(abs, dir))
					continue;
				used++;
				written += jnum(f, "bytes_written");
			}
		}
		if (!used)
			continue;
		fmt_bytes(b, sizeof(b), written);
		if (!strcmp(jstr(e, "fs_type") ?: "", "tmpfs") ||
		    !strcmp(jstr(e, "fs_type") ?: "", "ramfs"))
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
		add(c, "cache-not-persistent", DIAG_WARNING, "io",
		    "cache on a file system that is not kept",
		    json_pack("{s:s, s:O, s:O, s:O, s:O, s:i, s:f}", "dir", dir, "role",
			      json_object_get(e, "role"), "fs_type", json_object_get(e, "fs_type"),
			      "read_only", json_object_get(e, "read_only"), "statfs_path",
			      json_object_get(e, "statfs_path"), "paths_used", used,
			      "bytes_written", written),
		    -1, fix,
		    "the cache %s (%s) is on %s, %s; %d path%s used there, %s written this run",
		    dir, jstr(e, "role"), jstr(e, "fs_type"), jstr(e, "lost") ?: "not kept", used,
		    used == 1 ? "" : "s", b);
	}
}

/* The models--ORG--NAME folder a cache path belongs to, copied to out. */
static bool repo_folder(const char *path, char *out, size_t len)
{
	const char *p = strstr(path, "/models--"), *e;

	if (!p)
		return false;
	p++;
	e = strchr(p, '/');
	snprintf(out, len, "%.*s", (int)(e ? (size_t)(e - p) : strlen(p)), p);
	return true;
}

static void rule_lock_wait(struct ctx *c)
{
	json_t *f;
	size_t i;

	json_array_foreach (json_object_get(c->root, "files"), i, f) {
		const char *path = jstr(f, "path");
		double t = jnum(f, "first_ms"), next = -1, wait;
		char repo[PATH_MAX], needle[PATH_MAX + 4], abs[PATH_MAX];
		const char *sections[] = {"files", "missing_paths"};
		bool stuck;

		if (!path || !strstr(path, "/.locks/") || !str_ends_with(path, ".lock") ||
		    !repo_folder(path, repo, sizeof(repo)))
			continue;
		/* huggingface_hub opens the lock, flock()s it, then goes on in the
		 * repo's folder: the gap to its next step there is the wait */
		snprintf(needle, sizeof(needle), "/%s/", repo);
		for (size_t s = 0; s < 2; s++) {
			json_t *e;
			size_t j;

			json_array_foreach (json_object_get(c->root, sections[s]), j, e) {
				const char *p = jstr(e, "path");

				if (!p || strstr(p, "/.locks/") || !strstr(p, needle))
					continue;
				if (jnum(e, "first_ms") > t &&
				    (next < 0 || jnum(e, "first_ms") < next))
					next = jnum(e, "first_ms");
				/* a path opened earlier may be touched again after the wait */
				if (jnum(e, "last_ms") > t && jnum(e, "first_ms") <= t &&
				    (next < 0 || jnum(e, "last_ms") < next))
					next = jnum(e, "last_ms");
			}
		}
		stuck = next < 0;
		wait = (stuck ? c->end : next) - t;
		if (wait < LOCK_MIN_WAIT_MS)
			continue;
		path_resolve(c->app_dir, path, abs, sizeof(abs));
		add(c, "cache-lock-wait", stuck && c->ready < 0 ? DIAG_ERROR : DIAG_WARNING, "io",
		    "waiting for a lock on the cache",
		    json_pack("{s:s, s:s, s:f, s:f, s:b}", "lock", abs, "repo", repo,
			      "locked_at_ms", t, "seconds", round3(wait / 1000), "still_waiting",
			      stuck),
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

static void rule_io_amplification(struct ctx *c)
{
	json_t *f;
	size_t i;

	json_array_foreach (json_object_get(c->root, "files"), i, f) {
		const char *path = jstr(f, "path"), *cls = jstr(f, "class");
		double size = jnum(f, "size"), rd = jnum(f, "bytes_read"), reads = jnum(f, "reads");
		char abs[PATH_MAX], a[32], b[32];

		if (!path || !cls || strcmp(cls, "model") || rd <= 0)
			continue;
		path_resolve(c->app_dir, path, abs, sizeof(abs));
		fmt_bytes(a, sizeof(a), rd);
		fmt_bytes(b, sizeof(b), size);
		if (size > 0 && rd >= REREAD_FACTOR * size && rd - size >= REREAD_MIN_EXTRA) {
			add(c, "io-reread", DIAG_WARNING, "io", "model file read several times",
			    json_pack("{s:s, s:f, s:f, s:f, s:f}", "path", abs, "bytes_read", rd,
				      "size", size, "factor", round3(rd / size), "reads", reads),
			    -1,
			    "load the file once and share it (cache the loaded object), or mmap it "
			    "(safetensors) so the page cache serves the re-reads; check that no "
			    "loader "
			    "is called twice for the same file",
			    "%s: %s read for a %s file (%.1fx)", abs, a, b, rd / size);
		} else if (reads >= SMALL_READS_MIN && rd >= SMALL_READS_MIN_BYTES &&
			   rd / reads < SMALL_READ_MAX) {
			char avg[32];

			fmt_bytes(avg, sizeof(avg), rd / reads);
			add(c, "io-small-reads", DIAG_WARNING, "io",
			    "model file read in many small pieces",
			    json_pack("{s:s, s:f, s:f, s:f}", "path", abs, "bytes_read", rd,
				      "reads", reads, "avg_read", round3(rd / reads)),
			    -1,
			    "read with a large buffer (open(path, 'rb', buffering=16 << 20)) or "
			    "mmap "
			    "the file; each small read is a system call",
			    "%s: %.0f reads of %s on average (%s in all)", abs, reads, avg, a);
		}
	}
}

/* ---- rules: downloads ---- */

/* Cache bookkeeping, not downloaded content. */
static bool cache_meta(const char *path)
{
	return strstr(path, "/.locks/") || strstr(path, "/refs/") || strstr(path, "/.no_exist/");
}

/* The downloads: each blobs/ETAG.incomplete opened, with the bytes written
 * to its inode whichever name the trace gave them (the .incomplete path,
 * the blob it was renamed to, or "[fd] NAME" for writes seen only by inode),
 * plus any other file written inside a models--* folder. */
static void find_downloads(struct ctx *c)
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
		    !strstr(path, "/models--") || cache_meta(path) || jnum(f, "bytes_written") <= 0)
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
	const char *p = strstr(abs, "/models--");
	size_t n = p ? (size_t)(p - abs) : strlen(abs);

	snprintf(out, len, "%.*s", (int)n, abs);
}

static void rule_wrong_cache(struct ctx *c)
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
			 "env.HF_HUB_CACHE=%s), and move what was downloaded: mv %s/models--* %s/",
			 want, want, root, want);
		json_object_set_new(g, "configured_cache", json_string(want));
		add(c, "wrong-cache", DIAG_WARNING, "download",
		    "models written outside the configured cache", json_incref(g), -1, fix,
		    "%zu file%s (%s) downloaded into %s, but the configured cache is %s: every "
		    "start "
		    "from another environment downloads them again",
		    json_array_size(json_object_get(g, "files")),
		    json_array_size(json_object_get(g, "files")) == 1 ? "" : "s", b, root, want);
	}
	json_decref(roots);
}

static int cmp_double(const void *x, const void *y);

/* Start times of the connects to a hub (any port but 53), sorted: how many
 * fall in a window is then two binary searches. */
static double *hub_connect_starts(struct ctx *c, size_t *n)
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
		qsort(v, *n, sizeof(*v), cmp_double);
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

static void rule_interrupted(struct ctx *c)
{
	/* indexes built once: lookups per file stay O(log n) on any input */
	json_t *f, *by_path = json_index(json_object_get(c->root, "downloads"), "path", false);
	json_t *dls_by_path = json_index(c->dls, "path", true);
	size_t i, n_hub;
	double *hub = hub_connect_starts(c, &n_hub);

	json_array_foreach (json_object_get(c->root, "files"), i, f) {
		const char *path = jstr(f, "path");
		char abs[PATH_MAX], a[32];
		double on_disk = -1, written = jnum(f, "bytes_written");
		struct stat st;
		json_t *d;
		bool left;

		if (!path || !str_ends_with(path, ".incomplete"))
			continue;
		path_resolve(c->app_dir, path, abs, sizeof(abs));
		/* the trace records the rename that completes a download
		 * (downloads[].complete): the recorded answer, so that diagnose on a
		 * saved timeline says the same later; the disk only for timelines
		 * without that record */
		d = json_object_get(by_path, path);
		if (d && json_is_boolean(json_object_get(d, "complete")))
			left = json_is_false(json_object_get(d, "complete"));
		else if (c->app_dir_here)
			left = stat(abs, &st) == 0;
		else
			left = d && json_is_false(json_object_get(d, "completed"));
		if (!left)
			continue;
		if (c->app_dir_here && stat(abs, &st) == 0)
			on_disk = (double)st.st_size; /* evidence only: it may change later */
		if (json_object_get(dls_by_path, abs))
			written = jnum(json_object_get(dls_by_path, abs), "bytes");
		fmt_bytes(a, sizeof(a), written);
		add(c, "download-interrupted", c->failed ? DIAG_ERROR : DIAG_WARNING, "download",
		    "interrupted download left behind",
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
	free(hub);
}

static void rule_slow_download(struct ctx *c)
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
						       w, "seconds", round3(dur / 1000), "rate_bps",
						       round3(w / (dur / 1000))));
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
	add(c, "download-slow", DIAG_WARNING, "download", "slow model download",
	    json_pack("{s:o, s:f, s:f, s:f, s:s?, s:n}", "files", files, "bytes", bytes, "seconds",
		      round3((b - a) / 1000), "rate_bps", round3(bytes / ((b - a) / 1000)),
		      "endpoint", c->endpoint, "time_left"),
	    (b - a) / 1000,
	    "the hub delivers slowly: set HF_ENDPOINT to a closer mirror ([env] HF_ENDPOINT = "
	    "https://hf-mirror.com, or a local proxy), or download the models once ahead of time "
	    "into the cache and start with HF_HUB_OFFLINE=1",
	    "%s in %.1f s (%s/s) from %s: %s; time left unknown (the trace does not see the "
	    "expected size)",
	    total, (b - a) / 1000, rate, c->endpoint ? c->endpoint : "the hub", msg_files);
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

/* Every needed file came from the cache: nothing downloaded, snapshots read. */
static bool all_cached(struct ctx *c)
{
	json_t *f;
	size_t i;
	int snaps = 0;

	json_array_foreach (json_object_get(c->root, "files"), i, f) {
		const char *p = jstr(f, "path");

		if (!p)
			continue;
		if (json_array_size(c->dls))
			return false;
		if (strstr(p, "/snapshots/") && json_integer_value(json_object_get(f, "opens")) > 0)
			snaps++;
	}
	return snaps > 0 && c->ready >= 0;
}

static void rule_hub_unreachable(struct ctx *c)
{
	/* built once, not per peer: linear on any input */
	json_t *peers = json_object(), *e, *g;
	json_t *net_by_peer = json_index(json_object_get(c->root, "network"), "peer", true);
	bool cached = all_cached(c);
	const char *peer;
	size_t i;

	/* connection attempts by peer (TCP/UDP over IP, not DNS) */
	json_array_foreach (json_object_get(c->root, "connects"), i, e) {
		int port = (int)json_integer_value(json_object_get(e, "port"));
		int fam = (int)json_integer_value(json_object_get(e, "family"));
		const char *p = jstr(e, "peer");

		if (!p || port == 0 || port == 53 || fam == 1)
			continue;
		g = json_object_get(peers, p);
		if (!g) {
			g = json_pack("{s:[], s:[]}", "starts", "errors");
			json_object_set_new(peers, p, g);
		}
		json_array_append_new(json_object_get(g, "starts"), json_real(jnum(e, "start_ms")));
		if (json_integer_value(json_object_get(e, "ret")) < 0 &&
		    json_integer_value(json_object_get(e, "ret")) != -EINPROGRESS) {
			const char *n =
			    strerrorname_np((int)-json_integer_value(json_object_get(e, "ret")));

			json_array_append_new(json_object_get(g, "errors"),
					      json_string(n ? n : "?"));
		}
	}
	json_object_foreach (peers, peer, g) {
		json_t *net, *starts = json_object_get(g, "starts");
		size_t cnt = json_array_size(starts),
		       nerr = json_array_size(json_object_get(g, "errors"));
		double in = 0, out = 0, lost = -1, median = 0, *gaps;
		const char *how, *why;
		bool hub = c->ep_peer[0] && !strcmp(peer, c->ep_peer);
		char fix[1024], label[400], lost_txt[64] = "";
		int sev;

		net = json_object_get(net_by_peer, peer);
		in = jnum(net, "bytes_in");
		out = jnum(net, "bytes_out");
		if (in > 0)
			continue; /* it answered */

		/* each attempt waits until the next one starts: the gaps are the
		 * time lost; the last attempt's wait is taken as the median */
		gaps = calloc(cnt ? cnt : 1, sizeof(*gaps));
		if (!gaps)
			continue;
		for (size_t k = 1; k < cnt; k++)
			gaps[k - 1] = json_real_value(json_array_get(starts, k)) -
				      json_real_value(json_array_get(starts, k - 1));
		if (cnt >= 2) {
			double sum = 0;

			for (size_t k = 0; k + 1 < cnt; k++)
				sum += gaps[k];
			qsort(gaps, cnt - 1, sizeof(*gaps), cmp_double);
			median = gaps[(cnt - 1) / 2];
			lost = (sum + median) / 1000;
		} else if (cnt == 1 && c->ready < 0) {
			lost = (c->end - json_real_value(json_array_get(starts, 0))) / 1000;
		}
		free(gaps);

		if (nerr) {
			how = json_string_value(json_array_get(json_object_get(g, "errors"), 0));
			why = "connect failed";
		} else if (out <= 0) {
			how = "no connection";
			why = "no connection was established (refused or unreachable)";
		} else if (median >= DROP_MIN_GAP_MS || cnt == 1) {
			how = "silently dropped";
			why = "requests were sent but nothing came back: each one waited for its "
			      "timeout";
		} else {
			how = "reset";
			why = "requests were sent and the connection was closed without an answer";
		}
		snprintf(label, sizeof(label), "%s%s%s%s", hub ? "the model hub " : "", peer,
			 hub ? " (HF_ENDPOINT=" : "", hub ? c->endpoint : "");
		if (hub)
			strcat(label, ")");
		if (cached)
			snprintf(
			    fix, sizeof(fix),
			    "every file the service needed was already in the cache: start with "
			    "HF_HUB_OFFLINE=1 ([env] HF_HUB_OFFLINE = 1 in tts-launch.ini) so it "
			    "does "
			    "not ask the hub; or set HF_ENDPOINT to a reachable mirror");
		else
			snprintf(
			    fix, sizeof(fix),
			    "make %s reachable (firewall, proxy: HTTPS_PROXY), or set HF_ENDPOINT "
			    "to a reachable mirror; with every model already downloaded, "
			    "HF_HUB_OFFLINE=1 skips the hub; a lower HF_HUB_ETAG_TIMEOUT shortens "
			    "each wait",
			    peer);
		if (lost >= 0)
			snprintf(lost_txt, sizeof(lost_txt), "; about %.1f s lost", lost);
		sev = c->failed || c->ready < 0 ? DIAG_ERROR : DIAG_WARNING;
		add(c, "hub-unreachable", sev, "download", "model hub unreachable",
		    json_pack("{s:s, s:b, s:s?, s:i, s:s, s:O, s:f, s:f, s:f, s:b}", "peer", peer,
			      "hub", hub, "endpoint", c->endpoint, "attempts", (int)cnt, "outcome",
			      how, "errors", json_object_get(g, "errors"), "bytes_out", out,
			      "bytes_in", in, "seconds_per_attempt", round3(median / 1000),
			      "all_cached", cached),
		    lost, fix, "%s: %zu connection attempt%s, %s (%s)%s", label, cnt,
		    cnt == 1 ? "" : "s", how, why, lost_txt);
	}
	json_decref(peers);
	json_decref(net_by_peer);
}

/* The endpoint's host is a name (not an IPv4/IPv6 literal). */
static bool endpoint_is_name(const struct ctx *c, char *host, size_t len)
{
	const char *colon = strrchr(c->ep_peer, ':');
	size_t n = colon ? (size_t)(colon - c->ep_peer) : strlen(c->ep_peer);

	snprintf(host, len, "%.*s", (int)n, c->ep_peer);
	return *host && host[0] != '[' && strspn(host, "0123456789.") != strlen(host);
}

static void rule_dns(struct ctx *c)
{
	json_t *e, *servers = json_array(), *seen = json_object(); /* seen: a set, linear */
	size_t i;
	int queries = 0, fails = 0, ep_port = 0, ep_connects = 0;
	double a = -1, b = -1;
	char host[300];
	bool name = c->ep_peer[0] && endpoint_is_name(c, host, sizeof(host));

	if (name)
		ep_port = atoi(strrchr(c->ep_peer, ':') + 1);
	json_array_foreach (json_object_get(c->root, "connects"), i, e) {
		json_int_t ret = json_integer_value(json_object_get(e, "ret"));
		int port = (int)json_integer_value(json_object_get(e, "port"));
		int fam = (int)json_integer_value(json_object_get(e, "family"));
		if (port == ep_port && fam != 1)
			ep_connects++;
		if (port != 53)
			continue;
		queries++;
		if (ret < 0 && ret != -EINPROGRESS)
			fails++;
		if (a < 0)
			a = jnum(e, "start_ms");
		b = jnum(e, "start_ms");
		if (!jstr(e, "peer"))
			continue; /* a hand-edited or foreign timeline */
		if (!json_object_get(seen, jstr(e, "peer"))) {
			json_object_set_new(seen, jstr(e, "peer"), json_true());
			json_array_append_new(servers, json_pack("s", jstr(e, "peer")));
		}
	}
	json_decref(seen);
	/* a name server that cannot be reached, or a hub name that was looked
	 * up and never connected to: the look-up failed */
	if (!fails && !(name && queries && !ep_connects)) {
		json_decref(servers);
		return;
	}
	add(c, "dns-failure", c->failed || c->ready < 0 ? DIAG_ERROR : DIAG_WARNING, "download",
	    "name resolution failed",
	    json_pack("{s:o, s:i, s:i, s:f, s:f, s:s?, s:s?}", "servers", servers, "queries",
		      queries, "failed_connects", fails, "first_ms", a, "last_ms", b, "endpoint",
		      c->endpoint, "host", name ? host : NULL),
	    b > a ? (b - a) / 1000 : -1,
	    "check the resolver (/etc/resolv.conf, the container's DNS settings) and the "
	    "name in HF_ENDPOINT; put the hub's address in /etc/hosts or use an address in "
	    "HF_ENDPOINT; with every model cached, HF_HUB_OFFLINE=1 needs no look-up",
	    "%s%s%s: %d DNS quer%s to %s%s, no connection to the hub followed",
	    name ? "the hub's name " : "", name ? host : "name server",
	    name ? " could not be resolved" : " unreachable", queries, queries == 1 ? "y" : "ies",
	    json_string_value(json_array_get(servers, 0)) ?: "?", fails ? " failed" : "");
}

/* ---- rules: memory ---- */

static void rule_lazy_faults(struct ctx *c)
{
	json_t *r, *list = json_array();
	size_t i;
	double faults = 0;

	/* needs per-request fault counts (requests[]); without them the trace
	 * cannot tell load-time faults from request-time ones */
	json_array_foreach (json_object_get(c->root, "requests"), i, r) {
		/* faults inside model file mappings (minor and major): not any
		 * major fault, which a library page or a log file can cause */
		double mf = jnum(r, "model_faults");

		if (mf <= 0)
			continue;
		faults += mf;
		json_array_append_new(list, json_incref(r));
	}
	if (!json_array_size(list)) {
		json_decref(list);
		return;
	}
	add(c, "lazy-model-faults", DIAG_WARNING, "memory",
	    "model pages faulted in during requests",
	    json_pack("{s:o, s:f, s:s?}", "requests", list, "faults", faults, "mlock", c->mlock),
	    -1,
	    c->mlock && strcmp(c->mlock, "off")
		? "mlock is on but did not cover these pages: use --mlock=all, or check the "
		  "mlock result in the timeline (memory.mlock)"
		: "start with --mlock=models (or [mlock] mode = models) so model pages are locked "
		  "in memory once loaded",
	    "%zu request%s faulted %.0f model pages in", json_array_size(list),
	    json_array_size(list) == 1 ? "" : "s", faults);
}

/* ---- entry points ---- */

static int level_of(json_t *findings)
{
	json_t *f;
	size_t i;
	int lvl = DIAG_CLEAN;

	json_array_foreach (findings, i, f) {
		const char *s = jstr(f, "severity");

		if (s && !strcmp(s, "error"))
			lvl = DIAG_ERROR;
		else if (lvl < DIAG_WARNING)
			lvl = DIAG_WARNING;
	}
	return lvl;
}

int diagnose_run(struct timeline *tl, unsigned checks)
{
	struct ctx c;

	if (!tl || !timeline_json(tl))
		return DIAG_CLEAN;
	ctx_init(&c, tl);
	find_downloads(&c);
	if (checks & DIAG_DOWNLOAD) {
		rule_dns(&c);
		rule_hub_unreachable(&c);
		rule_interrupted(&c);
		rule_slow_download(&c);
		rule_wrong_cache(&c);
	}
	if (checks & DIAG_IO) {
		rule_missing_retry(&c);
		rule_write_refused(&c);
		rule_not_persistent(&c);
		rule_lock_wait(&c);
		rule_io_amplification(&c);
	}
	if (checks & DIAG_MEMORY)
		rule_lazy_faults(&c);
	json_object_set_new(timeline_json(tl), "findings", c.findings);
	json_decref(c.dls);
	return level_of(c.findings);
}

int diagnose_level(const struct timeline *tl)
{
	return tl ? level_of(json_object_get(timeline_json(tl), "findings")) : DIAG_CLEAN;
}

void diagnose_print(const struct timeline *tl, FILE *out)
{
	json_t *findings = tl ? json_object_get(timeline_json(tl), "findings") : NULL, *f;
	size_t i;

	if (!json_array_size(findings))
		return;
	fprintf(out, "tts-launch: diagnosis: %zu finding%s\n", json_array_size(findings),
		json_array_size(findings) == 1 ? "" : "s");
	json_array_foreach (findings, i, f) {
		json_t *lost = json_object_get(f, "seconds_lost");

		/* paths in messages come from the trace: escaped for the terminal */
		fputs("  ", out);
		fput_esc(jstr(f, "severity"), out);
		fputc('[', out);
		fput_esc(jstr(f, "id"), out);
		fputs("] ", out);
		fput_esc(jstr(f, "title"), out);
		fputs(": ", out);
		fput_esc(jstr(f, "message"), out);
		fputc('\n', out);
		if (json_is_number(lost) && json_number_value(lost) >= 0.1)
			fprintf(out, "      time lost: %.1f s\n", json_number_value(lost));
		fputs("      fix: ", out);
		fput_esc(jstr(f, "fix"), out);
		fputc('\n', out);
	}
}

int diagnose_command(const char *path, unsigned checks, const char *format)
{
	char err[1024];
	struct timeline *tl = timeline_load(path, err, sizeof(err));
	int lvl;

	if (!tl) {
		fprintf(stderr, "tts-launch: diagnose: %s\n", err);
		return 2;
	}
	lvl = diagnose_run(tl, checks ? checks : DIAG_ALL);
	if (!strcmp(format, "json")) {
		json_t *o = json_pack("{s:s, s:s, s:O}", "timeline", path, "result",
				      lvl == DIAG_ERROR ? "error"
				      : lvl		? "warning"
							: "clean",
				      "findings", json_object_get(timeline_json(tl), "findings"));

		json_dumpf(o, stdout,
			   JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
		fputc('\n', stdout);
		json_decref(o);
	} else if (lvl == DIAG_CLEAN) {
		printf("tts-launch: diagnosis of %s: no findings\n", path);
	} else {
		diagnose_print(tl, stdout);
	}
	timeline_free(tl);
	return lvl;
}
