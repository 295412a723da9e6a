/* safefile: links are followed only when root owns them, in any component;
 * existing files are written only when regular, single-linked and owned by
 * an allowed owner; atomic writes leave the old file or the new one, never
 * a temp file, and write devices in place. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "atomicfile.h"
#include "safefile.h"

static char top[] = "/tmp/tts-safe-XXXXXX";

/* fsync counted: this definition is the one atomicfile.o, linked in here,
 * calls (the test's own, before libc's) */
static int fsyncs;

int fsync(int fd)
{
	fsyncs++;
	return (int)syscall(SYS_fsync, fd);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(top) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[300];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	return system(cmd);
}

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", top, name);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static char *read_text(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* A link as another user would plant it (as root: chowned to nobody). */
static void plant(const char *target, const char *link)
{
	assert_int_equal(symlink(target, link), 0);
	if (geteuid() == 0)
		assert_int_equal(lchown(link, 65534, 65534), 0);
}

static void test_link_in_a_parent_is_refused(void **state)
{
	char real[300], link[300], file[300], err[512];
	const char *base;

	(void)state;
	path_of(real, sizeof(real), "real");
	path_of(link, sizeof(link), "logs");
	assert_int_equal(mkdir(real, 0755), 0);
	plant(real, link);
	path_of(file, sizeof(file), "logs/webui.log");
	assert_int_equal(safe_dir_open(file, &base, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "'logs' is a symbolic link"));
	assert_int_equal(safe_open_append(file, NULL, 0644, NULL, err, sizeof(err)), -1);
	assert_int_equal(access(real, F_OK), 0);
	path_of(file, sizeof(file), "real/webui.log");
	assert_int_equal(access(file, F_OK), -1); /* nothing created through it */
}

static void test_roots_own_link_is_followed(void **state)
{
	char real[300], link[300], file[300], err[512];
	const char *base;
	int fd;

	(void)state;
	if (geteuid() != 0)
		skip(); /* only root's links are trusted; CI runs as root */
	path_of(real, sizeof(real), "rootreal");
	path_of(link, sizeof(link), "rootlink");
	assert_int_equal(mkdir(real, 0755), 0);
	assert_int_equal(symlink("rootreal", link), 0); /* relative, root's */
	path_of(file, sizeof(file), "rootlink/a/../x.log");
	path_of(real, sizeof(real), "rootreal/a");
	assert_int_equal(mkdir(real, 0755), 0);
	fd = safe_dir_open(file, &base, err, sizeof(err));
	assert_true(fd >= 0);
	assert_string_equal(base, "x.log");
	close(fd);
	fd = safe_open_append(file, NULL, 0644, NULL, err, sizeof(err));
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "ok\n", 3), 3);
	close(fd);
	path_of(file, sizeof(file), "rootreal/x.log");
	assert_string_equal(read_text(file), "ok\n");
}

static void test_append_refuses_link_hardlink_fifo_and_strangers(void **state)
{
	char victim[300], p[300], err[512];
	struct safe_owners o = {.uid = {0, 1000}, .n = 2};

	(void)state;
	path_of(victim, sizeof(victim), "victim");
	write_text(victim, "precious\n");

	path_of(p, sizeof(p), "link.log");
	plant(victim, p);
	assert_int_equal(safe_open_append(p, &o, 0644, NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is a symbolic link owned by uid"));

	path_of(p, sizeof(p), "hard.log");
	assert_int_equal(link(victim, p), 0);
	assert_int_equal(safe_open_append(p, &o, 0644, NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "has 2 hard links"));

	path_of(p, sizeof(p), "fifo.log");
	assert_int_equal(mkfifo(p, 0644), 0);
	/* no reader: must fail at once, not block */
	assert_int_equal(safe_open_append(p, &o, 0644, NULL, err, sizeof(err)), -1);

	if (geteuid() == 0) {
		path_of(p, sizeof(p), "stranger.log");
		write_text(p, "theirs\n");
		assert_int_equal(chown(p, 4242, 4242), 0);
		assert_int_equal(safe_open_append(p, &o, 0644, NULL, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "owned by uid 4242"));
		assert_string_equal(read_text(p), "theirs\n");
	}
	assert_string_equal(read_text(victim), "precious\n");
}

static void test_atomic_write_replaces_whole_and_leaves_no_temp(void **state)
{
	char p[300], err[512];
	struct stat st;

	(void)state;
	path_of(p, sizeof(p), "t.json");
	write_text(p, "old\n");
	assert_int_equal(atomic_write(p, "new\n", 4, 0640, (uid_t)-1, (gid_t)-1, err, sizeof(err)),
			 0);
	assert_string_equal(read_text(p), "new\n");
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	if (geteuid() == 0) {
		assert_int_equal(atomic_write(p, "own\n", 4, 0640, 65534, 65534, err, sizeof(err)),
				 0);
		assert_int_equal(stat(p, &st), 0);
		assert_int_equal(st.st_uid, 65534);
	}
	/* no ".t.json.*" left behind */
	{
		char cmd[400];

		snprintf(cmd, sizeof(cmd), "ls -A %s | grep -q '^\\.t\\.json\\.'", top);
		assert_int_not_equal(system(cmd), 0);
	}
}

/* The pidfile's write: the same whole file, mode and clean directory,
 * durable or not (no fsync: it means nothing after a reboot, and where
 * /run is on a disk the fsyncs delayed the service's exec) */
static void test_atomic_write_volatile_is_whole_without_fsync(void **state)
{
	char p[300], victim[300], err[512];
	struct stat st;

	(void)state;
	path_of(p, sizeof(p), "v.pid");
	write_text(p, "1 2\n3 4\n");
	fsyncs = 0;
	assert_int_equal(atomic_write(p, "5 6\n", 4, 0644, (uid_t)-1, (gid_t)-1, err, sizeof(err)),
			 0);
	assert_int_equal(fsyncs, 2); /* the file, then its directory */
	fsyncs = 0;
	assert_int_equal(atomic_write_volatile(p, "7 8\n9 10\n", 9, 0644, (uid_t)-1, (gid_t)-1, err,
					       sizeof(err)),
			 0);
	assert_int_equal(fsyncs, 0);
	assert_string_equal(read_text(p), "7 8\n9 10\n");
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	{
		char cmd[400];

		snprintf(cmd, sizeof(cmd), "ls -A %s | grep -q '^\\.v\\.pid\\.'", top);
		assert_int_not_equal(system(cmd), 0);
	}
	/* the same refusals as atomic_write */
	path_of(victim, sizeof(victim), "victim3");
	write_text(victim, "precious\n");
	path_of(p, sizeof(p), "link.pid");
	plant(victim, p);
	assert_int_equal(
	    atomic_write_volatile(p, "x", 1, 0644, (uid_t)-1, (gid_t)-1, err, sizeof(err)), -1);
	assert_string_equal(read_text(victim), "precious\n");
}

static void test_atomic_refuses_links_and_directories(void **state)
{
	char victim[300], p[300], err[512];

	(void)state;
	path_of(victim, sizeof(victim), "victim2");
	write_text(victim, "precious\n");
	path_of(p, sizeof(p), "out.svg");
	plant(victim, p);
	assert_int_equal(atomic_write(p, "x", 1, 0644, (uid_t)-1, (gid_t)-1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "refusing to write through it"));
	assert_string_equal(read_text(victim), "precious\n");
	path_of(p, sizeof(p), "adir");
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(atomic_write(p, "x", 1, 0644, (uid_t)-1, (gid_t)-1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is a directory"));
}

static void test_atomic_writes_a_device_in_place(void **state)
{
	char p[300], err[512];
	struct stat st;

	(void)state;
	if (geteuid() != 0)
		skip(); /* mknod needs CAP_MKNOD */
	path_of(p, sizeof(p), "null");
	assert_int_equal(mknod(p, S_IFCHR | 0666, makedev(1, 3)), 0);
	assert_int_equal(chmod(p, 0666), 0); /* past the umask: must stay so */
	assert_int_equal(atomic_write(p, "x", 1, 0644, (uid_t)-1, (gid_t)-1, err, sizeof(err)), 0);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISCHR(st.st_mode));
	assert_int_equal(st.st_rdev, makedev(1, 3));
	assert_int_equal(st.st_mode & 07777, 0666);
}

static void test_owners_for_a_run(void **state)
{
	struct safe_owners o;

	(void)state;
	safe_owners_init(&o, 1234, top);
	if (geteuid() != 0) {
		assert_int_equal(o.n, 0);
		return;
	}
	assert_int_equal(o.n, 2); /* root (also top's owner) and the service user */
	assert_int_equal(o.uid[0], 0);
	assert_int_equal(o.uid[1], 1234);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_link_in_a_parent_is_refused),
	    cmocka_unit_test(test_roots_own_link_is_followed),
	    cmocka_unit_test(test_append_refuses_link_hardlink_fifo_and_strangers),
	    cmocka_unit_test(test_atomic_write_replaces_whole_and_leaves_no_temp),
	    cmocka_unit_test(test_atomic_refuses_links_and_directories),
	    cmocka_unit_test(test_atomic_write_volatile_is_whole_without_fsync),
	    cmocka_unit_test(test_atomic_writes_a_device_in_place),
	    cmocka_unit_test(test_owners_for_a_run),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
