/* Stale matching rules: which command lines count as an instance of the
 * configured app. Pure function, no /proc access. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "stale.h"

static char dir[] = "/tmp/tts-stale-XXXXXX";
static char other[] = "/tmp/tts-stale-other-XXXXXX";

static int setup(void **state)
{
	char path[256];
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_non_null(mkdtemp(other));
	snprintf(path, sizeof(path), "%s/webui.py", dir);
	f = fopen(path, "w");
	fclose(f);
	snprintf(path, sizeof(path), "%s/webui.py", other);
	f = fopen(path, "w");
	fclose(f);
	return 0;
}

static int teardown(void **state)
{
	char cmd[512];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s", dir, other);
	return system(cmd);
}

static struct config cfg(enum stale_scope scope)
{
	struct config c;
	char err[CONFIG_ERR_MAX];

	config_defaults(&c);
	free(c.app_dir);
	c.app_dir = strdup(dir);
	c.stale_scope = scope;
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	return c;
}

#define ARGV(...) ((char *const[]){__VA_ARGS__, NULL})

static void test_matches_interpreter_running_script(void **state)
{
	struct config c = cfg(SCOPE_APP);

	(void)state;
	assert_true(stale_matches(&c, ARGV("python3", "webui.py", "--port", "7860"), dir));
	assert_true(stale_matches(&c, ARGV("/usr/bin/python3.11", "-u", "webui.py"), dir));
	assert_true(stale_matches(&c, ARGV("python", "-X", "utf8", "webui.py"), dir));
	assert_true(stale_matches(&c, ARGV("uv", "run", "webui.py"), dir));
	/* Absolute path from anywhere. */
	{
		char abs[256];

		snprintf(abs, sizeof(abs), "%s/webui.py", dir);
		assert_true(stale_matches(&c, ARGV("python3", abs), "/"));
	}
	config_free(&c);
}

static void test_never_matches_mere_arguments(void **state)
{
	struct config c = cfg(SCOPE_APP);

	(void)state;
	/* An editor or a pager on the file, or the file as a later argument. */
	assert_false(stale_matches(&c, ARGV("vim", "webui.py"), dir));
	assert_false(stale_matches(&c, ARGV("less", "webui.py"), dir));
	assert_false(stale_matches(&c, ARGV("python3", "edit.py", "webui.py"), dir));
	assert_false(stale_matches(&c, ARGV("python3", "-c", "print(1)"), dir));
	/* A look-alike name. */
	assert_false(stale_matches(&c, ARGV("python3", "webui.py.bak"), dir));
	assert_false(stale_matches(&c, ARGV("python3", "my_webui.py"), dir));
	config_free(&c);
}

static void test_scope_app_vs_any(void **state)
{
	struct config app = cfg(SCOPE_APP), any = cfg(SCOPE_ANY);

	(void)state;
	/* Same script name in another directory: only with scope = any. */
	assert_false(stale_matches(&app, ARGV("python3", "webui.py"), other));
	assert_true(stale_matches(&any, ARGV("python3", "webui.py"), other));
	/* Unknown cwd (process gone, no permission): not ours. */
	assert_false(stale_matches(&app, ARGV("python3", "webui.py"), NULL));
	config_free(&app);
	config_free(&any);
}

static void test_symlinked_script_in_another_checkout(void **state)
{
	struct config c = cfg(SCOPE_APP);
	char link_dir[] = "/tmp/tts-stale-link-XXXXXX", link[256], target[256], cmd[300];

	(void)state;
	/* Two checkouts whose webui.py are links to one file: still two apps. */
	assert_non_null(mkdtemp(link_dir));
	snprintf(link, sizeof(link), "%s/webui.py", link_dir);
	snprintf(target, sizeof(target), "%s/webui.py", dir);
	assert_int_equal(symlink(target, link), 0);
	assert_false(stale_matches(&c, ARGV("python3", "webui.py"), link_dir));
	assert_true(stale_matches(&c, ARGV("python3", "webui.py"), dir));
	snprintf(cmd, sizeof(cmd), "rm -rf %s", link_dir);
	assert_int_equal(system(cmd), 0);
	config_free(&c);
}

static void test_direct_execution(void **state)
{
	struct config c = cfg(SCOPE_APP);

	(void)state;
	assert_true(stale_matches(&c, ARGV("./webui.py", "--port", "1"), dir));
	config_free(&c);
}

/* Only root's, [service] user's and the app directory owner's processes
 * can be instances: anyone else's look-alike is left alone. */
static void test_owner_rules(void **state)
{
	struct config c = cfg(SCOPE_APP);
	struct stale_owners o;
	char err[CONFIG_ERR_MAX];

	(void)state;
	if (getuid() != 0)
		skip(); /* the app dir must be root's, then nobody's */
	assert_int_equal(chown(dir, 0, 0), 0);
	stale_owners_init(&c, &o);
	assert_true(stale_owner_counts(&o, 0, 0));
	assert_false(stale_owner_counts(&o, 65534, 65534));
	/* a setuid-root program another user started is still theirs */
	assert_false(stale_owner_counts(&o, 65534, 0));
	assert_false(stale_owner_counts(&o, 0, 65534));
	/* the app dir's owner */
	assert_int_equal(chown(dir, 65534, 65534), 0);
	stale_owners_init(&c, &o);
	assert_true(stale_owner_counts(&o, 65534, 65534));
	assert_false(stale_owner_counts(&o, 1, 1));
	assert_int_equal(chown(dir, 0, 0), 0);
	/* [service] user */
	assert_int_equal(config_set(&c, "service.user=daemon", err, sizeof(err)), 0);
	stale_owners_init(&c, &o);
	assert_true(stale_owner_counts(&o, 1, 1)); /* daemon is uid 1 on Debian */
	assert_false(stale_owner_counts(&o, 65534, 65534));
	config_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_matches_interpreter_running_script),
	    cmocka_unit_test(test_never_matches_mere_arguments),
	    cmocka_unit_test(test_scope_app_vs_any),
	    cmocka_unit_test(test_direct_execution),
	    cmocka_unit_test(test_symlinked_script_in_another_checkout),
	    cmocka_unit_test(test_owner_rules),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
