/* imports and interp: module names from module files, imports derived from
 * a model's files, the interpreter behind a runner (uv run), and the
 * app's .venv as the default interpreter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "imports.h"
#include "interp.h"
#include "timeline_internal.h"
#include "timeline_sections.h"
#include "util.h"

static void module_is(const char *path, const char *want)
{
	char got[256];
	bool ok = imports_module_of(path, got, sizeof(got));

	if (!want) {
		if (ok)
			fail_msg("%s: expected no module, got %s", path, got);
		return;
	}
	if (!ok)
		fail_msg("%s: expected %s, got none", path, want);
	assert_string_equal(got, want);
}

static void test_module_names(void **state)
{
	(void)state;
	module_is("/usr/lib/python3.11/json/__init__.py", "json");
	module_is("/usr/lib/python3.11/email/__pycache__/parser.cpython-311.pyc", "email.parser");
	module_is("/usr/lib/python3.11/__pycache__/enum.cpython-311.opt-1.pyc", "enum");
	module_is("/r/.pyenv/versions/3.11.7/lib/python3.11/lib-dynload/"
		  "_decimal.cpython-311-x86_64-linux-gnu.so",
		  "_decimal");
	module_is("/usr/lib/python3/dist-packages/torch/__init__.py", "torch");
	module_is("/usr/lib/python3/dist-packages/torch/_C.cpython-311-x86_64-linux-gnu.so",
		  "torch._C");
	module_is("/app/.venv/lib/python3.11/site-packages/numpy/core/__pycache__/"
		  "multiarray.cpython-311.pyc",
		  "numpy.core.multiarray");
	/* a library a package ships is no module; nor are .pth, metadata, dirs */
	module_is("/usr/lib/python3/dist-packages/torch/lib/libtorch_cpu.so", NULL);
	module_is("/usr/lib/python3/dist-packages/distutils-precedence.pth", NULL);
	module_is("/usr/lib/python3/dist-packages/numpy-1.24.2.dist-info/METADATA", NULL);
	module_is("/usr/lib/python3.11/site-packages", NULL);
	module_is("/usr/lib/python3.11", NULL);
	module_is("/app/webui.py", NULL);
	module_is("/usr/lib/python3/dist-packages/foo-bar/x.py", NULL);
}

static json_t *file(const char *path, double a, double b)
{
	return json_pack("{s:s, s:s, s:i, s:i, s:f, s:f}", "path", path, "class", "python", "opens",
			 1, "pid", 42, "first_ms", a, "last_ms", b);
}

static void test_derive(void **state)
{
	json_t *root = json_pack("{s:[], s:{s:[]}, s:{s:i}, s:[]}", "files", "tracing", "fallbacks",
				 "process", "pid", 42, "processes");
	json_t *files = json_object_get(root, "files"), *py;
	struct timeline *tl = timeline_wrap(json_incref(root));
	struct tl_sections *s;
	const struct tl_import *imp;

	(void)state;
	json_array_append_new(files, file("/usr/lib/python3.11/json/__pycache__/"
					  "decoder.cpython-311.pyc",
					  20, 21));
	json_array_append_new(files, file("/usr/lib/python3.11/json/__pycache__/"
					  "__init__.cpython-311.pyc",
					  10, 11));
	/* the same module's source, opened later: one span */
	json_array_append_new(files, file("/usr/lib/python3.11/json/decoder.py", 22, 23));
	json_array_append_new(files, file("/usr/lib/python3.11/site-packages", 5, 6));

	s = timeline_sections(tl); /* files[] taken over as records */
	assert_int_equal(s->l[TLS_FILES].n, 4);
	assert_int_equal(imports_derive(s), 2);
	imp = TLS_IMPORTS_OF(s);
	assert_int_equal(s->l[TLS_IMPORTS].n, 2);
	assert_string_equal(imp[0].name, "json");
	assert_string_equal(imp[1].name, "json.decoder");
	assert_true(imp[1].start_ms == 20);
	assert_true(imp[1].end_ms == 23);
	assert_true(imp[1].dur_ms == 3);
	assert_int_equal(imp[1].pid, 42);
	assert_int_equal(imp[0].derived, 1);
	tl_list_clear(s, TLS_IMPORTS);

	/* no USDT imports: the derived ones, said in tracing.fallbacks */
	imports_snapshot(root, s, false);
	py = json_object_get(root, "python");
	assert_string_equal(jstr(py, "imports_from"), "module_files");
	s = timeline_sections(tl);
	assert_int_equal(s->l[TLS_IMPORTS].n, 2);
	assert_true(TLS_IMPORTS_OF(s)[0].derived == 1);
	assert_int_equal(
	    json_array_size(json_object_get(json_object_get(root, "tracing"), "fallbacks")), 1);
	/* USDT imports win: set in the tree, taken over as records */
	json_object_set_new(py, "imports",
			    json_pack("[{s:s, s:i, s:f, s:f, s:f, s:i}]", "name", "os", "pid", 42,
				      "start_ms", 1.0, "end_ms", 2.0, "dur_ms", 1.0, "depth", 0));
	s = timeline_sections(tl);
	imports_snapshot(root, s, true);
	py = json_object_get(root, "python");
	assert_string_equal(jstr(py, "imports_from"), "usdt");
	s = timeline_sections(tl);
	assert_int_equal(s->l[TLS_IMPORTS].n, 1);
	assert_string_equal(TLS_IMPORTS_OF(s)[0].name, "os");
	assert_int_equal(TLS_IMPORTS_OF(s)[0].derived, -1); /* absent: not derived */
	timeline_free(tl);
	json_decref(root);
}

static json_t *proc(int pid, int ppid, const char *cmd, double exec_ms)
{
	return json_pack("{s:i, s:i, s:s, s:f, s:n}", "pid", pid, "ppid", ppid, "command", cmd,
			 "exec_ms", exec_ms, "exit");
}

static void test_interpreter_behind_uv(void **state)
{
	json_t *procs = json_array(), *ip, *j;
	char line[512];

	(void)state;
	json_array_append_new(procs, proc(100, 1, "/usr/bin/uv", 5));
	/* uv's query of the interpreter: a python child that exits at once */
	json_array_append_new(procs, proc(101, 100, "/app/.venv/bin/python", 20));
	json_object_set_new(json_array_get(procs, 1), "exit",
			    json_pack("{s:i, s:n}", "code", 0, "signal"));
	json_object_set_new(json_array_get(procs, 1), "exit_ms", json_real(25));
	json_array_append_new(procs, proc(102, 100, "/app/.venv/bin/python", 30));
	json_array_append_new(procs, proc(104, 102, "/app/.venv/bin/python", 40)); /* a worker */
	json_array_append_new(procs, proc(103, 1, "/usr/bin/python3", 10));	   /* not ours */
	ip = interp_find(procs, 100);
	assert_non_null(ip);
	assert_int_equal((int)jnum(ip, "pid"), 102);
	j = interp_json(procs, 100);
	assert_int_equal((int)jnum(json_object_get(j, "runner"), "pid"), 100);
	json_decref(j);
	assert_int_equal(interp_exit_line(procs, 100, 137, line, sizeof(line)), -1); /* alive */
	json_object_set_new(ip, "exit", json_pack("{s:n, s:i}", "code", "signal", 9));
	json_object_set_new(ip, "exit_ms", json_real(50));
	assert_int_equal(interp_exit_line(procs, 100, 137, line, sizeof(line)), 0);
	assert_non_null(strstr(line, "(pid 102, started by uv) was killed by SIGKILL"));
	assert_non_null(strstr(line, "exit 137"));
	json_object_set_new(ip, "exit", json_pack("{s:i, s:n}", "code", 3, "signal"));
	assert_int_equal(interp_exit_line(procs, 100, 3, line, sizeof(line)), 0);
	assert_non_null(strstr(line, "exited with status 3; uv exited with 3"));
	json_object_set_new(ip, "exit", json_pack("{s:i, s:n}", "code", 0, "signal"));
	assert_int_equal(interp_exit_line(procs, 100, 0, line, sizeof(line)), -1); /* clean */
	/* a python run directly is its own interpreter, no runner */
	j = interp_json(procs, 103);
	assert_int_equal((int)jnum(j, "pid"), 103);
	assert_true(json_is_null(json_object_get(j, "runner")));
	assert_int_equal(interp_exit_line(procs, 103, 0, line, sizeof(line)), -1);
	json_decref(j);
	json_decref(procs);
}

/* [app] python unset and a .venv: the app's interpreter, for run and doctor */
static void test_venv_default(void **state)
{
	char dir[] = "/tmp/tts-venv-XXXXXX", p[256], err[CONFIG_ERR_MAX], found[4096];
	struct config c;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/webui.py", dir);
	f = fopen(p, "w");
	assert_non_null(f);
	fclose(f);
	config_defaults(&c);
	c.euid = 65534;
	free(c.app_dir);
	c.app_dir = strdup(dir);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	assert_string_equal(c.python, "/usr/bin/python3"); /* no .venv */
	assert_false(c.python_venv);
	config_free(&c);

	snprintf(p, sizeof(p), "%s/.venv", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/.venv/bin", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/.venv/bin/python", dir);
	assert_int_equal(symlink("/usr/bin/python3", p), 0);
	config_defaults(&c);
	c.euid = 65534;
	free(c.app_dir);
	c.app_dir = strdup(dir);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	assert_string_equal(c.python, p);
	assert_true(c.python_venv);
	assert_int_equal(config_app_interpreter(&c, found, sizeof(found), err, sizeof(err)), 0);
	assert_string_equal(found, p);
	assert_int_equal(config_check_app(&c, err, sizeof(err)), 0);
	assert_string_equal(interp_exe_glob(&c), "python*");
	config_free(&c);

	/* set explicitly: the setting wins over the .venv */
	config_defaults(&c);
	c.euid = 65534;
	free(c.app_dir);
	c.app_dir = strdup(dir);
	assert_int_equal(config_set(&c, "app.python=uv run", err, sizeof(err)), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	assert_string_equal(c.python, "uv run");
	assert_false(c.python_venv);
	assert_string_equal(interp_exe_glob(&c), "python");
	config_free(&c);

	unlink(p);
	snprintf(p, sizeof(p), "%s/.venv/bin", dir);
	rmdir(p);
	snprintf(p, sizeof(p), "%s/.venv", dir);
	rmdir(p);
	snprintf(p, sizeof(p), "%s/webui.py", dir);
	unlink(p);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_module_names),
	    cmocka_unit_test(test_derive),
	    cmocka_unit_test(test_interpreter_behind_uv),
	    cmocka_unit_test(test_venv_default),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
