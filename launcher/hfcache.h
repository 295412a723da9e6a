/* hfcache: where the service's Hugging Face hub client keeps its cache,
 * from the service's environment (HF_HUB_CACHE, HF_HOME, HOME) and [app]
 * dir / model_dir, and the cache's layout: a repository's folder
 * models--ORG--NAME (org/name), its snapshots/ and blobs/, the cache's
 * bookkeeping (.locks/, refs/, .no_exist/) and lock files. The single home
 * of these rules for the tracer's file classes, the live progress, diagnose
 * and the renderers. */
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

/* The cache's bookkeeping, not downloaded content: .locks/, refs/, .no_exist/. */
bool hf_cache_meta(const char *path);

/* path is in the cache's .locks/ folder. */
bool hf_in_locks(const char *path);

/* A lock file huggingface_hub flock()s: .locks/.../NAME.lock. */
bool hf_lock_file(const char *path);

#endif
