/* pidfile.c: written atomically, read without following a link or
 * blocking on a FIFO, removed only by the supervisor it names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "pidfile.h"

static char top[] = "/tmp/tts-pidfile-XXXXXX";

static int setup(void **state)
{
	(void)state;
	assert_non_null(mkdtemp(top));
	return 0;
}

static int teardown(void **state)
{
	char cmd[256];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	return system(cmd);
}

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", top, name);
}

static void test_write_then_read(void **state)
{
	struct pidfile_info in = {123, 456, 789, 1011}, out;
	char path[512], err[512];
	struct stat st;

	(void)state;
	path_of(path, sizeof(path), "a.pid");
	assert_int_equal(pidfile_write(path, &in, err, sizeof(err)), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_int_equal(pidfile_read(path, &out), 0);
	assert_int_equal(out.service_pid, 123);
	assert_int_equal(out.service_start, 456);
	assert_int_equal(out.supervisor_pid, 789);
	assert_int_equal(out.supervisor_start, 1011);
}

static void test_missing_malformed_link_fifo(void **state)
{
	struct pidfile_info pi;
	char path[512], target[512];
	FILE *f;

	(void)state;
	path_of(path, sizeof(path), "none.pid");
	assert_int_equal(pidfile_read(path, &pi), -1);
	path_of(path, sizeof(path), "junk.pid");
	f = fopen(path, "w");
	fputs("12 x\n", f);
	fclose(f);
	assert_int_equal(pidfile_read(path, &pi), -2);
	assert_int_equal(pi.service_pid, 0);
	/* empty (written without fsync, then a crash): names nothing, as if missing */
	path_of(path, sizeof(path), "empty.pid");
	f = fopen(path, "w");
	fclose(f);
	assert_int_equal(pidfile_read(path, &pi), -1);
	/* a link at the name is not followed, even to a good pidfile */
	path_of(target, sizeof(target), "a.pid");
	path_of(path, sizeof(path), "link.pid");
	assert_int_equal(symlink(target, path), 0);
	assert_int_equal(pidfile_read(path, &pi), -2);
	/* a FIFO does not block the reader */
	path_of(path, sizeof(path), "fifo.pid");
	assert_int_equal(mkfifo(path, 0644), 0);
	assert_int_equal(pidfile_read(path, &pi), -2);
}

static void test_remove_only_when_it_names_the_supervisor(void **state)
{
	struct pidfile_info in = {10, 20, 30, 40};
	char path[512], err[512];

	(void)state;
	path_of(path, sizeof(path), "b.pid");
	assert_int_equal(pidfile_write(path, &in, err, sizeof(err)), 0);
	assert_int_equal(pidfile_remove_if(path, 31), 0);
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(pidfile_remove_if(path, 30), 1);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(pidfile_remove_if("", 30), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_write_then_read),
	    cmocka_unit_test(test_missing_malformed_link_fifo),
	    cmocka_unit_test(test_remove_only_when_it_names_the_supervisor),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
