/* phases: inference over the model only (a loaded timeline gets the same
 * phases): cache probing from missing paths, mlock only for large locks,
 * and the launcher's own phases kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "clock.h"
#include "config.h"
#include "phases.h"
#include "timeline.h"
#include "timeline_internal.h"

static struct timeline *new_tl(void)
{
	static char *argv[] = {"tts-launch", "run", NULL};
	struct config c;
	struct timeline *tl;

	clock_init();
	config_defaults(&c);
	tl = timeline_new(&c, 2, argv);
	config_free(&c);
	return tl;
}

static json_t *phase_of(struct timeline *tl, const char *name)
{
	size_t i;
	json_t *p;

	json_array_foreach (json_object_get(timeline_json(tl), "phases"), i, p)
		if (!strcmp(json_string_value(json_object_get(p, "name")), name))
			return p;
	return NULL;
}

static double at(struct timeline *tl, const char *name, const char *what)
{
	json_t *p = phase_of(tl, name);

	return p ? json_number_value(json_object_get(p, what)) : -1;
}

static void test_cache_probe_mlock_and_sources(void **state)
{
	struct timeline *tl = new_tl();
	json_t *root = timeline_json(tl), *mem = json_object_get(root, "memory");

	(void)state;
	json_object_set_new(mem, "mlock_calls", json_array());
	timeline_mark(tl, "spawn", 1);
	timeline_mark(tl, "exec", 5);
	timeline_mark(tl, "ready", 200);
	timeline_phase(tl, "stale_kill", 0, 1);
	json_array_append_new(json_object_get(root, "missing_paths"),
			      json_pack("{s:s, s:s, s:f, s:f}", "path", "/c/hub/x", "class",
					"hf_cache", "first_ms", 30.0, "last_ms", 35.0));
	/* a library's page-sized mlock is not "locking the model"; mlockall is */
	json_array_append_new(json_object_get(mem, "mlock_calls"),
			      json_pack("{s:s, s:i, s:f, s:f}", "call", "mlock", "len", 4096,
					"start_ms", 10.0, "dur_ms", 1.0));
	json_array_append_new(json_object_get(mem, "mlock_calls"),
			      json_pack("{s:s, s:i, s:f, s:f}", "call", "mlockall", "len", 0,
					"start_ms", 150.0, "dur_ms", 20.0));
	phases_infer(tl);
	assert_true(at(tl, "cache_probe", "start_ms") == 30);
	assert_true(at(tl, "cache_probe", "end_ms") == 35);
	assert_true(at(tl, "mlock", "start_ms") == 150);
	assert_true(at(tl, "mlock", "end_ms") == 170);
	/* ready: from the end of the last work before it */
	assert_true(at(tl, "ready", "start_ms") == 170);
	assert_string_equal(json_string_value(json_object_get(phase_of(tl, "mlock"), "source")),
			    "trace");
	assert_string_equal(
	    json_string_value(json_object_get(phase_of(tl, "stale_kill"), "source")), "launcher");
	timeline_free(tl);
}

static void test_nothing_traced(void **state)
{
	struct timeline *tl = new_tl();

	(void)state;
	/* no marks, no files: no phase invented */
	phases_infer(tl);
	assert_int_equal(json_array_size(json_object_get(timeline_json(tl), "phases")), 0);
	phases_infer(NULL);
	timeline_free(tl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cache_probe_mlock_and_sources),
	    cmocka_unit_test(test_nothing_traced),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
