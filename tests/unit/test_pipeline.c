/* pipeline: the stages run in order up to the one asked for; an untraced
 * run skips the trace stages but still gets findings and the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "config.h"
#include "pipeline.h"
#include "timeline.h"
#include "timeline_internal.h"

static struct timeline *new_tl(void)
{
	static char *argv[] = {"tts-launch", "run", NULL};
	struct config c;
	struct timeline *tl;

	clock_init();
	config_defaults(&c);
	tl = timeline_new(&c, 2, argv);
	config_free(&c);
	return tl;
}

static void test_untraced_stages(void **state)
{
	char dir[] = "/tmp/test_pipeline.XXXXXX", path[64], err[256] = "";
	struct timeline *tl = new_tl(), *back;
	struct pipeline_in in = {.path = path, .uid = getuid(), .gid = getgid()};

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/t.json", dir);
	/* no tracer: nothing to collect, and phases are not inferred */
	timeline_mark(tl, "spawn", 1);
	timeline_mark(tl, "exec", 5);
	assert_int_equal(pipeline_run(&in, tl, PIPE_TRACE, err, sizeof(err)), 0);
	assert_int_equal(json_array_size(json_object_get(timeline_json(tl), "phases")), 0);
	/* up to the findings: cache_fs recorded, still no file */
	assert_int_equal(pipeline_run(&in, tl, PIPE_FINDINGS, err, sizeof(err)), 0);
	assert_true(json_is_array(json_object_get(timeline_json(tl), "cache_fs")));
	assert_int_not_equal(access(path, F_OK), 0);
	/* written: and it loads back */
	assert_int_equal(pipeline_run(&in, tl, PIPE_WRITE, err, sizeof(err)), 0);
	back = timeline_load(path, err, sizeof(err));
	assert_non_null(back);
	assert_true(json_is_array(json_object_get(timeline_json(back), "findings")));
	timeline_free(back);
	unlink(path);
	rmdir(dir);
	/* a path where nothing can be written: -1 and why */
	snprintf(path, sizeof(path), "%s/none/t.json", dir);
	assert_int_equal(pipeline_run(&in, tl, PIPE_WRITE, err, sizeof(err)), -1);
	assert_true(err[0] != 0);
	/* no path: nothing written, no error */
	in.path = "";
	assert_int_equal(pipeline_run(&in, tl, PIPE_WRITE, err, sizeof(err)), 0);
	timeline_free(tl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_untraced_stages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
