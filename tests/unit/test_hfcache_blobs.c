/* The host's side of the hub cache's layout: hostprobe_hub_blob, the one
 * live look the timeline's downloads[].also_in is recorded from. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "hfcache.h"
#include "hostprobe.h"

static void test_hub_blob_found_by_etag(void **state)
{
	char tmp[] = "/tmp/tts-blobs-XXXXXX", p[PATH_MAX], out[PATH_MAX], cmd[PATH_MAX + 16];
	struct hf_cache_dir d[2];
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(tmp));
	snprintf(d[0].path, sizeof(d[0].path), "%s/empty", tmp);
	snprintf(d[1].path, sizeof(d[1].path), "%s/hub", tmp);
	d[0].role = d[1].role = "test";
	snprintf(p, sizeof(p), "%s/hub/models--o--r/blobs", tmp);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", p);
	assert_int_equal(system(cmd), 0);
	snprintf(p, sizeof(p), "%s/hub/models--o--r/blobs/e1", tmp);
	f = fopen(p, "w");
	assert_non_null(f);
	fclose(f);
	snprintf(p, sizeof(p), "%s/hub/models--o--r/blobs/dir", tmp);
	assert_int_equal(mkdir(p, 0755), 0);

	assert_true(hostprobe_hub_blob(d, 2, "e1", out, sizeof(out)));
	snprintf(p, sizeof(p), "%s/hub/models--o--r/blobs/e1", tmp);
	assert_string_equal(out, p);
	assert_false(hostprobe_hub_blob(d, 2, "e2", out, sizeof(out)));
	assert_string_equal(out, "");
	assert_false(hostprobe_hub_blob(d, 2, "dir", out, sizeof(out))); /* not a file */
	assert_false(hostprobe_hub_blob(d, 1, "e1", out, sizeof(out)));	 /* not in that cache */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hub_blob_found_by_etag),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
