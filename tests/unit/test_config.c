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
	assert_string_equal(err, "--set 'app.port': expected SECTION.KEY=VALUE (e.g. --set app.port=7861)");
	assert_int_equal(config_set(&c, "app.prot=1", err, sizeof(err)), -1);
	assert_string_equal(err, "--set: unknown key 'prot' in section [app] (did you mean 'port'?)");
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
	assert_string_equal(err, "/nonexistent/tts.ini: cannot read config file: No such file or "
				 "directory (give an existing file with -c, or none for the defaults)");
	config_free(&c);
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
		snprintf(expfile, sizeof(expfile), CORPUS "/%.*s.expected", (int)(len - 4), de->d_name);
		f = fopen(expfile, "r");
		if (!f)
			fail_msg("%s has no .expected file", ini);
		assert_non_null(fgets(expected, sizeof(expected), f));
		fclose(f);
		expected[strcspn(expected, "\n")] = '\0';
		expand(want, sizeof(want), expected, ini);

		config_defaults(&c);
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
	assert_true(checked >= 20);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),   cmocka_unit_test(test_good_file),
		cmocka_unit_test(test_set),        cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_bad_corpus),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
