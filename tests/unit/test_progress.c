/* Live progress lines: a traced name with control characters in it never
 * reaches the terminal raw (docs/security.md, "Untrusted input"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "progress.h"

static char said[8192];

static void collect(void *arg, const char *line, bool terminal)
{
	(void)arg;
	(void)terminal;
	strncat(said, line, sizeof(said) - strlen(said) - 1);
}

static void test_names_from_the_trace_are_escaped(void **state)
{
	struct progress_opts o = {
	    .mode = PROGRESS_LOG, .stall_s = 0, .log_every_s = 5, .emit = collect};
	struct progress *p;
	json_t *root;

	(void)state;
	said[0] = '\0';
	root = json_pack("{s:{s:{s:{s:s, s:s}}}, s:[{s:s, s:f, s:i, s:f}]}", "launcher", "config",
			 "app", "dir", "/app", "model_dir", "./checkpoints", "files", "path",
			 "/app/checkpoints/hf_cache/\033]0;pwned\a\033[2J.incomplete",
			 "bytes_written", 4096.0, "opens", 1, "first_ms", 1.0);
	assert_non_null(root);
	p = progress_new(&o);
	assert_non_null(p);
	progress_sample(p, root, 1000);
	json_object_set_new(json_array_get(json_object_get(root, "files"), 0), "bytes_written",
			    json_real(8192));
	progress_sample(p, root, 6100);
	assert_non_null(strstr(said, "downloading"));
	assert_null(strchr(said, '\033'));
	assert_null(strchr(said, '\a'));
	assert_non_null(strstr(said, "\\x1b]0;pwned\\x07\\x1b[2J"));
	assert_int_equal(said[strlen(said) - 1], '\n'); /* the line's own newline stays */
	progress_free(p);
	json_decref(root);
}

/* The rate is over the last 5 s: a count frozen for 5 s gives no rate but
 * "stalled", said once when it stalls, not a rate decaying from the
 * average since the download began. */
static void test_frozen_download_says_stalled(void **state)
{
	struct progress_opts o = {
	    .mode = PROGRESS_LOG, .stall_s = 0, .log_every_s = 5, .emit = collect};
	struct progress *p;
	json_t *root, *f;
	double t;

	(void)state;
	said[0] = '\0';
	root = json_pack("{s:{s:{s:{s:s, s:s}}}, s:[{s:s, s:f, s:i, s:f}]}", "launcher", "config",
			 "app", "dir", "/app", "model_dir", "./checkpoints", "files", "path",
			 "/app/checkpoints/hf_cache/models--a--b/blobs/e.incomplete",
			 "bytes_written", 0.0, "opens", 1, "first_ms", 0.0);
	assert_non_null(root);
	f = json_array_get(json_object_get(root, "files"), 0);
	p = progress_new(&o);
	assert_non_null(p);
	/* 1 MiB/s for 10 s, then nothing for 8 s */
	for (t = 1000; t <= 10000; t += 1000) {
		json_object_set_new(f, "bytes_written", json_real(t / 1000 * 1048576));
		progress_sample(p, root, t);
	}
	assert_non_null(strstr(said, " at 1.0 MiB/s"));
	said[0] = '\0';
	for (t = 11000; t <= 18000; t += 1000)
		progress_sample(p, root, t);
	assert_non_null(strstr(said, "10.0 MiB, stalled: nothing received for 5 s "
				     "(0 B/s over the last 5 s)"));
	/* once, then every 5 s: not at each sample */
	assert_null(strstr(strstr(said, "stalled") + 1, "stalled"));
	/* a rate of 0 is said as stalled, not "at 0 B/s" */
	assert_null(strstr(said, "at 0 B/s"));
	progress_free(p);
	json_decref(root);
}

/* Two downloads growing 4 KiB -> 8 KiB over 5.1 s (about 800 B/s): one whose
 * size is IndexTTS2's known size (an estimate: "about", "(known size)"), one
 * whose size the kernel gave (a Xet temp at its full i_size: exact) */
static void test_percent_and_time_left(void **state)
{
	struct progress_opts o = {
	    .mode = PROGRESS_LOG, .stall_s = 0, .log_every_s = 5, .emit = collect};
	struct progress *p;
	json_t *root, *files, *f;
	size_t i;
	const char *known =
		       "/app/checkpoints/hf_cache/.cache/huggingface/download/K=.e1.incomplete",
		   *exact = "/app/checkpoints/.cache/huggingface/download/X=.e2.incomplete";

	(void)state;
	said[0] = '\0';
	root =
	    json_pack("{s:{s:{s:{s:s, s:s}}}, s:[{s:s, s:f, s:i, s:f}, {s:s, s:f, s:i, s:f}], "
		      "s:[{s:s, s:s, s:s, s:f, s:f, s:s}, {s:s, s:s, s:s, s:f, s:f, s:s}]}",
		      "launcher", "config", "app", "dir", "/app", "model_dir", "./checkpoints",
		      "files", "path", known, "bytes_written", 4096.0, "opens", 1, "first_ms", 1.0,
		      "path", exact, "bytes_written", 4096.0, "opens", 1, "first_ms", 1.0,
		      "downloads", "path", known, "name", "hf_cache/campplus_cn_common.bin", "kind",
		      "download", "bytes", 4096.0, "expected_size", 1000000.0, "expected_from",
		      "known", "path", exact, "name", "gpt.pth", "kind", "download", "bytes",
		      4096.0, "expected_size", 100000.0, "expected_from", "kernel");
	assert_non_null(root);
	p = progress_new(&o);
	assert_non_null(p);
	progress_sample(p, root, 1000);
	files = json_object_get(root, "files");
	json_array_foreach (files, i, f)
		json_object_set_new(f, "bytes_written", json_real(8192));
	json_array_foreach (json_object_get(root, "downloads"), i, f)
		json_object_set_new(f, "bytes", json_real(8192));
	said[0] = '\0';
	progress_sample(p, root, 6100);
	/* (1000000 - 8192) B at 803 B/s: 1235 s, said in minutes */
	assert_non_null(strstr(said, "tts-launch: downloading hf_cache/campplus_cn_common.bin: 8.0 "
				     "KiB at 803 B/s, 1% of about 976.6 KiB (known size), 21 min "
				     "left\n"));
	/* (100000 - 8192) B at 803 B/s: 114 s, in seconds; exact: no "about" */
	assert_non_null(strstr(said, "tts-launch: downloading gpt.pth: 8.0 KiB at 803 B/s, 8% of "
				     "97.7 KiB, 114 s left\n"));
	progress_free(p);
	json_decref(root);
}

/* A copy seen while its destination's open was not yet in the snapshot
 * ("[fd] NAME", the source then named by the hub's temp file it was
 * renamed from) is said once, from the snapshot that has both paths. */
static void test_copy_said_once_with_its_paths(void **state)
{
	struct progress_opts o = {
	    .mode = PROGRESS_LOG, .stall_s = 0, .log_every_s = 5, .emit = collect};
	struct progress *p;
	json_t *root, *c;
	const char *tmp = "/app/checkpoints/hf_cache/.cache/huggingface/download/semantic_codec/"
			  "Q=.e3.incomplete";

	(void)state;
	said[0] = '\0';
	root = json_pack("{s:{s:{s:{s:s, s:s}}}, s:[{s:s, s:s, s:s, s:s, s:f, s:f, s:b}]}",
			 "launcher", "config", "app", "dir", "/app", "model_dir", "./checkpoints",
			 "copies", "path", "[fd] semantic_codec_model.safetensors", "name",
			 "[fd] semantic_codec_model.safetensors", "source", tmp, "kind", "copy",
			 "bytes", 4096.0, "size", 5347738.0, "from_cache", 0);
	assert_non_null(root);
	p = progress_new(&o);
	assert_non_null(p);
	progress_sample(p, root, 1000);
	assert_string_equal(said, "");
	c = json_array_get(json_object_get(root, "copies"), 0);
	json_object_set_new(
	    c, "path", json_string("/app/checkpoints/hf_cache/semantic_codec_model.safetensors"));
	json_object_set_new(c, "name", json_string("hf_cache/semantic_codec_model.safetensors"));
	json_object_set_new(
	    c, "source", json_string("/app/checkpoints/hf_cache/semantic_codec/model.safetensors"));
	progress_sample(p, root, 2000);
	progress_timeline(p, root);
	assert_string_equal(said, "tts-launch: copying hf_cache/semantic_codec_model.safetensors "
				  "(5.1 MiB) from "
				  "/app/checkpoints/hf_cache/semantic_codec/model.safetensors\n");
	progress_free(p);
	json_decref(root);
}

/* A copy whose destination never resolves (opened before tracing, the
 * paths map full) is said as it is after a few samples, not only at the
 * end. */
static void test_unresolved_copy_said_after_a_while(void **state)
{
	struct progress_opts o = {
	    .mode = PROGRESS_LOG, .stall_s = 0, .log_every_s = 5, .emit = collect};
	struct progress *p;
	json_t *root;
	int n;

	(void)state;
	said[0] = '\0';
	root =
	    json_pack("{s:{s:{s:{s:s, s:s}}}, s:[{s:s, s:s, s:s, s:s, s:f, s:f, s:b}]}", "launcher",
		      "config", "app", "dir", "/app", "model_dir", "./checkpoints", "copies",
		      "path", "[fd] big.bin", "name", "[fd] big.bin", "source", "/app/old/big.bin",
		      "kind", "copy", "bytes", 4096.0, "size", 2048.0, "from_cache", 0);
	assert_non_null(root);
	p = progress_new(&o);
	assert_non_null(p);
	for (n = 1; n <= 10 && !said[0]; n++)
		progress_sample(p, root, 1000.0 * n);
	assert_int_equal(n - 1, 4);
	assert_string_equal(said,
			    "tts-launch: copying [fd] big.bin (2.0 KiB) from /app/old/big.bin\n");
	progress_sample(p, root, 20000);
	progress_timeline(p, root);
	assert_int_equal(
	    strlen(said),
	    strlen("tts-launch: copying [fd] big.bin (2.0 KiB) from /app/old/big.bin\n"));
	progress_free(p);
	json_decref(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names_from_the_trace_are_escaped),
	    cmocka_unit_test(test_frozen_download_says_stalled),
	    cmocka_unit_test(test_percent_and_time_left),
	    cmocka_unit_test(test_copy_said_once_with_its_paths),
	    cmocka_unit_test(test_unresolved_copy_said_after_a_while),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
