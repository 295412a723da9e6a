/* compare: nearest-rank percentiles, and every figure of the comparison of
 * the hand-made timelines in tests/fixtures/compare/ (their README gives the
 * expected values). Run from the top of the tree (make unit). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compare.h"
#include "timeline.h"
#include "timeline_internal.h"

#define FIXTURES "tests/fixtures/compare/"

static json_t *load(const char *name)
{
	char err[512];
	struct timeline *tl = timeline_load(name, err, sizeof(err));
	json_t *root;

	if (!tl)
		fail_msg("%s", err);
	root = json_incref(timeline_json(tl));
	timeline_free(tl);
	return root;
}

/* The comparison as the JSON compare_write_json wrote (c freed) */
static json_t *compare_json(struct compare *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	json_error_t jerr;
	json_t *out;

	assert_non_null(c);
	assert_non_null(f);
	assert_int_equal(compare_write_json(c, f), 0);
	fclose(f);
	compare_free(c);
	out = json_loads(buf, 0, &jerr);
	if (!out)
		fail_msg("compare's JSON does not parse: %s: %s", jerr.text, buf);
	free(buf);
	return out;
}

/* compare_build over two raw trees (borrowed) */
static json_t *build_json(json_t *before, json_t *after, const char *bn, const char *an)
{
	struct timeline *b = timeline_wrap(json_incref(before)),
			*a = timeline_wrap(json_incref(after));
	json_t *cmp;

	assert_non_null(b);
	assert_non_null(a);
	cmp = compare_json(compare_build(b, a, bn, an));
	timeline_free(a);
	timeline_free(b);
	return cmp;
}

static json_t *build(const char *before, const char *after)
{
	json_t *b = load(before), *a = load(after);
	json_t *cmp = build_json(b, a, before, after);

	json_decref(b);
	json_decref(a);
	assert_non_null(cmp);
	return cmp;
}

static double get(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);

	assert_true(json_is_number(v));
	return json_number_value(v);
}

static void assert_null_key(const json_t *obj, const char *key)
{
	assert_true(json_is_null(json_object_get(obj, key)));
}

/* before/after/diff/ratio of a row (NAN: null), to the 12 significant
 * digits the JSON output has (integral figures: exactly) */
static void assert_row(const json_t *r, double b, double a, double diff, double ratio)
{
	const char *keys[] = {"before", "after", "diff", "ratio"};
	double want[] = {b, a, diff, ratio};

	assert_non_null(r);
	for (int i = 0; i < 4; i++) {
		if (isnan(want[i]))
			assert_null_key(r, keys[i]);
		else if (fabs(get(r, keys[i]) - want[i]) > 1e-11 * fabs(want[i]) ||
			 (want[i] == floor(want[i]) && get(r, keys[i]) != want[i]))
			fail_msg("%s: %.17g, expected %.17g", keys[i], get(r, keys[i]), want[i]);
	}
}

static void test_percentile_nearest_rank(void **state)
{
	double v[100], one[] = {7}, three[] = {1, 2, 3}, ten[10];

	(void)state;
	for (int i = 0; i < 100; i++)
		v[i] = i + 1;
	for (int i = 0; i < 10; i++)
		ten[i] = (i + 1) * 10;
	/* rank ceil(p/100 * n), no interpolation */
	assert_true(compare_percentile(v, 100, 50) == 50);
	assert_true(compare_percentile(v, 100, 99) == 99);
	assert_true(compare_percentile(v, 100, 100) == 100);
	assert_true(compare_percentile(ten, 10, 50) == 50);  /* interpolation would say 55 */
	assert_true(compare_percentile(ten, 10, 99) == 100); /* and 99.1 here */
	assert_true(compare_percentile(ten, 10, 90) == 90);
	assert_true(compare_percentile(ten, 10, 91) == 100);
	assert_true(compare_percentile(three, 3, 50) == 2);
	assert_true(compare_percentile(three, 3, 0) == 1);
	assert_true(compare_percentile(one, 1, 99) == 7);
	assert_true(isnan(compare_percentile(v, 0, 50)));
}

static void test_phases(void **state)
{
	json_t *cmp = build(FIXTURES "before.json", FIXTURES "after.json");
	json_t *ph = json_object_get(cmp, "phases");
	static const char *names[] = {
	    "launch", "spawn", "imports", "download:gpt.pth.incomplete", "model_load", "mlock"};

	(void)state;
	/* before's order, then the phases only after has */
	assert_int_equal(json_array_size(ph), 6);
	for (size_t i = 0; i < 6; i++)
		assert_string_equal(
		    json_string_value(json_object_get(json_array_get(ph, i), "name")), names[i]);
	assert_row(json_array_get(ph, 0), 10, 10, 0, 1);
	assert_row(json_array_get(ph, 1), 40, 30, -10, 0.75);
	assert_row(json_array_get(ph, 2), 1000, 800, -200, 0.8);
	assert_row(json_array_get(ph, 3), 300, NAN, NAN, NAN); /* end - start, only before */
	assert_row(json_array_get(ph, 4), 2000, 500, -1500, 0.25);
	assert_row(json_array_get(ph, 5), NAN, 250, NAN, NAN);
	json_decref(cmp);
}

/* Repeated names add up on each side; rows in before's order of first
 * appearance, then after's own; 20,000 phases (54 s when each row scanned
 * every other row) give 20,000 rows with the right totals. */
static void test_phases_repeated_and_many(void **state)
{
	const char *f = "{s:[{s:s, s:f}, {s:s, s:f}, {s:s, s:f}]}";
	json_t *b = json_pack(f, "phases", "name", "x", "dur_ms", 1.0, "name", "y", "dur_ms", 2.0,
			      "name", "x", "dur_ms", 4.0);
	json_t *a = json_pack(f, "phases", "name", "z", "dur_ms", 8.0, "name", "x", "dur_ms", 16.0,
			      "name", "z", "dur_ms", 32.0);
	json_t *cmp = build_json(b, a, "b", "a"), *ph = json_object_get(cmp, "phases"), *big;
	const size_t n = 20000;

	(void)state;
	assert_int_equal(json_array_size(ph), 3);
	assert_string_equal(json_string_value(json_object_get(json_array_get(ph, 0), "name")), "x");
	assert_string_equal(json_string_value(json_object_get(json_array_get(ph, 1), "name")), "y");
	assert_string_equal(json_string_value(json_object_get(json_array_get(ph, 2), "name")), "z");
	assert_row(json_array_get(ph, 0), 5, 16, 11, 3.2);
	assert_row(json_array_get(ph, 1), 2, NAN, NAN, NAN);
	assert_row(json_array_get(ph, 2), NAN, 40, NAN, NAN);
	json_decref(cmp);
	json_decref(a);
	json_decref(b);

	big = json_pack("{s:[]}", "phases");
	for (size_t i = 0; i < n; i++) {
		char name[32];

		snprintf(name, sizeof(name), "p%zu", i);
		json_array_append_new(json_object_get(big, "phases"),
				      json_pack("{s:s, s:f}", "name", name, "dur_ms", (double)i));
	}
	cmp = build_json(big, big, "b", "a");
	ph = json_object_get(cmp, "phases");
	assert_int_equal(json_array_size(ph), n);
	assert_string_equal(json_string_value(json_object_get(json_array_get(ph, n - 1), "name")),
			    "p19999");
	assert_row(json_array_get(ph, n - 1), 19999, 19999, 0, 1);
	json_decref(cmp);
	json_decref(big);
}

static void test_startup_and_faults(void **state)
{
	json_t *cmp = build(FIXTURES "before.json", FIXTURES "after.json");
	json_t *st = json_object_get(cmp, "startup_ms");

	(void)state;
	assert_row(st, 4000, 3000, -1000, 0.75);
	assert_string_equal(json_string_value(json_object_get(st, "before_mark")), "ready");
	assert_string_equal(json_string_value(json_object_get(st, "after_mark")), "ready");
	assert_row(json_object_get(cmp, "page_faults"), 50000, 40000, -10000, 0.8);
	assert_row(json_object_get(cmp, "major_faults"), 200, 0, -200, 0);
	json_decref(cmp);
}

static void test_requests(void **state)
{
	json_t *cmp = build(FIXTURES "before.json", FIXTURES "after.json");
	json_t *rq = json_object_get(cmp, "requests");

	(void)state;
	assert_row(json_object_get(rq, "count"), 10, 10, 0, 1);
	assert_row(json_object_get(rq, "first_ms"), 30, 44, 14, 44.0 / 30.0);
	assert_row(json_object_get(rq, "p50_ms"), 50, 40, -10, 0.8);
	assert_row(json_object_get(rq, "p99_ms"), 100, 44, -56, 0.44);
	assert_row(json_object_get(rq, "spread"), 2, 44.0 / 40.0, 44.0 / 40.0 - 2,
		   (44.0 / 40.0) / 2);
	assert_row(json_object_get(rq, "faults_per_request"), 550, 0.4, 0.4 - 550, 0.4 / 550);
	assert_row(json_object_get(rq, "major_faults_per_request"), 5.5, 0, -5.5, 0);
	json_decref(cmp);
}

static void test_mlock_both_shapes(void **state)
{
	json_t *cmp = build(FIXTURES "before.json", FIXTURES "after.json");
	json_t *ml = json_object_get(cmp, "mlock");
	json_t *b = json_object_get(ml, "before"), *a = json_object_get(ml, "after");

	(void)state;
	/* before: the shim was off (memory.mlock), no call traced */
	assert_string_equal(json_string_value(json_object_get(b, "mode")), "off");
	assert_string_equal(json_string_value(json_object_get(b, "status")), "off");
	assert_null_key(b, "bytes_locked");
	assert_int_equal(json_integer_value(json_object_get(b, "calls")), 0);
	/* after: memory.mlock the outcome + memory.mlock_calls */
	assert_string_equal(json_string_value(json_object_get(a, "mode")), "all");
	assert_string_equal(json_string_value(json_object_get(a, "status")), "locked");
	assert_true(get(a, "bytes_locked") == 524288000);
	assert_int_equal(json_integer_value(json_object_get(a, "calls")), 1);
	assert_row(json_object_get(ml, "bytes_locked"), NAN, 524288000, NAN, NAN);
	json_decref(cmp);
}

static void test_missing_figures(void **state)
{
	json_t *cmp = build(FIXTURES "minimal.json", FIXTURES "before.json");
	json_t *rq = json_object_get(cmp, "requests"), *st = json_object_get(cmp, "startup_ms");
	json_t *mb = json_object_get(json_object_get(cmp, "mlock"), "before");

	(void)state;
	/* no ready mark: start-up runs to exit */
	assert_row(st, 68.25, 4000, 4000 - 68.25, 4000 / 68.25);
	assert_string_equal(json_string_value(json_object_get(st, "before_mark")), "exit");
	assert_row(json_array_get(json_object_get(cmp, "phases"), 0), 12.5, 10, -2.5, 0.8);
	assert_row(json_object_get(cmp, "page_faults"), NAN, 50000, NAN, NAN);
	/* no requests[] at all: count unknown, not 0 */
	assert_row(json_object_get(rq, "count"), NAN, 10, NAN, NAN);
	assert_row(json_object_get(rq, "p50_ms"), NAN, 50, NAN, NAN);
	assert_row(json_object_get(rq, "spread"), NAN, 2, NAN, NAN);
	assert_null_key(mb, "mode");
	assert_null_key(mb, "status");
	assert_null_key(mb, "calls");
	json_decref(cmp);
}

static void test_text_has_the_figures(void **state)
{
	char err[512];
	struct timeline *b = timeline_load(FIXTURES "before.json", err, sizeof(err));
	struct timeline *a = timeline_load(FIXTURES "after.json", err, sizeof(err));
	struct compare *cmp;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_non_null(b);
	assert_non_null(a);
	cmp = compare_build(b, a, "before.json", "after.json");
	assert_non_null(cmp);
	assert_non_null(f);
	compare_print_text(cmp, f);
	fclose(f);
	assert_non_null(strstr(buf, "model_load"));
	assert_non_null(strstr(buf, "2000.0 ms"));
	assert_non_null(strstr(buf, "-1500.0 ms"));
	assert_non_null(strstr(buf, "0.25x"));
	assert_non_null(strstr(buf, "start-up (to ready)"));
	assert_non_null(strstr(buf, "500.0 MiB"));
	/* launch: 10 ms on both sides, noise: left out of the table */
	assert_null(strstr(buf, "launch "));
	assert_non_null(strstr(buf, "1 phase left out as noise"));
	/* the verdict ends it */
	assert_non_null(strstr(buf, "\nwith --mlock: request p99 100.0 -> 44.0 ms\n"));
	assert_string_equal(compare_verdict(cmp), "with --mlock: request p99 100.0 -> 44.0 ms");
	free(buf);
	compare_free(cmp);
	timeline_free(a);
	timeline_free(b);
}

/* a long phase name is cut in the middle in the table: its end (the file
 * a download becomes) stays; JSON keeps it whole */
static void test_long_names_keep_their_end(void **state)
{
	const char *name = "download:nvidia/bigvgan_v2_22khz_80band_256x:bigvgan_generator.pt";
	json_t *b = json_pack("{s:[{s:s, s:f}]}", "phases", "name", name, "dur_ms", 100.0);
	json_t *a = json_pack("{s:[]}", "phases");
	struct timeline *tb = timeline_wrap(json_incref(b)), *ta = timeline_wrap(json_incref(a));
	struct compare *cmp = compare_build(tb, ta, "b", "a");
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_non_null(cmp);
	assert_non_null(f);
	compare_print_text(cmp, f);
	fclose(f);
	assert_non_null(strstr(buf, "    download:nvid...56x:bigvgan_generator.pt "));
	assert_null(strstr(buf, name));
	free(buf);
	compare_free(cmp);
	timeline_free(ta);
	timeline_free(tb);
	json_decref(a);
	json_decref(b);
}

/* the noise rule of compare.h */
static void test_noise(void **state)
{
	(void)state;
	assert_true(compare_is_noise(1.4, 4.9));    /* both under 5 ms, ratio 3.5x */
	assert_false(compare_is_noise(1.4, 5.6));   /* one over 5 ms, 3.6 ms apart */
	assert_true(compare_is_noise(100, 101.9));  /* under 2 ms apart */
	assert_true(compare_is_noise(1000, 1049));  /* under 5% */
	assert_false(compare_is_noise(1000, 1051)); /* over 5% and 2 ms */
	assert_false(compare_is_noise(NAN, 1));	    /* one side only: shown */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_percentile_nearest_rank),
	    cmocka_unit_test(test_phases),
	    cmocka_unit_test(test_phases_repeated_and_many),
	    cmocka_unit_test(test_startup_and_faults),
	    cmocka_unit_test(test_requests),
	    cmocka_unit_test(test_mlock_both_shapes),
	    cmocka_unit_test(test_missing_figures),
	    cmocka_unit_test(test_text_has_the_figures),
	    cmocka_unit_test(test_long_names_keep_their_end),
	    cmocka_unit_test(test_noise),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
