/* The environment the service gets: PYTHONPATH order, [env] variables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "spawn.h"

static const char *get(char **envp, const char *name)
{
	size_t len = strlen(name);
	const char *found = NULL;
	int count = 0;

	for (char **e = envp; *e; e++) {
		if (!strncmp(*e, name, len) && (*e)[len] == '=') {
			found = *e + len + 1;
			count++;
		}
	}
	assert_true(count <= 1); /* never twice */
	return found;
}

static void test_pythonpath_order(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	char *base[] = {"PATH=/usr/bin", "PYTHONPATH=/inherited", "HOME=/root", NULL};
	char **envp;

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_set(&c, "app.dir=/tmp", err, sizeof(err)), 0);
	assert_int_equal(config_set(&c, "env.pythonpath=lib:/opt/extra", err, sizeof(err)), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	envp = spawn_build_env(&c, base);
	assert_string_equal(get(envp, "PYTHONPATH"), "/tmp:/tmp/lib:/opt/extra:/inherited");
	assert_string_equal(get(envp, "PATH"), "/usr/bin");
	assert_string_equal(get(envp, "HOME"), "/root");
	spawn_env_free(envp);
	config_free(&c);
}

static void test_env_overrides_inherited(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	char *base[] = {"HF_HOME=/old", NULL};
	char **envp;

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_set(&c, "app.dir=/tmp", err, sizeof(err)), 0);
	assert_int_equal(config_set(&c, "env.HF_HOME=/new", err, sizeof(err)), 0);
	assert_int_equal(config_set(&c, "env.HF_HUB_OFFLINE=1", err, sizeof(err)), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	envp = spawn_build_env(&c, base);
	assert_string_equal(get(envp, "HF_HOME"), "/new");
	assert_string_equal(get(envp, "HF_HUB_OFFLINE"), "1");
	/* No inherited PYTHONPATH: just the app dir. */
	assert_string_equal(get(envp, "PYTHONPATH"), "/tmp");
	spawn_env_free(envp);
	config_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pythonpath_order),
	    cmocka_unit_test(test_env_overrides_inherited),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
