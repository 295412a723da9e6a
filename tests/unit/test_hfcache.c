/* hfcache: the hub cache's layout rules (the repository folder and its
 * id, snapshots, bookkeeping, locks) and where the cache is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hfcache.h"

#define SNAP "/c/hub/models--IndexTeam--IndexTTS-2/snapshots/abc123/"

static void test_repo_folder(void **state)
{
	size_t n = 0;
	const char *p = SNAP "gpt.pth", *f;

	(void)state;
	f = hf_repo_folder(p, &n);
	assert_non_null(f);
	assert_int_equal(f - p, strlen("/c/hub/"));
	assert_int_equal(n, strlen("models--IndexTeam--IndexTTS-2"));
	/* a component that begins with the prefix, at the start too */
	f = hf_repo_folder("models--a--b", &n);
	assert_non_null(f);
	assert_int_equal(n, 12);
	assert_null(hf_repo_folder("/c/hub/xmodels--a--b/x", &n));
	assert_non_null(hf_repo_folder("/c/xmodels--a/models--a--b/x", &n));
	assert_int_equal(n, 12);
	assert_null(hf_repo_folder("/c/hub/model.bin", NULL));
	assert_null(hf_repo_folder(NULL, NULL));
}

static void test_repo_id(void **state)
{
	char id[64], small[6];

	(void)state;
	assert_true(hf_repo_id(SNAP "gpt.pth", id, sizeof(id)));
	assert_string_equal(id, "IndexTeam/IndexTTS-2");
	assert_true(hf_repo_id("/x/models--facebook--w2v-bert-2.0/blobs/e3b0", id, sizeof(id)));
	assert_string_equal(id, "facebook/w2v-bert-2.0");
	assert_true(hf_repo_id("/x/models--gpt2", id, sizeof(id)));
	assert_string_equal(id, "gpt2"); /* no org: as is */
	assert_false(hf_repo_id("/x/checkpoints/gpt.pth", id, sizeof(id)));
	assert_string_equal(id, "");
	/* cut to the buffer */
	assert_true(hf_repo_id("/x/models--abc--defgh/blobs/1", small, sizeof(small)));
	assert_string_equal(small, "abc/d");
	/* at a character boundary: "é" is two bytes */
	assert_true(hf_repo_id("/x/models--abc--\xc3\xa9z/blobs/1", small, sizeof(small)));
	assert_string_equal(small, "abc/");
}

static void test_root_and_snapshots(void **state)
{
	char out[256];

	(void)state;
	assert_int_equal(hf_cache_root_len(SNAP "gpt.pth"), strlen("/c/hub"));
	assert_int_equal(hf_cache_root_len("/c/hub/a.bin"), strlen("/c/hub/a.bin"));
	assert_true(
	    hf_snapshots_dir("/c/hub/models--a--b/blobs/e3b0.incomplete", out, sizeof(out)));
	assert_string_equal(out, "/c/hub/models--a--b/snapshots/");
	assert_false(hf_snapshots_dir("/c/hub/a.bin", out, sizeof(out)));
	assert_string_equal(out, "");
	assert_string_equal(hf_snapshot_file(SNAP "sub/gpt.pth"), "sub/gpt.pth");
	assert_null(hf_snapshot_file("/c/hub/models--a--b/blobs/e3b0"));
	assert_null(hf_snapshot_file("/c/hub/models--a--b/snapshots/abc123"));
	assert_true(hf_in_snapshots(SNAP "gpt.pth"));
	assert_false(hf_in_snapshots("/c/hub/models--a--b/blobs/e3b0"));
}

static void test_bookkeeping_and_locks(void **state)
{
	(void)state;
	assert_true(hf_cache_meta("/c/hub/.locks/models--a--b/e3b0.lock"));
	assert_true(hf_cache_meta("/c/hub/models--a--b/refs/main"));
	assert_true(hf_cache_meta("/c/hub/models--a--b/.no_exist/abc/x.json"));
	assert_false(hf_cache_meta(SNAP "gpt.pth"));
	assert_false(hf_cache_meta("/c/hub/models--a--b/blobs/e3b0.incomplete"));
	assert_true(hf_in_locks("/c/hub/.locks/models--a--b/e3b0.lock"));
	assert_true(hf_lock_file("/c/hub/.locks/models--a--b/e3b0.lock"));
	assert_false(hf_lock_file("/c/hub/.locks/models--a--b/e3b0"));
	assert_false(hf_lock_file("/c/hub/models--a--b/x.lock"));
}

static const char *env_of(const void *ctx, const char *name)
{
	const char *const *kv = ctx;

	for (; kv[0]; kv += 2)
		if (!strcmp(kv[0], name))
			return kv[1];
	return NULL;
}

static void test_cache_dirs(void **state)
{
	const char *env[] = {"HF_HUB_CACHE", "hc", "HOME", "/home/u", NULL};
	struct hf_cache_dir d[HF_MAX_CACHE_DIRS];
	char home[256];
	int n;

	(void)state;
	hf_home("/app", env_of, env + 2, home, sizeof(home));
	assert_string_equal(home, "/home/u/.cache/huggingface");
	n = hf_cache_dirs("/app", "ckpt", env_of, env, true, d, HF_MAX_CACHE_DIRS);
	assert_int_equal(n, 4);
	assert_string_equal(d[0].path, "/app/hc");
	assert_string_equal(d[0].role, "HF_HUB_CACHE");
	assert_string_equal(d[1].path, "/app/ckpt/hf_cache");
	assert_string_equal(d[2].path, "/home/u/.cache/huggingface/hub");
	assert_string_equal(d[3].path, "/app/ckpt");
	assert_int_equal(hf_cache_dirs("/app", NULL, env_of, env, true, d, 1), 1);
}

static void test_hub_temp(void **state)
{
	(void)state;
	assert_true(hf_hub_temp("/h/hub/models--a--b/blobs/e1.incomplete"));
	assert_true(hf_hub_temp("/m/.cache/huggingface/download/X=.e.incomplete"));
	assert_true(hf_hub_temp("e1.incomplete"));
	assert_false(hf_hub_temp("/h/hub/models--a--b/blobs/e1"));
	assert_false(hf_hub_temp("/h/x.incomplete.bak"));
	assert_false(hf_hub_temp(".incomplete")); /* no name before the suffix */
	assert_false(hf_hub_temp(NULL));
	assert_int_equal(hf_hub_temp_stem("/c/blobs/e1.incomplete"), strlen("/c/blobs/e1"));
	assert_int_equal(hf_hub_temp_stem("/c/blobs/e1"), strlen("/c/blobs/e1"));
	assert_int_equal(hf_hub_temp_stem(".incomplete"), strlen(".incomplete"));
	assert_int_equal(hf_hub_temp_stem(NULL), 0);
}

static void test_temp_writers(void **state)
{
	char out[512];

	(void)state;
	assert_int_equal(hf_temp_writer("/h/hub/models--a--b/blobs/e1.incomplete"), HF_W_HUB_CACHE);
	assert_int_equal(hf_temp_writer("/m/.cache/huggingface/download/s/X=.e.incomplete"),
			 HF_W_LOCAL_DIR);
	assert_int_equal(hf_temp_writer("/m/._____temp/campplus_cn_common.bin"), HF_W_MODELSCOPE);
	assert_int_equal(hf_temp_writer("/m/campplus_cn_common.bin.tmp"), HF_W_MIRROR);
	assert_int_equal(hf_temp_writer("/m/x.tmp"), HF_W_NONE);
	assert_int_equal(hf_temp_writer("/h/xet/e/chunk-cache/ab/abc/0-1.12ab.tmp"), HF_W_NONE);
	assert_int_equal(hf_temp_writer("/m/model.bin"), HF_W_NONE);
	assert_string_equal(hf_writer_name(HF_W_LOCAL_DIR), "local_dir");
	assert_true(hf_temp_final("/h/hub/models--a--b/blobs/e1.incomplete", out, sizeof(out)));
	assert_string_equal(out, "/h/hub/models--a--b/blobs/e1");
	assert_true(hf_temp_final("/m/._____temp/x.bin", out, sizeof(out)));
	assert_string_equal(out, "/m/x.bin");
	assert_true(hf_temp_final("/m/x.bin.tmp", out, sizeof(out)));
	assert_string_equal(out, "/m/x.bin");
	assert_false(hf_temp_final("/m/.cache/huggingface/download/X=.e.incomplete", out, 8));
}

static void test_local_dir_names(void **state)
{
	const char *t = "/ck/hf_cache/.cache/huggingface/download/XRAwiExoq78Qbz0xuYectGBSVtE=."
			"9c0e.incomplete";
	const char *n = "/ck/hf_cache/.cache/huggingface/download/semantic_codec/"
			"xGOKKLRSlIhH692hSVvI1-gpoa8=.4f1a.incomplete";
	char h[29], out[512];

	(void)state;
	/* python3 -c 'base64.urlsafe_b64encode(hashlib.sha1(b"...").digest())' */
	hf_short_hash("campplus_cn_common.bin.metadata", h);
	assert_string_equal(h, "XRAwiExoq78Qbz0xuYectGBSVtE=");
	hf_short_hash("model.safetensors.metadata", h);
	assert_string_equal(h, "xGOKKLRSlIhH692hSVvI1-gpoa8=");
	assert_true(hf_local_dir_final(
	    t, "/ck/hf_cache/.cache/huggingface/download/campplus_cn_common.bin.lock", out,
	    sizeof(out)));
	assert_string_equal(out, "/ck/hf_cache/campplus_cn_common.bin");
	assert_false(hf_local_dir_final(t, "/ck/hf_cache/.cache/huggingface/download/gpt.pth.lock",
					out, sizeof(out)));
	/* a nested name: the temp sits in download/SUB/ */
	assert_true(hf_local_dir_final(
	    n, "/ck/hf_cache/.cache/huggingface/download/semantic_codec/model.safetensors.metadata",
	    out, sizeof(out)));
	assert_string_equal(out, "/ck/hf_cache/semantic_codec/model.safetensors");
	assert_true(hf_local_dir_etag(t, out, sizeof(out)));
	assert_string_equal(out, "9c0e");
	assert_false(
	    hf_local_dir_etag("/h/hub/models--a--b/blobs/e1.incomplete", out, sizeof(out)));
	assert_true(hf_local_dir_lock(
	    "/ck/hf_cache/.cache/huggingface/download/semantic_codec/model.safetensors.lock", out,
	    sizeof(out)));
	assert_string_equal(out, "/ck/hf_cache/semantic_codec/model.safetensors");
	assert_false(hf_local_dir_lock("/h/hub/.locks/models--a--b/e1.lock", out, sizeof(out)));
}

static void test_download_names_and_sizes(void **state)
{
	char out[512];

	(void)state;
	hf_download_name("/h/hub/models--funasr--campplus/snapshots/c1/campplus_cn_common.bin",
			 "/app/ck", "/app", out, sizeof(out));
	assert_string_equal(out, "funasr/campplus:campplus_cn_common.bin");
	hf_download_name("/h/hub/models--funasr--campplus/blobs/e1", NULL, NULL, out, sizeof(out));
	assert_string_equal(out, "funasr/campplus:blobs/e1");
	hf_download_name("/app/ck/hf_cache/w2v-bert-2.0/model.safetensors", "/app/ck", "/app", out,
			 sizeof(out));
	assert_string_equal(out, "hf_cache/w2v-bert-2.0/model.safetensors");
	hf_download_name("/app/examples/voice_01.wav", "/app/ck", "/app", out, sizeof(out));
	assert_string_equal(out, "examples/voice_01.wav");
	hf_download_name("/srv/x.bin", "/app/ck", "/app", out, sizeof(out));
	assert_string_equal(out, "/srv/x.bin");
	assert_true(hf_known_size("/app/ck/hf_cache/w2v-bert-2.0/model.safetensors") >
		    2000000000LL);
	assert_true(hf_known_size("/h/hub/models--facebook--w2v-bert-2.0/snapshots/c/"
				  "model.safetensors") > 2000000000LL);
	assert_int_equal(hf_known_size("/app/ck/hf_cache/other/model.safetensors"), 0);
	assert_int_equal(hf_known_size("/app/ck/gpt.pth"), 3500000000LL);
	assert_true(hf_in_xet_cache("/h/xet/x/chunk-cache/a/b", NULL));
	assert_true(hf_in_xet_cache("/h/xet/x/anything", "/h/xet"));
	assert_false(hf_in_xet_cache("/h/hub/models--a--b/blobs/e", "/h/xet"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_repo_folder),
	    cmocka_unit_test(test_repo_id),
	    cmocka_unit_test(test_root_and_snapshots),
	    cmocka_unit_test(test_bookkeeping_and_locks),
	    cmocka_unit_test(test_cache_dirs),
	    cmocka_unit_test(test_hub_temp),
	    cmocka_unit_test(test_temp_writers),
	    cmocka_unit_test(test_local_dir_names),
	    cmocka_unit_test(test_download_names_and_sizes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
