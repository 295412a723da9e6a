/* diagnose rules over the hand-made timelines in
 * tests/fixtures/timelines-diagnose/ (one per rule, and a healthy one with
 * none): each fires alone, with its severity and evidence. And what a
 * stalled start-up waits on (stall.h), over small inline models. Run
 * from the top of the tree (make unit). Their [app] dir does not exist, so
 * nothing is looked up on this machine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "diagnose.h"
#include "pipeline.h"
#include "progress.h"
#include "stall.h"
#include "timeline.h"
#include "timeline_internal.h"
#include "timeline_sections.h"
#include "tl_fixture.h"

static struct timeline *load(const char *name) { return fixture_load(name); }

/* Runs every rule; the one finding must be `id` with `severity`. */
static json_t *only_finding(struct timeline *tl, const char *id, const char *severity,
			    int want_level)
{
	json_t *fs, *f;

	/* without the exit rule, which explains every failed fixture too */
	assert_int_equal(diagnose_run(tl, DIAG_ALL & ~DIAG_EXIT), want_level);
	fs = json_object_get(timeline_json(tl), "findings");
	if (json_array_size(fs) != 1) {
		char *d = json_dumps(fs, JSON_INDENT(1));

		fail_msg("want one %s finding, got %s", id, d);
	}
	f = json_array_get(fs, 0);
	assert_string_equal(json_string_value(json_object_get(f, "id")), id);
	assert_string_equal(json_string_value(json_object_get(f, "severity")), severity);
	assert_non_null(json_string_value(json_object_get(f, "fix")));
	assert_non_null(json_string_value(json_object_get(f, "message")));
	return f;
}

static json_t *ev(json_t *f, const char *k) { return fixture_evidence(f, k); }

static const char *ev_str(json_t *f, const char *k) { return json_string_value(ev(f, k)); }

static double ev_num(json_t *f, const char *k) { return json_number_value(ev(f, k)); }

static bool contains(const char *s, const char *sub) { return s && strstr(s, sub); }

#define CACHE "/nonexistent/app/checkpoints/hf_cache"

static void test_healthy(void **state)
{
	struct timeline *tl = load("healthy");

	(void)state;
	assert_int_equal(diagnose_run(tl, DIAG_ALL), DIAG_CLEAN);
	assert_int_equal(json_array_size(json_object_get(timeline_json(tl), "findings")), 0);
	assert_int_equal(diagnose_level(tl), DIAG_CLEAN);
	timeline_free(tl);
}

static void test_missing_path_retry(void **state)
{
	struct timeline *tl = load("missing-path-retry");
	json_t *f = only_finding(tl, "missing-path-retry", "error", DIAG_ERROR),
	       *top = ev(f, "top");

	(void)state;
	/* the interpreter's own search path is ignored, the mount is not */
	assert_string_equal(json_string_value(json_object_get(top, "path")), "/mnt/hf_cache");
	assert_int_equal(json_integer_value(json_object_get(top, "attempts")), 12);
	assert_string_equal(json_string_value(json_object_get(top, "errno")), "ENOENT");
	assert_int_equal(json_array_size(ev(f, "paths")), 1);
	assert_float_equal(json_number_value(json_object_get(f, "seconds_lost")), 3.0, 1e-9);
	/* no attribution: its span, a share of launch to the exit (9 s) */
	assert_string_equal(json_string_value(json_object_get(top, "cost_from")), "span");
	assert_float_equal(json_number_value(json_object_get(top, "share")), 0.333, 1e-9);
	timeline_free(tl);
}

static void test_cache_write_refused(void **state)
{
	struct timeline *tl = load("cache-write-refused");
	json_t *f = only_finding(tl, "cache-write-refused", "error", DIAG_ERROR);

	(void)state;
	assert_string_equal(ev_str(f, "errno"), "EROFS");
	assert_string_equal(json_string_value(json_array_get(ev(f, "paths"), 0)),
			    CACHE "/models--a--b/blobs/e1.incomplete");
	assert_true(contains(json_string_value(json_object_get(f, "fix")), "read-write"));
	timeline_free(tl);
}

static void test_cache_lock_wait(void **state)
{
	struct timeline *tl = load("cache-lock-wait");
	json_t *f = only_finding(tl, "cache-lock-wait", "warning", DIAG_WARNING);

	(void)state;
	assert_string_equal(ev_str(f, "lock"), CACHE "/.locks/models--funasr--campplus/e2.lock");
	assert_string_equal(ev_str(f, "repo"), "models--funasr--campplus");
	assert_float_equal(ev_num(f, "seconds"), 2.5, 1e-9);
	assert_true(json_is_false(ev(f, "still_waiting")));
	timeline_free(tl);
}

static void test_io_reread(void **state)
{
	struct timeline *tl = load("io-reread");
	json_t *f = only_finding(tl, "io-reread", "warning", DIAG_WARNING);

	(void)state;
	assert_string_equal(ev_str(f, "path"), "/nonexistent/app/checkpoints/gpt.pth");
	assert_float_equal(ev_num(f, "factor"), 4.0, 1e-9);
	timeline_free(tl);
}

static void test_io_small_reads(void **state)
{
	struct timeline *tl = load("io-small-reads");
	json_t *f = only_finding(tl, "io-small-reads", "warning", DIAG_WARNING);

	(void)state;
	assert_float_equal(ev_num(f, "reads"), 1000, 1e-9);
	assert_float_equal(ev_num(f, "avg_read"), 2097.152, 1e-9);
	timeline_free(tl);
}

static void test_hub_unreachable(void **state)
{
	struct timeline *tl = load("hub-unreachable");
	json_t *f = only_finding(tl, "hub-unreachable", "warning", DIAG_WARNING);

	(void)state;
	assert_string_equal(ev_str(f, "peer"), "127.0.0.1:8999");
	assert_true(json_is_true(ev(f, "hub")));
	assert_string_equal(ev_str(f, "outcome"), "silently dropped");
	assert_int_equal(json_integer_value(ev(f, "attempts")), 3);
	assert_true(json_is_true(ev(f, "all_cached")));
	/* two gaps of 1 s, plus the median for the last attempt */
	assert_float_equal(json_number_value(json_object_get(f, "seconds_lost")), 3.0, 1e-9);
	assert_true(contains(json_string_value(json_object_get(f, "fix")), "HF_HUB_OFFLINE=1"));
	timeline_free(tl);
}

/* The hub unreachable while a download was under way (its temp file open,
 * never renamed: a resumed one looks the same): the advice is the download's
 * read timeout, HF_HUB_DOWNLOAD_TIMEOUT, not the metadata's ETag one. The
 * fixture with that file added, written to a file and loaded as diagnose
 * loads one. */
static void test_hub_unreachable_while_downloading(void **state)
{
	json_error_t je;
	json_t *root = json_load_file(FIXTURES "hub-unreachable.json", 0, &je), *f;
	char path[] = "/tmp/tts-unit-hub-dl-XXXXXX", err[512];
	struct timeline *tl;
	int fd = mkstemp(path);

	(void)state;
	assert_non_null(root);
	assert_true(fd >= 0);
	json_array_append_new(
	    json_object_get(root, "files"),
	    json_pack("{s:s, s:s, s:i, s:i, s:n, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, "
		      "s:f, s:f}",
		      "path",
		      "/nonexistent/app/checkpoints/hf_cache/models--IndexTeam--IndexTTS-2/blobs/"
		      "0123abcd.incomplete",
		      "class", "download", "opens", 1, "failed_opens", 0, "errno", "bytes_read", 0,
		      "bytes_written", 1048576, "reads", 0, "writes", 16, "mmaps", 0, "mmap_bytes",
		      0, "faults", 0, "size", 1048576, "pid", 100, "first_ms", 1300.0, "last_ms",
		      1400.0));
	assert_int_equal(json_dumpfd(root, fd, 0), 0);
	close(fd);
	json_decref(root);
	tl = timeline_load(path, err, sizeof(err));
	unlink(path);
	if (!tl)
		fail_msg("%s", err);
	diagnose_run(tl, DIAG_ALL);
	f = NULL;
	for (size_t i = 0; i < json_array_size(json_object_get(timeline_json(tl), "findings"));
	     i++) {
		json_t *x = json_array_get(json_object_get(timeline_json(tl), "findings"), i);

		if (!strcmp(json_string_value(json_object_get(x, "id")), "hub-unreachable"))
			f = x;
	}
	assert_non_null(f);
	assert_true(
	    contains(json_string_value(json_object_get(f, "fix")), "HF_HUB_DOWNLOAD_TIMEOUT"));
	assert_true(contains(json_string_value(json_object_get(f, "fix")), "a resumed one too"));
	assert_false(contains(json_string_value(json_object_get(f, "fix")), "HF_HUB_ETAG_TIMEOUT"));
	timeline_free(tl);
}

static void test_dns_failure(void **state)
{
	struct timeline *tl = load("dns-failure");
	json_t *f = only_finding(tl, "dns-failure", "warning", DIAG_WARNING);

	(void)state;
	assert_string_equal(ev_str(f, "host"), "hub.invalid");
	assert_int_equal(json_integer_value(ev(f, "queries")), 2);
	assert_string_equal(json_string_value(json_array_get(ev(f, "servers"), 0)), "10.0.0.53:53");
	timeline_free(tl);
}

static void test_download_slow(void **state)
{
	struct timeline *tl = load("download-slow");
	json_t *f = only_finding(tl, "download-slow", "warning", DIAG_WARNING);

	(void)state;
	assert_float_equal(ev_num(f, "bytes"), 1048576, 1e-9);
	assert_float_equal(ev_num(f, "seconds"), 4.0, 1e-9);
	assert_float_equal(ev_num(f, "rate_bps"), 262144, 1e-9);
	assert_true(
	    contains(json_string_value(json_object_get(json_array_get(ev(f, "files"), 0), "path")),
		     "models--facebook--w2v-bert-2.0/blobs/4f1ad.incomplete"));
	assert_true(contains(json_string_value(json_object_get(f, "fix")), "HF_ENDPOINT"));
	timeline_free(tl);
}

static void test_download_interrupted(void **state)
{
	struct timeline *tl = load("download-interrupted");
	json_t *f = only_finding(tl, "download-interrupted", "error", DIAG_ERROR);

	(void)state;
	/* the app dir is not on this machine: the recorded `completed` decides */
	assert_string_equal(ev_str(f, "path"),
			    CACHE "/models--facebook--w2v-bert-2.0/blobs/4f1ad.incomplete");
	assert_float_equal(ev_num(f, "bytes_written"), 524288, 1e-9);
	assert_true(json_is_null(ev(f, "size_on_disk")));
	timeline_free(tl);
}

/* Whether a .incomplete is still there comes from what was recorded when
 * the timeline was written (cache_fs[].incomplete), never from this disk. */
static void test_download_interrupted_from_the_record(void **state)
{
	struct timeline *tl = load("download-interrupted");
	json_t *d = json_array_get(json_object_get(timeline_json(tl), "downloads"), 0);
	json_t *fs = json_array_get(json_object_get(timeline_json(tl), "cache_fs"), 0), *f;

	(void)state;
	/* no rename record: the disk as recorded decides */
	json_object_del(d, "complete");
	json_object_del(d, "completed");
	json_object_set_new(fs, "incomplete",
			    json_pack("[{s:s, s:i}]", "path",
				      json_string_value(json_object_get(d, "path")), "size", 4096));
	f = only_finding(tl, "download-interrupted", "error", DIAG_ERROR);
	assert_float_equal(ev_num(f, "size_on_disk"), 4096, 1e-9);
	/* recorded as gone: nothing left behind */
	json_object_set_new(fs, "incomplete", json_array());
	assert_int_equal(diagnose_run(tl, DIAG_ALL & ~DIAG_EXIT), DIAG_CLEAN);
	timeline_free(tl);
}

/* diagnose on a saved timeline elsewhere: recorded on a machine where the
 * cache exists, diagnosed after it is gone, the findings are the same. */
static void test_same_findings_when_the_cache_is_gone(void **state)
{
	char tmp[] = "/tmp/tts-diag-XXXXXX", dir[512], blob[600], cmd[700];
	struct timeline *tl = load("download-interrupted");
	json_t *d = json_array_get(json_object_get(timeline_json(tl), "downloads"), 0);
	/* files[]: the model's records (timeline_sections.h) */
	struct tl_file *f = &TLS_FILES_OF(timeline_sections(tl))[0];
	json_t *before, *after;
	FILE *w;

	(void)state;
	assert_non_null(mkdtemp(tmp));
	snprintf(dir, sizeof(dir), "%s/app/checkpoints/hf_cache/models--a--b/blobs", tmp);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
	assert_int_equal(system(cmd), 0);
	snprintf(blob, sizeof(blob), "%s/e1.incomplete", dir);
	w = fopen(blob, "w");
	assert_non_null(w);
	for (int i = 0; i < 1000; i++)
		fputc('x', w);
	fclose(w);
	snprintf(dir, sizeof(dir), "%s/app", tmp);
	json_object_set_new(
	    json_object_get(
		json_object_get(json_object_get(timeline_json(tl), "launcher"), "config"), "app"),
	    "dir", json_string(dir));
	free((void *)f->path);
	f->path = strdup(blob);
	json_object_set_new(d, "path", json_string(blob));
	json_object_del(d, "complete");
	json_object_del(d, "completed");
	json_object_del(timeline_json(tl), "cache_fs");

	/* written: recorded with the file on disk */
	pipeline_record_cache_fs(tl);
	diagnose_run(tl, DIAG_ALL & ~DIAG_EXIT);
	before = json_deep_copy(json_object_get(timeline_json(tl), "findings"));
	assert_int_equal(json_array_size(before), 1);
	assert_float_equal(
	    json_number_value(json_object_get(
		json_object_get(json_array_get(before, 0), "evidence"), "size_on_disk")),
	    1000, 1e-9);

	/* read later, elsewhere: nothing of it on this disk any more */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	assert_int_equal(system(cmd), 0);
	diagnose_run(tl, DIAG_ALL & ~DIAG_EXIT);
	after = json_object_get(timeline_json(tl), "findings");
	assert_true(json_equal(before, after));
	json_decref(before);
	timeline_free(tl);
}

static void test_wrong_cache(void **state)
{
	struct timeline *tl = load("wrong-cache");
	json_t *f = only_finding(tl, "wrong-cache", "warning", DIAG_WARNING);

	(void)state;
	assert_string_equal(ev_str(f, "written_to"), "/nonexistent/hf_home/hub");
	assert_string_equal(ev_str(f, "configured_cache"), CACHE);
	assert_float_equal(ev_num(f, "bytes"), 65536, 1e-9);
	timeline_free(tl);
}

static void test_cache_not_persistent(void **state)
{
	struct timeline *tl = load("cache-not-persistent");
	json_t *f = only_finding(tl, "cache-not-persistent", "warning", DIAG_WARNING);

	(void)state;
	/* the tmpfs cache was used; the overlay HF_HOME/hub was not: no alarm for it */
	assert_string_equal(ev_str(f, "dir"), CACHE);
	assert_string_equal(ev_str(f, "fs_type"), "tmpfs");
	assert_string_equal(ev_str(f, "role"), "model_dir/hf_cache");
	assert_int_equal(json_integer_value(ev(f, "paths_used")), 2);
	assert_true(contains(json_string_value(json_object_get(f, "fix")), "HF_HUB_CACHE"));
	timeline_free(tl);
}

static void test_lazy_model_faults(void **state)
{
	struct timeline *tl = load("lazy-model-faults");
	json_t *f = only_finding(tl, "lazy-model-faults", "warning", DIAG_WARNING);

	(void)state;
	assert_float_equal(ev_num(f, "faults"), 5, 1e-9);
	/* the second request's 3 major faults were not in model files */
	assert_int_equal(json_array_size(ev(f, "requests")), 1);
	assert_true(contains(json_string_value(json_object_get(f, "fix")), "--mlock=models"));
	timeline_free(tl);
}

/* #16: a warm start's requests map model pages that are in memory already
 * (minor faults, no time lost): no finding; one read back from disk (a
 * major fault in a model file) is */
static void test_lazy_model_faults_needs_major(void **state)
{
	struct timeline *tl = load("lazy-model-faults");
	json_t *reqs = json_object_get(timeline_json(tl), "requests");
	json_t *r0 = json_array_get(reqs, 0);

	(void)state;
	/* the demo's warm start: 149 model pages faulted, none from disk */
	json_object_set_new(r0, "model_faults", json_integer(149));
	json_object_set_new(r0, "model_major_faults", json_integer(0));
	assert_int_equal(diagnose_run(tl, DIAG_MEMORY), DIAG_CLEAN);
	assert_int_equal(json_array_size(json_object_get(timeline_json(tl), "findings")), 0);
	/* one of them read back from disk: the finding, with its count */
	json_object_set_new(r0, "model_major_faults", json_integer(1));
	assert_int_equal(diagnose_run(tl, DIAG_MEMORY), DIAG_WARNING);
	{
		json_t *f = json_array_get(json_object_get(timeline_json(tl), "findings"), 0);

		assert_string_equal(json_string_value(json_object_get(f, "id")),
				    "lazy-model-faults");
		assert_float_equal(ev_num(f, "major_faults"), 1, 1e-9);
		assert_float_equal(ev_num(f, "faults"), 149, 1e-9);
	}
	timeline_free(tl);
}

/* --check-* selects rules */
static void test_checks_select(void **state)
{
	struct timeline *tl = load("hub-unreachable");

	(void)state;
	assert_int_equal(diagnose_run(tl, DIAG_IO | DIAG_MEMORY), DIAG_CLEAN);
	assert_int_equal(diagnose_run(tl, DIAG_DOWNLOAD), DIAG_WARNING);
	timeline_free(tl);
}

/* Each rule is a row of its group's table: selected with its check alone,
 * silent without it, and its findings name that check. */
static void test_rule_table_groups(void **state)
{
	static const struct {
		const char *id, *check;
		unsigned flag;
	} rows[] = {
	    {"missing-path-retry", "io", DIAG_IO},
	    {"cache-write-refused", "io", DIAG_IO},
	    {"cache-lock-wait", "io", DIAG_IO},
	    {"io-reread", "io", DIAG_IO},
	    {"io-small-reads", "io", DIAG_IO},
	    {"cache-not-persistent", "io", DIAG_IO},
	    {"hub-unreachable", "download", DIAG_DOWNLOAD},
	    {"dns-failure", "download", DIAG_DOWNLOAD},
	    {"download-slow", "download", DIAG_DOWNLOAD},
	    {"download-interrupted", "download", DIAG_DOWNLOAD},
	    {"wrong-cache", "download", DIAG_DOWNLOAD},
	    {"lazy-model-faults", "memory", DIAG_MEMORY},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct timeline *tl = load(rows[i].id);
		json_t *f;

		assert_int_equal(diagnose_run(tl, DIAG_ALL & ~rows[i].flag & ~DIAG_EXIT),
				 DIAG_CLEAN);
		assert_int_not_equal(diagnose_run(tl, rows[i].flag), DIAG_CLEAN);
		f = json_array_get(json_object_get(timeline_json(tl), "findings"), 0);
		assert_string_equal(json_string_value(json_object_get(f, "id")), rows[i].id);
		assert_string_equal(json_string_value(json_object_get(f, "check")), rows[i].check);
		timeline_free(tl);
	}
}

/* ---- the caches' file systems ---- */

static void test_cache_dirs(void **state)
{
	struct timeline *tl = load("healthy");
	struct hf_cache_dir d[HF_MAX_CACHE_DIRS];
	int n = diagnose_cache_dirs(timeline_json(tl), d, HF_MAX_CACHE_DIRS, true);

	(void)state;
	assert_int_equal(n, 3);
	assert_string_equal(d[0].path, CACHE);
	assert_string_equal(d[0].role, "model_dir/hf_cache");
	assert_string_equal(d[1].path, "/nonexistent/hf_home/hub");
	assert_string_equal(d[2].path, "/nonexistent/app/checkpoints");
	/* statfs of a cache not there yet: its nearest existing parent ("/") */
	pipeline_record_cache_fs(tl);
	assert_int_equal(json_array_size(json_object_get(timeline_json(tl), "cache_fs")), 2);
	assert_string_equal(
	    json_string_value(json_object_get(
		json_array_get(json_object_get(timeline_json(tl), "cache_fs"), 0), "statfs_path")),
	    "/");
	assert_true(json_is_false(json_object_get(
	    json_array_get(json_object_get(timeline_json(tl), "cache_fs"), 0), "exists")));
	timeline_free(tl);
}

/* Without HF_HOME the default cache is under the service's HOME as the
 * timeline recorded it (the service user's), not the diagnosing shell's. */
static void test_cache_dirs_follow_the_recorded_home(void **state)
{
	struct timeline *tl = load("healthy");
	json_t *vars = json_object_get(
	    json_object_get(
		json_object_get(json_object_get(timeline_json(tl), "launcher"), "config"), "env"),
	    "vars");
	struct hf_cache_dir d[HF_MAX_CACHE_DIRS];
	int n;

	(void)state;
	json_object_del(vars, "HF_HOME");
	json_object_set_new(vars, "HOME", json_string("/srv/tts"));
	n = diagnose_cache_dirs(timeline_json(tl), d, HF_MAX_CACHE_DIRS, false);
	assert_int_equal(n, 2);
	assert_string_equal(d[1].role, "HF_HOME/hub");
	assert_string_equal(d[1].path, "/srv/tts/.cache/huggingface/hub");
	timeline_free(tl);
}

/* ---- what a stall waits on (stall.h) ---- */

static json_t *model(const char *text)
{
	json_error_t e;
	json_t *r = json_loads(text, 0, &e);

	if (!r)
		fail_msg("bad test JSON: %s", e.text);
	return r;
}

/* stall_waiting_on over the views of root, with the download in flight
 * and its name found as the live display finds them (progress.c) */
static json_t *stall_of(const json_t *root, double since, double now)
{
	const struct tl_file *fl;
	char name[300];
	struct stall_download dl = {0};
	struct tl_view *v = tl_view_decode_tree(root);
	json_t *w;

	assert_non_null(v);
	/* in flight: a counted download has its last one */
	assert_true(!tl_view_downloads_in_flight(v, &fl) == !fl);
	if (fl && fl->path) {
		dl = (struct stall_download){fl->path, tl_or0(fl->first_ms), name};
		progress_download_name(v, dl.path, dl.first_ms, name, sizeof(name));
	}
	w = stall_waiting_on(v, NULL, NULL, dl.path ? &dl : NULL, since, now);
	tl_view_free(v);
	return w;
}

static json_t *waiting(const char *text, double since, double now, const char *kind)
{
	json_t *root = model(text), *w = stall_of(root, since, now), *hit = NULL, *x;
	size_t i;

	json_array_foreach (w, i, x)
		if (!strcmp(json_string_value(json_object_get(x, "kind")), kind) && !hit)
			hit = json_incref(x);
	if (!hit) {
		char *d = json_dumps(w, 0);

		fail_msg("no %s in %s", kind, d);
	}
	json_decref(w);
	json_decref(root);
	return hit;
}

static void test_stall_connect(void **state)
{
	/* a connect still pending (no completion record for that process and port) */
	json_t *w =
	    waiting("{\"connects\": [{\"peer\": \"10.1.2.3:443\", \"port\": 443, \"pid\": 7,"
		    " \"start_ms\": 1000, \"ret\": -115, \"pending\": true}]}",
		    1000, 31000, "connect");

	(void)state;
	assert_string_equal(json_string_value(json_object_get(w, "peer")), "10.1.2.3:443");
	assert_float_equal(json_number_value(json_object_get(w, "seconds")), 30, 1e-9);
	assert_true(contains(json_string_value(json_object_get(w, "message")),
			     "blocked in a connect to 10.1.2.3:443 for 30 s"));
	json_decref(w);
}

static void test_stall_connect_completed(void **state)
{
	json_t *root =
	    model("{\"connects\": [{\"peer\": \"10.1.2.3:443\", \"port\": 443, \"pid\": 7,"
		  " \"start_ms\": 1000, \"ret\": -115, \"pending\": true},"
		  " {\"peer\": \"?:443\", \"port\": 443, \"pid\": 7, \"start_ms\": 1000,"
		  " \"ret\": 0, \"pending\": false}]}");
	json_t *w = stall_of(root, 1000, 31000);

	(void)state;
	/* nothing else known: "unknown", never a connect that completed */
	assert_int_equal(json_array_size(w), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(w, 0), "kind")),
			    "unknown");
	json_decref(w);
	json_decref(root);
}

static void test_stall_peer_silent(void **state)
{
	json_t *w = waiting("{\"network\": [{\"peer\": \"127.0.0.1:8999\", \"bytes_in\": 0,"
			    " \"bytes_out\": 150, \"dns\": false, \"first_ms\": 2000,"
			    " \"last_ms\": 2000}]}",
			    2000, 5000, "peer-silent");

	(void)state;
	assert_string_equal(json_string_value(json_object_get(w, "peer")), "127.0.0.1:8999");
	assert_true(contains(json_string_value(json_object_get(w, "message")),
			     "waiting 3 s for an answer from 127.0.0.1:8999, 1st attempt"));
	json_decref(w);
}

/* A request retried on new connections, each accepted and never answered
 * (the first on a connection whose earlier request was answered): the
 * newest, still open, is the 3rd attempt, named by the peer's host. */
static void test_stall_retried_request(void **state)
{
	json_t *w = waiting(
	    "{\"network\": [{\"peer\": \"127.0.0.2:443\", \"port\": 443, \"host\":"
	    " \"huggingface.co\", \"role\": \"hub\", \"bytes_in\": 279, \"bytes_out\": 800,"
	    " \"dns\": false, \"last_ms\": 9000}],"
	    " \"connects\": ["
	    "{\"peer\": \"127.0.0.2:443\", \"port\": 443, \"pid\": 7, \"start_ms\": 1000,"
	    " \"established_ms\": 1000, \"closed_ms\": 5000, \"bytes_in\": 279, \"bytes_out\": 400,"
	    " \"writes\": 2, \"reply_max\": 0},"
	    "{\"peer\": \"127.0.0.2:443\", \"port\": 443, \"pid\": 7, \"start_ms\": 5500,"
	    " \"established_ms\": 5500, \"closed_ms\": 6500, \"bytes_in\": 0, \"bytes_out\": 200,"
	    " \"writes\": 1, \"reply_max\": 0},"
	    "{\"peer\": \"127.0.0.2:443\", \"port\": 443, \"pid\": 7, \"start_ms\": 9000,"
	    " \"established_ms\": 9000, \"closed_ms\": null, \"bytes_in\": 0, \"bytes_out\": 200,"
	    " \"writes\": 1, \"reply_max\": 0}]}",
	    2000, 21000, "peer-silent");

	(void)state;
	assert_string_equal(json_string_value(json_object_get(w, "label")), "huggingface.co:443");
	assert_int_equal(json_integer_value(json_object_get(w, "attempt")), 3);
	assert_true(contains(json_string_value(json_object_get(w, "message")),
			     "waiting 20 s for an answer from huggingface.co:443, 3rd attempt"));
	json_decref(w);
}

/* TLS: each retry's handshake is read, no answer: still waiting, and the
 * handshakes are not answers (the live display's progress) */
static void test_stall_tls_handshake_is_no_answer(void **state)
{
	json_t *root =
	    model("{\"network\": [{\"peer\": \"127.0.0.2:443\", \"port\": 443, \"host\":"
		  " \"huggingface.co\", \"bytes_in\": 3420, \"bytes_out\": 1600, \"dns\": false,"
		  " \"last_ms\": 7100}],"
		  " \"connects\": ["
		  "{\"peer\": \"127.0.0.2:443\", \"port\": 443, \"pid\": 7, \"start_ms\": 900,"
		  " \"established_ms\": 900, \"closed_ms\": 6900, \"bytes_in\": 1710,"
		  " \"bytes_out\": 800, \"writes\": 3, \"reply_max\": 510, \"tls\": true},"
		  "{\"peer\": \"127.0.0.2:443\", \"port\": 443, \"pid\": 7, \"start_ms\": 6950,"
		  " \"established_ms\": 6950, \"closed_ms\": 6951, \"bytes_in\": 0,"
		  " \"bytes_out\": 0, \"writes\": 0, \"reply_max\": 0},"
		  "{\"peer\": \"127.0.0.2:443\", \"port\": 443, \"pid\": 7, \"start_ms\": 7100,"
		  " \"established_ms\": 7100, \"closed_ms\": null, \"bytes_in\": 1710,"
		  " \"bytes_out\": 800, \"writes\": 3, \"reply_max\": 510, \"tls\": true}]}");
	struct tl_view *v = tl_view_decode_tree(root);
	json_t *w = stall_of(root, 7100, 19100), *x = json_array_get(w, 0);

	(void)state;
	assert_non_null(v);
	assert_true(stall_conn_answer_bytes(&v->connects[0]) == 0);
	assert_int_equal(stall_conn_unanswered(&v->connects[2]), 1);
	assert_string_equal(json_string_value(json_object_get(x, "kind")), "peer-silent");
	assert_true(contains(json_string_value(json_object_get(x, "message")),
			     "waiting 18 s for an answer from huggingface.co:443, 2nd attempt"));
	tl_view_free(v);
	json_decref(w);
	json_decref(root);
}

static void test_stall_download(void **state)
{
	json_t *w = waiting(
	    "{\"files\": [{\"path\": \"/c/models--funasr--campplus/blobs/e.incomplete\","
	    " \"opens\": 1, \"first_ms\": 1000, \"last_ms\": 1000, \"bytes_written\": 0}],"
	    " \"missing_paths\": [{\"path\": "
	    "\"/c/models--funasr--campplus/snapshots/abc/campplus_cn_common.bin\","
	    " \"attempts\": 1, \"first_ms\": 990, \"last_ms\": 990, \"class\": \"hf_cache\"}],"
	    " \"network\": [{\"peer\": \"127.0.0.1:8999\", \"bytes_in\": 4096, \"bytes_out\": 300,"
	    " \"dns\": false, \"first_ms\": 900, \"last_ms\": 1500}]}",
	    1500, 40000, "download-stalled");

	(void)state;
	assert_true(contains(json_string_value(json_object_get(w, "message")),
			     "downloading funasr/campplus:campplus_cn_common.bin"));
	assert_true(contains(json_string_value(json_object_get(w, "message")),
			     "reading from 127.0.0.1:8999, which has sent nothing for 38 s"));
	json_decref(w);
}

static void test_stall_lock(void **state)
{
	json_t *w =
	    waiting("{\"files\": [{\"path\": \"/c/.locks/models--a--b/e.lock\", \"opens\": 1,"
		    " \"first_ms\": 4000, \"last_ms\": 4000}]}",
		    4000, 34000, "lock");

	(void)state;
	assert_string_equal(json_string_value(json_object_get(w, "path")),
			    "/c/.locks/models--a--b/e.lock");
	assert_true(contains(json_string_value(json_object_get(w, "message")), "opened 30 s ago"));
	json_decref(w);
}

static void test_stall_missing_path(void **state)
{
	json_t *w = waiting("{\"missing_paths\": [{\"path\": \"/mnt/hf\", \"attempts\": 14,"
			    " \"errno\": \"ENOENT\", \"first_ms\": 1000, \"last_ms\": 29000,"
			    " \"class\": \"other\"}, {\"path\": \"/root/.netrc\", \"attempts\": 9,"
			    " \"errno\": \"ENOENT\", \"first_ms\": 1000, \"last_ms\": 29000,"
			    " \"class\": \"other\"}]}",
			    2000, 30000, "missing-path");

	(void)state;
	assert_string_equal(json_string_value(json_object_get(w, "path")), "/mnt/hf");
	assert_true(contains(json_string_value(json_object_get(w, "message")),
			     "14 attempts over 28 s (ENOENT)"));
	json_decref(w);
}

static void test_download_name(void **state)
{
	json_t *root =
	    model("{\"missing_paths\": ["
		  " {\"path\": "
		  "\"/c/models--amphion--MaskGCT/snapshots/abc/semantic_codec/model.safetensors\","
		  " \"first_ms\": 900, \"last_ms\": 2000},"
		  " {\"path\": \"/c/models--amphion--MaskGCT/snapshots/abc/other.bin\","
		  " \"first_ms\": 500, \"last_ms\": 500}]}");
	char name[300];
	struct tl_view *v = tl_view_decode_tree(root);

	(void)state;
	assert_non_null(v);
	/* the last snapshot probe before the blob was opened names it */
	assert_false(progress_download_name(v, "/c/models--amphion--MaskGCT/blobs/a17c.incomplete",
					    1000, name, sizeof(name)));
	assert_string_equal(name, "amphion/MaskGCT:semantic_codec/model.safetensors");
	progress_download_name(v, "/x/models/big.bin", 1000, name, sizeof(name));
	assert_string_equal(name, "big.bin");
	tl_view_free(v);
	json_decref(root);
}

/* Once the snapshot links to the blob, the link names it, whatever the
 * probes suggest (a live sample may miss the probe of the right file). */
static void test_download_name_from_the_snapshot_link(void **state)
{
	json_t *root =
	    model("{\"missing_paths\": ["
		  " {\"path\": \"/c/models--facebook--w2v/snapshots/abc/config.json\","
		  " \"first_ms\": 900, \"last_ms\": 950}],"
		  " \"symlinks\": ["
		  " {\"path\": \"/c/models--facebook--w2v/snapshots/abc/config.json\","
		  " \"resolved\": \"/c/models--facebook--w2v/blobs/90aa\", \"result\": 0},"
		  " {\"path\": \"/c/models--facebook--w2v/snapshots/abc/model.safetensors\","
		  " \"resolved\": \"/c/models--facebook--w2v/blobs/4f1a\", \"result\": 0}]}");
	char name[300];
	struct tl_view *v = tl_view_decode_tree(root);

	(void)state;
	assert_non_null(v);
	assert_true(progress_download_name(v, "/c/models--facebook--w2v/blobs/4f1a.incomplete",
					   1000, name, sizeof(name)));
	assert_string_equal(name, "facebook/w2v:model.safetensors");
	assert_true(progress_download_name(v, "/c/models--facebook--w2v/blobs/90aa", 1000, name,
					   sizeof(name)));
	assert_string_equal(name, "facebook/w2v:config.json");
	tl_view_free(v);
	json_decref(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_healthy),
	    cmocka_unit_test(test_missing_path_retry),
	    cmocka_unit_test(test_cache_write_refused),
	    cmocka_unit_test(test_cache_lock_wait),
	    cmocka_unit_test(test_io_reread),
	    cmocka_unit_test(test_io_small_reads),
	    cmocka_unit_test(test_hub_unreachable),
	    cmocka_unit_test(test_hub_unreachable_while_downloading),
	    cmocka_unit_test(test_dns_failure),
	    cmocka_unit_test(test_download_slow),
	    cmocka_unit_test(test_download_interrupted),
	    cmocka_unit_test(test_download_interrupted_from_the_record),
	    cmocka_unit_test(test_same_findings_when_the_cache_is_gone),
	    cmocka_unit_test(test_wrong_cache),
	    cmocka_unit_test(test_cache_not_persistent),
	    cmocka_unit_test(test_lazy_model_faults),
	    cmocka_unit_test(test_lazy_model_faults_needs_major),
	    cmocka_unit_test(test_checks_select),
	    cmocka_unit_test(test_rule_table_groups),
	    cmocka_unit_test(test_cache_dirs),
	    cmocka_unit_test(test_cache_dirs_follow_the_recorded_home),
	    cmocka_unit_test(test_stall_connect),
	    cmocka_unit_test(test_stall_connect_completed),
	    cmocka_unit_test(test_stall_peer_silent),
	    cmocka_unit_test(test_stall_retried_request),
	    cmocka_unit_test(test_stall_tls_handshake_is_no_answer),
	    cmocka_unit_test(test_stall_download),
	    cmocka_unit_test(test_stall_lock),
	    cmocka_unit_test(test_stall_missing_path),
	    cmocka_unit_test(test_download_name),
	    cmocka_unit_test(test_download_name_from_the_snapshot_link),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
