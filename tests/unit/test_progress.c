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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names_from_the_trace_are_escaped),
	    cmocka_unit_test(test_frozen_download_says_stalled),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
