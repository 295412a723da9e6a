/* hfcache: where the service's Hugging Face hub client keeps its cache,
 * from the service's environment (HF_HUB_CACHE, HF_HOME, HOME) and [app]
 * dir / model_dir, and the cache's layout: a repository's folder
 * models--ORG--NAME (org/name), its snapshots/ and blobs/, the cache's
 * bookkeeping (.locks/, refs/, .no_exist/) and lock files; the temp files
 * each downloader writes and what they become (hub cache blobs, local_dir,
 * ModelScope, hf-mirror), how a download is named, the Xet caches, and the
 * known sizes of IndexTTS2's model files. The single home of these rules
 * for the tracer's file classes, the timeline's downloads, the live
 * progress, diagnose, doctor and the renderers. */
#ifndef TTS_HFCACHE_H
#define TTS_HFCACHE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#define HF_MAX_CACHE_DIRS 4

struct hf_cache_dir {
	char path[PATH_MAX];
	const char *role; /* "HF_HUB_CACHE", "model_dir/hf_cache", "HF_HOME/hub", "model_dir" */
};

/* The value of name in the service's environment, or NULL. */
typedef const char *(*hf_env_fn)(const void *ctx, const char *name);

/* $HF_HOME, else $HOME/.cache/huggingface (HOME from env, else ours, else
 * /root); relative to app_dir when relative; absolute and normalised. */
void hf_home(const char *app_dir, hf_env_fn env, const void *ctx, char *out, size_t len);

/* HF_HUB_CACHE (when set), <model_dir>/hf_cache (IndexTTS2's own layout,
 * when model_dir is set), hf_home()/hub, and with_model_dir the model
 * directory itself; absolute. Returns how many of max were filled. */
int hf_cache_dirs(const char *app_dir, const char *model_dir, hf_env_fn env, const void *ctx,
		  bool with_model_dir, struct hf_cache_dir *out, int max);

/* A repository's folder in the cache: models--ORG--NAME. */
#define HF_REPO_PREFIX "models--"

/* The models--ORG--NAME folder in path (a path component that begins with
 * HF_REPO_PREFIX), *len its length up to the next '/' or the end; NULL when
 * path is in no repository folder. */
const char *hf_repo_folder(const char *path, size_t *len);

/* The repository id of path's folder: models--ORG--NAME -> ORG/NAME (the
 * first "--" made a '/'; the folder's rest as is when it has none), cut to
 * len - 1 bytes at a character boundary. false (out "") when path is in no
 * repository folder. */
bool hf_repo_id(const char *path, char *out, size_t len);

/* The length of path's cache root: the part before "/models--ORG--NAME",
 * all of path when it is in no repository folder. */
size_t hf_cache_root_len(const char *path);

/* "<...>/models--ORG--NAME/snapshots/" for path in a repository folder,
 * into out; false (out "") when path is in none. */
bool hf_snapshots_dir(const char *path, char *out, size_t len);

/* The file's path inside its snapshot (what follows
 * models--ORG--NAME/snapshots/COMMIT/), or NULL. */
const char *hf_snapshot_file(const char *path);

/* path is in a snapshots/ folder. */
bool hf_in_snapshots(const char *path);

/* The cache's bookkeeping, not downloaded content: .locks/, refs/, .no_exist/;
 * local_dir's .cache/huggingface/ files but its .incomplete temps; ModelScope's
 * .mdl/.msc/.mv. */
bool hf_cache_meta(const char *path);

/* path is in the cache's .locks/ folder. */
bool hf_in_locks(const char *path);

/* A lock file huggingface_hub flock()s: .locks/.../NAME.lock. */
bool hf_lock_file(const char *path);

/* ---- downloads: the temp files each client writes ---- */

/* The suffix of huggingface_hub's temp files: a download being written,
 * renamed to its final name without it when complete (hub cache
 * blobs/ETAG.incomplete, local_dir B64.ETAG.incomplete). */
#define HF_HUB_TEMP_SUFFIX ".incomplete"

/* path is one of huggingface_hub's temp files: a name, then the suffix. */
bool hf_hub_temp(const char *path);

/* The length of path without the temp suffix: all of it when path is no
 * hub temp file (the hub cache's blob is path cut there). */
size_t hf_hub_temp_stem(const char *path);

/* Who writes a temp file that is renamed into a download's final name. */
enum hf_writer {
	HF_W_NONE = 0,
	HF_W_HUB_CACHE,	 /* huggingface_hub's cache: models--O--N/blobs/ETAG.incomplete */
	HF_W_LOCAL_DIR,	 /* local_dir: L/.cache/huggingface/download/[SUB/]B64.ETAG.incomplete */
	HF_W_MODELSCOPE, /* modelscope: L/._____temp/NAME */
	HF_W_MIRROR,	 /* IndexTTS2's hf-mirror fallback: NAME.tmp, os.replace */
};

/* "hub_cache", "local_dir", "modelscope", "mirror" ("" for none) */
const char *hf_writer_name(enum hf_writer w);

/* The writer whose temp-file rule path follows; HF_W_NONE when path is no
 * download temp (the Xet caches' own temp files included). */
enum hf_writer hf_temp_writer(const char *path);

/* The file the temp path becomes, from its name alone: the blob (hub
 * cache), LOCAL/NAME (ModelScope), NAME (mirror). false for local_dir
 * (hf_local_dir_final) and non-temps. */
bool hf_temp_final(const char *path, char *out, size_t len);

/* local_dir: the temp file's name is urlsafe_b64(sha1("NAME.metadata")).ETAG
 * .incomplete next to download/[SUB/]NAME.metadata and NAME.lock
 * (_local_folder.py). When peer (a path in the temp's folder) is that
 * NAME.lock or NAME.metadata, the final path LOCAL/[SUB/]NAME into out. */
bool hf_local_dir_final(const char *temp, const char *peer, char *out, size_t len);

/* A NAME.tmp whose final path is this is IndexTTS2's hf-mirror fallback
 * (examples_downloader.py): under the model dir, or the app's examples/. */
bool hf_mirror_target(const char *final, const char *model_dir, const char *app_dir);

/* A local_dir download's lock, L/.cache/huggingface/download/[SUB/]NAME.lock:
 * the file it guards, L/[SUB/]NAME, into out. */
bool hf_local_dir_lock(const char *path, char *out, size_t len);

/* The etag in a local_dir temp name (B64.ETAG.incomplete) into out. The hub
 * cache keeps the same file as models--ORG--NAME/blobs/ETAG. */
bool hf_local_dir_etag(const char *temp, char *out, size_t len);

/* urlsafe base64 of the SHA-1 of s (28 characters and a NUL into out[29]). */
void hf_short_hash(const char *s, char out[29]);

/* The name a download (or copy) is shown by, from the file it becomes:
 * in a hub cache ORG/NAME:FILE (FILE inside the snapshot; the blob's name
 * when only that is known), else relative to model_dir, else to app_dir,
 * else the absolute path. docs/timeline.md, "downloads". */
void hf_download_name(const char *final, const char *model_dir, const char *app_dir, char *out,
		      size_t len);

/* Xet's caches: $HF_XET_CACHE, else hf_home()/xet (absolute). */
void hf_xet_dir(const char *app_dir, hf_env_fn env, const void *ctx, char *out, size_t len);

/* path is in Xet's chunk, shard or staging cache (under a folder of those
 * names, or under xet_dir when given): the transfer's own, not a download. */
bool hf_in_xet_cache(const char *path, const char *xet_dir);

/* The size IndexTTS2's file final is known to have (INDEXTTS2.md), 0 when
 * it is none of them: an estimate, for percent done before the end. */
long long hf_known_size(const char *final);

/* The known files, for doctor's free-space check: NULL-terminated. */
struct hf_known_file {
	const char *suffix; /* the final path ends with "/" suffix */
	long long bytes;
	const char *flat; /* where the 2026 start keeps it, under model_dir */
};
extern const struct hf_known_file hf_known_files[];

#endif
