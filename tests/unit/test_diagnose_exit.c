/* diagnose_exit.c over small inline models: start-failed says whose exit
 * code it is, quotes the last error line and names the cause; it is silent
 * on a stop and on a healthy run; hub-http-error takes the status from the
 * output; an info finding does not change the level. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "diagnose.h"
#include "timeline.h"
#include "timeline_internal.h"

/* A run of [app] (port 7860) that exited as exit says, with output tail. */
static struct timeline *model(const char *exit_json, const char *tail_json, double ready)
{
	json_error_t e;
	json_t *root = json_pack(
	    "{s:s, s:{s:{s:{s:s, s:i}, s:n, s:{s:{s:s}}}}, s:{s:i, s:o, s:o}, s:o}", "schema",
	    "tts-launch.timeline/1", "launcher", "config", "app", "dir", "/nonexistent/app", "port",
	    7860, "command", "env", "vars", "HF_ENDPOINT", "http://127.0.0.1:8999", "process",
	    "pid", 42, "exit", json_loads(exit_json, 0, &e), "output_tail",
	    json_loads(tail_json, 0, &e), "marks", json_pack("{s:f}", "launch", 0.0));

	assert_non_null(root);
	if (ready >= 0)
		json_object_set_new(json_object_get(root, "marks"), "ready", json_real(ready));
	return timeline_wrap(root);
}

static json_t *find(struct timeline *tl, const char *id)
{
	json_t *f;
	size_t i;

	json_array_foreach (json_object_get(timeline_json(tl), "findings"), i, f)
		if (!strcmp(json_string_value(json_object_get(f, "id")), id))
			return f;
	return NULL;
}

static const char *msg(json_t *f) { return json_string_value(json_object_get(f, "message")); }

static void test_exit_code_and_last_error(void **state)
{
	struct timeline *tl =
	    model("{\"code\": 1, \"signal\": null, \"ms\": 900, \"code_of\": \"service\", "
		  "\"stop_requested\": false}",
		  "[\"Traceback (most recent call last):\", \"  File \\\"webui.py\\\", line 3\", "
		  "\"OSError: [Errno 30] Read-only file system: '/cache'\"]",
		  -1);
	json_t *f;

	(void)state;
	assert_int_equal(diagnose_run(tl, DIAG_ALL), DIAG_ERROR);
	f = find(tl, "start-failed");
	assert_non_null(f);
	assert_non_null(
	    strstr(msg(f), "exited with status 1 (its own exit code) before it was ready"));
	assert_non_null(strstr(msg(f), "OSError: [Errno 30] Read-only file system"));
	/* --check-io alone: the other groups only */
	assert_int_equal(diagnose_run(tl, DIAG_IO), DIAG_CLEAN);
	timeline_free(tl);
}

static void test_signal_and_exec(void **state)
{
	struct timeline *tl = model("{\"code\": null, \"signal\": 9, \"ms\": 900}", "[]", 500);
	json_t *f;

	(void)state;
	assert_int_equal(diagnose_run(tl, DIAG_ALL), DIAG_ERROR);
	f = find(tl, "start-failed");
	assert_non_null(strstr(msg(f), "killed by SIGKILL (exit 137: 128 + the signal)"));
	assert_non_null(strstr(json_string_value(json_object_get(f, "fix")), "out-of-memory"));
	timeline_free(tl);
	tl = model("{\"code\": 127, \"signal\": null, \"ms\": 9, \"code_of\": \"exec\", "
		   "\"error\": \"/usr/bin/python9: No such file or directory\"}",
		   "[]", -1);
	assert_int_equal(diagnose_run(tl, DIAG_ALL), DIAG_ERROR);
	f = find(tl, "start-failed");
	assert_non_null(strstr(msg(f), "tts-launch could not execute the service (exit 127"));
	assert_non_null(strstr(msg(f), "python9"));
	timeline_free(tl);
}

static void test_quiet_on_a_stop_and_a_healthy_run(void **state)
{
	struct timeline *tl = model("{\"code\": null, \"signal\": 15, \"ms\": 900, "
				    "\"stop_requested\": true}",
				    "[]", 500);

	(void)state;
	assert_int_equal(diagnose_run(tl, DIAG_ALL), DIAG_CLEAN);
	timeline_free(tl);
	tl = model("{\"code\": 0, \"signal\": null, \"ms\": 900}", "[]", 500);
	assert_int_equal(diagnose_run(tl, DIAG_ALL), DIAG_CLEAN);
	timeline_free(tl);
	/* status 0, but before the ready it was started for */
	tl = model("{\"code\": 0, \"signal\": null, \"ms\": 900}", "[\"bye\"]", -1);
	assert_int_equal(diagnose_run(tl, DIAG_ALL), DIAG_ERROR);
	assert_non_null(strstr(msg(find(tl, "start-failed")), "its last line: bye"));
	timeline_free(tl);
}

static void test_hub_http_error(void **state)
{
	struct timeline *tl =
	    model("{\"code\": 1, \"signal\": null, \"ms\": 900}",
		  "[\"huggingface_hub.errors.HfHubHTTPError: 500 Internal Server Error for url: "
		  "http://127.0.0.1:8999/a/b/resolve/main/c.json\"]",
		  -1);
	json_t *f, *s;

	(void)state;
	json_object_set_new(timeline_json(tl), "network",
			    json_pack("[{s:s, s:i, s:i, s:i, s:i, s:b}]", "peer", "127.0.0.1:8999",
				      "port", 8999, "connects", 2, "bytes_in", 800, "bytes_out",
				      400, "dns", 0));
	assert_int_equal(diagnose_run(tl, DIAG_ALL), DIAG_ERROR);
	f = find(tl, "hub-http-error");
	assert_non_null(f);
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(f, "evidence"), "status")), 500);
	assert_non_null(strstr(msg(f), "HTTP 500"));
	/* the exit finding names it as the cause */
	s = find(tl, "start-failed");
	assert_non_null(strstr(msg(s), "the cause: hub-http-error"));
	timeline_free(tl);
}

static void test_info_does_not_change_the_level(void **state)
{
	struct timeline *tl = timeline_wrap(
	    json_pack("{s:[{s:s, s:s}]}", "findings", "id", "no-gpu", "severity", "info"));

	(void)state;
	assert_int_equal(diagnose_level(tl), DIAG_CLEAN);
	timeline_free(tl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_exit_code_and_last_error),
	    cmocka_unit_test(test_signal_and_exec),
	    cmocka_unit_test(test_quiet_on_a_stop_and_a_healthy_run),
	    cmocka_unit_test(test_hub_http_error),
	    cmocka_unit_test(test_info_does_not_change_the_level),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
