#include "hfcache.h"

#include <stdio.h>
#include <stdlib.h>

#include "util.h"

void hf_home(const char *app_dir, hf_env_fn env, const void *ctx, char *out, size_t len)
{
	const char *v = env(ctx, "HF_HOME");
	char tmp[PATH_MAX];

	if (v && *v) {
		path_resolve(app_dir, v, out, len);
		return;
	}
	v = env(ctx, "HOME");
	if (!v || !*v)
		v = getenv("HOME");
	snprintf(tmp, sizeof(tmp), "%.*s/.cache/huggingface", PATH_MAX - 32, v && *v ? v : "/root");
	path_resolve(app_dir, tmp, out, len);
}

int hf_cache_dirs(const char *app_dir, const char *model_dir, hf_env_fn env, const void *ctx,
		  bool with_model_dir, struct hf_cache_dir *out, int max)
{
	const char *hub = env(ctx, "HF_HUB_CACHE");
	char md[PATH_MAX] = "", tmp[PATH_MAX];
	int n = 0;

	if (hub && *hub && n < max) {
		path_resolve(app_dir, hub, out[n].path, PATH_MAX);
		out[n++].role = "HF_HUB_CACHE";
	}
	if (model_dir && *model_dir) {
		path_resolve(app_dir, model_dir, md, sizeof(md));
		if (n < max) {
			snprintf(out[n].path, PATH_MAX, "%.*s/hf_cache", PATH_MAX - 10, md);
			out[n++].role = "model_dir/hf_cache";
		}
	}
	hf_home(app_dir, env, ctx, tmp, sizeof(tmp));
	if (n < max) {
		snprintf(out[n].path, PATH_MAX, "%.*s/hub", PATH_MAX - 8, tmp);
		out[n++].role = "HF_HOME/hub";
	}
	if (with_model_dir && *md && n < max) {
		snprintf(out[n].path, PATH_MAX, "%s", md);
		out[n++].role = "model_dir";
	}
	return n;
}
