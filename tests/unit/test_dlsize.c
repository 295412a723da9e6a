/* The expected size of a download, in order of truth (dlsize.h), and what
 * the live lines say from it: a lower bound (Xet's highest offset so far)
 * is never said as a total, a contradicted known size never as a percent,
 * and the "downloaded" line gives the file's size from the kernel. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dlsize.h"
#include "progress.h"

#define MIB 1048576.0

static char said[8192];

static void collect(void *arg, const char *line, bool terminal)
{
	(void)arg;
	(void)terminal;
	strncat(said, line, sizeof(said) - strlen(said) - 1);
}

static struct dlsize ex(bool renamed, double isize, double have, double known)
{
	return dlsize_expected(&(struct dlsize_in){renamed, isize, have, known});
}

static void test_order_of_truth(void **state)
{
	struct dlsize r;

	(void)state;
	/* renamed: the kernel's size, a known size of another size dropped */
	r = ex(true, 837632, 837632, 28000000);
	assert_int_equal(r.from, DLSIZE_KERNEL);
	assert_true(r.size == 837632 && r.known_dropped);
	r = ex(true, 1000, 1000, 1000);
	assert_true(r.from == DLSIZE_KERNEL && !r.known_dropped);
	/* renamed, no write seen: no size, never the known one */
	r = ex(true, 0, 0, 28000000);
	assert_int_equal(r.from, DLSIZE_NONE);
	/* the demo's Xet download: 2 MiB written, the highest offset 5.2 MiB,
	 * IndexTTS2's known size 2.3 GB: the known size, not the offset */
	r = ex(false, 5.2 * MIB, 2 * MIB, 2300000000.0);
	assert_int_equal(r.from, DLSIZE_KNOWN);
	assert_true(r.size == 2300000000.0 && !r.known_dropped);
	/* the highest offset beyond the known size: dropped, a lower bound */
	r = ex(false, 40 * MIB, 20 * MIB, 28000000);
	assert_int_equal(r.from, DLSIZE_AT_LEAST);
	assert_true(r.size == 40 * MIB && r.known_dropped);
	/* bytes beyond the known size, written in order: nothing */
	r = ex(false, 30 * MIB, 30 * MIB, 28000000);
	assert_int_equal(r.from, DLSIZE_NONE);
	assert_true(r.known_dropped);
	/* no known size: the highest offset as a lower bound, or nothing */
	r = ex(false, 5.2 * MIB, 2 * MIB, 0);
	assert_int_equal(r.from, DLSIZE_AT_LEAST);
	assert_false(r.known_dropped);
	assert_int_equal(ex(false, 2 * MIB, 2 * MIB, 0).from, DLSIZE_NONE);
	/* a lower bound has no percent */
	assert_true(dlsize_percent(2 * MIB, 5.2 * MIB, DLSIZE_AT_LEAST) < 0);
	assert_true(dlsize_percent(1, 4, DLSIZE_KERNEL) == 25);
	assert_string_equal(dlsize_from_name(DLSIZE_AT_LEAST), "highest_offset");
	assert_int_equal(dlsize_from_parse("highest_offset"), DLSIZE_AT_LEAST);
	assert_null(dlsize_from_name(DLSIZE_NONE));
}

static void test_texts(void **state)
{
	char t[128];

	(void)state;
	dlsize_text(2 * MIB, 5.2 * MIB, DLSIZE_AT_LEAST, 1e6, t, sizeof(t));
	assert_string_equal(t, ", of at least 5.2 MiB so far");
	dlsize_text(2 * MIB, 4 * MIB, DLSIZE_KERNEL, 0, t, sizeof(t));
	assert_string_equal(t, ", 50% of 4.0 MiB");
	dlsize_text(0, 28000000, DLSIZE_KNOWN, 0, t, sizeof(t));
	assert_string_equal(t, ", 0% of about 26.7 MiB (known size)");
	dlsize_text(2 * MIB, 0, DLSIZE_NONE, 1e6, t, sizeof(t));
	assert_string_equal(t, "");
}

#define TEMP "/app/checkpoints/.cache/huggingface/download/X=.e1.incomplete"

/* One local_dir download as the timeline records it */
static json_t *model(double bytes, double size, const char *from, double expected)
{
	return json_pack("{s:{s:{s:{s:s, s:s}}}, s:[{s:s, s:f, s:i, s:f}], "
			 "s:[{s:s, s:s, s:s, s:s, s:f, s:f, s:i, s:o, s:o}], s:[]}",
			 "launcher", "config", "app", "dir", "/app", "model_dir", "./checkpoints",
			 "files", "path", TEMP, "bytes_written", bytes, "opens", 1, "first_ms", 1.0,
			 "downloads", "path", TEMP, "name", "w2v.safetensors", "kind", "download",
			 "writer", "local_dir", "bytes", bytes, "size", size, "threads", 4,
			 "expected_size", expected > 0 ? json_real(expected) : json_null(),
			 "expected_from", from ? json_string(from) : json_null(), "renames");
}

/* Xet's threads wrote at offsets: the highest so far is said as a lower
 * bound, never as the total nor with a percent */
static void test_offsets_said_as_at_least(void **state)
{
	struct progress_opts o = {
	    .mode = PROGRESS_LOG, .stall_s = 0, .log_every_s = 5, .emit = collect};
	struct progress *p = progress_new(&o);
	json_t *root = model(1 * MIB, 5.2 * MIB, "highest_offset", 5.2 * MIB);

	(void)state;
	said[0] = '\0';
	progress_sample(p, root, 1000);
	json_decref(root);
	root = model(2 * MIB, 5.2 * MIB, "highest_offset", 5.2 * MIB);
	progress_sample(p, root, 6100);
	assert_non_null(strstr(said, "tts-launch: downloading w2v.safetensors: 2.0 MiB at "));
	assert_non_null(strstr(said, ", of at least 5.2 MiB so far\n"));
	assert_null(strchr(said, '%'));
	assert_null(strstr(said, "left"));
	progress_free(p);
	json_decref(root);
}

/* Renamed: "downloaded NAME: SIZE" with the kernel's size of the file, not
 * the bytes counted while it was in flight, nor a known size */
static void test_downloaded_says_the_file_size(void **state)
{
	struct progress_opts o = {
	    .mode = PROGRESS_LOG, .stall_s = 0, .log_every_s = 5, .emit = collect};
	struct progress *p = progress_new(&o);
	json_t *root = model(4096, 4096, "known", 28000000), *d;

	(void)state;
	said[0] = '\0';
	progress_sample(p, root, 1000);
	assert_non_null(strstr(said, "of about 26.7 MiB (known size)"));
	d = json_array_get(json_object_get(root, "downloads"), 0);
	json_object_set_new(d, "bytes", json_real(900000));
	json_object_set_new(d, "size", json_real(837632));
	json_object_set_new(d, "complete", json_true());
	json_object_set_new(d, "expected_from", json_string("kernel"));
	json_object_set_new(d, "expected_size", json_real(837632));
	json_array_append_new(json_object_get(root, "renames"),
			      json_pack("{s:s, s:s, s:i}", "old", TEMP, "new",
					"/app/checkpoints/w2v.safetensors", "result", 0));
	said[0] = '\0';
	progress_sample(p, root, 2000);
	assert_string_equal(said, "tts-launch: downloaded w2v.safetensors: 818.0 KiB\n");
	progress_free(p);
	json_decref(root);
}

/* The only download in flight counts the network bytes until its first
 * write (plain HTTP writes in 10 MiB steps); once it is seen written at
 * offsets by several threads (Xet) its distinct bytes are its progress:
 * never more than the file holds, and no false "stalled" while the
 * distinct bytes catch up with the network count */
static void test_offset_writes_count_distinct_bytes(void **state)
{
	struct progress_opts o = {
	    .mode = PROGRESS_LOG, .stall_s = 0, .log_every_s = 5, .emit = collect};
	struct progress *p = progress_new(&o);
	json_t *root = model(0, 0, "known", 2300000000.0), *d, *f, *n;
	double t;

	(void)state;
	n = json_pack("{s:s, s:f}", "peer", "10.0.0.1:443", "bytes_in", 0.0);
	json_object_set_new(root, "network", json_pack("[o]", n));
	d = json_array_get(json_object_get(root, "downloads"), 0);
	f = json_array_get(json_object_get(root, "files"), 0);
	json_object_set_new(d, "threads", json_integer(0));
	said[0] = '\0';
	progress_sample(p, root, 1000);
	json_object_set_new(n, "bytes_in", json_real(400 * 1024));
	progress_sample(p, root, 2000);
	for (t = 3000; t <= 12000; t += 1000) {
		double b = (t - 2000) / 1000 * 64 * 1024; /* 64 KiB/s written */

		json_object_set_new(n, "bytes_in", json_real(400 * 1024 + b));
		json_object_set_new(d, "threads", json_integer(2));
		json_object_set_new(d, "bytes", json_real(b));
		json_object_set_new(d, "size", json_real(b + 128 * 1024));
		json_object_set_new(f, "bytes_written", json_real(b));
		progress_sample(p, root, t);
	}
	/* at 12 s: 640 KiB written (the network count would say 1.0 MiB) */
	assert_non_null(strstr(said, "tts-launch: downloading w2v.safetensors: 640.0 KiB at "));
	assert_null(strstr(said, "stalled"));
	assert_null(strstr(said, "1.0 MiB at"));
	progress_free(p);
	json_decref(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_order_of_truth),
	    cmocka_unit_test(test_texts),
	    cmocka_unit_test(test_offsets_said_as_at_least),
	    cmocka_unit_test(test_downloaded_says_the_file_size),
	    cmocka_unit_test(test_offset_writes_count_distinct_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
