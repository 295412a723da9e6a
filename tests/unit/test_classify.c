/* classify: file classes, the model-suffix table, its keys for the BPF
 * side (compared here the way bpf/common.bpf.h model_name does) and its
 * globs for [mlock] patterns. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "classify.h"
#include "trace.h"

#define MAX TRACE_MODEL_SUFFIXES /* what the BPF side holds */

/* bpf/common.bpf.h's model_name, on the launcher's keys */
static bool kernel_match(const char *name, const uint64_t *val, const uint64_t *mask)
{
	uint64_t t = 0;

	for (size_t i = 0; name[i]; i++)
		t = (t << 8) | (unsigned char)name[i];
	for (int i = 0; i < MAX; i++)
		if (mask[i] && (t & mask[i]) == val[i])
			return true;
	return false;
}

static void test_keys_match_the_table(void **state)
{
	uint64_t val[MAX], mask[MAX];
	static const char *const names[] = {
	    "bpe.model", "gpt.pth", "w.pt", "model.safetensors", "x.bin", "a.ckpt", "b.onnx",
	    "c.gguf",	 "d.npz",   "e.h5", "config.yaml",	 "x.pt2", "model",  "notes.txt",
	    "pt",	 "a.models"};

	(void)state;
	assert_true(classify_model_keys(val, mask, MAX) <= MAX);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_int_equal(kernel_match(names[i], val, mask),
				 classify_model_suffix(names[i]));
	assert_true(kernel_match("bpe.model", val, mask)); /* the kernel's table had no .model */
	assert_false(kernel_match("bpe.txt", val, mask));
}

static void test_classes(void **state)
{
	const char *caches[] = {"/c/hub", NULL};

	(void)state;
	assert_string_equal(classify_file("/app/checkpoints/bpe.model", caches), "model");
	assert_string_equal(classify_file("/c/hub/models--a--b/blobs/e.incomplete", caches),
			    "download");
	assert_string_equal(classify_file("/c/hub/models--a--b/refs/main", caches), "hf_cache");
	assert_string_equal(classify_file("/usr/lib/python3/dist-packages/x.pth", NULL), "python");
	assert_string_equal(classify_file("/srv/x", NULL), "other");
}

/* [mlock] patterns' default: every suffix of the table as a glob, in order,
 * one space between; cut short safely (the length needed returned). */
static void test_globs_are_the_table(void **state)
{
	char globs[512], want[512] = "", small[8];
	size_t n;

	(void)state;
	for (int i = 0; classify_model_suffixes[i]; i++) {
		strcat(want, i ? " *" : "*");
		strcat(want, classify_model_suffixes[i]);
	}
	n = classify_model_globs(globs, sizeof(globs));
	assert_string_equal(globs, want);
	assert_int_equal(n, strlen(want));
	assert_non_null(strstr(globs, "*.safetensors"));
	assert_non_null(strstr(globs, "*.model")); /* bpe.model: a model file, as for the kernel */
	assert_int_equal(classify_model_globs(small, sizeof(small)), n);
	assert_int_equal(strlen(small), sizeof(small) - 1);
	assert_int_equal(strncmp(small, want, sizeof(small) - 1), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keys_match_the_table),
	    cmocka_unit_test(test_classes),
	    cmocka_unit_test(test_globs_are_the_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
