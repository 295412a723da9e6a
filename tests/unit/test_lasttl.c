/* lasttl: the last timeline a run started in a directory wrote (issue 16:
 * `diagnose` without arguments after `make demo`), in a temp directory of
 * the test's own uid standing for RUN_DIR. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "lasttl.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test-lasttl-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	return chmod(dir, 0755);
}

static int teardown(void **state)
{
	char p[128];

	(void)state;
	snprintf(p, sizeof(p), "%s/%s", dir, LASTTL_FILE);
	unlink(p);
	snprintf(p, sizeof(p), "%s/other", dir);
	unlink(p);
	return rmdir(dir);
}

static int get(const char *cwd, char *tl, char *conf)
{
	return lasttl_read_in(dir, getuid(), cwd, tl, 4096, conf, 4096);
}

static void test_per_directory_most_recent(void **state)
{
	char tl[4096], conf[4096];

	(void)state;
	assert_int_equal(get("/src/tts", tl, conf), -1); /* none yet */
	lasttl_note_in(dir, getuid(), "/src/tts", "/src/tts/build/demo/cold.json",
		       "/src/tts/build/demo/demo.ini");
	lasttl_note_in(dir, getuid(), "/tmp/elsewhere", "/tmp/elsewhere/t.json",
		       "(built-in defaults)");
	lasttl_note_in(dir, getuid(), "/src/tts", "/src/tts/build/demo/timeline.json",
		       "/src/tts/build/demo/demo.ini");
	assert_int_equal(get("/src/tts", tl, conf), 0);
	assert_string_equal(tl, "/src/tts/build/demo/timeline.json");
	assert_string_equal(conf, "/src/tts/build/demo/demo.ini");
	assert_int_equal(get("/tmp/elsewhere", tl, conf), 0);
	assert_string_equal(tl, "/tmp/elsewhere/t.json");
	assert_string_equal(conf, "(built-in defaults)");
	/* a prefix of a recorded directory is another directory */
	assert_int_equal(get("/src", tl, conf), -1);
}

static void test_keeps_the_most_recent_directories(void **state)
{
	char tl[4096], conf[4096], cwd[64], want[96];

	(void)state;
	for (int i = 0; i < LASTTL_MAX + 4; i++) {
		snprintf(cwd, sizeof(cwd), "/d%d", i);
		snprintf(want, sizeof(want), "/d%d/t.json", i);
		lasttl_note_in(dir, getuid(), cwd, want, "");
	}
	assert_int_equal(get("/d0", tl, conf), -1); /* dropped */
	snprintf(cwd, sizeof(cwd), "/d%d", LASTTL_MAX + 3);
	assert_int_equal(get(cwd, tl, conf), 0);
	snprintf(cwd, sizeof(cwd), "/d%d", 4);
	assert_int_equal(get(cwd, tl, conf), 0);
	assert_string_equal(tl, "/d4/t.json");
	assert_string_equal(conf, "");
}

static void test_not_trusted_or_not_kept(void **state)
{
	char tl[4096], conf[4096], p[128], o[128];

	(void)state;
	/* a relative timeline, or names with a tab or newline: not kept */
	lasttl_note_in(dir, getuid(), "/x", "t.json", "");
	lasttl_note_in(dir, getuid(), "/y", "/y/a\tb.json", "");
	lasttl_note_in(dir, getuid(), "/z\nq", "/z/t.json", "");
	assert_int_equal(get("/x", tl, conf), -1);
	assert_int_equal(get("/y", tl, conf), -1);
	lasttl_note_in(dir, getuid(), "/w", "/w/t.json", "");
	assert_int_equal(get("/w", tl, conf), 0);
	/* another owner expected */
	assert_int_equal(lasttl_read_in(dir, getuid() + 1, "/w", tl, 4096, conf, 4096), -1);
	/* a directory others may write */
	assert_int_equal(chmod(dir, 0777), 0);
	assert_int_equal(get("/w", tl, conf), -1);
	assert_int_equal(chmod(dir, 0755), 0);
	/* the file a symbolic link */
	snprintf(p, sizeof(p), "%s/%s", dir, LASTTL_FILE);
	snprintf(o, sizeof(o), "%s/other", dir);
	assert_int_equal(rename(p, o), 0);
	assert_int_equal(symlink(o, p), 0);
	assert_int_equal(get("/w", tl, conf), -1);
	/* a file others may write */
	assert_int_equal(unlink(p), 0);
	assert_int_equal(rename(o, p), 0);
	assert_int_equal(chmod(p, 0666), 0);
	assert_int_equal(get("/w", tl, conf), -1);
	assert_int_equal(chmod(p, 0644), 0);
	assert_int_equal(get("/w", tl, conf), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_per_directory_most_recent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_keeps_the_most_recent_directories, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_not_trusted_or_not_kept, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
