/* The --check-io rules over synthetic timelines (issue 16), where a real
 * scenario cannot be made on a test machine or its cost must be exact:
 * EDQUOT (no quota tools here: the rule is a function of the timeline, so a
 * timeline with the failed writes stands for the full disk it would see),
 * and what a retry loop on a missing path cost, from the attribution's
 * strip (the critical thread asleep between attempts) or else its span.
 * The hand-made fixtures of tests/fixtures/timelines-diagnose/ edited in
 * memory. Run from the top of the tree (make unit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "diagnose.h"
#include "timeline.h"
#include "timeline_internal.h"
#include "timeline_sections.h"
#include "tl_fixture.h"

#define CACHE "/nonexistent/app/checkpoints/hf_cache"

static struct timeline *load(const char *name) { return fixture_load(name); }

static json_t *root_of(struct timeline *tl) { return timeline_json(tl); }

/* files[] and missing_paths[] are the model's records (timeline_sections.h):
 * a fixture's variant edits them there */
static void set(struct timeline *tl, enum tl_sec_id id, size_t i, const char *key, json_t *v)
{
	assert_int_equal(tl_rec_set_new(timeline_sections(tl), id, i, key, v), 0);
}

/* The findings with this id after running checks; NULL when none. */
static json_t *finding(struct timeline *tl, unsigned checks, const char *id)
{
	json_t *f;
	size_t i;

	diagnose_run(tl, checks);
	json_array_foreach (json_object_get(root_of(tl), "findings"), i, f)
		if (!strcmp(json_string_value(json_object_get(f, "id")), id))
			return f;
	return NULL;
}

static json_t *ev(json_t *f, const char *k) { return fixture_evidence(f, k); }

static bool contains(const char *s, const char *sub) { return s && strstr(s, sub); }

static const char *msg(json_t *f) { return json_string_value(json_object_get(f, "message")); }

/* ---- EDQUOT: the service user's quota, from the failed writes ---- */

static void test_quota_exceeded(void **state)
{
	struct timeline *tl = load("cache-write-refused");
	const char *blob = CACHE "/models--a--b/blobs/e1.incomplete";
	json_t *f;

	(void)state;
	/* the download opened, wrote 3 MiB, then write() failed: EDQUOT; the
	 * rename of the partial blob failed the same way */
	set(tl, TLS_FILES, 0, "errno", NULL);
	set(tl, TLS_FILES, 0, "failed_opens", json_integer(0));
	set(tl, TLS_FILES, 0, "opens", json_integer(1));
	set(tl, TLS_FILES, 0, "bytes_written", json_real(3.0 * 1024 * 1024));
	set(tl, TLS_FILES, 0, "write_errors", json_integer(1));
	set(tl, TLS_FILES, 0, "write_errno", json_string("EDQUOT"));
	json_object_set_new(
	    root_of(tl), "failed_ops",
	    json_pack("[{s:s, s:s, s:i, s:s, s:f, s:f, s:i}, {s:s, s:s, s:i, s:s, s:f, s:f, s:i}]",
		      "op", "write", "path", blob, "count", 1, "errno", "EDQUOT", "first_ms",
		      1000.0, "last_ms", 1500.0, "pid", 100, "op", "rename", "path",
		      CACHE "/models--a--b/blobs/e1", "count", 1, "errno", "EDQUOT", "first_ms",
		      1600.0, "last_ms", 1600.0, "pid", 100));
	f = finding(tl, DIAG_IO, "cache-write-refused");
	assert_non_null(f);
	assert_string_equal(json_string_value(json_object_get(f, "severity")), "error");
	assert_string_equal(json_string_value(ev(f, "errno")), "EDQUOT");
	/* the first failure: the write, by its path; each path once */
	assert_string_equal(json_string_value(ev(f, "op")), "write");
	assert_string_equal(json_string_value(ev(f, "path")), blob);
	assert_int_equal(json_array_size(ev(f, "paths")), 2);
	assert_int_equal(json_array_size(ev(f, "ops")), 2);
	/* the file system, as recorded */
	assert_string_equal(json_string_value(ev(f, "fs_type")), "ext4");
	assert_string_equal(json_string_value(ev(f, "cache_dir")), CACHE);
	assert_true(contains(msg(f), "write of " CACHE "/models--a--b/blobs/e1.incomplete"));
	assert_true(contains(msg(f), "EDQUOT: the user's disk quota is exhausted"));
	assert_true(contains(msg(f), "is on ext4"));
	assert_true(contains(json_string_value(json_object_get(f, "fix")), "quota"));
	/* the partial file is said as what the failed write left */
	json_object_set_new(root_of(tl), "cache_fs", json_array());
	f = finding(tl, DIAG_IO, "cache-write-refused");
	assert_true(contains(msg(f), "its file system was not recorded"));
	timeline_free(tl);
}

/* A download left behind by a failed write is not a cut connection. */
static void test_interrupted_by_a_failed_write(void **state)
{
	struct timeline *tl = load("download-interrupted");
	const struct tl_sections *s = timeline_sections(tl);
	size_t file = s->l[TLS_FILES].n;
	json_t *f;

	(void)state;
	for (size_t i = 0; i < s->l[TLS_FILES].n; i++)
		if (contains(TLS_FILES_OF(s)[i].path, ".incomplete"))
			file = i;
	assert_true(file < s->l[TLS_FILES].n);
	f = finding(tl, DIAG_DOWNLOAD, "download-interrupted");
	assert_non_null(f);
	assert_false(contains(msg(f), "a write failed"));
	set(tl, TLS_FILES, file, "write_errno", json_string("ENOSPC"));
	f = finding(tl, DIAG_DOWNLOAD, "download-interrupted");
	assert_true(contains(msg(f), "then a write failed (ENOSPC)"));
	assert_true(contains(json_string_value(json_object_get(f, "fix")), "cache-write-refused"));
	timeline_free(tl);
}

/* A model file read once while its download still grew: the trace took
 * its size at the first look (128 KiB of 5.1 MiB, the 2026 demo's cold
 * start); the size it ended with is the download's, no re-read. */
static void test_reread_measured_against_the_downloaded_size(void **state)
{
	struct timeline *tl = load("io-reread");

	(void)state;
	/* gpt.pth: 40 MiB read for 10 MiB, a re-read */
	assert_non_null(finding(tl, DIAG_IO, "io-reread"));
	set(tl, TLS_FILES, 0, "size", json_integer(131072));
	set(tl, TLS_FILES, 0, "bytes_read", json_integer(5309208));
	assert_non_null(finding(tl, DIAG_IO, "io-reread"));
	json_array_append_new(json_object_get(root_of(tl), "downloads"),
			      json_pack("{s:s, s:s, s:i, s:b}", "path",
					"/nonexistent/app/checkpoints/x.incomplete", "final_path",
					"/nonexistent/app/checkpoints/gpt.pth", "bytes", 5309208,
					"complete", 1));
	assert_null(finding(tl, DIAG_IO, "io-reread"));
	assert_null(finding(tl, DIAG_IO, "io-small-reads"));
	timeline_free(tl);
}

/* ---- a retry loop's cost ---- */

/* The fixture's loop: /mnt/hf_cache, 12 attempts, 100..3100 ms, exit at
 * 9000 never ready. Made a ready start at ready_ms, the loop at
 * first..last, with an attribution window from the exec (20 ms). */
static struct timeline *loop(double first, double last, int attempts, double ready_ms)
{
	struct timeline *tl = load("missing-path-retry");
	json_t *r = root_of(tl);

	set(tl, TLS_MISSING, 0, "first_ms", json_real(first));
	set(tl, TLS_MISSING, 0, "last_ms", json_real(last));
	set(tl, TLS_MISSING, 0, "attempts", json_integer(attempts));
	json_object_set_new(json_object_get(r, "marks"), "ready", json_real(ready_ms));
	json_object_del(json_object_get(r, "process"), "exit");
	return tl;
}

/* The attribution: the strip given as kind, start, end triples. */
static void strip(struct timeline *tl, double end, bool cut, int n, ...)
{
	json_t *s = json_array();
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < n; i++) {
		const char *k = va_arg(ap, const char *);
		double a = va_arg(ap, double), b = va_arg(ap, double);

		json_array_append_new(
		    s, json_pack("{s:f, s:f, s:s}", "start_ms", a, "end_ms", b, "kind", k));
	}
	va_end(ap);
	json_object_set_new(root_of(tl), "attribution",
			    json_pack("{s:f, s:f, s:f, s:b, s:o, s:b, s:[]}", "start_ms", 20.0,
				      "end_ms", end, "window_ms", end - 20, "complete", 1, "strip",
				      s, "strip_cut", cut, "causes"));
}

static double top_num(json_t *f, const char *k)
{
	return json_number_value(json_object_get(ev(f, "top"), k));
}

static const char *top_str(json_t *f, const char *k)
{
	return json_string_value(json_object_get(ev(f, "top"), k));
}

/* The seen case: 25 failed stats asleep over ~1 s of a ~1.35 s start. */
static void test_loop_costs_most_of_a_short_start(void **state)
{
	struct timeline *tl = loop(240, 1200, 25, 1370);
	json_t *f;

	(void)state;
	strip(tl, 1370, false, 4, "cpu", 20.0, 240.0, "sleep", 240.0, 1200.0, "cpu", 1200.0, 1300.0,
	      "runqueue", 1300.0, 1370.0);
	f = finding(tl, DIAG_IO, "missing-path-retry");
	assert_non_null(f);
	assert_string_equal(json_string_value(json_object_get(f, "severity")), "warning");
	assert_string_equal(top_str(f, "cost_from"), "attribution");
	assert_float_equal(top_num(f, "cost_s"), 0.96, 1e-9);
	assert_float_equal(top_num(f, "share"), 0.96 / 1.35, 1e-3);
	assert_float_equal(json_number_value(json_object_get(f, "seconds_lost")), 0.96, 1e-9);
	assert_true(contains(msg(f), "71% of the start-up (asleep between attempts)"));
	timeline_free(tl);
}

/* The same loop, 1 s asleep, in a 6 s start: under 2 s and under 25%. */
static void test_short_loop_in_a_long_start_is_no_finding(void **state)
{
	struct timeline *tl = loop(240, 1240, 25, 6020);

	(void)state;
	strip(tl, 6020, false, 3, "cpu", 20.0, 240.0, "sleep", 240.0, 1240.0, "disk", 1240.0,
	      6020.0);
	assert_null(finding(tl, DIAG_IO, "missing-path-retry"));
	/* without the attribution, its span (1 s of 6 s) is measured: none either */
	json_object_del(root_of(tl), "attribution");
	assert_null(finding(tl, DIAG_IO, "missing-path-retry"));
	timeline_free(tl);
}

/* A side thread polls while the critical thread works: the span is most of
 * the start, the cost is nothing. Without the attribution the span counts. */
static void test_loop_off_the_critical_path_costs_nothing(void **state)
{
	struct timeline *tl = loop(240, 1200, 25, 1370);
	json_t *f;

	(void)state;
	strip(tl, 1370, false, 2, "cpu", 20.0, 1300.0, "net", 1300.0, 1370.0);
	assert_null(finding(tl, DIAG_IO, "missing-path-retry"));
	json_object_del(root_of(tl), "attribution");
	f = finding(tl, DIAG_IO, "missing-path-retry");
	assert_non_null(f);
	assert_string_equal(top_str(f, "cost_from"), "span");
	assert_float_equal(top_num(f, "cost_s"), 0.96, 1e-9);
	assert_float_equal(top_num(f, "share"), 0.96 / 1.37, 1e-3);
	timeline_free(tl);
}

/* A futex that timed out (Event.wait) is asleep too; a strip cut short
 * before the loop's end leaves the span to stand for it. */
static void test_loop_cost_lock_waits_and_a_cut_strip(void **state)
{
	struct timeline *tl = loop(100, 3100, 12, 3300);
	json_t *f;

	(void)state;
	strip(tl, 3300, false, 3, "lock", 100.0, 2600.0, "cpu", 2600.0, 3100.0, "cpu", 3100.0,
	      3300.0);
	f = finding(tl, DIAG_IO, "missing-path-retry");
	assert_non_null(f);
	assert_float_equal(top_num(f, "cost_s"), 2.5, 1e-9);
	strip(tl, 3300, true, 1, "sleep", 20.0, 500.0);
	f = finding(tl, DIAG_IO, "missing-path-retry");
	assert_non_null(f);
	assert_float_equal(top_num(f, "cost_s"), 3.0, 1e-9);
	assert_float_equal(top_num(f, "seconds"), 3.0, 1e-9);
	timeline_free(tl);
}

/* A loop that goes on after ready cost the start-up only what it cost
 * before ready (the strip ends there). */
static void test_loop_after_ready_counts_until_ready(void **state)
{
	struct timeline *tl = loop(1000, 9000, 40, 1500);

	(void)state;
	/* 0.4 s asleep in it before ready: under 0.5 s */
	strip(tl, 1500, false, 3, "cpu", 20.0, 1000.0, "sleep", 1000.0, 1400.0, "cpu", 1400.0,
	      1500.0);
	assert_null(finding(tl, DIAG_IO, "missing-path-retry"));
	/* its span, 8 s, would have said otherwise */
	json_object_del(root_of(tl), "attribution");
	assert_non_null(finding(tl, DIAG_IO, "missing-path-retry"));
	timeline_free(tl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quota_exceeded),
	    cmocka_unit_test(test_interrupted_by_a_failed_write),
	    cmocka_unit_test(test_reread_measured_against_the_downloaded_size),
	    cmocka_unit_test(test_loop_costs_most_of_a_short_start),
	    cmocka_unit_test(test_short_loop_in_a_long_start_is_no_finding),
	    cmocka_unit_test(test_loop_off_the_critical_path_costs_nothing),
	    cmocka_unit_test(test_loop_cost_lock_waits_and_a_cut_strip),
	    cmocka_unit_test(test_loop_after_ready_counts_until_ready),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
