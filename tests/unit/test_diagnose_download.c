/* The download rules of issue 14 (diagnose_download.c) over the healthy
 * fixture plus one inline section each: wrong-cache only for the hub cache
 * layout (local_dir downloads are deliberate) with a fix that names folders,
 * never a temp file; xet-cache; download-lock-wait; downloaded-twice (an
 * old cache elsewhere, a deleted file downloaded again). Each
 * fires on its case and is silent on the healthy model. Run from the top of
 * the tree (make unit). */
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

#define HEALTHY "tests/fixtures/timelines-diagnose/healthy.json"
#define MD	"/nonexistent/app/checkpoints"

/* The healthy model with section key set to the JSON text (NULL: as is);
 * the findings after every rule ran. */
static json_t *run_with(const char *key, const char *text, struct timeline **out)
{
	char err[512];
	struct timeline *tl = timeline_load(HEALTHY, err, sizeof(err));
	json_error_t e;
	json_t *v;

	if (!tl)
		fail_msg("%s", err);
	if (key) {
		v = json_loads(text, 0, &e);
		if (!v)
			fail_msg("bad test JSON: %s", e.text);
		json_object_set_new(timeline_json(tl), key, v);
	}
	diagnose_run(tl, DIAG_ALL);
	*out = tl;
	return json_object_get(timeline_json(tl), "findings");
}

static json_t *find(json_t *fs, const char *id)
{
	json_t *f;
	size_t i;

	json_array_foreach (fs, i, f)
		if (!strcmp(json_string_value(json_object_get(f, "id")), id))
			return f;
	return NULL;
}

static const char *ev_str(json_t *f, const char *k)
{
	return json_string_value(json_object_get(json_object_get(f, "evidence"), k));
}

static void test_healthy_has_none(void **state)
{
	struct timeline *tl;
	json_t *fs = run_with(NULL, NULL, &tl);

	(void)state;
	assert_int_equal(json_array_size(fs), 0);
	timeline_free(tl);
}

#define DL(path, writer, final, name)                                                              \
	"{\"path\": \"" path "\", \"name\": \"" name "\", \"kind\": \"download\", \"writer\": "    \
	"\"" writer "\", \"bytes\": 1000, \"bytes_written\": 1000, \"size\": 1000, \"threads\": "  \
	"1, \"first_ms\": 100, \"last_ms\": 200, \"complete\": true, \"completed\": true, "        \
	"\"final_path\": \"" final "\", \"rename_ms\": 201, \"link\": null}"

static void test_wrong_cache_local_dir_is_deliberate(void **state)
{
	struct timeline *tl;
	json_t *fs = run_with(
	    "downloads",
	    "[" DL("/elsewhere/ld/.cache/huggingface/download/XRAwiExoq78Qbz0xuYectGBSVtE=.e1."
		   "incomplete",
		   "local_dir", "/elsewhere/ld/campplus_cn_common.bin",
		   "/elsewhere/ld/campplus_cn_common.bin") "]",
	    &tl);

	(void)state;
	assert_null(find(fs, "wrong-cache"));
	timeline_free(tl);
}

static void test_wrong_cache_hub_cache_fix_names_folders(void **state)
{
	struct timeline *tl;
	json_t *fs = run_with(
	    "downloads",
	    "[" DL("/root/.cache/huggingface/hub/models--a--b/blobs/e1.incomplete", "hub_cache",
		   "/root/.cache/huggingface/hub/models--a--b/blobs/e1", "a/b:f.bin") "]",
	    &tl);
	json_t *f = find(fs, "wrong-cache");
	const char *fix;

	(void)state;
	assert_non_null(f);
	assert_string_equal(ev_str(f, "written_to"), "/root/.cache/huggingface/hub");
	fix = json_string_value(json_object_get(f, "fix"));
	assert_non_null(strstr(fix, "mv /root/.cache/huggingface/hub/models--* " MD "/hf_cache/"));
	assert_null(strstr(fix, ".incomplete"));
	timeline_free(tl);
}

static void test_xet_cache_on_tmpfs(void **state)
{
	struct timeline *tl;
	json_t *fs = run_with("xet",
			      "{\"dir\": \"/dev/shm/xet\", \"files\": 3, \"bytes_written\": 5000, "
			      "\"write_errors\": 0, \"fs_type\": \"tmpfs\", \"persistent\": false, "
			      "\"lost\": \"memory\"}",
			      &tl);
	json_t *f = find(fs, "xet-cache");

	(void)state;
	assert_non_null(f);
	assert_string_equal(ev_str(f, "dir"), "/dev/shm/xet");
	assert_non_null(strstr(json_string_value(json_object_get(f, "fix")), "HF_XET_CACHE"));
	timeline_free(tl);
	/* a container's overlay layer: not kept either (warns, names the fs) */
	fs = run_with("xet",
		      "{\"dir\": \"/root/.cache/huggingface/xet\", \"files\": 3, "
		      "\"bytes_written\": 5000, \"write_errors\": 0, \"fs_type\": \"overlay\", "
		      "\"persistent\": false, \"lost\": \"the container's layer\"}",
		      &tl);
	f = find(fs, "xet-cache");
	assert_non_null(f);
	assert_string_equal(json_string_value(json_object_get(f, "severity")), "warning");
	assert_string_equal(ev_str(f, "fs_type"), "overlay");
	assert_non_null(strstr(json_string_value(json_object_get(f, "message")), "on overlay"));
	assert_non_null(strstr(json_string_value(json_object_get(f, "fix")), "HF_XET_CACHE"));
	timeline_free(tl);
	/* on a disk: nothing */
	fs = run_with("xet",
		      "{\"dir\": \"/var/xet\", \"files\": 3, \"bytes_written\": 5000, "
		      "\"write_errors\": 0, \"fs_type\": \"ext4\", \"persistent\": true}",
		      &tl);
	assert_null(find(fs, "xet-cache"));
	timeline_free(tl);
	/* full: the failed writes */
	fs = run_with("xet",
		      "{\"dir\": \"/var/xet\", \"files\": 3, \"bytes_written\": 5000, "
		      "\"write_errors\": 2, \"write_errno\": \"ENOSPC\", \"fs_type\": \"ext4\", "
		      "\"persistent\": true}",
		      &tl);
	f = find(fs, "xet-cache");
	assert_non_null(f);
	assert_string_equal(json_string_value(json_object_get(f, "title")), "Xet chunk cache full");
	timeline_free(tl);
}

/* Does a local_dir lock of MD/NAME, with these figures (holder_pid 0: no
 * holder seen), make download-lock-wait? */
static bool lock_wait_fires(const char *name, int calls, int failures, double contended_ms,
			    double acquired_ms, int holder_pid)
{
	char locks[1024], holder[48] = "";
	struct timeline *tl;
	json_t *fs;
	bool fired;

	if (holder_pid)
		snprintf(holder, sizeof(holder), ", \"holder_pid\": %d", holder_pid);
	snprintf(locks, sizeof(locks),
		 "[{\"path\": \"" MD "/.cache/huggingface/download/%s.lock\", \"calls\": %d, "
		 "\"failures\": %d, \"contended_ms\": %g, \"acquired_ms\": %g, "
		 "\"waiting\": false%s}]",
		 name, calls, failures, contended_ms, acquired_ms, holder);
	fs = run_with("locks", locks, &tl);
	fired = find(fs, "download-lock-wait") != NULL;
	timeline_free(tl);
	return fired;
}

static void test_download_lock_wait_names_the_holder(void **state)
{
	struct timeline *tl;
	json_t *fs = run_with(
	    "locks",
	    "[{\"path\": \"" MD
	    "/hf_cache/.cache/huggingface/download/campplus_cn_common.bin.lock\", "
	    "\"calls\": 40, \"blocking_calls\": 0, \"failures\": 39, \"errno\": \"EAGAIN\", "
	    "\"wait_ms\": 0, \"max_wait_ms\": 0, \"contended_ms\": 2000, \"acquired_ms\": 2500, "
	    "\"waiting\": false, \"holder_pid\": 4242, \"holder_command\": \"python3\"}]",
	    &tl);
	json_t *f = find(fs, "download-lock-wait");

	(void)state;
	assert_non_null(f);
	assert_string_equal(ev_str(f, "name"), "hf_cache/campplus_cn_common.bin");
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(f, "evidence"), "holder_pid")),
	    4242);
	assert_non_null(strstr(json_string_value(json_object_get(f, "message")), "pid 4242"));
	timeline_free(tl);
	/* one refused poll, however long until the next (a loaded machine), is
	 * no wait on another process */
	assert_false(lock_wait_fires("bpe.model", 5, 1, 2405, 2971, 0));
	/* three refused polls over 1.5 s, no holder seen: the service's own
	 * workers on a loaded machine (CI), no finding; the same with the
	 * holder seen in another process is one */
	assert_false(lock_wait_fires("feat2.pt", 6, 3, 1493, 1979, 0));
	assert_true(lock_wait_fires("feat2.pt", 6, 3, 1493, 1979, 4242));
	/* a short wait (one refused poll) is no finding */
	assert_false(lock_wait_fires("gpt.pth", 2, 1, 50, 100, 0));
}

/* An older timeline's download (no downloads[] entry names it): the bytes
 * written to its inode under every name the trace gave it, its temp file,
 * a cut dentry name ("[fd] " + a prefix of the base name), the blob it was
 * renamed to; found by prefix, counted once each. */
static void test_older_download_summed_over_its_names(void **state)
{
	struct timeline *tl;
	json_t *fs = run_with(
	    "files",
	    "[{\"path\": \"/c/models--a--b/blobs/0123456789abcdef0123.incomplete\","
	    "  \"bytes_written\": 1000, \"first_ms\": 0, \"last_ms\": 100},"
	    " {\"path\": \"[fd] 0123456789abcdef01\", \"bytes_written\": 5000,"
	    "  \"first_ms\": 200, \"last_ms\": 9000},"
	    " {\"path\": \"[fd] 0123456789abcdef0123.incomplete.other\", \"bytes_written\": 7,"
	    "  \"first_ms\": 200, \"last_ms\": 99000},"
	    " {\"path\": \"/c/models--a--b/blobs/0123456789abcdef0123\", \"bytes_written\": 2000,"
	    "  \"first_ms\": 50, \"last_ms\": 50}]",
	    &tl);
	json_t *f = find(fs, "download-slow"), *files, *one;

	(void)state;
	assert_non_null(f);
	files = json_object_get(json_object_get(f, "evidence"), "files");
	assert_int_equal(json_array_size(files), 1);
	one = json_array_get(files, 0);
	assert_string_equal(json_string_value(json_object_get(one, "path")),
			    "/c/models--a--b/blobs/0123456789abcdef0123.incomplete");
	/* 1000 + 5000 + 2000: the longer name is no prefix of it */
	assert_true(json_number_value(json_object_get(one, "bytes")) == 8000);
	assert_true(json_number_value(json_object_get(one, "seconds")) == 9);
	timeline_free(tl);
}

/* download-slow's time left counts a size only when it is a total: the
 * kernel's or IndexTTS2's known one, never Xet's highest offset so far (a
 * lower bound): with it, the time left is unknown (null). */
static void test_time_left_only_from_a_total(void **state)
{
	static const char *const from[] = {"known", "highest_offset"};

	(void)state;
	for (int i = 0; i < 2; i++) {
		char text[600];
		struct timeline *tl;
		json_t *fs, *f, *left;

		snprintf(text, sizeof(text),
			 "[{\"path\": \"/c/models--a--b/blobs/0123.incomplete\","
			 "  \"name\": \"a/b/gpt.pth\", \"kind\": \"download\", \"writer\": \"xet\","
			 "  \"bytes\": 100000,"
			 "  \"first_ms\": 0, \"last_ms\": 10000, \"complete\": false,"
			 "  \"expected_size\": 5000000, \"expected_from\": \"%s\"}]",
			 from[i]);
		fs = run_with("downloads", text, &tl);
		f = find(fs, "download-slow");
		assert_non_null(f);
		left = json_object_get(json_object_get(f, "evidence"), "time_left");
		if (i == 0)
			assert_true(json_is_number(left) && json_number_value(left) > 0);
		else
			assert_true(json_is_null(left));
		timeline_free(tl);
	}
}

static void test_downloaded_twice(void **state)
{
	struct timeline *tl;
	json_t *fs = run_with(
	    "downloads",
	    "[{\"path\": \"" MD
	    "/hf_cache/.cache/huggingface/download/X=.e1.incomplete\", \"name\": "
	    "\"hf_cache/campplus_cn_common.bin\", \"kind\": \"download\", \"writer\": "
	    "\"local_dir\", \"bytes\": 1000, \"first_ms\": 100, \"last_ms\": 200, \"complete\": "
	    "true, \"completed\": true, \"final_path\": \"" MD
	    "/hf_cache/campplus_cn_common.bin\", "
	    "\"also_in\": \"/srv/hf/hub/models--funasr--campplus/blobs/e1\"}]",
	    &tl);
	json_t *f = find(fs, "downloaded-twice");

	(void)state;
	assert_non_null(f);
	assert_string_equal(ev_str(f, "cache"), "/srv/hf/hub");
	assert_non_null(
	    strstr(json_string_value(json_object_get(f, "fix")), "HF_HUB_CACHE = /srv/hf/hub"));
	timeline_free(tl);
}

/* #701: config.yaml deleted from a warm app and downloaded again: its
 * local_dir metadata from the first download was read, the file was missing */
static void test_downloaded_again_after_delete(void **state)
{
	char err[512];
	struct timeline *tl = timeline_load(HEALTHY, err, sizeof(err));
	json_t *root, *fs, *f, *ev;
	const char *dl =
	    "[{\"path\": \"" MD "/.cache/huggingface/download/_ouC4VcfA9-o6nAiMaExMJW7X2A=.e1."
	    "incomplete\", \"name\": \"config.yaml\", \"kind\": \"download\", \"writer\": "
	    "\"local_dir\", \"bytes\": 2573, \"first_ms\": 100, \"last_ms\": 200, \"complete\": "
	    "true, \"completed\": true, \"final_path\": \"" MD
	    "/config.yaml\", \"also_in\": null}]";
	const char *meta =
	    "{\"path\": \"" MD "/.cache/huggingface/download/config.yaml.metadata\", "
	    "\"class\": \"other\", \"opens\": 2, \"bytes_read\": 101, "
	    "\"bytes_written\": 101, \"first_ms\": 90, \"last_ms\": 210}";
	const char *gone = "{\"path\": \"" MD "/config.yaml\", \"attempts\": 3, \"errno\": "
			   "\"ENOENT\", \"first_ms\": 50, \"last_ms\": 95, \"class\": \"config\"}";

	(void)state;
	if (!tl)
		fail_msg("%s", err);
	root = timeline_json(tl);
	json_object_set_new(root, "downloads", json_loads(dl, 0, NULL));
	json_array_append_new(json_object_get(root, "files"), json_loads(meta, 0, NULL));
	json_array_append_new(json_object_get(root, "missing_paths"), json_loads(gone, 0, NULL));
	diagnose_run(tl, DIAG_ALL);
	fs = json_object_get(root, "findings");
	f = find(fs, "downloaded-twice");
	assert_non_null(f);
	ev = json_object_get(f, "evidence");
	assert_string_equal(ev_str(f, "reason"), "deleted");
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(ev, "files"), 0), "name")),
			    "config.yaml");
	assert_non_null(strstr(json_string_value(json_object_get(f, "message")),
			       "1 file (2.5 KiB) downloaded again into the same place"));
	assert_non_null(strstr(json_string_value(json_object_get(f, "fix")), "#701"));
	timeline_free(tl);
	/* the file there but outdated (not missing): an update, no finding */
	tl = timeline_load(HEALTHY, err, sizeof(err));
	root = timeline_json(tl);
	json_object_set_new(root, "downloads", json_loads(dl, 0, NULL));
	json_array_append_new(json_object_get(root, "files"), json_loads(meta, 0, NULL));
	diagnose_run(tl, DIAG_ALL);
	assert_null(find(json_object_get(root, "findings"), "downloaded-twice"));
	timeline_free(tl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_healthy_has_none),
	    cmocka_unit_test(test_wrong_cache_local_dir_is_deliberate),
	    cmocka_unit_test(test_wrong_cache_hub_cache_fix_names_folders),
	    cmocka_unit_test(test_xet_cache_on_tmpfs),
	    cmocka_unit_test(test_download_lock_wait_names_the_holder),
	    cmocka_unit_test(test_older_download_summed_over_its_names),
	    cmocka_unit_test(test_time_left_only_from_a_total),
	    cmocka_unit_test(test_downloaded_twice),
	    cmocka_unit_test(test_downloaded_again_after_delete),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
