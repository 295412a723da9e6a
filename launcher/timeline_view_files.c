/* timeline_view_files: the decoders of timeline_view.h's file sections
 * (files and missing_paths are the model's records, timeline_sections.h;
 * downloads, copies, renames, symlinks, locks,
 * failed_ops, cache_fs) and the look-ups over them. */
#include <string.h>

#include "hfcache.h"
#include "phases.h"
#include "timeline_view_int.h"
#include "util.h"

int tlv_decode_downloads(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "downloads"), *e;
	struct tl_download *out;
	size_t i;

	if (LIST(arr, out, v->n_downloads) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_download){
		    .path = str(e, "path"),
		    .name = str(e, "name"),
		    .label = phases_download_label(str(e, "name"), str(e, "path")),
		    .bytes = num(e, "bytes"),
		    .first_ms = num(e, "first_ms"),
		    .last_ms = num(e, "last_ms"),
		    .rate_mb_s = num(e, "rate_mb_s"),
		    .completed = flag(e, "completed"),
		    .complete = flag(e, "complete"),
		    .completed_known = json_is_boolean(json_object_get(e, "completed")),
		    .complete_known = json_is_boolean(json_object_get(e, "complete")),
		    .final_path = str(e, "final_path"),
		    .link = str(e, "link"),
		    .writer = str(e, "writer"),
		    .expected_size = num(e, "expected_size"),
		    .expected_from = str(e, "expected_from"),
		    .bytes_written = num(e, "bytes_written"),
		    .size = num(e, "size"),
		    .dur_ms = num(e, "dur_ms"),
		    .rename_ms = num(e, "rename_ms"),
		    .percent = num(e, "percent"),
		    .threads = num(e, "threads"),
		    .resumed_from = num(e, "resumed_from"),
		    .kind = str(e, "kind"),
		    .also_in = str(e, "also_in"),
		};
	v->downloads = out;
	return 0;
}

int tlv_decode_copies(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "copies"), *e;
	struct tl_copy *out;
	size_t i;

	if (LIST(arr, out, v->n_copies) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_copy){
		    .path = str(e, "path"),
		    .source = str(e, "source"),
		    .name = str(e, "name"),
		    .label = phases_download_label(str(e, "name"), str(e, "path")),
		    .bytes = num(e, "bytes"),
		    .size = num(e, "size"),
		    .first_ms = num(e, "first_ms"),
		    .last_ms = num(e, "last_ms"),
		    .from_cache = flag(e, "from_cache"),
		};
	v->copies = out;
	return 0;
}

int tlv_decode_renames(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "renames"), *e;
	struct tl_rename *out;
	size_t i;

	if (LIST(arr, out, v->n_renames) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_rename){str(e, "old"), str(e, "new"), num(e, "result")};
	v->renames = out;
	return 0;
}

int tlv_decode_symlinks(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "symlinks"), *e;
	struct tl_symlink *out;
	size_t i;

	if (LIST(arr, out, v->n_symlinks) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_symlink){str(e, "path"), str(e, "resolved"), num(e, "result")};
	v->symlinks = out;
	return 0;
}

int tlv_decode_locks(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "locks"), *e;
	struct tl_lock *out;
	size_t i;

	if (LIST(arr, out, v->n_locks) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_lock){
		    .path = str(e, "path"),
		    .waiting = flag(e, "waiting"),
		    .waiting_ms = num(e, "waiting_ms"),
		    .calls = num(e, "calls"),
		    .blocking_calls = num(e, "blocking_calls"),
		    .failures = num(e, "failures"),
		    .wait_ms = num(e, "wait_ms"),
		    .max_wait_ms = num(e, "max_wait_ms"),
		    .contended_ms = num(e, "contended_ms"),
		    .acquired_ms = num(e, "acquired_ms"),
		    .acquired_null = json_is_null(json_object_get(e, "acquired_ms")),
		    .first_ms = num(e, "first_ms"),
		    .last_ms = num(e, "last_ms"),
		    .holder_pid = num(e, "holder_pid"),
		    .holder_command = str(e, "holder_command"),
		    .errno_name = str(e, "errno"),
		};
	v->locks = out;
	return 0;
}

int tlv_decode_failed_ops(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "failed_ops"), *e;
	struct tl_failed_op *out;
	size_t i;

	if (LIST(arr, out, v->n_failed_ops) < 0)
		return -1;
	json_array_foreach (arr, i, e)
		out[i] = (struct tl_failed_op){
		    .op = str(e, "op"),
		    .path = str(e, "path"),
		    .old = str(e, "old"),
		    .errno_name = str(e, "errno"),
		    .count = num(e, "count"),
		    .first_ms = num(e, "first_ms"),
		    .last_ms = num(e, "last_ms"),
		    .pid = num(e, "pid"),
		};
	v->failed_ops = out;
	return 0;
}

int tlv_decode_cache_fs(const json_t *root, struct tl_view *v)
{
	const json_t *arr = json_object_get(root, "cache_fs"), *e, *g;
	struct tl_cache_fs *out;
	size_t i, j;

	if (LIST(arr, out, v->n_cache_fs) < 0)
		return -1;
	v->cache_fs = out;
	json_array_foreach (arr, i, e) {
		const json_t *inc = json_object_get(e, "incomplete");
		struct tl_on_disk *d;

		out[i] = (struct tl_cache_fs){
		    .dir = str(e, "dir"),
		    .role = str(e, "role"),
		    .statfs_path = str(e, "statfs_path"),
		    .fs_type = str(e, "fs_type"),
		    .fs_magic = str(e, "fs_magic"),
		    .lost = str(e, "lost"),
		    .exists = tri(e, "exists"),
		    .read_only = tri(e, "read_only"),
		    .persistent = tri(e, "persistent"),
		    .has_incomplete = json_is_array(inc),
		};
		if (LIST(inc, d, out[i].n_incomplete) < 0)
			return -1;
		json_array_foreach (inc, j, g)
			d[j] = (struct tl_on_disk){str(g, "path"), num(g, "size")};
		out[i].incomplete = d;
	}
	return 0;
}

const struct tl_download *tl_view_download_at(const struct tl_view *v, const char *path, bool blobs)
{
	for (size_t i = 0; v && path && i < v->n_downloads; i++) {
		const struct tl_download *d = &v->downloads[i];

		if (d->name &&
		    ((d->path && !strcmp(d->path, path)) ||
		     (blobs && d->link && d->final_path && !strcmp(d->final_path, path))))
			return d;
	}
	return NULL;
}

bool tl_view_renamed(const struct tl_view *v, const char *path)
{
	for (size_t i = 0; v && path && i < v->n_renames; i++)
		if (v->renames[i].old && !strcmp(v->renames[i].old, path) &&
		    tl_or0(v->renames[i].result) == 0)
			return true;
	return false;
}

int tl_view_downloads_in_flight(const struct tl_view *v, const struct tl_file **last)
{
	int n = 0;

	*last = NULL;
	for (size_t i = 0; v && i < v->n_files; i++) {
		const struct tl_file *f = &v->files[i];

		/* a download's temp file, whichever client writes it (the class
		 * timeline_files gives it), or an older timeline's *.incomplete */
		if (!f->path || f->path[0] != '/' ||
		    !(hf_hub_temp(f->path) || (f->class && !strcmp(f->class, "download"))) ||
		    tl_or0(f->opens) <= 0 || tl_view_renamed(v, f->path))
			continue;
		n++;
		if (!*last || tl_or0(f->first_ms) > tl_or0((*last)->first_ms))
			*last = f;
	}
	return n;
}

const struct tl_cache_fs *tl_view_cache_fs_of(const struct tl_view *v, const char *abs)
{
	const struct tl_cache_fs *best = NULL;

	for (size_t i = 0; v && abs && i < v->n_cache_fs; i++) {
		const char *dir = v->cache_fs[i].dir;

		if (dir && path_under(abs, dir) && (!best || strlen(dir) > strlen(best->dir)))
			best = &v->cache_fs[i];
	}
	return best;
}

int tlv_decode_xet(const json_t *root, struct tl_view *v)
{
	const json_t *x = json_object_get(root, "xet");

	v->xet = (struct tl_xet){
	    .present = json_is_object(x),
	    .dir = str(x, "dir"),
	    .write_errno = str(x, "write_errno"),
	    .fs_type = str(x, "fs_type"),
	    .lost = str(x, "lost"),
	    .bytes_written = num(x, "bytes_written"),
	    .write_errors = num(x, "write_errors"),
	    .files = num(x, "files"),
	    .persistent = tri(x, "persistent"),
	};
	return 0;
}
