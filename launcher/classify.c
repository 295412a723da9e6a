#include "classify.h"

#include <stdio.h>
#include <string.h>

#include "hfcache.h"
#include "util.h"

const char *const classify_model_suffixes[] = {
    ".pth", ".pt", ".safetensors", ".bin", ".ckpt", ".onnx", ".gguf", ".model", ".npz", ".h5", NULL,
};

static bool any_suffix(const char *p, const char *const *list)
{
	for (; *list; list++)
		if (str_ends_with(p, *list))
			return true;
	return false;
}

bool classify_model_suffix(const char *path) { return any_suffix(path, classify_model_suffixes); }

size_t classify_model_globs(char *out, size_t len)
{
	size_t off = 0;

	if (len)
		out[0] = '\0';
	for (int i = 0; classify_model_suffixes[i]; i++) {
		int n = snprintf(out + off, off < len ? len - off : 0, "%s*%s", i ? " " : "",
				 classify_model_suffixes[i]);

		off += n > 0 ? (size_t)n : 0;
	}
	return off;
}

const char *classify_file(const char *path, const char *const *cache_dirs)
{
	static const char *const config[] = {".yaml", ".yml", ".json", ".toml",
					     ".ini",  ".cfg", ".conf", NULL};
	bool in_cache = false, pyish;

	/* the temp files downloads are written to (hfcache.c's rules; a
	 * NAME.tmp is one only where IndexTTS2's mirror fallback writes, which
	 * takes the model dir: timeline_files.c decides) */
	if (hf_temp_writer(path) != HF_W_NONE && hf_temp_writer(path) != HF_W_MIRROR)
		return "download";
	/* Xet's chunk/shard caches: the transfer's own, not downloads */
	if (hf_in_xet_cache(path, NULL))
		return "xet_cache";
	for (; cache_dirs && *cache_dirs; cache_dirs++)
		in_cache |= path_under(path, *cache_dirs);
	/* site-packages' *.pth are interpreter start-up files, not torch checkpoints */
	pyish = strstr(path, "/site-packages/") || strstr(path, "/dist-packages/") ||
		strstr(path, "/lib/python3");
	if (classify_model_suffix(path) && !pyish)
		return "model";
	if (in_cache)
		return "hf_cache";
	if (pyish || str_ends_with(path, ".py") || str_ends_with(path, ".pyc"))
		return "python";
	if (str_ends_with(path, ".so") || strstr(path, ".so.") ||
	    !strcmp(path, "/etc/ld.so.cache") || !strcmp(path, "/etc/ld.so.preload"))
		return "library";
	if (any_suffix(path, config))
		return "config";
	if (!strncmp(path, "/etc/", 5) || !strncmp(path, "/proc/", 6) ||
	    !strncmp(path, "/sys/", 5) || !strncmp(path, "/dev/", 5) ||
	    !strncmp(path, "/usr/share/", 11))
		return "system";
	return "other";
}

int classify_model_keys(uint64_t *val, uint64_t *mask, int max)
{
	int n = 0;

	for (int i = 0; i < max; i++)
		val[i] = mask[i] = 0;
	for (; classify_model_suffixes[n]; n++) {
		const char *s = classify_model_suffixes[n];
		size_t l = strlen(s), k = l > 8 ? 8 : l;
		uint64_t v = 0;

		if (n >= max)
			continue;
		for (size_t j = l - k; j < l; j++)
			v = (v << 8) | (unsigned char)s[j];
		val[n] = v;
		mask[n] = k == 8 ? ~0ull : (1ull << (8 * k)) - 1;
	}
	return n;
}
