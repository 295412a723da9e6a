/* timeline_view: the one rule for missing fields and the fallbacks between
 * names the view owns (a phase's dur_ms, a request's latency_ms/dur_ms and
 * faults/page_faults), so no reader repeats them. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "timeline_internal.h"
#include "timeline_view.h"

static json_t *root; /* the tree the view borrows its strings from */

static struct tl_view *view_of(const char *text)
{
	json_error_t e;
	struct tl_view *v;

	root = json_loads(text, 0, &e);
	if (!root)
		fail_msg("bad test JSON: %s", e.text);
	v = tl_view_decode_tree(root);
	assert_non_null(v);
	return v;
}

static void view_free(struct tl_view *v)
{
	tl_view_free(v);
	json_decref(root);
	root = NULL;
}

static void test_phase_duration(void **state)
{
	struct tl_view *v =
	    view_of("{\"phases\": [{\"name\": \"a\", \"start_ms\": 10, \"end_ms\": 25},"
		    " {\"name\": \"b\", \"start_ms\": 0, \"end_ms\": 9, \"dur_ms\": 4},"
		    " {\"name\": \"c\", \"start_ms\": 3}]}");

	(void)state;
	assert_int_equal(v->n_phases, 3);
	assert_true(v->phases[0].dur_ms == 15); /* end - start */
	assert_true(v->phases[1].dur_ms == 4);	/* as written */
	assert_false(tl_has(v->phases[2].dur_ms));
	view_free(v);
}

static void test_request_aliases(void **state)
{
	struct tl_view *v =
	    view_of("{\"requests\": ["
		    " {\"start_ms\": 1, \"end_ms\": 5, \"dur_ms\": 4, \"page_faults\": 7},"
		    " {\"start_ms\": 1, \"end_ms\": 9, \"latency_ms\": 8, \"faults\": 2},"
		    " {\"start_ms\": 2, \"end_ms\": 5},"
		    " {\"start_ms\": \"x\"}]}");

	(void)state;
	assert_int_equal(v->n_requests, 4);
	/* the older names */
	assert_true(v->requests[0].latency_ms == 4 && v->requests[0].dur_ms == 4);
	assert_true(v->requests[0].faults == 7 && v->requests[0].page_faults == 7);
	/* the newer */
	assert_true(v->requests[1].latency_ms == 8 && v->requests[1].dur_ms == 8);
	assert_true(v->requests[1].faults == 2 && v->requests[1].page_faults == 2);
	/* neither: end - start; no fault count */
	assert_true(v->requests[2].latency_ms == 3 && v->requests[2].dur_ms == 3);
	assert_false(tl_has(v->requests[2].faults));
	/* a mistyped start: none, and nothing derived from it */
	assert_false(tl_has(v->requests[3].latency_ms));
	view_free(v);
}

/* downloads and copies: name and label (the name, else the base name of
 * the path); a temp file or a hub cache blob found by path */
static void test_download_names(void **state)
{
	struct tl_view *v =
	    view_of("{\"downloads\": ["
		    " {\"path\": \"/c/models--a--b/blobs/1f.incomplete\", \"name\": \"a/b:m.bin\","
		    "  \"final_path\": \"/c/models--a--b/blobs/1f\", \"link\": \"/c/s/m.bin\"},"
		    " {\"path\": \"/m/.cache/huggingface/download/x=.2e.incomplete\","
		    "  \"name\": \"gpt.pth\", \"final_path\": \"/m/gpt.pth\"},"
		    " {\"path\": \"/old/blobs/3a.incomplete\"}],"
		    " \"copies\": [{\"path\": \"/m/hf_cache/c.bin\", \"name\": \"hf_cache/c.bin\","
		    "  \"source\": \"/o/c.bin\", \"bytes\": 5, \"from_cache\": true}]}");

	(void)state;
	assert_int_equal(v->n_downloads, 3);
	assert_string_equal(v->downloads[0].label, "a/b:m.bin");
	assert_string_equal(v->downloads[1].label, "gpt.pth");
	assert_null(v->downloads[2].name);
	assert_string_equal(v->downloads[2].label, "3a.incomplete");
	assert_ptr_equal(tl_view_download_at(v, "/c/models--a--b/blobs/1f", true),
			 &v->downloads[0]);
	assert_null(tl_view_download_at(v, "/c/models--a--b/blobs/1f", false));
	assert_ptr_equal(
	    tl_view_download_at(v, "/m/.cache/huggingface/download/x=.2e.incomplete", false),
	    &v->downloads[1]);
	/* a local_dir download's final file is no blob: a file like any other */
	assert_null(tl_view_download_at(v, "/m/gpt.pth", true));
	/* an unnamed one (older) is not looked up */
	assert_null(tl_view_download_at(v, "/old/blobs/3a.incomplete", true));
	assert_int_equal(v->n_copies, 1);
	assert_string_equal(v->copies[0].label, "hf_cache/c.bin");
	assert_true(v->copies[0].from_cache && v->copies[0].bytes == 5);
	view_free(v);
}

/* A peer's lookup gives its last entry (as the rules read network[] by
 * peer), in any order of the list; none for a name not there. */
static void test_peer_lookup(void **state)
{
	struct tl_view *v = view_of("{\"network\": ["
				    " {\"peer\": \"10.0.0.2:443\", \"bytes_in\": 1},"
				    " {\"peer\": \"10.0.0.1:443\", \"bytes_in\": 2},"
				    " {\"bytes_in\": 9},"
				    " {\"peer\": \"10.0.0.2:443\", \"bytes_in\": 3,"
				    "  \"host\": \"hub.test\", \"first_ms\": 4}]}");
	const struct tl_peer *p;

	(void)state;
	p = tl_view_peer(v, "10.0.0.2:443");
	assert_non_null(p);
	assert_true(p->bytes_in == 3);
	assert_string_equal(p->host, "hub.test");
	assert_true(p->first_ms == 4);
	assert_true(tl_view_peer(v, "10.0.0.1:443")->bytes_in == 2);
	assert_null(tl_view_peer(v, "10.0.0.3:443"));
	assert_null(tl_view_peer(v, ""));
	assert_null(tl_view_peer(v, NULL));
	view_free(v);
}

/* The run's [env], renames and the downloads in flight, as the rules and
 * the live display ask for them. */
static void test_env_renames_in_flight(void **state)
{
	struct tl_view *v =
	    view_of("{\"launcher\": {\"config\": {\"app\": {\"port\": 7860}, \"command\": null,"
		    "  \"env\": {\"vars\": {\"HF_HUB_DISABLE_XET\": \"1\", \"N\": 3}}}},"
		    " \"files\": ["
		    "  {\"path\": \"/c/blobs/a.incomplete\", \"opens\": 1, \"first_ms\": 5},"
		    "  {\"path\": \"/c/blobs/b.incomplete\", \"opens\": 1, \"first_ms\": 9},"
		    "  {\"path\": \"/m/x.tmp\", \"class\": \"download\", \"opens\": 2,"
		    "   \"first_ms\": 7},"
		    "  {\"path\": \"/c/blobs/c.incomplete\", \"opens\": 0, \"first_ms\": 20},"
		    "  {\"path\": \"rel.incomplete\", \"opens\": 1, \"first_ms\": 30}],"
		    " \"renames\": [{\"old\": \"/c/blobs/b.incomplete\", \"new\": \"/c/blobs/b\","
		    "  \"result\": 0}, {\"old\": \"/c/blobs/a.incomplete\", \"result\": -2}]}");
	const struct tl_file *last;

	(void)state;
	assert_true(v->config_app_port == 7860);
	assert_true(v->config_command_null);
	assert_string_equal(tl_view_env(v, "HF_HUB_DISABLE_XET"), "1");
	assert_null(tl_view_env(v, "N")); /* not a string */
	assert_null(tl_view_env(v, "HF_ENDPOINT"));
	assert_true(tl_view_renamed(v, "/c/blobs/b.incomplete"));
	assert_false(tl_view_renamed(v, "/c/blobs/a.incomplete")); /* the rename failed */
	/* a and x.tmp: b was renamed, c never opened, rel.incomplete not absolute */
	assert_int_equal(tl_view_downloads_in_flight(v, &last), 2);
	assert_string_equal(last->path, "/m/x.tmp");
	view_free(v);
}

/* The sections the I/O and download rules read: the caches' recorded file
 * systems (the deepest holding a path), failed operations, lock holders. */
static void test_cache_fs_failed_ops_locks(void **state)
{
	struct tl_view *v = view_of(
	    "{\"cache_fs\": ["
	    "  {\"dir\": \"/c\", \"fs_type\": \"ext4\", \"read_only\": false,"
	    "   \"persistent\": true, \"incomplete\": []},"
	    "  {\"dir\": \"/c/hub\", \"fs_type\": \"tmpfs\", \"lost\": \"at reboot\","
	    "   \"read_only\": true, \"persistent\": false,"
	    "   \"incomplete\": [{\"path\": \"/c/hub/x.incomplete\", \"size\": 7},"
	    "                   {\"path\": \"/c/hub/y.incomplete\", \"size\": null}]}],"
	    " \"failed_ops\": [{\"op\": \"mkdir\", \"path\": \"/ro/d\", \"errno\": \"EROFS\","
	    "  \"count\": 3}],"
	    " \"locks\": [{\"path\": \"/c/.locks/a.lock\", \"holder_pid\": 42,"
	    "  \"holder_command\": \"python3\", \"contended_ms\": 10, \"acquired_ms\": null}]}");
	const struct tl_cache_fs *fs;

	(void)state;
	fs = tl_view_cache_fs_of(v, "/c/hub/models--a--b/blobs/1");
	assert_non_null(fs);
	assert_string_equal(fs->fs_type, "tmpfs");
	assert_int_equal(fs->read_only, 1);
	assert_int_equal(fs->persistent, 0);
	assert_true(fs->has_incomplete);
	assert_int_equal(fs->n_incomplete, 2);
	assert_true(fs->incomplete[0].size == 7);
	assert_false(tl_has(fs->incomplete[1].size));
	assert_string_equal(tl_view_cache_fs_of(v, "/c/other")->fs_type, "ext4");
	assert_null(tl_view_cache_fs_of(v, "/elsewhere"));
	assert_int_equal(fs->exists, -1); /* absent: not a flag */
	assert_int_equal(v->n_failed_ops, 1);
	assert_string_equal(v->failed_ops[0].errno_name, "EROFS");
	assert_true(v->failed_ops[0].count == 3);
	assert_true(v->locks[0].holder_pid == 42);
	assert_string_equal(v->locks[0].holder_command, "python3");
	assert_false(tl_has(v->locks[0].acquired_ms));
	assert_true(v->locks[0].acquired_null);
	view_free(v);
}

/* the sections the rules read since they left the raw tree: xet, the
 * attribution's strip, gpu.low_vram/device, the flags of a download,
 * memory.mlock.start_ms, a file's major faults */
static void test_rule_sections(void **state)
{
	struct tl_view *v =
	    view_of("{\"xet\": {\"dir\": \"/x\", \"bytes_written\": 5, \"persistent\": false,"
		    "  \"fs_type\": \"tmpfs\", \"lost\": null},"
		    " \"attribution\": {\"window_ms\": 100, \"strip_cut\": true, \"strip\": ["
		    "  {\"start_ms\": 0, \"end_ms\": 40, \"kind\": \"sleep\"}, {\"kind\": 3}]},"
		    " \"gpu\": {\"low_vram\": {\"below\": true, \"total_bytes\": 8,"
		    "  \"qwen_emotion_opened\": false}, \"device\": {\"name\": \"T4\"}},"
		    " \"downloads\": [{\"path\": \"/a.incomplete\", \"complete\": false},"
		    "  {\"path\": \"/b.incomplete\", \"completed\": true}],"
		    " \"memory\": {\"mlock\": {\"status\": \"locked\", \"start_ms\": 12}},"
		    " \"files\": [{\"path\": \"/m\", \"major_faults\": 4}],"
		    " \"locks\": [{\"path\": \"/l\"}]}");

	(void)state;
	assert_true(v->xet.present);
	assert_string_equal(v->xet.dir, "/x");
	assert_int_equal(v->xet.persistent, 0);
	assert_null(v->xet.lost);
	assert_false(tl_has(v->xet.write_errors));
	assert_true(v->attribution.window_ms == 100);
	assert_true(v->attribution.strip_cut);
	assert_int_equal(v->attribution.n_strip, 2);
	assert_string_equal(v->attribution.strip[0].kind, "sleep");
	assert_null(v->attribution.strip[1].kind); /* mistyped: none */
	assert_false(tl_has(v->attribution.strip[1].start_ms));
	assert_true(v->gpu.low_vram_below);
	assert_true(v->gpu.low_vram_total_bytes == 8);
	assert_false(tl_has(v->gpu.low_vram_threshold_bytes));
	assert_string_equal(v->gpu.device_name, "T4");
	assert_true(v->downloads[0].complete_known && !v->downloads[0].complete);
	assert_false(v->downloads[0].completed_known);
	assert_true(v->downloads[1].completed_known && v->downloads[1].completed);
	assert_false(v->downloads[1].complete_known);
	assert_true(v->memory.mlock_start_ms == 12);
	assert_true(v->files[0].major_faults == 4);
	assert_false(v->locks[0].acquired_null); /* absent is not null */
	view_free(v);
}

/* a view of launcher.config alone (the pipeline's cache_fs stage) */
static void test_config_view(void **state)
{
	struct tl_view *v =
	    view_of("{\"launcher\": {\"config\": {\"app\": {\"dir\": \"/app\","
		    " \"model_dir\": \"ck\"}, \"env\": {\"vars\": {\"HOME\": \"/h\"}}}},"
		    " \"files\": [{\"path\": \"/f\"}]}");
	struct tl_view *c = tl_view_decode_config(root);

	(void)state;
	assert_non_null(c);
	assert_string_equal(c->config_app_dir, "/app");
	assert_string_equal(c->config_model_dir, "ck");
	assert_string_equal(tl_view_env(c, "HOME"), "/h");
	assert_int_equal(c->n_files, 0); /* nothing else decoded */
	assert_int_equal(v->n_files, 1);
	tl_view_free(c);
	view_free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_phase_duration),
	    cmocka_unit_test(test_request_aliases),
	    cmocka_unit_test(test_download_names),
	    cmocka_unit_test(test_peer_lookup),
	    cmocka_unit_test(test_env_renames_in_flight),
	    cmocka_unit_test(test_cache_fs_failed_ops_locks),
	    cmocka_unit_test(test_rule_sections),
	    cmocka_unit_test(test_config_view),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
