/* timeline_build: the collector's records and the maps into the model's
 * trace sections; see timeline_build.h.
 *
 * Still here, to move (issue 13): the file classes come from
 * classify_file and hfcache's cache directories; a download's final
 * size and whether it finished are read from the live disk (stat/access in
 * snap_files); requests carry dur_ms and page_faults copied from latency_ms
 * and faults for their readers (collector.c on_request). */
#include "timeline_build.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "classify.h"
#include "clock.h"
#include "gpu.h"
#include "hfcache.h"
#include "imports.h"
#include "procfs.h"
#include "redact.h"
#include "timeline_internal.h"
#include "timeline_parts.h"
#include "trace.skel.h"
#include "util.h"

const char *config_env(const void *cfg, const char *name)
{
	const struct config *c = cfg;

	for (size_t i = 0; c && i < c->n_env; i++)
		if (!strcmp(c->env[i].name, name))
			return c->env[i].value;
	return NULL;
}

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

json_t *errno_json(int e)
{
	const char *n = e > 0 ? strerrorname_np(e) : NULL;

	return n ? json_string(n) : json_null();
}

struct io_ent {
	struct file_key k;
	struct file_val v;
	bool claimed;  /* reads, maps, faults (and writes unless wclaimed) given to a path */
	bool wclaimed; /* writes given to a download (*.incomplete) path */
};

static int io_cmp(const void *a, const void *b)
{
	const struct file_key *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static json_t *file_json(const char *path, const char *cls, const struct path_val *pv,
			 const struct file_val *fv, __u64 first, __u64 last)
{
	json_t *f =
	    json_pack("{s:o, s:s, s:i, s:i, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "path",
		      json_text(path), "class", cls, "opens", pv ? (int)pv->opens : 0,
		      "failed_opens", pv ? (int)pv->open_fails : 0, "errno",
		      errno_json(pv && pv->open_fails ? pv->open_errno : 0), "bytes_read",
		      (json_int_t)fv->bytes_read, "bytes_written", (json_int_t)fv->bytes_written,
		      "reads", (json_int_t)fv->reads, "writes", (json_int_t)fv->writes, "mmaps",
		      (json_int_t)fv->mmaps, "mmap_bytes", (json_int_t)fv->mmap_bytes, "faults",
		      (json_int_t)fv->faults, "size", (json_int_t)fv->size);

	json_object_set_new(f, "pid", pv ? json_integer(pv->first_pid) : json_null());
	set_ms_range(f, first, last);
	/* when its mapped pages were faulted in: load time or request time */
	json_object_set_new(f, "faults_after_ready",
			    json_integer((json_int_t)fv->faults_after_ready));
	json_object_set_new(f, "major_faults", json_integer((json_int_t)fv->major_faults));
	json_object_set_new(f, "first_fault_ms",
			    fv->first_fault_ns ? ms_json(clock_ns_to_ms(fv->first_fault_ns))
					       : json_null());
	json_object_set_new(f, "last_fault_ms",
			    fv->last_fault_ns ? ms_json(clock_ns_to_ms(fv->last_fault_ns))
					      : json_null());
	json_object_set_new(f, "write_errors", json_integer((json_int_t)fv->write_errors));
	json_object_set_new(f, "write_errno", errno_json(fv->write_errors ? fv->write_errno : 0));
	return f;
}

/* One path of the paths map, made absolute; relative and absolute spellings
 * of one file are merged. */
struct pent {
	char path[PATH_MAX];
	struct path_val pv;
	__u64 base_dev, base_ino; /* a relative path's directory */
	bool rel;
	const char *cls;
	struct io_ent *ie;  /* the inode it opened, if its I/O was seen */
	struct file_val fv; /* the I/O given to this path */
};

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
			char abs[PATH_MAX];

			if (!pe[i].rel ||
			    !(base = paths_dir_find(d, pe[i].base_dev, pe[i].base_ino)))
				continue;
			path_resolve(base, pe[i].path, abs, sizeof(abs));
			snprintf(pe[i].path, sizeof(pe[i].path), "%s", abs);
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
static void snap_failops(struct collector *t, const struct path_dirs *dt, json_t *files,
			 json_t *renames, json_t *root)
{
	static const char *ops[] = {"?", "mkdir", "unlink", "rmdir"};
	struct bpf_map *m = t->skel->maps.failops;
	json_t *list = json_array(), *f;
	struct failop_key k, next;
	struct failop_val v;
	size_t i;
	int more;

	for (more = bpf_map__get_next_key(m, NULL, &next, sizeof(next)); !more;
	     more = bpf_map__get_next_key(m, &k, &next, sizeof(next))) {
		char abs[PATH_MAX];

		k = next;
		if (bpf_map__lookup_elem(m, &k, sizeof(k), &v, sizeof(v), 0))
			continue;
		k.p.path[sizeof(k.p.path) - 1] = 0;
		paths_abs(dt, k.p.path, k.p.base_dev, k.p.base_ino, abs, sizeof(abs));
		json_array_append_new(
		    list,
		    json_pack("{s:s, s:o, s:i, s:o, s:o, s:o, s:i}", "op", ops[k.op < 4 ? k.op : 0],
			      "path", json_text(abs), "count", (int)v.count, "errno",
			      errno_json(v.err), "first_ms", ms_json(clock_ns_to_ms(v.first_ns)),
			      "last_ms", ms_json(clock_ns_to_ms(v.last_ns)), "pid", (int)v.pid));
	}
	/* writes: the kernel keeps no time for them, the file's span stands in */
	json_array_foreach (files, i, f) {
		if (json_integer_value(json_object_get(f, "write_errors")) <= 0)
			continue;
		json_array_append_new(list, json_pack("{s:s, s:O, s:O, s:O, s:O, s:O, s:O}", "op",
						      "write", "path", json_object_get(f, "path"),
						      "count", json_object_get(f, "write_errors"),
						      "errno", json_object_get(f, "write_errno"),
						      "first_ms", json_object_get(f, "first_ms"),
						      "last_ms", json_object_get(f, "last_ms"),
						      "pid", json_object_get(f, "pid")));
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

/* flock/fcntl locks per file, and the blocking lock calls in progress now */
static void snap_locks(struct collector *t, const struct pent *pe, size_t n_pe, json_t *root)
{
	struct bpf_map *m = t->skel->maps.locks, *im = t->skel->maps.inflight;
	json_t *list = json_array(), *l;
	struct file_key k, next;
	struct lock_val v;
	__u32 tid, tnext;
	struct inflight in;
	double now = clock_ms();
	__u32 walked;
	int more;

	for (more = bpf_map__get_next_key(m, NULL, &next, sizeof(next)); !more;
	     more = bpf_map__get_next_key(m, &k, &next, sizeof(next))) {
		char name[TRACE_NAME_MAX + 16];
		const char *path = NULL;
		double ff, end;

		k = next;
		if (bpf_map__lookup_elem(m, &k, sizeof(k), &v, sizeof(v), 0))
			continue;
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
		json_array_append_new(list, l);
	}
	/* blocking lock calls not returned yet: the file by /proc/TID/fd/FD.
	 * The kernel deletes entries meanwhile, and a deleted key makes
	 * get_next_key start over: the walk is capped at the map's size. */
	for (more = bpf_map__get_next_key(im, NULL, &tnext, sizeof(tnext)), walked = 0;
	     !more && walked++ < bpf_map__max_entries(im);
	     more = bpf_map__get_next_key(im, &tid, &tnext, sizeof(tnext))) {
		char link[64], path[PATH_MAX];
		json_t *hit = NULL, *pj;
		ssize_t n;
		size_t i;

		tid = tnext;
		if (bpf_map__lookup_elem(im, &tid, sizeof(tid), &in, sizeof(in), 0) ||
		    (in.nr != SYS_flock && in.nr != SYS_fcntl) || !in.a2)
			continue;
		snprintf(link, sizeof(link), "/proc/%u/fd/%llu", tid, (unsigned long long)in.a0);
		n = readlink(link, path, sizeof(path) - 1);
		if (n <= 0)
			continue;
		path[n] = 0;
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
	timeline_sort_by(list, "first_ms");
	json_object_set_new(root, "locks", list);
}

static void snap_files(struct collector *t, json_t *root)
{
	struct bpf_map *pm = t->skel->maps.paths, *fm = t->skel->maps.files;
	json_t *files = json_array(), *missing = json_array(), *downloads = json_array();
	json_t *renames = json_array(), *links = json_array();
	struct io_ent *io = NULL;
	struct pent *pe = NULL;
	struct path_dirs dt = {0};
	size_t n_io = 0, cap = 0, n_pe = 0, cap_pe = 0, m;
	struct path_key pk, pnext;
	struct file_key fk, fnext;
	struct path_val pv;
	struct file_val fv;
	char dirs[HF_MAX_CACHE_DIRS + 1][PATH_MAX];
	char(*r2)[2][PATH_MAX] = NULL; /* renames and symlinks, absolute */
	const char *dp[HF_MAX_CACHE_DIRS + 2];
	int nd, more;

	nd = cache_dirs(t->cfg, dirs);
	for (int i = 0; i < nd; i++)
		dp[i] = dirs[i];
	dp[nd] = NULL;

	/* bytes per inode, sorted for lookup by the paths that opened them */
	for (more = bpf_map__get_next_key(fm, NULL, &fnext, sizeof(fnext)); !more;
	     more = bpf_map__get_next_key(fm, &fk, &fnext, sizeof(fnext))) {
		fk = fnext;
		if (bpf_map__lookup_elem(fm, &fk, sizeof(fk), &fv, sizeof(fv), 0))
			continue;
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
	if (n_io)
		qsort(io, n_io, sizeof(*io), io_cmp);

	/* the paths map, relative paths last: they resolve against the table
	 * the absolute ones build */
	for (more = bpf_map__get_next_key(pm, NULL, &pnext, sizeof(pnext)); !more;
	     more = bpf_map__get_next_key(pm, &pk, &pnext, sizeof(pnext))) {
		pk = pnext;
		if (bpf_map__lookup_elem(pm, &pk, sizeof(pk), &pv, sizeof(pv), 0))
			continue;
		if (n_pe == cap_pe) {
			struct pent *n =
			    realloc(pe, (cap_pe = cap_pe ? cap_pe * 2 : 512) * sizeof(*pe));

			if (!n)
				break;
			pe = n;
		}
		pk.path[sizeof(pk.path) - 1] = 0;
		snprintf(pe[n_pe].path, sizeof(pe[n_pe].path), "%s", pk.path);
		pe[n_pe].pv = pv;
		pe[n_pe].rel = pk.path[0] != '/';
		pe[n_pe].base_dev = pk.base_dev;
		pe[n_pe].base_ino = pk.base_ino;
		n_pe++;
	}
	resolve_paths(t, pe, n_pe, &dt);
	if (n_pe)
		qsort(pe, n_pe, sizeof(*pe), pent_cmp);
	m = 0;
	for (size_t i = 0; i < n_pe; i++) {
		if (m && !strcmp(pe[m - 1].path, pe[i].path))
			pv_merge(&pe[m - 1].pv, &pe[i].pv);
		else
			pe[m++] = pe[i];
	}
	n_pe = m;
	/* the inode each path opened; earliest opener first */
	for (size_t i = 0; i < n_pe; i++) {
		struct file_key key = {.dev = pe[i].pv.dev, .ino = pe[i].pv.ino};

		pe[i].cls = classify_file(pe[i].path, dp);
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
			json_array_append_new(
			    missing,
			    json_pack("{s:o, s:i, s:o, s:o, s:o, s:i, s:s}", "path",
				      json_text(path), "attempts",
				      (int)(pv.open_fails + pv.probe_fails), "errno",
				      errno_json(pv.probe_fails ? pv.probe_errno : pv.open_errno),
				      "first_ms", ms_json(clock_ns_to_ms(pv.fail_first_ns)),
				      "last_ms", ms_json(clock_ns_to_ms(pv.fail_last_ns)), "pid",
				      (int)pv.first_pid, "class", cls));
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
		json_array_append_new(files, file_json(path, cls, &pv, &fv, first, last));
		if (dl && fv.bytes_written) {
			char final[PATH_MAX];
			size_t l = strlen(path) - strlen(".incomplete");
			double a = clock_ns_to_ms(first), b = clock_ns_to_ms(last);
			const char *renamed = NULL, *link = NULL;
			double rename_ms = -1;
			struct stat st;

			snprintf(final, sizeof(final), "%.*s", (int)l, path);
			/* complete when the trace saw it renamed to its final name */
			for (size_t i = 0; r2 && i < t->n_path2; i++) {
				if (t->path2[i].type == EV_RENAME && t->path2[i].ret == 0 &&
				    !strcmp(r2[i][0], path)) {
					renamed = r2[i][1];
					rename_ms = clock_ns_to_ms(t->path2[i].ts_ns);
				}
			}
			for (size_t i = 0; renamed && r2 && i < t->n_path2; i++)
				if (t->path2[i].type == EV_SYMLINK && t->path2[i].ret == 0 &&
				    !strcmp(r2[i][0], renamed))
					link = r2[i][1];
			json_array_append_new(
			    downloads,
			    json_pack(
				"{s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:b, s:b, s:o, s:o, s:o}",
				"path", json_text(path), "bytes", (json_int_t)fv.bytes_written,
				"size",
				!stat(renamed ? renamed : final, &st) ? json_integer(st.st_size)
								      : json_null(),
				"first_ms", ms_json(a), "last_ms", ms_json(b), "dur_ms",
				ms_json(b - a), "rate_mb_s",
				b > a ? json_real(fv.bytes_written / 1e3 / (b - a)) : json_null(),
				"complete", renamed != NULL, "completed",
				renamed != NULL || access(final, F_OK) == 0, "final_path",
				json_text(renamed), "rename_ms",
				renamed ? ms_json(rename_ms) : json_null(), "link",
				json_text(link)));
		}
	}

	/* inodes read or written but never opened by path in the tree (inherited
	 * fds such as the log file): named by their dentry */
	for (size_t i = 0; i < n_io; i++) {
		char name[TRACE_NAME_MAX + 16];

		if (io[i].claimed)
			continue;
		snprintf(name, sizeof(name), "[fd] %s", io[i].v.name);
		json_array_append_new(files,
				      file_json(name, classify_file(io[i].v.name, dp), NULL,
						&io[i].v, io[i].v.first_ns, io[i].v.last_ns));
	}
	snap_locks(t, pe, n_pe, root);
	snap_failops(t, &dt, files, renames, root);
	paths_dirs_free(&dt);
	free(r2);
	free(pe);
	free(io);
	timeline_sort_by(files, "first_ms");
	timeline_sort_by(missing, "first_ms");
	timeline_sort_by(downloads, "first_ms");
	json_object_set_new(root, "files", files);
	json_object_set_new(root, "missing_paths", missing);
	json_object_set_new(root, "downloads", downloads);
	json_object_set_new(root, "renames", renames);
	json_object_set_new(root, "symlinks", links);
}

static void snap_procs(struct collector *t, json_t *root)
{
	struct bpf_map *m = t->skel->maps.procstat;
	json_t *mem = json_object_get(root, "memory"), *per = json_array(), *sched = json_array();
	json_t *procs = json_array(), *p;
	__u64 faults = 0, maj = 0, minr = 0, io = 0, sl = 0, rq = 0;
	__u32 k, next;
	struct proc_stat s;
	const char *key;
	int more;

	for (more = bpf_map__get_next_key(m, NULL, &next, sizeof(next)); !more;
	     more = bpf_map__get_next_key(m, &k, &next, sizeof(next))) {
		unsigned long long mi = 0, ma = 0;
		json_t *cmd;

		k = next;
		if (bpf_map__lookup_elem(m, &k, sizeof(k), &s, sizeof(s), 0))
			continue;
		p = collector_proc(t, (pid_t)k);
		cmd = json_object_get(p, "command");
		if (s.exited || !proc_faults((pid_t)k, &mi, &ma)) {
			/* exited: the sum over its threads, taken at each thread's exit */
			mi = s.exited_min_flt;
			ma = s.exited_maj_flt;
		}
		faults += s.faults;
		maj += ma;
		minr += mi;
		io += s.io_wait_ns;
		sl += s.sleep_ns;
		rq += s.runq_ns;
		json_array_append_new(
		    per, json_pack("{s:i, s:O, s:I, s:I, s:I}", "pid", (int)k, "command", cmd,
				   "page_faults", (json_int_t)s.faults, "minor_faults",
				   (json_int_t)mi, "major_faults", (json_int_t)ma));
		json_array_append_new(
		    sched, json_pack("{s:i, s:O, s:o, s:o, s:o, s:I}", "pid", (int)k, "command",
				     cmd, "io_wait_ms", ms_json(s.io_wait_ns / 1e6), "sleep_ms",
				     ms_json(s.sleep_ns / 1e6), "runqueue_ms",
				     ms_json(s.runq_ns / 1e6), "switches", (json_int_t)s.switches));
	}
	json_object_set_new(mem, "page_faults", json_integer((json_int_t)faults));
	json_object_set_new(mem, "major_faults", json_integer((json_int_t)maj));
	json_object_set_new(mem, "minor_faults", json_integer((json_int_t)minr));
	json_object_set_new(mem, "per_process", per);
	json_object_set_new(root, "sched",
			    json_pack("{s:o, s:o, s:o, s:o}", "io_wait_ms", ms_json(io / 1e6),
				      "sleep_ms", ms_json(sl / 1e6), "runqueue_ms",
				      ms_json(rq / 1e6), "processes", sched));
	json_object_foreach (t->procs, key, p)
		json_array_append(procs, p);
	timeline_sort_by(procs, "pid");
	json_object_set_new(root, "processes", procs);
}

static void snap_memory(struct collector *t, json_t *root)
{
	json_t *mem = json_object_get(root, "memory"), *series = json_array(), *files, *f;
	__u64 model_faults = 0, *counts;
	__u32 last = 0;
	size_t i;

	/* the series up to its last non-empty bucket, each the sum over CPUs
	 * (a per-CPU array: the fault probe adds without an atomic); batch
	 * reads of FAULT_CHUNK buckets, not thousands of lookups */
	counts = calloc(TRACE_BUCKETS, sizeof(*counts));
	if (counts && collector_fault_series(t, counts) == 0) {
		for (__u32 b = 0; b < TRACE_BUCKETS; b++)
			if (counts[b])
				last = b + 1;
		for (__u32 b = 0; b < last; b++)
			json_array_append_new(series, json_integer((json_int_t)counts[b]));
	}
	free(counts);
	json_object_set_new(mem, "fault_rate",
			    json_pack("{s:i, s:o}", "bucket_ms", (int)(TRACE_BUCKET_NS / 1000000),
				      "counts", series));
	files = json_object_get(root, "files");
	json_array_foreach (files, i, f) {
		if (!strcmp(json_string_value(json_object_get(f, "class")), "model"))
			model_faults += json_integer_value(json_object_get(f, "faults"));
	}
	json_object_set_new(mem, "model_file_faults", json_integer((json_int_t)model_faults));
	json_object_set_new(mem, "mlock_calls", json_deep_copy(t->mlocks));
}

static void snap_block(struct collector *t, json_t *root, const __u64 *cnt)
{
	json_t *hist = json_array();

	for (__u32 i = 0; i < TRACE_HIST_SLOTS; i++) {
		__u64 v = 0;

		if (bpf_map__lookup_elem(t->skel->maps.blockhist, &i, sizeof(i), &v, sizeof(v),
					 0) ||
		    !v)
			continue;
		/* slot i holds latencies below 2^i us */
		json_array_append_new(hist, json_pack("{s:I, s:I}", "lt_us", (json_int_t)1 << i,
						      "count", (json_int_t)v));
	}
	json_object_set_new(root, "block",
			    json_pack("{s:I, s:I, s:o}", "requests",
				      (json_int_t)cnt[CNT_BLOCK_REQS], "bytes",
				      (json_int_t)cnt[CNT_BLOCK_BYTES], "latency_hist", hist));
}

static json_t *strv_json(char *const *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

void timeline_build(struct timeline *tl, struct collector *t, const struct tracer_status *st)
{
	json_t *root, *tr, *fb;
	__u64 cnt[CNT_MAX];
	__u64 lost;

	if (!t || !st || !tl)
		return;
	root = timeline_json(tl);
	collector_counters(t, cnt);
	lost = cnt[CNT_RB_DROPS] + cnt[CNT_PATHS_FULL] + cnt[CNT_FILES_FULL] + cnt[CNT_PEERS_FULL] +
	       cnt[CNT_PROCS_FULL] + cnt[CNT_FAILOPS_FULL] + cnt[CNT_LOCKS_FULL] +
	       cnt[CNT_THREADS_FULL] + t->user_lost;

	tr = json_object_get(root, "tracing");
	json_object_set_new(tr, "enabled", json_true());
	json_object_set_new(tr, "probes", strv_json(st->probes, st->n_probes));
	fb = json_array();
	for (size_t i = 0; i < st->n_fallbacks; i++)
		json_array_append_new(fb, json_pack("{s:s, s:s}", "probe", st->fallbacks[i].probe,
						    "reason", st->fallbacks[i].reason));
	json_object_set_new(tr, "fallbacks", fb);
	json_object_set_new(tr, "tracefs", json_string(st->tracefs));
	json_object_set_new(tr, "events_lost", json_integer((json_int_t)lost));
	json_object_set_new(
	    tr, "lost",
	    json_pack("{s:I, s:I, s:I, s:I, s:I}", "ring_buffer", (json_int_t)cnt[CNT_RB_DROPS],
		      "paths", (json_int_t)cnt[CNT_PATHS_FULL], "files",
		      (json_int_t)cnt[CNT_FILES_FULL], "peers", (json_int_t)cnt[CNT_PEERS_FULL],
		      "processes", (json_int_t)cnt[CNT_PROCS_FULL]));
	json_object_set_new(json_object_get(tr, "lost"), "failed_ops",
			    json_integer((json_int_t)cnt[CNT_FAILOPS_FULL]));
	json_object_set_new(json_object_get(tr, "lost"), "locks",
			    json_integer((json_int_t)cnt[CNT_LOCKS_FULL]));
	json_object_set_new(json_object_get(tr, "lost"), "threads",
			    json_integer((json_int_t)cnt[CNT_THREADS_FULL]));

	if (t->exec_ms >= 0)
		timeline_mark(tl, "exec", t->exec_ms);
	if (t->ready_ms >= 0)
		timeline_mark(tl, "ready", t->ready_ms);

	snap_files(t, root);
	snap_network(t, root);
	snap_procs(t, root);
	snap_memory(t, root);
	snap_block(t, root, cnt);
	imports_snapshot(root, t->imports, st->usdt); /* python: USDT or derived imports */
	json_object_set_new(root, "gpu", gpu_snap(t->gpu, root, t->cfg, t->ready_ms));
	json_object_set_new(root, "requests", json_deep_copy(t->requests));
	json_object_set_new(tr, "requests_window_s",
			    t->req_window_ms < 0 ? json_null()
						 : json_real(t->req_window_ms / 1000));
	json_object_set_new(tr, "requests_after_window",
			    json_integer((json_int_t)t->req_after_window));
	json_object_set_new(tr, "light",
			    !st->light
				? json_null()
				: json_pack("{s:o, s:o, s:o}", "ms", ms_json(st->light_ms),
					    "detached", strv_json(st->detached, st->n_detached),
					    "kept", strv_json(st->kept, st->n_kept)));
}
