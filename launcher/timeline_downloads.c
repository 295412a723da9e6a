/* timeline_downloads: the model's downloads (every client's temp file,
 * named by the file it becomes, bytes = the distinct ranges written, the
 * kernel's size), copies (sendfile/copy_file_range) and xet (the Xet
 * transfer's own chunk/shard cache) sections, for timeline_files.c. The
 * layout rules are hfcache.c's. docs/timeline.md, "downloads". */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dlsize.h"
#include "hfcache.h"
#include "hostprobe.h"
#include "mapwalk.h"
#include "timeline_files.h"
#include "timeline_files_int.h"
#include "timeline_internal.h"
#include "timeline_view.h"
#include "trace.skel.h"
#include "util.h"

/* ---- Xet's caches ---- */

/* The Xet transfer's own files (chunk/shard cache, staging: class
 * xet_cache), as a whole: what it wrote there and where that lives. The
 * real client shares chunks across files, so these bytes belong to no one
 * download. null when none was touched. */
void snap_xet(struct collector *t, const struct tl_file *files, size_t n_files, json_t *root)
{
	const char *app = t->cfg && t->cfg->app_dir ? t->cfg->app_dir : "/";
	char dir[PATH_MAX], magic[32];
	double written = 0, errors = 0;
	const char *err = NULL;
	struct hostprobe_fs fs;
	json_t *x;
	int n = 0;

	hf_xet_dir(app, config_env, t->cfg, dir, sizeof(dir));
	for (size_t i = 0; i < n_files; i++) {
		const struct tl_file *f = &files[i];

		if (!f->class || strcmp(f->class, "xet_cache"))
			continue;
		n++;
		written += tl_or0(f->bytes_written);
		if (f->write_errors > 0) {
			errors += f->write_errors;
			err = f->write_errno;
		}
	}
	if (!n) {
		json_object_set_new(root, "xet", json_null());
		return;
	}
	x = json_pack("{s:o, s:i, s:I, s:I, s:s?}", "dir", json_text(dir), "files", n,
		      "bytes_written", (json_int_t)written, "write_errors", (json_int_t)errors,
		      "write_errno", err);
	if (hostprobe_fs(dir, &fs) == 0) {
		snprintf(magic, sizeof(magic), "0x%lx", fs.magic);
		json_object_set_new(x, "fs_type", json_string(fs.type ? fs.type : magic));
		json_object_set_new(x, "persistent", json_boolean(fs.lost == NULL));
		json_object_set_new(x, "lost", fs.lost ? json_string(fs.lost) : json_null());
	}
	json_object_set_new(root, "xet", x);
}

/* ---- downloads and copies ---- */

static int wr_cmp(const void *a, const void *b)
{
	const struct wr_key *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

void dl_ctx_init(struct dl_ctx *dx, struct collector *t)
{
	struct bpf_map *m = t->skel->maps.wranges;
	struct wr_key k;
	struct wr_val v;
	struct map_walk mw;
	size_t cap = 0;

	memset(dx, 0, sizeof(*dx));
	dx->app_dir = t->cfg && t->cfg->app_dir ? t->cfg->app_dir : "/";
	if (t->cfg && t->cfg->model_dir && *t->cfg->model_dir)
		path_resolve(dx->app_dir, t->cfg->model_dir, dx->model_dir, sizeof(dx->model_dir));
	map_walk_begin(&mw, bpf_map__fd(m), sizeof(k), sizeof(v), false);
	while (map_walk_next(&mw, &k, &v)) {
		if (dx->n_wr == cap) {
			struct wr_ent *n = realloc(dx->wr, (cap = cap ? cap * 2 : 64) * sizeof(*n));

			if (!n)
				break;
			dx->wr = n;
		}
		dx->wr[dx->n_wr].k = k;
		dx->wr[dx->n_wr++].v = v;
	}
	map_walk_end(&mw);
	if (dx->n_wr)
		qsort(dx->wr, dx->n_wr, sizeof(*dx->wr), wr_cmp);
}

/* What the tree's threads wrote into one inode, all together */
struct wr_sum {
	__u64 distinct; /* bytes in the union of the ranges, plus the unranged */
	__u64 extra;	/* of those: writes no slot took (exact unless they overlap) */
	__u64 isize;	/* i_size after the last write */
	__u64 max_end;
	__u64 first_ns, last_ns;
	int threads;
	int ranges;   /* disjoint ranges in the union */
	__u64 min_lo; /* the lowest offset written */
};

static int u64pair_cmp(const void *a, const void *b)
{
	const __u64 *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

static bool wr_sum(const struct dl_ctx *dx, __u64 dev, __u64 ino, struct wr_sum *o)
{
	struct wr_key key = {.dev = dev, .ino = ino};
	struct wr_ent *e = dx->n_wr ? bsearch(&key, dx->wr, dx->n_wr, sizeof(*e), wr_cmp) : NULL;
	__u64(*iv)[2] = NULL;
	size_t a, b, n = 0;

	memset(o, 0, sizeof(*o));
	if (!e)
		return false;
	/* bsearch finds one of the inode's entries: the run around it */
	for (a = e - dx->wr; a > 0 && !wr_cmp(&dx->wr[a - 1].k, &key); a--)
		;
	for (b = e - dx->wr; b + 1 < dx->n_wr && !wr_cmp(&dx->wr[b + 1].k, &key); b++)
		;
	iv = calloc((b - a + 1) * WR_SLOTS, sizeof(*iv));
	if (!iv)
		return false;
	for (size_t i = a; i <= b; i++) {
		const struct wr_val *v = &dx->wr[i].v;

		o->threads++;
		o->extra += v->extra;
		if (v->max_end > o->max_end)
			o->max_end = v->max_end;
		if (!o->first_ns || v->first_ns < o->first_ns)
			o->first_ns = v->first_ns;
		if (v->last_ns >= o->last_ns) {
			o->last_ns = v->last_ns;
			o->isize = v->isize;
		}
		for (__u32 s = 0; s < v->n && s < WR_SLOTS; s++) {
			iv[n][0] = v->lo[s];
			iv[n++][1] = v->hi[s];
		}
	}
	qsort(iv, n, sizeof(*iv), u64pair_cmp);
	for (size_t i = 0; i < n;) {
		__u64 lo = iv[i][0], hi = iv[i][1];

		if (!o->ranges)
			o->min_lo = lo;

		for (i++; i < n && iv[i][0] <= hi; i++)
			if (iv[i][1] > hi)
				hi = iv[i][1];
		o->distinct += hi - lo;
		o->ranges++;
	}
	o->distinct += o->extra;
	free(iv);
	return true;
}

/* The final path a download's temp file becomes, and the path that names
 * it (a hub cache's snapshot link; else the final path): what the trace saw
 * (the rename, the link), else what hfcache's rules derive from the names
 * the client used just before (local_dir: its lock or metadata; hub cache:
 * the snapshot pointer it probed). */
static void dl_final(const struct pent *pe, size_t n_pe, size_t j, char (*r2)[2][PATH_MAX],
		     const struct collector *t, char *final, char *named, const char **renamed,
		     double *rename_ms, const char **link)
{
	const char *path = pe[j].path;
	enum hf_writer w = hf_temp_writer(path);

	*renamed = *link = NULL;
	*rename_ms = -1;
	final[0] = named[0] = 0;
	for (size_t i = 0; r2 && i < t->n_path2; i++) {
		if (t->path2[i].type == EV_RENAME && t->path2[i].ret == 0 &&
		    !strcmp(r2[i][0], path)) {
			*renamed = r2[i][1];
			*rename_ms = clock_ns_to_ms(t->path2[i].ts_ns);
		}
	}
	if (*renamed)
		snprintf(final, PATH_MAX, "%s", *renamed);
	else if (w == HF_W_LOCAL_DIR) {
		for (size_t i = 0; i < n_pe && !*final; i++)
			hf_local_dir_final(path, pe[i].path, final, PATH_MAX);
	} else {
		hf_temp_final(path, final, PATH_MAX);
	}
	for (size_t i = 0; *final && r2 && i < t->n_path2; i++)
		if (t->path2[i].type == EV_SYMLINK && t->path2[i].ret == 0 &&
		    !strcmp(r2[i][0], final))
			*link = r2[i][1];
	if (*link) {
		snprintf(named, PATH_MAX, "%s", *link);
	} else if (w == HF_W_HUB_CACHE && *final) {
		/* huggingface_hub checks snapshots/COMMIT/FILE, then the blob,
		 * then takes the lock and opens the .incomplete: the pointer of
		 * the repository whose first failed probe came last before the
		 * blob's is this file's (the pointer is probed again after) */
		char snaps[PATH_MAX];
		__u64 blob_ns = 0, best = 0;

		hf_snapshots_dir(final, snaps, sizeof(snaps));
		for (size_t i = 0; i < n_pe; i++)
			if (!strcmp(pe[i].path, final) && pe[i].pv.probe_fails)
				blob_ns = pe[i].pv.fail_first_ns;
		if (!blob_ns)
			blob_ns = pe[j].pv.first_ns;
		for (size_t i = 0; *snaps && i < n_pe; i++) {
			const struct path_val *v = &pe[i].pv;

			if (!v->probe_fails || strncmp(pe[i].path, snaps, strlen(snaps)) ||
			    !hf_snapshot_file(pe[i].path) || v->fail_first_ns > blob_ns ||
			    v->fail_first_ns < best)
				continue;
			best = v->fail_first_ns;
			snprintf(named, PATH_MAX, "%s", pe[i].path);
		}
	}
	if (!*named)
		snprintf(named, PATH_MAX, "%s", *final ? final : path);
}

/* Where a hub cache already keeps the file a local_dir download wrote
 * (models--ORG--NAME/blobs/ETAG under HF_HUB_CACHE, model_dir/hf_cache or
 * HF_HOME/hub): the model's downloads[].also_in, for the downloaded-twice
 * rule. The one answer here the trace cannot give (the blob may be one the
 * tree never touched, from an earlier run), so it is the host's
 * (hostprobe), asked when the completed download is first seen and
 * recorded in the collector: every later snapshot, and the timeline
 * written at the end, keep that answer, never a later disk's. */
static const char *also_in(struct collector *t, const char *etag)
{
	struct hf_cache_dir d[HF_MAX_CACHE_DIRS];
	const char *app = t->cfg && t->cfg->app_dir ? t->cfg->app_dir : "/";
	struct coll_hub_blob *r;
	char found[PATH_MAX];
	int n;

	for (int i = 0; i < t->n_hub_blobs; i++)
		if (!strcmp(t->hub_blobs[i].etag, etag))
			return t->hub_blobs[i].blob;
	n = hf_cache_dirs(app, t->cfg ? t->cfg->model_dir : NULL, config_env, t->cfg, false, d,
			  HF_MAX_CACHE_DIRS);
	hostprobe_hub_blob(d, n, etag, found, sizeof(found));
	if (t->n_hub_blobs == COLL_HUB_BLOBS_MAX)
		return NULL; /* not recorded: a later snapshot asks again */
	r = &t->hub_blobs[t->n_hub_blobs++];
	snprintf(r->etag, sizeof(r->etag), "%s", etag);
	r->blob = *found ? strdup(found) : NULL;
	return r->blob;
}

/* The trace saw the final file there without seeing the rename: the tree
 * opened final (the open succeeded, so it existed) and the kernel's i_size
 * of its inode (the files map) is not 0, or the client linked a snapshot
 * to it (hub cache: done only once the blob is in place). */
/* The final path when it is absolute: one made from a temp file whose
 * directory was never resolved (a relative path of a process gone before
 * its cwd was read) is not known, and the format promises an absolute one */
static const char *absolute_or_null(const char *p) { return p && p[0] == '/' ? p : NULL; }

static bool final_seen(const struct pent *pe, size_t n_pe, const char *final, const char *link)
{
	if (link)
		return true;
	for (size_t i = 0; *final && i < n_pe; i++)
		if (pe[i].pv.opens && pe[i].ie && pe[i].ie->v.size > 0 &&
		    !strcmp(pe[i].path, final))
			return true;
	return false;
}

json_t *download_json(const struct dl_ctx *dx, const struct pent *pe, size_t n_pe, size_t j,
		      char (*r2)[2][PATH_MAX], const struct collector *t, __u64 first, __u64 last)
{
	const struct file_val *fv = &pe[j].fv;
	const char *path = pe[j].path, *renamed, *link;
	char final[PATH_MAX], named[PATH_MAX], name[PATH_MAX];
	double a = clock_ns_to_ms(first), b = clock_ns_to_ms(last), rename_ms;
	struct wr_sum ws;
	__u64 bytes, have;
	long long known;
	struct dlsize ex;
	double pct;
	bool resumed;
	json_t *d;

	dl_final(pe, n_pe, j, r2, t, final, named, &renamed, &rename_ms, &link);
	hf_download_name(named, dx->model_dir, dx->app_dir, name, sizeof(name));
	/* bytes: the distinct ranges written (exact as wr_val says), else the
	 * sum of the writes */
	bytes = wr_sum(dx, pe[j].pv.dev, pe[j].pv.ino, &ws) ? ws.distinct : fv->bytes_written;
	known = hf_known_size(*final ? final : path);
	/* resumed (plain HTTP, ModelScope: Range): one run of writes that
	 * starts past 0 and reaches the end; the file then has what an
	 * earlier run wrote too (have), which its percent counts */
	resumed = ws.ranges == 1 && ws.min_lo > 0 && ws.max_end >= ws.isize;
	have = resumed ? ws.isize : bytes;
	/* the expected size, in order of truth (dlsize.h): the kernel's once
	 * renamed, IndexTTS2's known size while nothing contradicts it, the
	 * highest offset written only as a lower bound */
	ex = dlsize_expected(
	    &(struct dlsize_in){renamed != NULL, (double)ws.isize, (double)have, (double)known});
	pct = dlsize_percent((double)have, ex.size, ex.from);
	d = json_pack("{s:o, s:o, s:s, s:s, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:b, s:b, s:o, s:o, "
		      "s:o}",
		      "path", json_text(path), "name", json_text(name), "kind", "download",
		      "writer", hf_writer_name(hf_temp_writer(path)), "bytes", (json_int_t)bytes,
		      "bytes_written", (json_int_t)fv->bytes_written, "size",
		      ws.last_ns ? json_integer((json_int_t)ws.isize) : json_null(), "first_ms",
		      ms_json(a), "last_ms", ms_json(b), "dur_ms", ms_json(b - a), "rate_mb_s",
		      b > a ? json_real(bytes / 1e3 / (b - a)) : json_null(), "complete",
		      renamed != NULL, "completed",
		      renamed != NULL || final_seen(pe, n_pe, final, link), "final_path",
		      json_text(absolute_or_null(renamed ? renamed : final)), "rename_ms",
		      renamed ? ms_json(rename_ms) : json_null(), "link", json_text(link));
	if (renamed && hf_temp_writer(path) == HF_W_LOCAL_DIR) {
		char etag[128];
		const char *blob = hf_local_dir_etag(path, etag, sizeof(etag))
				       ? also_in((struct collector *)t, etag)
				       : NULL;

		json_object_set_new(d, "also_in", json_text(blob));
	}
	json_object_set_new(d, "threads", json_integer(ws.threads));
	json_object_set_new(d, "ranges", json_integer(ws.ranges));
	json_object_set_new(d, "ranges_exact", json_boolean(ws.last_ns && !ws.extra));
	json_object_set_new(d, "expected_size",
			    ex.from != DLSIZE_NONE ? json_integer((json_int_t)ex.size)
						   : json_null());
	json_object_set_new(d, "expected_from", json_text(dlsize_from_name(ex.from)));
	json_object_set_new(d, "known_size", known ? json_integer((json_int_t)known) : json_null());
	json_object_set_new(d, "known_dropped", json_boolean(ex.known_dropped));
	json_object_set_new(d, "resumed_from",
			    resumed ? json_integer((json_int_t)ws.min_lo) : json_null());
	json_object_set_new(d, "percent", pct >= 0 ? json_real(pct) : json_null());
	return d;
}

/* The path the tree last opened inode k by, or NULL */
static const char *inode_path(const struct pent *pe, size_t n_pe, const struct file_key *k)
{
	const char *p = NULL;
	__u64 at = 0;

	for (size_t i = 0; i < n_pe; i++)
		if (pe[i].pv.opens && pe[i].pv.dev == k->dev && pe[i].pv.ino == k->ino &&
		    pe[i].pv.last_ns >= at) {
			p = pe[i].path;
			at = pe[i].pv.last_ns;
		}
	return p;
}

/* sendfile/copy_file_range copies (the copies map): each by destination,
 * named like a download; from_cache when the source is in a hub cache
 * (models--ORG--NAME: shutil.copytree/copy2 migrating an old cache) */
void snap_copies(const struct dl_ctx *dx, struct collector *t, const struct pent *pe, size_t n_pe,
		 json_t *root)
{
	struct bpf_map *m = t->skel->maps.copies;
	json_t *list = json_array();
	struct file_key k;
	struct copy_val v;
	struct map_walk mw;

	map_walk_begin(&mw, bpf_map__fd(m), sizeof(k), sizeof(v), false);
	while (map_walk_next(&mw, &k, &v)) {
		char dn[TRACE_NAME_MAX + 8], sn[TRACE_NAME_MAX + 8], name[PATH_MAX];
		const char *dst, *src;
		double a, b;

		v.src_name[TRACE_NAME_MAX - 1] = v.dst_name[TRACE_NAME_MAX - 1] = 0;
		snprintf(dn, sizeof(dn), "[fd] %s", v.dst_name);
		snprintf(sn, sizeof(sn), "[fd] %s", v.src_name);
		dst = inode_path(pe, n_pe, &k);
		src = inode_path(pe, n_pe, &v.src);
		hf_download_name(dst ? dst : dn, dx->model_dir, dx->app_dir, name, sizeof(name));
		a = clock_ns_to_ms(v.first_ns);
		b = clock_ns_to_ms(v.last_ns);
		json_array_append_new(
		    list, json_pack("{s:o, s:o, s:o, s:s, s:I, s:I, s:I, s:o, s:o, s:o, s:b, s:i}",
				    "path", json_text(dst ? dst : dn), "name", json_text(name),
				    "source", json_text(src ? src : sn), "kind", "copy", "bytes",
				    (json_int_t)v.bytes, "size", (json_int_t)v.isize, "calls",
				    (json_int_t)v.calls, "first_ms", ms_json(a), "last_ms",
				    ms_json(b), "dur_ms", ms_json(b - a), "from_cache",
				    src && hf_repo_folder(src, NULL) != NULL, "pid", (int)v.pid));
	}
	map_walk_end(&mw);
	timeline_sort_by(list, "first_ms");
	json_object_set_new(root, "copies", list);
}
