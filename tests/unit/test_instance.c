/* instance.c's pure parts and the trusted-directory check that guards
 * /run/tts-launch, on scratch directories (run as root, as in CI). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "instance.h"

static char top[] = "/tmp/tts-instance-XXXXXX";

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

static void test_missing_dir_is_created_0755(void **state)
{
	char dir[512], err[512];
	struct stat st;
	mode_t old = umask(077);
	int fd;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/new", top);
	fd = instance_dir_open(dir, geteuid(), err, sizeof(err));
	umask(old);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(stat(dir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0755);
	/* and opened again as it is */
	fd = instance_dir_open(dir, geteuid(), err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
}

static void test_dir_others_may_write_is_refused(void **state)
{
	char dir[512], err[512];

	(void)state;
	snprintf(dir, sizeof(dir), "%s/open", top);
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(chmod(dir, 0777), 0);
	assert_int_equal(instance_dir_open(dir, geteuid(), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "writable by others"));
	assert_int_equal(chmod(dir, 0775), 0);
	assert_int_equal(instance_dir_open(dir, geteuid(), err, sizeof(err)), -1);
}

static void test_dir_of_another_owner_is_refused(void **state)
{
	char dir[512], err[512];

	(void)state;
	if (geteuid() != 0)
		skip();
	snprintf(dir, sizeof(dir), "%s/theirs", top);
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(chown(dir, 65534, 65534), 0);
	assert_int_equal(instance_dir_open(dir, 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "owned by uid 65534"));
}

static void test_link_or_file_is_refused(void **state)
{
	char dir[512], link[512], file[512], err[512];
	FILE *f;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/real", top);
	snprintf(link, sizeof(link), "%s/link", top);
	snprintf(file, sizeof(file), "%s/file", top);
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(symlink(dir, link), 0);
	assert_int_equal(instance_dir_open(link, geteuid(), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "symbolic link"));
	f = fopen(file, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(instance_dir_open(file, geteuid(), err, sizeof(err)), -1);
}

static void test_key_names_the_app_and_tells_apps_apart(void **state)
{
	char a[512], b[512], p1[600], p2[600], p3[600];
	char *k1, *k2, *k3, *k4;

	(void)state;
	snprintf(a, sizeof(a), "%s/index-tts", top);
	snprintf(b, sizeof(b), "%s/other dir", top);
	mkdir(a, 0755);
	mkdir(b, 0755);
	snprintf(p1, sizeof(p1), "%s/tts-launch.pid", a);
	snprintf(p2, sizeof(p2), "%s/tts-launch.pid", b);
	/* the same pidfile seen through "..": the same app */
	snprintf(p3, sizeof(p3), "%s/../index-tts/tts-launch.pid", a);
	k1 = instance_key(a, p1);
	k2 = instance_key(b, p2);
	k3 = instance_key(a, p3);
	k4 = instance_key("/", "/tts-launch.pid");
	assert_true(!strncmp(k1, "index-tts-", 10));
	assert_int_equal(strlen(k1), strlen("index-tts-") + 16);
	assert_true(!strncmp(k2, "other_dir-", 10)); /* no space, no slash */
	assert_string_not_equal(k1, k2);
	assert_string_equal(k1, k3);
	assert_true(!strncmp(k4, "root-", 5));
	free(k1);
	free(k2);
	free(k3);
	free(k4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_missing_dir_is_created_0755),
	    cmocka_unit_test(test_dir_others_may_write_is_refused),
	    cmocka_unit_test(test_dir_of_another_owner_is_refused),
	    cmocka_unit_test(test_link_or_file_is_refused),
	    cmocka_unit_test(test_key_names_the_app_and_tells_apps_apart),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
