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
	assert_int_equal(logfile_open(&l, path, NULL, 4096, 2, err, sizeof(err)), 0);
	/* One write far larger than max_size, made of 100-byte lines. */
	for (int i = 0; i < 200; i++)
		off +=
		    (size_t)snprintf(chunk + off, sizeof(chunk) - off, "line %04d %089d\n", i, 0);
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
	assert_int_equal(logfile_open(&l, path, NULL, 0, 2, err, sizeof(err)), 0);
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
	assert_int_equal(
	    logfile_open(&l, "/nonexistent/dir/webui.log", NULL, 0, 1, err, sizeof(err)), -1);
	assert_string_equal(err,
			    "failed to open log file /nonexistent/dir/webui.log: No such file or "
			    "directory ([log] file)");
}

/* The rotation race, made deterministic: a link to another file appears at
 * the log's name between the rename and the reopen (where a looping
 * attacker would put it). The reopen refuses it; nothing reaches the
 * link's target; the output from then on is counted as lost. */
struct plant {
	char link[300];
	char target[300];
};

static void plant_link(void *arg)
{
	struct plant *p = arg;

	assert_int_equal(symlink(p->target, p->link), 0);
	if (geteuid() == 0) /* as the service user would have planted it */
		assert_int_equal(lchown(p->link, 65534, 65534), 0);
}

static void test_link_planted_between_rename_and_reopen_is_refused(void **state)
{
	char dir[] = "/tmp/tts-log-XXXXXX", path[256], err[256], line[100], cmd[300];
	struct plant p;
	struct logfile l;
	FILE *f;

	(void)state;
	memset(line, 'y', sizeof(line));
	line[sizeof(line) - 1] = '\n';
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/webui.log", dir);
	snprintf(p.link, sizeof(p.link), "%s", path);
	snprintf(p.target, sizeof(p.target), "%s/victim", dir);
	f = fopen(p.target, "w");
	assert_non_null(f);
	fputs("precious\n", f);
	fclose(f);
	assert_int_equal(logfile_open(&l, path, NULL, 1000, 1, err, sizeof(err)), 0);
	l.after_rename = plant_link;
	l.hook_arg = &p;
	for (int i = 0; i < 9; i++) /* 900 bytes: no rotation yet */
		assert_int_equal(logfile_write(&l, line, sizeof(line)), 0);
	/* the next two lines pass 1000 bytes: rotate, the link appears, refused */
	assert_int_equal(logfile_write(&l, line, sizeof(line)), 0);
	assert_int_equal(logfile_write(&l, line, sizeof(line)), -1);
	assert_int_equal(l.fd, -1);
	assert_non_null(strstr(l.error, "symbolic link"));
	assert_int_equal(l.lost, sizeof(line));
	assert_int_equal(logfile_write(&l, line, sizeof(line)), -1);
	assert_int_equal(l.lost, 2 * sizeof(line));
	logfile_close(&l);
	assert_int_equal(size_of(p.target), 9); /* "precious\n", untouched */
	snprintf(cmd, sizeof(cmd), "%s.1", path);
	assert_int_equal(size_of(cmd), 1000); /* the rotated file kept its lines */
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rotation_keeps_lines_whole),
	    cmocka_unit_test(test_no_rotation_when_zero),
	    cmocka_unit_test(test_unwritable_path_is_an_error),
	    cmocka_unit_test(test_link_planted_between_rename_and_reopen_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
