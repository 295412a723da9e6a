/* Log rotation: no file passes max_size, lines are not split, only
 * `backups` old files are kept, nothing is lost but the oldest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "logfile.h"

static long long size_of(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_size : -1;
}

static void test_rotation_keeps_lines_whole(void **state)
{
	char dir[] = "/tmp/tts-log-XXXXXX", path[256], bak[300], err[256], chunk[20000];
	struct logfile l;
	size_t off = 0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/webui.log", dir);
	assert_int_equal(logfile_open(&l, path, 4096, 2, err, sizeof(err)), 0);
	/* One write far larger than max_size, made of 100-byte lines. */
	for (int i = 0; i < 200; i++)
		off += (size_t)snprintf(chunk + off, sizeof(chunk) - off, "line %04d %089d\n", i, 0);
	assert_int_equal(off, 20000);
	assert_int_equal(logfile_write(&l, chunk, off), 0);
	logfile_close(&l);

	assert_true(size_of(path) > 0 && size_of(path) <= 4096);
	snprintf(bak, sizeof(bak), "%s.1", path);
	assert_int_equal(size_of(bak), 4000); /* 40 whole lines fit in 4096 */
	snprintf(bak, sizeof(bak), "%s.2", path);
	assert_int_equal(size_of(bak), 4000);
	snprintf(bak, sizeof(bak), "%s.3", path);
	assert_int_equal(size_of(bak), -1); /* only 2 backups */
	{
		FILE *f = fopen(path, "r");
		char first[128];

		assert_non_null(fgets(first, sizeof(first), f));
		fclose(f);
		assert_memory_equal(first, "line 0160", 9); /* the newest 40 lines */
	}
	snprintf(bak, sizeof(bak), "rm -rf %s", dir);
	assert_int_equal(system(bak), 0);
}

static void test_no_rotation_when_zero(void **state)
{
	char dir[] = "/tmp/tts-log-XXXXXX", path[256], err[256], buf[1000];
	struct logfile l;

	(void)state;
	memset(buf, 'x', sizeof(buf));
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/webui.log", dir);
	assert_int_equal(logfile_open(&l, path, 0, 2, err, sizeof(err)), 0);
	for (int i = 0; i < 50; i++)
		assert_int_equal(logfile_write(&l, buf, sizeof(buf)), 0);
	logfile_close(&l);
	assert_int_equal(size_of(path), 50000);
	unlink(path);
	rmdir(dir);
}

static void test_unwritable_path_is_an_error(void **state)
{
	struct logfile l;
	char err[256];

	(void)state;
	assert_int_equal(logfile_open(&l, "/nonexistent/dir/webui.log", 0, 1, err, sizeof(err)), -1);
	assert_string_equal(err, "failed to open log file /nonexistent/dir/webui.log: No such file or "
				 "directory ([log] file)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rotation_keeps_lines_whole),
		cmocka_unit_test(test_no_rotation_when_zero),
		cmocka_unit_test(test_unwritable_path_is_an_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
