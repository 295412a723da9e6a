/* hfcache: where the service's Hugging Face hub client keeps its cache,
 * from the service's environment (HF_HUB_CACHE, HF_HOME, HOME) and [app]
 * dir / model_dir. One definition for the tracer's file classes, the
 * live progress and diagnose. */
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

#endif
