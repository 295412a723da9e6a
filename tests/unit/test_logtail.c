/* The service's output tail (logfile.h log_tail): the last lines, in order,
 * whatever was printed before; a progress bar's \r keeps its last state;
 * lines cut at a character; a line cut by the ring's start is dropped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "logfile.h"

static void test_last_lines_in_order(void **state)
{
	static struct log_tail t;
	char **l;

	(void)state;
	log_tail_push(&t, "one\ntwo\n", 8);
	log_tail_push(&t, "\nthree\nfour", 11);
	l = log_tail_lines(&t, 3, 100);
	assert_non_null(l);
	assert_string_equal(l[0], "two");
	assert_string_equal(l[1], "three");
	assert_string_equal(l[2], "four"); /* unfinished, still quoted */
	assert_null(l[3]);
	log_tail_free(l);
}

static void test_ring_keeps_the_end(void **state)
{
	static struct log_tail t;
	char line[64], **l;

	(void)state;
	for (int i = 0; i < 5000; i++) {
		int n = snprintf(line, sizeof(line), "line %d\n", i);

		log_tail_push(&t, line, (size_t)n);
	}
	{
		const char *tb = "Traceback\r\nOSError: [Errno 30] Read-only file system\n";

		log_tail_push(&t, tb, strlen(tb));
	}
	l = log_tail_lines(&t, 4, 100);
	assert_non_null(l);
	assert_string_equal(l[0], "line 4998");
	assert_string_equal(l[1], "line 4999");
	assert_string_equal(l[2], "Traceback");
	assert_string_equal(l[3], "OSError: [Errno 30] Read-only file system");
	log_tail_free(l);
	/* everything kept: the oldest line, cut by the ring, is not quoted */
	l = log_tail_lines(&t, 100000, 100);
	assert_non_null(l);
	assert_true(strncmp(l[0], "line ", 5) == 0);
	assert_int_equal((int)strlen(l[0]), (int)strlen("line 4000"));
	log_tail_free(l);
}

static void test_progress_bar_and_cut(void **state)
{
	static struct log_tail t, big;
	char huge[LOG_TAIL_BYTES * 2], **l;

	(void)state;
	log_tail_push(&t, "Downloading 10%\rDownloading 50%\rDownloading 90%\n", 48);
	log_tail_push(&t, "caf\xc3\xa9 au lait\n", 14);
	l = log_tail_lines(&t, 5, 4);
	assert_non_null(l);
	assert_string_equal(l[0], "Down");
	assert_string_equal(l[1], "caf"); /* not half of the é */
	assert_null(l[2]);
	log_tail_free(l);
	l = log_tail_lines(&t, 5, 100);
	assert_string_equal(l[0], "Downloading 90%");
	log_tail_free(l);
	assert_null(log_tail_lines(&big, 5, 100)); /* nothing printed */
	memset(huge, 'x', sizeof(huge));
	huge[sizeof(huge) - 1] = '\n';
	log_tail_push(&big, huge, sizeof(huge));
	l = log_tail_lines(&big, 5, 10);
	assert_non_null(l); /* one line longer than the ring: its end */
	assert_string_equal(l[0], "xxxxxxxxxx");
	log_tail_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_last_lines_in_order),
	    cmocka_unit_test(test_ring_keeps_the_end),
	    cmocka_unit_test(test_progress_bar_and_cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
