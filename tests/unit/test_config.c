/* Config parsing: defaults, a good file, --set, and the corpus of bad files
 * in tests/fixtures/bad-ini (NAME.ini gives the message in NAME.expected,
 * FILE standing for the file's path). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"

#define CORPUS "tests/fixtures/bad-ini"

static char *write_tmp(const char *text)
{
	static char path[64];
	int fd;

	strcpy(path, "/tmp/tts-config-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (int)strlen(text));
	close(fd);
	return path;
}

static void test_defaults(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	char **argv;

	(void)state;
	config_defaults(&c);
	c.euid = 65534; /* app dir "." is the checkout, whoever owns it */
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	assert_int_equal(c.port, 7860);
	assert_string_equal(c.script, "webui.py");
	assert_string_equal(c.stale_match, "webui.py");
	assert_true(c.trace);
	assert_int_equal(c.mode, MODE_FOREGROUND);
	argv = config_service_argv(&c);
	assert_string_equal(argv[0], "/usr/bin/python3");
	assert_string_equal(argv[1], "webui.py");
	assert_string_equal(argv[2], "--port");
	assert_string_equal(argv[3], "7860");
	for (char **a = argv; *a; a++)
		free(*a);
	free(argv);
	config_free(&c);
}

static void test_good_file(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	char *path = write_tmp("[app]\ndir = /tmp\npython = uv run\nport = 7861\n"
			       "args = --fp16 --port 9000\n"
			       "[env]\nhf_home = /srv/hf\npythonpath = lib:/opt/x\n"
			       "[stale]\ngrace = 500ms\npolicy = FAIL\n"
			       "[log]\nmax_size = 2M\nbackups = 0\n"
			       "[service]\nready_timeout = 2m\nmode = daemon\n"
			       "[trace]\nenabled = off\n");
	char **argv;

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	assert_string_equal(c.app_dir, "/tmp");
	assert_int_equal(c.port, 7861);
	assert_true(c.stale_grace > 0.49 && c.stale_grace < 0.51);
	assert_int_equal(c.stale_policy, STALE_FAIL);
	assert_int_equal(c.log_max_size, 2 * 1024 * 1024);
	assert_int_equal(c.log_backups, 0);
	assert_true(c.ready_timeout > 119 && c.ready_timeout < 121);
	assert_int_equal(c.mode, MODE_DAEMON);
	assert_false(c.trace);
	assert_string_equal(c.pythonpath, "lib:/opt/x");
	assert_int_equal(c.n_env, 1);
	assert_string_equal(c.env[0].name, "HF_HOME"); /* upper-cased back */
	assert_string_equal(c.env[0].value, "/srv/hf");
	argv = config_service_argv(&c);
	/* "uv run" splits; args' own --port wins over [app] port. */
	assert_string_equal(argv[0], "uv");
	assert_string_equal(argv[1], "run");
	assert_string_equal(argv[2], "webui.py");
	for (char **a = argv; *a; a++) {
		assert_string_not_equal(*a, "7861");
		free(*a);
	}
	free(argv);
	config_free(&c);
	unlink(path);
}

static void test_set(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_set(&c, "app.port=7870", err, sizeof(err)), 0);
	assert_int_equal(c.port, 7870);
	assert_int_equal(config_set(&c, "env.http_proxy=http://p:3128", err, sizeof(err)), 0);
	assert_string_equal(c.env[0].name, "http_proxy"); /* case kept */
	assert_int_equal(config_set(&c, "env.http_proxy=x", err, sizeof(err)), 0);
	assert_int_equal(c.n_env, 1); /* replaced, not added */
	assert_string_equal(c.env[0].value, "x");
	assert_int_equal(config_set(&c, "Trace.Settle=2s", err, sizeof(err)), 0);
	assert_true(c.settle > 1.99 && c.settle < 2.01);

	assert_int_equal(config_set(&c, "app.port", err, sizeof(err)), -1);
	assert_string_equal(
	    err, "--set 'app.port': expected SECTION.KEY=VALUE (e.g. --set app.port=7861)");
	assert_int_equal(config_set(&c, "app.prot=1", err, sizeof(err)), -1);
	assert_string_equal(err,
			    "--set: unknown key 'prot' in section [app] (did you mean 'port'?)");
	assert_int_equal(config_set(&c, "srvice.mode=daemon", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown section [srvice] (did you mean 'service'?)"));
	assert_int_equal(config_set(&c, "log.max_size=-1", err, sizeof(err)), -1);
	config_free(&c);
}

static void test_missing_file(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_load_file(&c, "/nonexistent/tts.ini", err, sizeof(err)), -1);
	assert_string_equal(err,
			    "/nonexistent/tts.ini: cannot read config file: No such file or "
			    "directory (give an existing file with -c, or none for the defaults)");
	config_free(&c);
}

/* Not a regular file, or too big: refused before any byte is parsed (and
 * a device such as /dev/zero does not hang the read). */
static void test_not_a_config_file(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	char path[] = "/tmp/tts-config-big-XXXXXX";
	int fd;

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_load_file(&c, "/tmp", err, sizeof(err)), -1);
	assert_string_equal(err,
			    "/tmp: is a directory, not a config file: give the INI file with -c "
			    "(e.g. -c /tmp/tts-launch.ini)");
	assert_int_equal(config_load_file(&c, "/dev/zero", err, sizeof(err)), -1);
	assert_string_equal(err,
			    "/dev/zero: is not a regular file (a device, FIFO or socket): give "
			    "the INI file with -c");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, CONFIG_MAX_BYTES + 1), 0);
	close(fd);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is 1048577 bytes: a config file is at most 1048576 bytes"));
	/* at the limit it is read (and here refused for its NUL bytes, not its size) */
	assert_int_equal(truncate(path, CONFIG_MAX_BYTES), 0);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "line 1: contains a NUL byte"));
	unlink(path);
	config_free(&c);
}

/* As root, a config another user owns or may write is refused; the same
 * file is fine for a non-root run. */
static void test_root_reads_only_roots_config(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX], want[CONFIG_ERR_MAX], link[64];
	char *path;

	(void)state;
	if (geteuid() != 0)
		skip();
	path = write_tmp("[app]\nport = 7861\n");
	config_defaults(&c);
	c.euid = 0;
	assert_int_equal(chown(path, 65534, 65534), 0);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), -1);
	snprintf(
	    want, sizeof(want),
	    "%s: is owned by uid 65534 (nobody), not root: as root, tts-launch "
	    "reads only a config root owns, since it decides what root runs (chown root:root %s, "
	    "or run tts-launch as that user)",
	    path, path);
	assert_string_equal(err, want);
	assert_int_equal(c.port, 7860);
	c.euid = 65534; /* not root: the kernel's permission checks are enough */
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), 0);
	assert_int_equal(c.port, 7861);

	c.euid = 0;
	assert_int_equal(chown(path, 0, 0), 0);
	assert_int_equal(chmod(path, 0666), 0);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), -1);
	snprintf(want, sizeof(want),
		 "%s: is writable by others (mode 0666): as root, tts-launch reads "
		 "only a config no other user can change (chmod go-w %s)",
		 path, path);
	assert_string_equal(err, want);
	assert_int_equal(chmod(path, 0620), 0);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is writable by its group (mode 0620)"));
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), 0);

	/* a link another user planted, even to root's own file */
	snprintf(link, sizeof(link), "%s.link", path);
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(lchown(link, 65534, 65534), 0);
	assert_int_equal(config_load_file(&c, link, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is a symbolic link owned by uid 65534, not root"));
	assert_int_equal(lchown(link, 0, 0), 0);
	assert_int_equal(config_load_file(&c, link, err, sizeof(err)), 0);
	unlink(link);
	unlink(path);
	config_free(&c);
}

/* As root with [service] user unset, the service runs as the owner of
 * [app] dir; root's own directory and an explicit user keep theirs. */
static void test_user_is_app_dir_owner(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	char dir[] = "/tmp/tts-config-app-XXXXXX";

	(void)state;
	if (geteuid() != 0)
		skip();
	assert_non_null(mkdtemp(dir));

	config_defaults(&c); /* root's directory: root */
	c.euid = 0;
	free(c.app_dir);
	c.app_dir = strdup(dir);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	assert_string_equal(c.user, "");
	assert_false(c.user_from_app_dir);
	assert_null(c.notice);
	config_free(&c);

	assert_int_equal(chown(dir, 65534, 65534), 0);
	config_defaults(&c);
	c.euid = 0;
	free(c.app_dir);
	c.app_dir = strdup(dir);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	assert_string_equal(c.user, "nobody");
	assert_true(c.user_from_app_dir);
	config_free(&c);

	/* not root: nothing to decide */
	config_defaults(&c);
	c.euid = 1000;
	free(c.app_dir);
	c.app_dir = strdup(dir);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	assert_string_equal(c.user, "");
	config_free(&c);

	/* service.user = root opts out, with a notice */
	config_defaults(&c);
	c.euid = 0;
	free(c.app_dir);
	c.app_dir = strdup(dir);
	assert_int_equal(config_set(&c, "service.user=root", err, sizeof(err)), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	assert_string_equal(c.user, "root");
	assert_false(c.user_from_app_dir);
	assert_non_null(c.notice);
	assert_non_null(strstr(c.notice, "[service] user = root: the service runs as root"));
	config_free(&c);

	/* an owner without an account cannot be run as by name: say so */
	assert_int_equal(chown(dir, 54321, 54321), 0);
	config_defaults(&c);
	c.euid = 0;
	free(c.app_dir);
	c.app_dir = strdup(dir);
	assert_int_equal(config_finish(&c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "belongs to uid 54321, which has no user account"));
	assert_non_null(strstr(err, "set [service] user"));
	config_free(&c);
	rmdir(dir);
}

static void test_set_limits(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX], arg[CONFIG_MAX_SET + 64];

	(void)state;
	config_defaults(&c);
	snprintf(arg, sizeof(arg), "env.%0*d=1", CONFIG_MAX_NAME + 1, 0);
	assert_int_equal(config_set(&c, arg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "a section or key name is at most 64 characters"));
	snprintf(arg, sizeof(arg), "app.args=%0*d", CONFIG_MAX_SET + 1, 0);
	assert_int_equal(config_set(&c, arg, err, sizeof(err)), -1);
	assert_string_equal(err, "--set app.args: the value is longer than 4096 characters");
	assert_int_equal(c.n_env, 0);
	config_free(&c);
}

/* Sizes: a unit, once. */
static void test_sizes(void **state)
{
	static const struct {
		const char *v;
		long long bytes; /* -1: refused */
	} cases[] = {
	    {"4096", 4096},	{"8K", 8192},	  {"10M", 10 << 20}, {"10MiB", 10 << 20},
	    {"10mb", 10 << 20}, {"1 G", 1 << 30}, {"5000B", 5000},   {"10MiBB", -1},
	    {"10MM", -1},	{"10 MiB x", -1}, {"10Bi", -1},	     {"10KiBiB", -1},
	};
	struct config c;
	char err[CONFIG_ERR_MAX], arg[64];

	(void)state;
	config_defaults(&c);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc;

		snprintf(arg, sizeof(arg), "log.max_size=%s", cases[i].v);
		rc = config_set(&c, arg, err, sizeof(err));
		if (cases[i].bytes < 0) {
			if (rc != -1)
				fail_msg("'%s' was accepted", cases[i].v);
		} else {
			if (rc != 0 || c.log_max_size != cases[i].bytes)
				fail_msg("'%s': rc %d, %lld bytes", cases[i].v, rc, c.log_max_size);
		}
	}
	config_free(&c);
}

/* A host or model_dir of spaces adds no option without its value. */
static void test_argv_blank_values(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	char **argv;
	int n = 0;

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_set(&c, "app.host= ", err, sizeof(err)), 0);
	assert_int_equal(config_set(&c, "app.model_dir=\t", err, sizeof(err)), 0);
	argv = config_service_argv(&c);
	for (char **a = argv; *a; a++, n++) {
		assert_string_not_equal(*a, "--host");
		assert_string_not_equal(*a, "--model_dir");
		free(*a);
	}
	assert_int_equal(n, 4); /* python3 webui.py --port 7860 */
	free(argv);
	config_free(&c);
}

/* A UTF-8 byte order mark is not part of the first section's name. */
static void test_bom(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	char *path = write_tmp("\xef\xbb\xbf[app]\nport = 7999\n");

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), 0);
	assert_int_equal(c.port, 7999);
	config_free(&c);
	unlink(path);
}

/* run's check before anything is killed: the interpreter and the script exist. */
static void test_check_app(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX], dir[] = "/tmp/tts-config-chk-XXXXXX", path[128];
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	config_defaults(&c);
	free(c.app_dir);
	c.app_dir = strdup(dir);
	assert_int_equal(config_check_app(&c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "[app] script 'webui.py': "));
	assert_non_null(strstr(err, "No such file or directory"));
	snprintf(path, sizeof(path), "%s/webui.py", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(config_check_app(&c, err, sizeof(err)), 0);
	/* relative to [app] dir, as the service execs it from there */
	assert_int_equal(config_set(&c, "app.python=.venv/bin/python --flag", err, sizeof(err)), 0);
	assert_int_equal(config_check_app(&c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "[app] python '.venv/bin/python': no executable file there"));
	/* on the service's PATH ([env] PATH wins over ours) */
	assert_int_equal(config_set(&c, "app.python=sh", err, sizeof(err)), 0);
	assert_int_equal(config_check_app(&c, err, sizeof(err)), 0);
	assert_int_equal(config_set(&c, "env.PATH=/nonexistent", err, sizeof(err)), 0);
	assert_int_equal(config_check_app(&c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "[app] python 'sh': not found on PATH"));
	/* -m module: nothing to look for */
	assert_int_equal(config_set(&c, "env.PATH=/usr/bin:/bin", err, sizeof(err)), 0);
	assert_int_equal(config_set(&c, "app.script=-m indextts.webui", err, sizeof(err)), 0);
	assert_int_equal(config_check_app(&c, err, sizeof(err)), 0);
	config_free(&c);
	unlink(path);
	rmdir(dir);
}

/* Replace every "FILE" in text with path. */
static void expand(char *out, size_t len, const char *text, const char *path)
{
	size_t o = 0;

	for (const char *p = text; *p && o < len - 1;) {
		if (!strncmp(p, "FILE", 4)) {
			o += (size_t)snprintf(out + o, len - o, "%s", path);
			p += 4;
		} else {
			out[o++] = *p++;
		}
	}
	out[o < len ? o : len - 1] = '\0';
}

static void test_bad_corpus(void **state)
{
	DIR *d = opendir(CORPUS);
	struct dirent *de;
	int checked = 0;

	(void)state;
	assert_non_null(d);
	while ((de = readdir(d))) {
		char ini[512], expfile[512], expected[1024], want[2048], err[CONFIG_ERR_MAX];
		size_t len = strlen(de->d_name);
		struct config c;
		FILE *f;
		int rc;

		if (len < 5 || strcmp(de->d_name + len - 4, ".ini"))
			continue;
		snprintf(ini, sizeof(ini), CORPUS "/%s", de->d_name);
		snprintf(expfile, sizeof(expfile), CORPUS "/%.*s.expected", (int)(len - 4),
			 de->d_name);
		f = fopen(expfile, "r");
		if (!f)
			fail_msg("%s has no .expected file", ini);
		assert_non_null(fgets(expected, sizeof(expected), f));
		fclose(f);
		expected[strcspn(expected, "\n")] = '\0';
		expand(want, sizeof(want), expected, ini);

		config_defaults(&c);
		/* the parser's messages, whoever owns the checkout (the root-only
		 * owner and mode checks have their own tests) */
		c.euid = 65534;
		err[0] = '\0';
		rc = config_load_file(&c, ini, err, sizeof(err));
		if (rc == 0)
			rc = config_finish(&c, err, sizeof(err));
		if (rc == 0)
			fail_msg("%s was accepted", ini);
		if (strcmp(err, want))
			fail_msg("%s:\n  got:  %s\n  want: %s", ini, err, want);
		config_free(&c);
		checked++;
	}
	closedir(d);
	assert_true(checked >= 37);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_good_file),
	    cmocka_unit_test(test_set),
	    cmocka_unit_test(test_missing_file),
	    cmocka_unit_test(test_bad_corpus),
	    cmocka_unit_test(test_not_a_config_file),
	    cmocka_unit_test(test_root_reads_only_roots_config),
	    cmocka_unit_test(test_user_is_app_dir_owner),
	    cmocka_unit_test(test_set_limits),
	    cmocka_unit_test(test_sizes),
	    cmocka_unit_test(test_argv_blank_values),
	    cmocka_unit_test(test_check_app),
	    cmocka_unit_test(test_bom),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
