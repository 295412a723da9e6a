/* timeline_files: the file side of the model's trace sections; see
 * timeline_files.h. The downloads, copies and xet sections are
 * timeline_downloads.c's.
 *
 * The file classes come from classify_file and hfcache's cache
 * directories. Everything else is the trace's, but for three live facts
 * the kernel's records cannot give, asked while the snapshot is taken
 * (the moment they describe) and kept as they were then: a lock's holder,
 * from /proc/locks while the tree is refused it (locks[].holder_pid); the
 * file of a blocking lock call not returned yet, from /proc/TID/fd
 * (locks[].waiting); and, in timeline_downloads.c, a hub cache blob the
 * tree never touched (downloads[].also_in). */
#include "timeline_files.h"
#include "timeline_files_int.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "classify.h"
#include "clock.h"
#include "hfcache.h"
#include "mapwalk.h"
#include "paths.h"
#include "timeline_internal.h"
#include "timeline_sections.h"
#include "trace.skel.h"
#include "util.h"

/* Where the service's Hugging Face client caches (hfcache.h), and its
 * HF_HOME as a whole (token, xet...): the "cache" file class. */
static int cache_dirs(const struct config *cfg, char dirs[][PATH_MAX])
{
	struct hf_cache_dir d[HF_MAX_CACHE_DIRS];
	const char *app = cfg && cfg->app_dir ? cfg->app_dir : "/";
	int n = hf_cache_dirs(app, cfg ? cfg->model_dir : NULL, config_env, cfg, false, d,
			      HF_MAX_CACHE_DIRS);

	for (int i = 0; i < n; i++)
		snprintf(dirs[i], PATH_MAX, "%.*s", PATH_MAX - 1, d[i].path);
	hf_home(app, config_env, cfg, dirs[n], PATH_MAX);
	return n + 1;
}

static void set_ms_range(json_t *o, __u64 first, __u64 last)
{
	json_object_set_new(o, "first_ms", ms_json(clock_ns_to_ms(first)));
	json_object_set_new(o, "last_ms", ms_json(clock_ns_to_ms(last)));
}

/* An errno's name ("ENOENT"), NULL for none or an unknown one */
static const char *errno_name(int e) { return e > 0 ? strerrorname_np(e) : NULL; }

json_t *errno_json(int e)
{
	const char *n = errno_name(e);

	return n ? json_string(n) : json_null();
}

static int io_cmp(const void *a, const void *b)
{
	const struct file_key *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* A files[] record (timeline_sections.h): its keys as file_json wrote them */
static void file_rec(struct tl_sections *s, const char *path, const char *cls,
		     const struct path_val *pv, const struct file_val *fv, __u64 first, __u64 last)
{
	struct tl_file *f = tl_list_push(s, TLS_FILES);
	const char *en = pv && pv->open_fails ? errno_name(pv->open_errno) : NULL;

	if (!f)
		return;
	f->path = tl_strdup(path);
	f->class = strdup(cls);
	f->opens = pv ? (int)pv->opens : 0;
	f->failed_opens = pv ? (int)pv->open_fails : 0;
	f->errno_name = en ? strdup(en) : NULL;
	f->bytes_read = (double)(json_int_t)fv->bytes_read;
	f->bytes_written = (double)(json_int_t)fv->bytes_written;
	f->reads = (double)(json_int_t)fv->reads;
	f->writes = (double)(json_int_t)fv->writes;
	f->mmaps = (double)(json_int_t)fv->mmaps;
	f->mmap_bytes = (double)(json_int_t)fv->mmap_bytes;
	f->faults = (double)(json_int_t)fv->faults;
	f->size = (double)(json_int_t)fv->size;
	f->pid = pv ? (double)pv->first_pid : TL_NONE;
	f->first_ms = coll_ms(clock_ns_to_ms(first));
	f->last_ms = coll_ms(clock_ns_to_ms(last));
	/* when its mapped pages were faulted in: load time or request time */
	f->faults_after_ready = (double)(json_int_t)fv->faults_after_ready;
	f->major_faults = (double)(json_int_t)fv->major_faults;
	f->first_fault_ms =
	    fv->first_fault_ns ? coll_ms(clock_ns_to_ms(fv->first_fault_ns)) : TL_NONE;
	f->last_fault_ms = fv->last_fault_ns ? coll_ms(clock_ns_to_ms(fv->last_fault_ns)) : TL_NONE;
	f->write_errors = (double)(json_int_t)fv->write_errors;
	en = fv->write_errors ? errno_name(fv->write_errno) : NULL;
	f->write_errno = en ? strdup(en) : NULL;
	tl_rec_seal(TLS_FILES, f);
}

static int pent_first_cmp(const void *a, const void *b)
{
	const struct pent *x = a, *y = b;

	return x->pv.first_ns < y->pv.first_ns ? -1 : x->pv.first_ns > y->pv.first_ns;
}

/* Several paths can name one inode: a download's *.incomplete is renamed to
 * its blob, which is opened again through a snapshot link. The writes go to
 * the download path, the reads and maps to the first other path that opened
 * it; what no one claimed goes to the download path. */
static void give_io(struct pent *pe, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct io_ent *ie = pe[i].ie;

		if (!ie || strcmp(pe[i].cls, "download") || ie->wclaimed)
			continue;
		ie->wclaimed = true;
		pe[i].fv.bytes_written = ie->v.bytes_written;
		pe[i].fv.writes = ie->v.writes;
		pe[i].fv.first_write_ns = ie->v.first_write_ns;
		pe[i].fv.last_write_ns = ie->v.last_write_ns;
		pe[i].fv.write_errors = ie->v.write_errors;
		pe[i].fv.write_errno = ie->v.write_errno;
		pe[i].fv.size = ie->v.size;
		memcpy(pe[i].fv.name, ie->v.name, sizeof(pe[i].fv.name));
	}
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < n; i++) {
			struct io_ent *ie = pe[i].ie;
			bool dl = !strcmp(pe[i].cls, "download");

			if (!ie || ie->claimed || dl != (pass == 1))
				continue;
			ie->claimed = true;
			pe[i].fv.first_ns = ie->v.first_ns;
			pe[i].fv.last_ns = ie->v.last_ns;
			pe[i].fv.bytes_read = ie->v.bytes_read;
			pe[i].fv.reads = ie->v.reads;
			pe[i].fv.mmaps = ie->v.mmaps;
			pe[i].fv.mmap_bytes = ie->v.mmap_bytes;
			pe[i].fv.faults = ie->v.faults;
			pe[i].fv.first_fault_ns = ie->v.first_fault_ns;
			pe[i].fv.last_fault_ns = ie->v.last_fault_ns;
			pe[i].fv.faults_after_ready = ie->v.faults_after_ready;
			pe[i].fv.major_faults = ie->v.major_faults;
			pe[i].fv.size = ie->v.size;
			if (!ie->wclaimed) {
				pe[i].fv.bytes_written = ie->v.bytes_written;
				pe[i].fv.writes = ie->v.writes;
				pe[i].fv.write_errors = ie->v.write_errors;
				pe[i].fv.write_errno = ie->v.write_errno;
				pe[i].fv.first_write_ns = ie->v.first_write_ns;
				pe[i].fv.last_write_ns = ie->v.last_write_ns;
			}
		}
	}
}

static int pent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct pent *)a)->path, ((const struct pent *)b)->path);
}

static __u64 min_nz(__u64 a, __u64 b) { return !a ? b : !b ? a : a < b ? a : b; }

static void pv_merge(struct path_val *a, const struct path_val *b)
{
	if (b->fail_last_ns > a->fail_last_ns) {
		a->open_errno = b->open_fails ? b->open_errno : a->open_errno;
		a->probe_errno = b->probe_fails ? b->probe_errno : a->probe_errno;
	}
	if (b->first_ns < a->first_ns)
		a->first_pid = b->first_pid;
	if (b->opens && (!a->opens || b->last_ns > a->last_ns)) {
		a->dev = b->dev;
		a->ino = b->ino;
	}
	a->first_ns = min_nz(a->first_ns, b->first_ns);
	a->last_ns = a->last_ns > b->last_ns ? a->last_ns : b->last_ns;
	a->fail_first_ns = min_nz(a->fail_first_ns, b->fail_first_ns);
	a->fail_last_ns = a->fail_last_ns > b->fail_last_ns ? a->fail_last_ns : b->fail_last_ns;
	a->opens += b->opens;
	a->open_fails += b->open_fails;
	a->probe_fails += b->probe_fails;
	a->open_flags |= b->open_flags;
}

/* Make relative paths absolute. Their bases: the cwds seen, and every
 * directory the tree opened (the dirfds of *at calls), itself perhaps by a
 * relative path resolved in an earlier round. Returns the table (owned
 * strings) for the renames and symlinks. */
static void resolve_paths(struct collector *t, struct pent *pe, size_t n, struct path_dirs *d)
{
	bool progress = true;

	for (size_t i = 0; i < t->dirs.n; i++)
		paths_dir_push(d, t->dirs.d[i].dev, t->dirs.d[i].ino, t->dirs.d[i].path);
	for (size_t i = 0; i < n; i++)
		if (!pe[i].rel && pe[i].pv.opens)
			paths_dir_push(d, pe[i].pv.dev, pe[i].pv.ino, pe[i].path);
	for (int round = 0; round < 4 && progress; round++) {
		progress = false;
		for (size_t i = 0; i < n; i++) {
			const char *base;
			char abs[PATH_MAX], *resolved;

			if (!pe[i].rel ||
			    !(base = paths_dir_find(d, pe[i].base_dev, pe[i].base_ino)))
				continue;
			path_resolve(base, pe[i].path, abs, sizeof(abs));
			if (!(resolved = strdup(abs)))
				continue;
			free(pe[i].path);
			pe[i].path = resolved;
			pe[i].rel = false;
			progress = true;
			if (pe[i].pv.opens)
				paths_dir_push(d, pe[i].pv.dev, pe[i].pv.ino, pe[i].path);
		}
	}
}

static json_t *path2_json(const struct tl_path2_event *e, const char *oldp, const char *newp)
{
	return json_pack("{s:o, s:o, s:o, s:i, s:i, s:o}", e->type == EV_SYMLINK ? "target" : "old",
			 json_text(oldp), e->type == EV_SYMLINK ? "path" : "new", json_text(newp),
			 "ms", ms_json(clock_ns_to_ms(e->ts_ns)), "pid", (int)e->pid, "result",
			 e->ret < 0 ? -1 : 0, "errno", errno_json(e->ret < 0 ? -e->ret : 0));
}

/* Failed mkdir/unlink/rmdir (the failops map), failed writes (per file)
 * and failed renames, as one list: what refused to be written. */
static void snap_failops(struct collector *t, const struct path_dirs *dt,
			 const struct tl_sections *s, json_t *renames, json_t *root)
{
	static const char *ops[] = {"?", "mkdir", "unlink", "rmdir"};
	struct bpf_map *m = t->skel->maps.failops;
	json_t *list = json_array(), *f;
	struct failop_key k;
	struct failop_val v;
	struct map_walk mw;
	size_t i;

	map_walk_begin(&mw, bpf_map__fd(m), sizeof(k), sizeof(v), false);
	while (map_walk_next(&mw, &k, &v)) {
		char abs[PATH_MAX];

		k.p.path[sizeof(k.p.path) - 1] = 0;
		paths_abs(dt, k.p.path, k.p.base_dev, k.p.base_ino, abs, sizeof(abs));
		json_array_append_new(
		    list,
		    json_pack("{s:s, s:o, s:i, s:o, s:o, s:o, s:i}", "op", ops[k.op < 4 ? k.op : 0],
			      "path", json_text(abs), "count", (int)v.count, "errno",
			      errno_json(v.err), "first_ms", ms_json(clock_ns_to_ms(v.first_ns)),
			      "last_ms", ms_json(clock_ns_to_ms(v.last_ns)), "pid", (int)v.pid));
	}
	map_walk_end(&mw);
	/* writes: the kernel keeps no time for them, the file's span stands in */
	for (i = 0; i < s->l[TLS_FILES].n; i++) {
		const struct tl_file *w = &TLS_FILES_OF(s)[i];

		if (!(w->write_errors > 0))
			continue;
		json_array_append_new(
		    list,
		    json_pack("{s:s, s:s, s:I, s:o, s:f, s:f, s:o}", "op", "write", "path", w->path,
			      "count", (json_int_t)w->write_errors, "errno",
			      w->write_errno ? json_string(w->write_errno) : json_null(),
			      "first_ms", w->first_ms, "last_ms", w->last_ms, "pid",
			      tl_has(w->pid) ? json_integer((json_int_t)w->pid) : json_null()));
	}
	json_array_foreach (renames, i, f) {
		if (json_integer_value(json_object_get(f, "result")) == 0)
			continue;
		json_array_append_new(
		    list,
		    json_pack("{s:s, s:O, s:O, s:i, s:O, s:O, s:O, s:O}", "op", "rename", "path",
			      json_object_get(f, "new"), "old", json_object_get(f, "old"), "count",
			      1, "errno", json_object_get(f, "errno"), "first_ms",
			      json_object_get(f, "ms"), "last_ms", json_object_get(f, "ms"), "pid",
			      json_object_get(f, "pid")));
	}
	timeline_sort_by(list, "first_ms");
	json_object_set_new(root, "failed_ops", list);
}

static json_t *lock_json(const char *path)
{
	return json_pack(
	    "{s:o, s:i, s:i, s:i, s:n, s:f, s:f, s:n, s:n, s:n, s:n, s:n, s:b, s:n, s:n}", "path",
	    json_text(path), "calls", 0, "blocking_calls", 0, "failures", 0, "errno", "wait_ms",
	    0.0, "max_wait_ms", 0.0, "contended_ms", "first_ms", "last_ms", "acquired_ms", "pid",
	    "waiting", false, "waiting_ms", "waiting_pid");
}

/* Who holds a lock on inode k now (/proc/locks: "N: FLOCK ADVISORY WRITE
 * PID MAJ:MIN:INO ..."), not counting the tree's waiter: the holder's pid,
 * 0 when none; its command into cmd. While the tree polls (filelock:
 * LOCK_NB, 50 ms sleep) the other process still holds it, so the live
 * answer at a snapshot is the holder's. */
static int lock_holder(const struct file_key *k, __u32 self, char *cmd, size_t len)
{
	FILE *f = fopen("/proc/locks", "re");
	char line[256];
	int pid = 0;

	if (len)
		cmd[0] = 0;
	if (!f)
		return 0;
	while (!pid && fgets(line, sizeof(line), f)) {
		unsigned int maj, min;
		unsigned long long ino;
		int p;

		/* "1: FLOCK  ADVISORY  WRITE 29165 fe:00:1146985 0 EOF" ("->" lines wait) */
		if (strstr(line, "->") ||
		    sscanf(line, "%*d: %*s %*s %*s %d %x:%x:%llu", &p, &maj, &min, &ino) != 4)
			continue;
		/* the kernel's dev_t: major in the upper 12 bits (MKDEV) */
		if (ino == k->ino && ((__u64)maj << 20 | min) == k->dev && (__u32)p != self)
			pid = p;
	}
	fclose(f);
	if (pid) {
		char path[64];
		FILE *c;

		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
		c = fopen(path, "re");
		if (c) {
			if (fgets(cmd, (int)len, c))
				cmd[strcspn(cmd, "\n")] = 0;
			fclose(c);
		}
	}
	return pid;
}

/* Holders seen by earlier snapshots: the final one comes after the wait
 * ended, when /proc/locks no longer shows them (one trace per process) */
#define HOLDERS_MAX 64
static struct {
	struct file_key k;
	int pid;
	char cmd[64];
} holders[HOLDERS_MAX];
static int n_holders;

static int holder_remembered(const struct file_key *k, __u32 self, bool live, char *cmd, size_t len)
{
	int pid = live ? lock_holder(k, self, cmd, len) : 0;

	for (int i = 0; i < n_holders; i++) {
		if (holders[i].k.dev != k->dev || holders[i].k.ino != k->ino)
			continue;
		if (pid) {
			holders[i].pid = pid;
			snprintf(holders[i].cmd, sizeof(holders[i].cmd), "%s", cmd);
		}
		snprintf(cmd, len, "%s", holders[i].cmd);
		return holders[i].pid;
	}
	if (pid && n_holders < HOLDERS_MAX) {
		holders[n_holders].k = *k;
		holders[n_holders].pid = pid;
		snprintf(holders[n_holders++].cmd, sizeof(holders[0].cmd), "%s", cmd);
	}
	return pid;
}

/* The file a blocking lock call not returned yet waits on: its thread's fd
 * now (/proc/TID/fd/FD). Live because the in-flight record holds the fd
 * alone, and the question (who waits, on what, now) is the snapshot's own
 * moment. false when the thread or fd is gone. */
static bool inflight_fd_path(__u32 tid, unsigned long long fd, char *path, size_t len)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%u/fd/%llu", tid, fd);
	n = readlink(link, path, len - 1);
	if (n <= 0)
		return false;
	path[n] = 0;
	return true;
}

/* flock/fcntl locks per file, and the blocking lock calls in progress now */
static void snap_locks(struct collector *t, const struct pent *pe, size_t n_pe, json_t *root)
{
	struct bpf_map *m = t->skel->maps.locks, *im = t->skel->maps.inflight;
	json_t *list = json_array(), *l;
	struct file_key k;
	struct lock_val v;
	__u32 tid;
	struct inflight in;
	struct map_walk mw, mw2;
	double now = clock_ms();

	map_walk_begin(&mw, bpf_map__fd(m), sizeof(k), sizeof(v), false);
	while (map_walk_next(&mw, &k, &v)) {
		char name[TRACE_NAME_MAX + 16];
		const char *path = NULL;
		double ff, end;

		for (size_t i = 0; i < n_pe && !path; i++)
			if (pe[i].pv.opens && pe[i].pv.dev == k.dev && pe[i].pv.ino == k.ino)
				path = pe[i].path;
		v.name[TRACE_NAME_MAX - 1] = 0;
		snprintf(name, sizeof(name), "[fd] %s", v.name);
		l = lock_json(path ? path : name);
		json_object_set_new(l, "calls", json_integer(v.calls));
		json_object_set_new(l, "blocking_calls", json_integer(v.blocking));
		json_object_set_new(l, "failures", json_integer(v.failures));
		json_object_set_new(l, "errno", errno_json(v.failures ? v.err : 0));
		json_object_set_new(l, "wait_ms", ms_json(v.wait_ns / 1e6));
		json_object_set_new(l, "max_wait_ms", ms_json(v.max_wait_ns / 1e6));
		set_ms_range(l, v.first_ns, v.last_ns);
		json_object_set_new(l, "acquired_ms",
				    v.acquired_ns ? ms_json(clock_ns_to_ms(v.acquired_ns))
						  : json_null());
		/* non-blocking polling (filelock: LOCK_EX|LOCK_NB, sleep, again):
		 * from the first refusal to the success, or to the last try */
		if (v.first_fail_ns) {
			ff = clock_ns_to_ms(v.first_fail_ns);
			end = clock_ns_to_ms(v.acquired_ns > v.first_fail_ns ? v.acquired_ns
									     : v.last_ns);
			json_object_set_new(l, "contended_ms", ms_json(end - ff));
		}
		json_object_set_new(l, "pid", json_integer(v.pid));
		/* refused and not had since: who holds it (the model's record) */
		if (v.failures) {
			char cmd[64] = "";
			int h = holder_remembered(&k, v.pid, v.acquired_ns < v.last_ns, cmd,
						  sizeof(cmd));

			json_object_set_new(l, "holder_pid", h ? json_integer(h) : json_null());
			json_object_set_new(l, "holder_command",
					    h && *cmd ? json_text(cmd) : json_null());
		}
		json_array_append_new(list, l);
	}
	map_walk_end(&mw);
	/* blocking lock calls not returned yet: the file by /proc/TID/fd/FD.
	 * The kernel deletes entries meanwhile: seen or not (mapwalk.h). */
	map_walk_begin(&mw2, bpf_map__fd(im), sizeof(tid), sizeof(in), false);
	while (map_walk_next(&mw2, &tid, &in)) {
		char path[PATH_MAX];
		json_t *hit = NULL, *pj;
		size_t i;

		if ((in.nr != SYS_flock && in.nr != SYS_fcntl) || !in.a2)
			continue;
		if (!inflight_fd_path(tid, (unsigned long long)in.a0, path, sizeof(path)))
			continue;
		/* the list holds paths as the timeline writes them (json_text) */
		pj = json_text(path);
		json_array_foreach (list, i, l)
			if (pj && json_equal(json_object_get(l, "path"), pj))
				hit = l;
		json_decref(pj);
		if (!hit) {
			hit = lock_json(path);
			set_ms_range(hit, in.ts, in.ts);
			json_array_append_new(list, hit);
		}
		json_object_set_new(hit, "waiting", json_true());
		json_object_set_new(hit, "waiting_ms", ms_json(now - clock_ns_to_ms(in.ts)));
		json_object_set_new(hit, "waiting_pid", json_integer(tid));
	}
	map_walk_end(&mw2);
	timeline_sort_by(list, "first_ms");
	json_object_set_new(root, "locks", list);
}

void timeline_snap_files(struct collector *t, json_t *root, struct tl_sections *s)
{
	struct bpf_map *pm = t->skel->maps.paths, *fm = t->skel->maps.files;
	json_t *downloads = json_array();
	json_t *renames = json_array(), *links = json_array();
	struct io_ent *io = NULL;
	struct pent *pe = NULL;
	struct path_dirs dt = {0};
	struct dl_ctx dx;
	size_t n_io = 0, cap = 0, n_pe = 0, cap_pe = 0, m;
	struct path_key pk;
	struct file_key fk;
	struct path_val pv;
	struct file_val fv;
	struct map_walk mw, mw2;
	char dirs[HF_MAX_CACHE_DIRS + 1][PATH_MAX];
	char(*r2)[2][PATH_MAX] = NULL; /* renames and symlinks, absolute */
	const char *dp[HF_MAX_CACHE_DIRS + 2];
	int nd;

	tl_list_clear(s, TLS_FILES);
	tl_list_clear(s, TLS_MISSING);
	nd = cache_dirs(t->cfg, dirs);
	dl_ctx_init(&dx, t);
	for (int i = 0; i < nd; i++)
		dp[i] = dirs[i];
	dp[nd] = NULL;

	/* bytes per inode, sorted for lookup by the paths that opened them */
	map_walk_begin(&mw, bpf_map__fd(fm), sizeof(fk), sizeof(fv), false);
	while (map_walk_next(&mw, &fk, &fv)) {
		if (n_io == cap) {
			struct io_ent *n = realloc(io, (cap = cap ? cap * 2 : 256) * sizeof(*io));

			if (!n)
				break;
			io = n;
		}
		io[n_io].k = fk;
		io[n_io].v = fv;
		io[n_io].v.name[TRACE_NAME_MAX - 1] = 0;
		io[n_io].wclaimed = false;
		io[n_io++].claimed = false;
	}
	map_walk_end(&mw);
	if (n_io)
		qsort(io, n_io, sizeof(*io), io_cmp);

	/* the paths map, relative paths last: they resolve against the table
	 * the absolute ones build */
	map_walk_begin(&mw2, bpf_map__fd(pm), sizeof(pk), sizeof(pv), false);
	while (map_walk_next(&mw2, &pk, &pv)) {
		if (n_pe == cap_pe) {
			struct pent *n =
			    realloc(pe, (cap_pe = cap_pe ? cap_pe * 2 : 512) * sizeof(*pe));

			if (!n)
				break;
			pe = n;
		}
		pk.path[sizeof(pk.path) - 1] = 0;
		if (!(pe[n_pe].path = strdup(pk.path)))
			continue;
		pe[n_pe].pv = pv;
		pe[n_pe].rel = pk.path[0] != '/';
		pe[n_pe].base_dev = pk.base_dev;
		pe[n_pe].base_ino = pk.base_ino;
		n_pe++;
	}
	map_walk_end(&mw2);
	resolve_paths(t, pe, n_pe, &dt);
	if (n_pe)
		qsort(pe, n_pe, sizeof(*pe), pent_cmp);
	m = 0;
	for (size_t i = 0; i < n_pe; i++) {
		if (m && !strcmp(pe[m - 1].path, pe[i].path)) {
			pv_merge(&pe[m - 1].pv, &pe[i].pv);
			free(pe[i].path);
		} else
			pe[m++] = pe[i];
	}
	n_pe = m;
	/* the inode each path opened; earliest opener first */
	for (size_t i = 0; i < n_pe; i++) {
		struct file_key key = {.dev = pe[i].pv.dev, .ino = pe[i].pv.ino};

		pe[i].cls = classify_file(pe[i].path, dp);
		if (hf_temp_writer(pe[i].path) == HF_W_MIRROR) {
			char fin[PATH_MAX];

			hf_temp_final(pe[i].path, fin, sizeof(fin));
			if (hf_mirror_target(fin, dx.model_dir, dx.app_dir))
				pe[i].cls = "download";
		}
		memset(&pe[i].fv, 0, sizeof(pe[i].fv));
		pe[i].ie =
		    pe[i].pv.opens && n_io ? bsearch(&key, io, n_io, sizeof(*io), io_cmp) : NULL;
	}
	if (n_pe)
		qsort(pe, n_pe, sizeof(*pe), pent_first_cmp);
	give_io(pe, n_pe);

	/* renames and symlinks, absolute */
	if (t->n_path2)
		r2 = calloc(t->n_path2, sizeof(*r2));
	for (size_t i = 0; r2 && i < t->n_path2; i++) {
		const struct tl_path2_event *e = &t->path2[i];

		paths_abs(&dt, e->new, e->new_dev, e->new_ino, r2[i][1], PATH_MAX);
		if (e->type == EV_SYMLINK) {
			/* a link's target is relative to the link's directory */
			char dir[PATH_MAX], *sl;

			snprintf(dir, sizeof(dir), "%s", r2[i][1]);
			sl = strrchr(dir, '/');
			if (sl)
				*sl = 0;
			path_resolve(dir, e->old, r2[i][0], PATH_MAX);
			json_array_append_new(links, path2_json(e, e->old, r2[i][1]));
			json_object_set_new(json_array_get(links, json_array_size(links) - 1),
					    "resolved", json_text(r2[i][0]));
		} else {
			paths_abs(&dt, e->old, e->old_dev, e->old_ino, r2[i][0], PATH_MAX);
			json_array_append_new(renames, path2_json(e, r2[i][0], r2[i][1]));
		}
	}

	/* one entry per path */
	for (size_t j = 0; j < n_pe; j++) {
		const char *cls = pe[j].cls, *path = pe[j].path;
		bool dl = !strcmp(cls, "download");
		__u64 first, last;

		pv = pe[j].pv;
		if (pv.open_fails || pv.probe_fails) {
			struct tl_missing *mp = tl_list_push(s, TLS_MISSING);
			const char *en =
			    errno_name(pv.probe_fails ? pv.probe_errno : pv.open_errno);

			if (mp) {
				mp->path = tl_strdup(path);
				mp->attempts = (int)(pv.open_fails + pv.probe_fails);
				mp->errno_name = en ? strdup(en) : NULL;
				mp->first_ms = coll_ms(clock_ns_to_ms(pv.fail_first_ns));
				mp->last_ms = coll_ms(clock_ns_to_ms(pv.fail_last_ns));
				mp->pid = (int)pv.first_pid;
				mp->class = strdup(cls);
				tl_rec_seal(TLS_MISSING, mp);
			}
		}
		if (!pv.opens && !pv.open_fails)
			continue;
		first = pv.first_ns;
		last = pv.last_ns;
		fv = pe[j].fv;
		/* a download lasts from its open to its last write */
		if (fv.first_ns && fv.first_ns < first)
			first = fv.first_ns;
		if (dl && fv.first_write_ns && fv.first_write_ns < first)
			first = fv.first_write_ns;
		if (dl ? fv.last_write_ns > last : fv.last_ns > last)
			last = dl ? fv.last_write_ns : fv.last_ns;
		file_rec(s, path, cls, &pv, &fv, first, last);
		/* written, or opened for writing (a transfer that has not written yet) */
		if (dl && (fv.bytes_written || (pv.open_flags & 3)))
			json_array_append_new(downloads,
					      download_json(&dx, pe, n_pe, j, r2, t, first, last));
	}
	snap_copies(&dx, t, pe, n_pe, root);
	free(dx.wr);

	/* inodes read or written but never opened by path in the tree (inherited
	 * fds such as the log file): named by their dentry */
	for (size_t i = 0; i < n_io; i++) {
		char name[TRACE_NAME_MAX + 16];

		if (io[i].claimed)
			continue;
		snprintf(name, sizeof(name), "[fd] %s", io[i].v.name);
		file_rec(s, name, classify_file(io[i].v.name, dp), NULL, &io[i].v, io[i].v.first_ns,
			 io[i].v.last_ns);
	}
	snap_xet(t, TLS_FILES_OF(s), s->l[TLS_FILES].n, root);
	snap_locks(t, pe, n_pe, root);
	snap_failops(t, &dt, s, renames, root);
	paths_dirs_free(&dt);
	free(r2);
	for (size_t i = 0; i < n_pe; i++)
		free(pe[i].path);
	free(pe);
	free(io);
	tl_list_sort(s, TLS_FILES);
	tl_list_sort(s, TLS_MISSING);
	timeline_sort_by(downloads, "first_ms");
	tl_sections_place(s, TLS_FILES, root);
	tl_sections_place(s, TLS_MISSING, root);
	json_object_set_new(root, "downloads", downloads);
	json_object_set_new(root, "renames", renames);
	json_object_set_new(root, "symlinks", links);
}
