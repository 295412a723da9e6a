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

/* a download's phase is named by the file it becomes; one without a name
 * (a timeline older than names) by its temp file's base name */
static void test_download_phases_by_name(void **state)
{
	struct timeline *tl = new_tl();
	json_t *root = timeline_json(tl), *dl = json_array();

	(void)state;
	json_object_set_new(root, "downloads", dl);
	json_array_append_new(
	    dl, json_pack("{s:s, s:s, s:f, s:f}", "path",
			  "/m/hf_cache/.cache/huggingface/download/xGOK=.4f1ad9.incomplete", "name",
			  "hf_cache/w2v-bert-2.0/model.safetensors", "first_ms", 10.0, "last_ms",
			  20.0));
	json_array_append_new(dl, json_pack("{s:s, s:f, s:f}", "path",
					    "/c/models--a--b/blobs/108f71ed.incomplete", "first_ms",
					    12.0, "last_ms", 14.0));
	phases_infer(tl);
	assert_true(at(tl, "download:hf_cache/w2v-bert-2.0/model.safetensors", "end_ms") == 20);
	assert_true(at(tl, "download:108f71ed.incomplete", "start_ms") == 12);
	assert_null(phase_of(tl, "download:xGOK=.4f1ad9.incomplete"));
	assert_string_equal(phases_download_label("a/b:c.bin", "/x/y.incomplete"), "a/b:c.bin");
	assert_string_equal(phases_download_label("", "/x/y.incomplete"), "y.incomplete");
	assert_string_equal(phases_download_label(NULL, NULL), "?");
	timeline_free(tl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cache_probe_mlock_and_sources),
	    cmocka_unit_test(test_nothing_traced),
	    cmocka_unit_test(test_download_phases_by_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
