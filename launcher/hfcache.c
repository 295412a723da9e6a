#include "hfcache.h"

#include <stdint.h>
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
	const char *b = strrchr(path, '/');

	if (hf_in_locks(path) || strstr(path, "/refs/") || strstr(path, "/.no_exist/"))
		return true;
	/* local_dir's own files (not its temp downloads), ModelScope's index */
	if (strstr(path, "/.cache/huggingface/") && !hf_hub_temp(path))
		return true;
	return b && (!strcmp(b, "/.mdl") || !strcmp(b, "/.msc") || !strcmp(b, "/.mv"));
}

bool hf_in_locks(const char *path) { return strstr(path, "/.locks/") != NULL; }

bool hf_lock_file(const char *path) { return hf_in_locks(path) && str_ends_with(path, ".lock"); }

/* ---- downloads ---- */

bool hf_hub_temp(const char *path)
{
	return path && strlen(path) > strlen(HF_HUB_TEMP_SUFFIX) &&
	       str_ends_with(path, HF_HUB_TEMP_SUFFIX);
}

size_t hf_hub_temp_stem(const char *path)
{
	if (!path)
		return 0;
	return strlen(path) - (hf_hub_temp(path) ? strlen(HF_HUB_TEMP_SUFFIX) : 0);
}

#define LOCAL_DIR_MARK "/.cache/huggingface/download/"
#define MS_TEMP_MARK   "/._____temp/"

const char *hf_writer_name(enum hf_writer w)
{
	static const char *const names[] = {"", "hub_cache", "local_dir", "modelscope", "mirror"};

	return (unsigned)w < sizeof(names) / sizeof(names[0]) ? names[w] : "";
}

bool hf_in_xet_cache(const char *path, const char *xet_dir)
{
	if (xet_dir && *xet_dir && path_under(path, xet_dir))
		return true;
	return strstr(path, "/chunk-cache/") || strstr(path, "/shard-cache/") ||
	       strstr(path, "/staging/");
}

enum hf_writer hf_temp_writer(const char *path)
{
	const char *b;

	if (!path || hf_in_xet_cache(path, NULL))
		return HF_W_NONE;
	if (hf_hub_temp(path))
		return strstr(path, LOCAL_DIR_MARK) ? HF_W_LOCAL_DIR : HF_W_HUB_CACHE;
	b = strstr(path, MS_TEMP_MARK);
	if (b && b[strlen(MS_TEMP_MARK)])
		return HF_W_MODELSCOPE;
	/* NAME.tmp where NAME has a suffix of its own (x.bin.tmp, not x.tmp) */
	if (str_ends_with(path, ".tmp")) {
		size_t n = strlen(path) - 4;
		const char *sl = strrchr(path, '/');
		const char *dot = memrchr(path, '.', n);

		if (dot && (!sl || dot > sl + 1))
			return HF_W_MIRROR;
	}
	return HF_W_NONE;
}

bool hf_temp_final(const char *path, char *out, size_t len)
{
	const char *m;

	if (len)
		out[0] = 0;
	switch (hf_temp_writer(path)) {
	case HF_W_HUB_CACHE:
	case HF_W_MIRROR: {
		size_t n = str_ends_with(path, ".tmp") ? strlen(path) - 4 : hf_hub_temp_stem(path);

		snprintf(out, len, "%.*s", (int)n, path);
		return true;
	}
	case HF_W_MODELSCOPE:
		m = strstr(path, MS_TEMP_MARK);
		snprintf(out, len, "%.*s/%s", (int)(m - path), path, m + strlen(MS_TEMP_MARK));
		return true;
	default:
		return false;
	}
}

bool hf_mirror_target(const char *final, const char *model_dir, const char *app_dir)
{
	char ex[PATH_MAX];

	if (model_dir && *model_dir && path_under(final, model_dir))
		return true;
	if (!app_dir || !*app_dir)
		return false;
	snprintf(ex, sizeof(ex), "%.*s/examples", PATH_MAX - 16, app_dir);
	return path_under(final, ex);
}

bool hf_local_dir_lock(const char *path, char *out, size_t len)
{
	const char *m = strstr(path, LOCAL_DIR_MARK);

	if (len)
		out[0] = 0;
	if (!m || !str_ends_with(path, ".lock") || !m[strlen(LOCAL_DIR_MARK)])
		return false;
	snprintf(out, len, "%.*s/%.*s", (int)(m - path), path,
		 (int)(strlen(m + strlen(LOCAL_DIR_MARK)) - 5), m + strlen(LOCAL_DIR_MARK));
	return true;
}

bool hf_local_dir_etag(const char *temp, char *out, size_t len)
{
	const char *b = strrchr(temp, '/');
	size_t n;

	if (len)
		out[0] = 0;
	if (!b || !strstr(temp, LOCAL_DIR_MARK) || !hf_hub_temp(temp))
		return false;
	b++;
	n = strlen(b);
	if (n <= 29 + strlen(HF_HUB_TEMP_SUFFIX) || b[28] != '.')
		return false;
	snprintf(out, len, "%.*s", (int)(hf_hub_temp_stem(b) - 29), b + 29);
	return strchr(out, '/') == NULL && *out;
}

/* SHA-1 (FIPS 180-4), for local_dir's temp names: small inputs only. */
static uint32_t rol(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

static void sha1_block(uint32_t h[5], const unsigned char *p)
{
	uint32_t w[80], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	for (int i = 0; i < 80; i++) {
		uint32_t f, k, t;

		if (i < 20) {
			f = (b & c) | (~b & d);
			k = 0x5a827999;
		} else if (i < 40) {
			f = b ^ c ^ d;
			k = 0x6ed9eba1;
		} else if (i < 60) {
			f = (b & c) | (b & d) | (c & d);
			k = 0x8f1bbcdc;
		} else {
			f = b ^ c ^ d;
			k = 0xca62c1d6;
		}
		t = rol(a, 5) + f + e + k + w[i];
		e = d;
		d = c;
		c = rol(b, 30);
		b = a;
		a = t;
	}
	h[0] += a;
	h[1] += b;
	h[2] += c;
	h[3] += d;
	h[4] += e;
}

void hf_short_hash(const char *s, char out[29])
{
	static const char b64[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	uint32_t h[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
	unsigned char blk[64], dig[21] = {0};
	size_t n = strlen(s), i = 0;
	uint64_t bits = (uint64_t)n * 8;

	for (; i + 64 <= n; i += 64)
		sha1_block(h, (const unsigned char *)s + i);
	memset(blk, 0, sizeof(blk));
	memcpy(blk, s + i, n - i);
	blk[n - i] = 0x80;
	if (n - i >= 56) {
		sha1_block(h, blk);
		memset(blk, 0, sizeof(blk));
	}
	for (int k = 0; k < 8; k++)
		blk[63 - k] = (unsigned char)(bits >> (8 * k));
	sha1_block(h, blk);
	for (int k = 0; k < 20; k++)
		dig[k] = (unsigned char)(h[k / 4] >> (24 - 8 * (k % 4)));
	/* 20 bytes: six full groups of 3, then 2 bytes and one '=' */
	for (int k = 0, o = 0; k < 21; k += 3) {
		uint32_t v = (uint32_t)dig[k] << 16 | (uint32_t)dig[k + 1] << 8 |
			     (k + 2 < 21 ? dig[k + 2] : 0);

		out[o++] = b64[(v >> 18) & 63];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = b64[(v >> 6) & 63];
		out[o++] = k + 2 < 20 ? b64[v & 63] : '=';
	}
	out[28] = 0;
}

bool hf_local_dir_final(const char *temp, const char *peer, char *out, size_t len)
{
	const char *m = strstr(temp, LOCAL_DIR_MARK), *tb = strrchr(temp, '/'),
		   *pb = strrchr(peer, '/');
	char name[PATH_MAX], hash[29];
	size_t nl;

	if (len)
		out[0] = 0;
	if (!m || !tb || !pb || tb - temp != pb - peer || strncmp(temp, peer, tb - temp))
		return false;
	pb++;
	if (str_ends_with(pb, ".lock"))
		nl = strlen(pb) - 5;
	else if (str_ends_with(pb, ".metadata"))
		nl = strlen(pb) - 9;
	else
		return false;
	snprintf(name, sizeof(name), "%.*s.metadata", (int)nl, pb);
	hf_short_hash(name, hash);
	if (strncmp(tb + 1, hash, 28) || tb[29] != '.')
		return false;
	/* LOCAL + /SUB/ (between the mark and the temp's name) + NAME */
	snprintf(out, len, "%.*s/%.*s%.*s", (int)(m - temp), temp,
		 (int)(tb + 1 - (m + strlen(LOCAL_DIR_MARK))), m + strlen(LOCAL_DIR_MARK), (int)nl,
		 pb);
	return true;
}

void hf_download_name(const char *final, const char *model_dir, const char *app_dir, char *out,
		      size_t len)
{
	char repo[256];
	const char *f;

	if (hf_repo_id(final, repo, sizeof(repo)) && *repo) {
		size_t n;
		const char *folder = hf_repo_folder(final, &n);

		f = hf_snapshot_file(final);
		if (!f)
			f = folder[n] ? folder + n + 1 : folder;
		snprintf(out, len, "%s:%s", repo, f);
		return;
	}
	if (model_dir && *model_dir && path_under(final, model_dir) &&
	    strlen(final) > strlen(model_dir)) {
		snprintf(out, len, "%s", final + strlen(model_dir) + (model_dir[1] != 0));
		return;
	}
	if (app_dir && *app_dir && path_under(final, app_dir) && strlen(final) > strlen(app_dir)) {
		snprintf(out, len, "%s", final + strlen(app_dir) + (app_dir[1] != 0));
		return;
	}
	snprintf(out, len, "%s", final);
}

void hf_xet_dir(const char *app_dir, hf_env_fn env, const void *ctx, char *out, size_t len)
{
	const char *v = env(ctx, "HF_XET_CACHE");
	char home[PATH_MAX], tmp[PATH_MAX];

	if (v && *v) {
		path_resolve(app_dir, v, out, len);
		return;
	}
	hf_home(app_dir, env, ctx, home, sizeof(home));
	snprintf(tmp, sizeof(tmp), "%.*s/xet", PATH_MAX - 8, home);
	snprintf(out, len, "%s", tmp);
}

/* INDEXTTS2.md: the sizes of IndexTTS2's large files (approximate) */
const struct hf_known_file hf_known_files[] = {
    {"gpt.pth", 3500000000LL, "gpt.pth"},
    {"s2mel.pth", 1200000000LL, "s2mel.pth"},
    {"w2v-bert-2.0/model.safetensors", 2300000000LL, "hf_cache/w2v-bert-2.0/model.safetensors"},
    {"semantic_codec/model.safetensors", 177000000LL, "hf_cache/semantic_codec/model.safetensors"},
    /* the copy2 of the one above: on disk twice */
    {"semantic_codec_model.safetensors", 177000000LL, "hf_cache/semantic_codec_model.safetensors"},
    {"campplus_cn_common.bin", 28000000LL, "hf_cache/campplus_cn_common.bin"},
    {"bigvgan_generator.pt", 450000000LL, "hf_cache/bigvgan/bigvgan_generator.pt"},
    {NULL, 0, NULL},
};

long long hf_known_size(const char *final)
{
	char key[PATH_MAX];
	const char *p = final;

	/* a hub cache path by repository name and file: NAME/FILE */
	if (hf_snapshot_file(final)) {
		char repo[256];
		const char *sl;

		hf_repo_id(final, repo, sizeof(repo));
		sl = strrchr(repo, '/');
		snprintf(key, sizeof(key), "/%s/%s", sl ? sl + 1 : repo, hf_snapshot_file(final));
		p = key;
	}
	for (const struct hf_known_file *k = hf_known_files; k->suffix; k++) {
		size_t a = strlen(p), b = strlen(k->suffix);

		if (a > b && !strcmp(p + a - b, k->suffix) && p[a - b - 1] == '/')
			return k->bytes;
	}
	return 0;
}
