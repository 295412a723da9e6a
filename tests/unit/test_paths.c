/* paths: the dev/ino directory table and the resolution of relative paths
 * the kernel reports. No BPF: the identities come from stat here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "paths.h"

static void test_add_is_unique_and_absolute_only(void **state)
{
	struct path_dirs d = {0};

	(void)state;
	paths_dir_add(&d, 1, 2, "/a");
	paths_dir_add(&d, 1, 2, "/b");	/* same identity: the first stays */
	paths_dir_add(&d, 1, 3, "rel"); /* not absolute: never a base */
	paths_dir_add(&d, 1, 4, NULL);
	assert_int_equal(d.n, 1);
	assert_string_equal(paths_dir_find(&d, 1, 2), "/a");
	assert_null(paths_dir_find(&d, 1, 3));
	paths_dir_push(&d, 1, 2, "/c"); /* push keeps duplicates; find gives the first */
	assert_int_equal(d.n, 2);
	assert_string_equal(paths_dir_find(&d, 1, 2), "/a");
	paths_dirs_free(&d);
	assert_int_equal(d.n, 0);
	assert_null(d.d);
}

static void test_abs(void **state)
{
	struct path_dirs d = {0};
	char out[256];

	(void)state;
	paths_dir_add(&d, 7, 9, "/srv/app");
	paths_abs(&d, "checkpoints/./gpt.pth", 7, 9, out, sizeof(out));
	assert_string_equal(out, "/srv/app/checkpoints/gpt.pth");
	paths_abs(&d, "../x", 7, 9, out, sizeof(out));
	assert_string_equal(out, "/srv/x");
	/* absolute: folded, whatever the base */
	paths_abs(&d, "/a/b/../c", 7, 9, out, sizeof(out));
	assert_string_equal(out, "/a/c");
	/* an unknown base, or none: left as the kernel gave it */
	paths_abs(&d, "y/z", 7, 10, out, sizeof(out));
	assert_string_equal(out, "y/z");
	paths_abs(&d, "y/z", 0, 0, out, sizeof(out));
	assert_string_equal(out, "y/z");
	paths_dirs_free(&d);
}

static void test_add_path_and_cwd_by_identity(void **state)
{
	struct path_dirs d = {0};
	char cwd[4096];
	struct stat st;
	__u64 dev = 0, ino = 0;

	(void)state;
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(stat(cwd, &st), 0);
	paths_dir_add_path(&d, cwd, &dev, &ino);
	assert_true(dev == paths_kernel_dev(st.st_dev) && ino == st.st_ino);
	assert_string_equal(paths_dir_find(&d, dev, ino), cwd);
	paths_dir_add_path(&d, "/nonexistent/dir", NULL, NULL); /* not there: nothing */
	assert_int_equal(d.n, 1);
	paths_dirs_free(&d);

	/* our own cwd, read from /proc; a chdir argument when the identity the
	 * kernel reported is not the live cwd's */
	paths_dir_add_cwd(&d, getpid(), 0, 0, NULL);
	assert_string_equal(paths_dir_find(&d, paths_kernel_dev(st.st_dev), st.st_ino), cwd);
	paths_dir_add_cwd(&d, getpid(), 99, 98, "/gone/dir");
	assert_string_equal(paths_dir_find(&d, 99, 98), "/gone/dir");
	/* relative: from the cwd that chdir left (the one before) */
	paths_dir_add_cwd(&d, getpid(), 99, 97, "relative");
	assert_string_equal(paths_dir_find(&d, 99, 97), "/gone/dir/relative");
	paths_dirs_free(&d);
}

/* A relative chdir read too late (the process gone): resolved against the
 * cwd the process had, from its start ([app] dir) or its parent's at fork,
 * and followed through a second chdir and an fchdir */
static void test_relative_chdir_of_a_process_gone(void **state)
{
	struct path_dirs d = {0};
	pid_t gone = 0x3ffffff0, child = 0x3ffffff1, other = 0x3ffffff2; /* no such pids */

	(void)state;
	paths_dir_add(&d, 7, 1, "/srv/app");
	paths_cwd_set(&d, gone, 7, 1);
	paths_dir_add_cwd(&d, gone, 7, 2, "sub");
	assert_string_equal(paths_dir_find(&d, 7, 2), "/srv/app/sub");
	paths_dir_add_cwd(&d, gone, 7, 3, "../other/./x");
	assert_string_equal(paths_dir_find(&d, 7, 3), "/srv/app/other/x");
	/* fchdir: no argument, the directory known by identity */
	paths_dir_add_cwd(&d, gone, 7, 2, "");
	paths_cwd_fork(&d, gone, child);
	paths_dir_add_cwd(&d, child, 7, 4, "blobs");
	assert_string_equal(paths_dir_find(&d, 7, 4), "/srv/app/sub/blobs");
	/* a process whose cwd was never seen: nothing is guessed */
	paths_dir_add_cwd(&d, other, 7, 5, "blobs");
	assert_null(paths_dir_find(&d, 7, 5));
	paths_dirs_free(&d);
}

static void test_kernel_dev(void **state)
{
	(void)state;
	/* MKDEV: major << 20 | minor */
	assert_true(paths_kernel_dev(makedev(8, 1)) == ((8ull << 20) | 1));
	assert_true(paths_kernel_dev(makedev(259, 3)) == ((259ull << 20) | 3));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_add_is_unique_and_absolute_only),
	    cmocka_unit_test(test_abs),
	    cmocka_unit_test(test_add_path_and_cwd_by_identity),
	    cmocka_unit_test(test_relative_chdir_of_a_process_gone),
	    cmocka_unit_test(test_kernel_dev),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
