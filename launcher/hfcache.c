#include "hfcache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

const char *hf_repo_folder(const char *path, size_t *len)
{
	const char *p = path, *e;

	if (!path)
		return NULL;
	while ((p = strstr(p, HF_REPO_PREFIX)) && p != path && p[-1] != '/')
		p++;
	if (!p)
		return NULL;
	e = strchr(p, '/');
	if (len)
		*len = e ? (size_t)(e - p) : strlen(p);
	return p;
}

bool hf_repo_id(const char *path, char *out, size_t len)
{
	size_t n, o = 0;
	const char *f = hf_repo_folder(path, &n), *q, *end;
	bool sep = false;

	if (!len)
		return false;
	out[0] = 0;
	if (!f)
		return false;
	end = f + n;
	q = f + strlen(HF_REPO_PREFIX);
	while (q < end && o + 1 < len) {
		if (!sep && q + 1 < end && q[0] == '-' && q[1] == '-') {
			out[o++] = '/';
			q += 2;
			sep = true;
		} else {
			out[o++] = *q++;
		}
	}
	out[o] = 0;
	if (q < end) /* cut: at a character boundary */
		utf8_trim(out);
	return true;
}

size_t hf_cache_root_len(const char *path)
{
	const char *f = hf_repo_folder(path, NULL);

	if (!f)
		return strlen(path);
	return f > path ? (size_t)(f - path - 1) : 0;
}

bool hf_snapshots_dir(const char *path, char *out, size_t len)
{
	size_t n;
	const char *f = hf_repo_folder(path, &n);

	if (len)
		out[0] = 0;
	if (!f)
		return false;
	snprintf(out, len, "%.*s/snapshots/", (int)(f + n - path), path);
	return true;
}

const char *hf_snapshot_file(const char *path)
{
	size_t n;
	const char *f = hf_repo_folder(path, &n), *c;

	if (!f || strncmp(f + n, "/snapshots/", 11))
		return NULL;
	c = strchr(f + n + 11, '/'); /* past COMMIT/ */
	return c ? c + 1 : NULL;
}

bool hf_in_snapshots(const char *path) { return strstr(path, "/snapshots/") != NULL; }

bool hf_cache_meta(const char *path)
{
	return hf_in_locks(path) || strstr(path, "/refs/") || strstr(path, "/.no_exist/");
}

bool hf_in_locks(const char *path) { return strstr(path, "/.locks/") != NULL; }

bool hf_lock_file(const char *path) { return hf_in_locks(path) && str_ends_with(path, ".lock"); }
