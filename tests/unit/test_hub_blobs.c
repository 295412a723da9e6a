/* hooks/hub_blobs.h: the mlock shim's names of a hub cache blob, on a hub
 * cache laid out here as huggingface_hub writes it (blobs/HASH, relative
 * links in snapshots/COMMIT/). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../hooks/hub_blobs.h"

static char root[64];
static int calls; /* how often a name was tested */

static bool safetensors(const char *path)
{
	size_t n = strlen(path);

	calls++;
	return n > 12 && !strcmp(path + n - 12, ".safetensors");
}

static bool snapshot_path(const char *path)
{
	calls++;
	return strstr(path, "/snapshots/c1/sub/") != NULL;
}

static void put(const char *rel, const char *link_to)
{
	char p[256], cmd[512];

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", p);
	assert_int_equal(system(cmd), 0);
	if (link_to) {
		assert_int_equal(symlink(link_to, p), 0);
	} else {
		FILE *f = fopen(p, "w");

		assert_non_null(f);
		fclose(f);
	}
}

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/test_hub_blobs.XXXXXX");
	assert_non_null(mkdtemp(root));
	put("models--a--b/blobs/aaa", NULL);
	put("models--a--b/blobs/bbb", NULL);
	put("models--a--b/blobs/ccc", NULL);
	put("models--a--b/snapshots/c1/model.safetensors", "../../blobs/aaa");
	put("models--a--b/snapshots/c1/sub/x/model.safetensors", "../../../../blobs/bbb");
	put("models--a--b/snapshots/c1/config.json", "../../blobs/ccc");
	put("models--a--b/snapshots/c1/notablob.safetensors", "../../other/ccc");
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd);
}

static bool blob(const char *hash, unsigned long ino, bool (*m)(const char *))
{
	char p[256];

	snprintf(p, sizeof(p), "%s/models--a--b/blobs/%s", root, hash);
	return blob_matches(p, 1, 2, ino, m);
}

static void test_points_at(void **state)
{
	(void)state;
	assert_true(points_at("../../blobs/aaa", "aaa"));
	assert_true(points_at("blobs/aaa", "aaa"));
	assert_true(points_at("/c/models--a--b/blobs/aaa", "aaa"));
	assert_false(points_at("../../blobs/xaaa", "aaa"));
	assert_false(points_at("../../myblobs/aaa", "aaa"));
	assert_false(points_at("../../blobs/aaa/", "aaa"));
	assert_false(points_at("aaa", "aaa"));
}

static void test_names(void **state)
{
	char p[256];

	(void)state;
	blobs_forget();
	assert_true(blob("aaa", 1, safetensors));  /* snapshots/c1/model.safetensors */
	assert_true(blob("bbb", 2, safetensors));  /* three folders down */
	assert_false(blob("ccc", 3, safetensors)); /* config.json; notablob points elsewhere */
	/* a pattern with a '/': the link's whole path */
	blobs_forget();
	assert_true(blob("bbb", 2, snapshot_path));
	assert_false(blob("aaa", 1, snapshot_path));
	/* not a blob: no look-up at all */
	snprintf(p, sizeof(p), "%s/models--a--b/snapshots/c1/config.json", root);
	calls = 0;
	assert_false(blob_matches(p, 1, 2, 9, safetensors));
	assert_int_equal(calls, 0);
	/* a blobs/ folder outside any cache (no snapshots/ beside it) */
	snprintf(p, sizeof(p), "%s/elsewhere/blobs/aaa", root);
	assert_false(blob_matches(p, 1, 2, 10, safetensors));
}

static void test_verdicts_are_kept_per_pass(void **state)
{
	(void)state;
	blobs_forget();
	assert_true(blob("aaa", 1, safetensors));
	calls = 0;
	assert_true(blob("aaa", 1, safetensors)); /* the same inode: no second walk */
	assert_int_equal(calls, 0);
	blobs_forget();
	assert_true(blob("aaa", 1, safetensors));
	assert_true(calls > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_points_at),
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_verdicts_are_kept_per_pass),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
