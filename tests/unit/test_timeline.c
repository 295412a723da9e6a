/* The timeline model: shape of a new model, marks and phases, atomic
 * write and load, file classes, phase inference, summary. No BPF. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "classify.h"
#include "clock.h"
#include "config.h"
#include "phases.h"
#include "timeline.h"
#include "timeline_internal.h"
#include "timeline_view.h"
#include "util.h"

static struct timeline *new_tl(void)
{
	static char *argv[] = {"tts-launch", "run", NULL};
	struct config c;
	struct timeline *tl;

	clock_init();
	config_defaults(&c);
	tl = timeline_new(&c, 2, argv);
	config_free(&c); /* the model keeps a copy of the settings */
	return tl;
}

static void test_new_has_every_key(void **state)
{
	static const char *keys[] = {"schema",	  "launcher",  "host",	"tracing",	 "process",
				     "marks",	  "phases",    "files", "missing_paths", "network",
				     "downloads", "memory",    "sched", "requests",	 "findings",
				     "python",	  "processes", "block"};
	struct timeline *tl = new_tl();

	(void)state;
	assert_non_null(tl);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		assert_non_null(json_object_get(timeline_json(tl), keys[i]));
	assert_string_equal(json_string_value(json_object_get(timeline_json(tl), "schema")),
			    TIMELINE_SCHEMA);
	assert_true(json_is_false(
	    json_object_get(json_object_get(timeline_json(tl), "tracing"), "enabled")));
	assert_true(json_is_object(
	    json_object_get(json_object_get(timeline_json(tl), "launcher"), "config")));
	timeline_free(tl);
}

static void test_marks_and_phases_replace(void **state)
{
	struct timeline *tl = new_tl();
	json_t *phases = json_object_get(timeline_json(tl), "phases");

	(void)state;
	assert_true(timeline_mark_ms(tl, "ready") < 0);
	timeline_mark(tl, "ready", 12.5);
	timeline_mark(tl, "ready", 10.25);
	assert_true(timeline_mark_ms(tl, "ready") == 10.25);
	timeline_phase(tl, "stale_kill", 1, 3);
	timeline_phase(tl, "stale_kill", 1, 4);
	assert_int_equal(json_array_size(phases), 1);
	assert_true(json_number_value(json_object_get(json_array_get(phases, 0), "dur_ms")) == 3);
	timeline_free(tl);
}

static void test_write_is_atomic_and_loads(void **state)
{
	char dir[] = "/tmp/tts-timeline-XXXXXX", path[256], err[256];
	struct timeline *tl = new_tl(), *back;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/t.json", dir);
	timeline_mark(tl, "spawn", 1.5);
	assert_int_equal(timeline_write(tl, path, (uid_t)-1, (gid_t)-1, err, sizeof(err)), 0);
	assert_int_equal(timeline_write(tl, path, (uid_t)-1, (gid_t)-1, err, sizeof(err)), 0);
	back = timeline_load(path, err, sizeof(err));
	assert_non_null(back);
	assert_true(timeline_mark_ms(back, "spawn") == 1.5);
	assert_true(json_equal(timeline_json(back), timeline_json(tl)));
	timeline_free(back);
	/* no temp file left beside it */
	snprintf(path, sizeof(path), "rmdir %s 2>/dev/null || ls %s >&2", dir, dir);
	unlink(strcat(strcpy(err, dir), "/t.json"));
	assert_int_equal(system(path), 0);
	/* a directory that does not exist: an error naming the file */
	assert_int_equal(
	    timeline_write(tl, "/nonexistent/dir/t.json", (uid_t)-1, (gid_t)-1, err, sizeof(err)),
	    -1);
	assert_non_null(strstr(err, "/nonexistent/dir/t.json"));
	timeline_free(tl);
}

static void test_load_rejects_other_schema(void **state)
{
	char path[] = "/tmp/tts-timeline-bad-XXXXXX", err[256];
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_true(write(fd, "{\"schema\": \"x/2\"}", 17) == 17);
	close(fd);
	assert_null(timeline_load(path, err, sizeof(err)));
	assert_non_null(strstr(err, "x/2"));
	unlink(path);
}

/* Every version in the list loads; the saved timelines of the first
 * version (the fixtures, written before any upgrade) load; anything else is
 * refused with the versions this build reads named. */
static void test_load_accepts_the_listed_versions(void **state)
{
	static const char *const saved[] = {
	    "tests/fixtures/timelines/cold.json",  "tests/fixtures/timelines/untraced.json",
	    "tests/fixtures/compare/before.json",  "tests/fixtures/compare/after.json",
	    "tests/fixtures/compare/minimal.json",
	};
	char err[512], body[256], want[256];

	(void)state;
	assert_true(timeline_n_schemas >= 1);
	assert_string_equal(timeline_schemas[0], TIMELINE_SCHEMA);
	assert_true(timeline_schema_loadable("tts-launch.timeline/1"));
	assert_false(timeline_schema_loadable("tts-launch.timeline/0"));
	assert_false(timeline_schema_loadable(NULL));
	for (size_t i = 0; i < timeline_n_schemas; i++) {
		char path[] = "/tmp/tts-timeline-ver-XXXXXX";
		int fd = mkstemp(path);
		int n = snprintf(body, sizeof(body), "{\"schema\": \"%s\"}", timeline_schemas[i]);
		struct timeline *tl;

		assert_true(fd >= 0);
		assert_true(write(fd, body, (size_t)n) == n);
		close(fd);
		tl = timeline_load(path, err, sizeof(err));
		if (!tl)
			fail_msg("%s: %s", timeline_schemas[i], err);
		timeline_free(tl);
		unlink(path);
	}
	for (size_t i = 0; i < sizeof(saved) / sizeof(saved[0]); i++) {
		struct timeline *tl = timeline_load(saved[i], err, sizeof(err));

		if (!tl)
			fail_msg("%s: %s", saved[i], err);
		timeline_free(tl);
	}
	timeline_schema_list(want, sizeof(want));
	assert_non_null(strstr(want, "tts-launch.timeline/1"));
	assert_null(timeline_load("tests/fixtures/compare/badschema.json", err, sizeof(err)));
	assert_non_null(strstr(err, want));
}

static void test_file_classes(void **state)
{
	const char *caches[] = {"/root/.cache/huggingface", NULL};

	(void)state;
	assert_string_equal(
	    classify_file("/root/.cache/huggingface/hub/blobs/ab.incomplete", caches), "download");
	assert_string_equal(classify_file("/app/checkpoints/gpt.pth", caches), "model");
	assert_string_equal(
	    classify_file("/usr/lib/python3/dist-packages/distutils-precedence.pth", caches),
	    "python");
	assert_string_equal(
	    classify_file("/root/.cache/huggingface/hub/models--a--b/refs/main", caches),
	    "hf_cache");
	assert_string_equal(
	    classify_file("/root/.cache/huggingface/hub/x/model.safetensors", caches), "model");
	assert_string_equal(classify_file("/etc/ld.so.cache", caches), "library");
	assert_string_equal(classify_file("checkpoints/config.yaml", caches), "config");
	assert_string_equal(classify_file("/etc/hostname", caches), "system");
	assert_string_equal(classify_file("/srv/x", caches), "other");
}

static json_t *file(const char *path, const char *cls, double a, double b)
{
	return json_pack("{s:s, s:s, s:f, s:f}", "path", path, "class", cls, "first_ms", a,
			 "last_ms", b);
}

static double phase(struct timeline *tl, const char *name, const char *what)
{
	size_t i;
	json_t *p;

	json_array_foreach (json_object_get(timeline_json(tl), "phases"), i, p) {
		if (!strcmp(json_string_value(json_object_get(p, "name")), name))
			return json_number_value(json_object_get(p, what));
	}
	return -1;
}

static void test_infer_phases(void **state)
{
	struct timeline *tl = new_tl();
	json_t *files = json_object_get(timeline_json(tl), "files");
	json_t *imports = json_object_get(json_object_get(timeline_json(tl), "python"), "imports");

	(void)state;
	timeline_mark(tl, "spawn", 2);
	timeline_mark(tl, "exec", 10);
	timeline_mark(tl, "ready", 100);
	timeline_phase(tl, "stale_kill", 0.5, 1.5);
	json_array_append_new(imports, json_pack("{s:s, s:f, s:f}", "name", "torch", "start_ms",
						 20.0, "end_ms", 40.0));
	json_array_append_new(files, file("checkpoints/config.yaml", "config", 41, 42));
	json_array_append_new(files, file("/m/gpt.pth", "model", 45, 80));
	json_array_append_new(files, file("/m/s2mel.pth", "model", 81, 90));
	json_array_append_new(json_object_get(timeline_json(tl), "downloads"),
			      json_pack("{s:s, s:f, s:f}", "path", "/c/blobs/e1.incomplete",
					"first_ms", 50.0, "last_ms", 60.0));
	phases_infer(tl);
	phases_infer(tl); /* again: no duplicates */
	assert_true(phase(tl, "launch", "end_ms") == 2);
	assert_true(phase(tl, "spawn", "dur_ms") == 8);
	assert_true(phase(tl, "interpreter_start", "end_ms") == 20);
	assert_true(phase(tl, "imports", "dur_ms") == 20);
	assert_true(phase(tl, "config_read", "start_ms") == 41);
	assert_true(phase(tl, "model_load", "start_ms") == 45);
	assert_true(phase(tl, "model_load", "end_ms") == 90);
	assert_true(phase(tl, "download:e1.incomplete", "dur_ms") == 10);
	assert_true(phase(tl, "ready", "start_ms") == 90);
	assert_true(phase(tl, "stale_kill", "start_ms") == 0.5);
	assert_int_equal(json_array_size(json_object_get(timeline_json(tl), "phases")), 9);
	timeline_free(tl);
}

static void test_summary(void **state)
{
	struct timeline *tl = new_tl();
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	timeline_set_tracing(tl, true, NULL);
	timeline_mark(tl, "exec", 10);
	timeline_mark(tl, "ready", 1500);
	timeline_phase(tl, "stale_kill", 0, 5);
	json_array_append_new(json_object_get(timeline_json(tl), "missing_paths"),
			      json_pack("{s:s, s:i, s:s, s:f, s:f}", "path", "/no/such", "attempts",
					4, "errno", "ENOENT", "first_ms", 1.0, "last_ms", 2.0));
	timeline_print_summary(tl, f);
	fclose(f);
	assert_non_null(strstr(buf, "ready at 1.500s"));
	assert_non_null(strstr(buf, "stale_kill"));
	assert_non_null(strstr(buf, "/no/such"));
	assert_non_null(strstr(buf, "events lost: 0"));
	free(buf);
	timeline_free(tl);
}

/* Request latency percentiles by nearest rank: 20 requests of 1..20 ms ->
 * p50 10 ms, p90 18 ms, p99 20 ms; faults per request averaged. */
static void test_summary_requests(void **state)
{
	struct timeline *tl = new_tl();
	json_t *reqs = json_object_get(timeline_json(tl), "requests");
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	timeline_set_tracing(tl, true, NULL);
	for (int i = 20; i >= 1; i--) /* out of order on purpose */
		json_array_append_new(reqs,
				      json_pack("{s:f, s:i, s:i}", "latency_ms", (double)i,
						"faults", 100, "major_faults", i == 20 ? 20 : 0));
	timeline_print_summary(tl, f);
	fclose(f);
	assert_non_null(strstr(buf, "requests: 20, latency p50 10.0ms, p90 18.0ms, p99 20.0ms; "
				    "per request 100 faults (1.0 major)"));
	free(buf);
	timeline_free(tl);
}

/* ---- loading hostile input (issue 12) ---- */

/* timeline_validate on JSON text: NULL when it passes, else the message. */
static const char *validate_text(const char *text)
{
	static char err[1024];
	json_error_t je;
	json_t *root = json_loads(text, 0, &je);
	int rc;

	assert_non_null(root);
	rc = timeline_validate(root, "t.json", err, sizeof(err));
	json_decref(root);
	return rc ? err : NULL;
}

#define TL(body) "{\"schema\": \"tts-launch.timeline/1\", " body "}"

static void test_validate_names_the_field_and_the_bound(void **state)
{
	static const struct {
		const char *json, *want;
	} bad[] = {
	    {TL("\"phases\": [{\"name\": \"a\", \"end_ms\": 1}, {\"name\": \"b\", \"end_ms\": "
		"1.7e308}]"),
	     "t.json: phases[1].end_ms = 1.7e+308 is not a time (0 .. 1e+11 ms)"},
	    {TL("\"marks\": {\"ready\": -0.5}"), "marks.ready = -0.5 is not a time"},
	    {TL("\"marks\": {\"ready\": \"soon\"}"), "marks.ready is not a time"},
	    {TL("\"marks\": []"), "marks is not an object"},
	    {TL("\"files\": [{\"path\": \"/x\", \"mmap_bytes\": 2e18}]"),
	     "files[0].mmap_bytes = 2e+18 is not a size (0 .. 1e+18 bytes)"},
	    {TL("\"files\": [{\"path\": \"/x\", \"size\": -1}]"),
	     "files[0].size = -1 is not a size"},
	    {TL("\"memory\": {\"fault_rate\": {\"counts\": [1, 2e19]}}"),
	     "memory.fault_rate.counts[1] = 2e+19 is out of range"},
	    {TL("\"phases\": [{\"start_ms\": 1}]"), "phases[0].name is missing or not a string"},
	    {TL("\"network\": [{\"peer\": null}]"), "network[0].peer is missing or not a string"},
	    {TL("\"downloads\": [7]"), "downloads[0] is not an object"},
	    {TL("\"requests\": {}"), "requests is not a list"},
	    {"[1, 2]", "not a JSON object"},
	    {"{\"schema\": \"tts-launch.timeline/1\\u001b[2J\"}", "\\x1b[2J"},
	};
	static const char *const good[] = {
	    TL("\"marks\": {\"ready\": 1e11}, \"phases\": []"),
	    TL("\"files\": [{\"path\": \"/x\", \"bytes_read\": null, \"errno\": \"ENOENT\"}]"),
	    TL("\"launcher\": {\"start\": {\"monotonic_ns\": 9223372036854775807}}"),
	    TL("\"connects\": [{\"ret\": -111, \"peer\": \"1.2.3.4:5\"}]"),
	    TL("\"phases\": [{\"name\": \"x\", \"count\": \"many\"}]"),
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *err = validate_text(bad[i].json);

		assert_non_null(err);
		if (!strstr(err, bad[i].want))
			fail_msg("%s: got '%s', want '%s'", bad[i].json, err, bad[i].want);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (validate_text(good[i]))
			fail_msg("%s refused: %s", good[i], validate_text(good[i]));
}

static void test_validate_depth(void **state)
{
	char text[4096] = "{\"schema\": \"tts-launch.timeline/1\", \"launcher\": ";
	size_t n = strlen(text);
	int depth;

	(void)state;
	/* the launcher object at depth 1: 31 more levels pass, 32 more do not */
	for (int pass = 0; pass < 2; pass++) {
		text[n] = 0;
		depth = pass ? 32 : 31;
		for (int i = 0; i < depth; i++)
			strcat(text, "{\"a\": ");
		strcat(text, "1");
		for (int i = 0; i < depth; i++)
			strcat(text, "}");
		strcat(text, "}");
		if (pass)
			assert_non_null(strstr(validate_text(text), "nested deeper than 32"));
		else
			assert_null(validate_text(text));
	}
}

static void test_load_is_bounded(void **state)
{
	char path[] = "/tmp/tts-timeline-big-XXXXXX", err[512];
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	/* sparse: one byte over the cap is refused, whatever the content */
	assert_int_equal(ftruncate(fd, (off_t)TIMELINE_MAX_FILE + 1), 0);
	close(fd);
	assert_null(timeline_load(path, err, sizeof(err)));
	assert_non_null(strstr(err, "larger than 256 MiB"));
	unlink(path);
	assert_null(timeline_load("/tmp", err, sizeof(err)));
	assert_non_null(strstr(err, "is a directory"));
	assert_null(timeline_load("/nonexistent/t.json", err, sizeof(err)));
	assert_non_null(strstr(err, "No such file"));
}

/* ---- util: UTF-8, the byte escape, the terminal escape ---- */

static void test_utf8_and_json_bytes(void **state)
{
	json_t *j;

	(void)state;
	assert_true(utf8_valid("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80", 14));
	assert_false(utf8_valid("\xc0\xaf", 2));	 /* overlong '/' */
	assert_false(utf8_valid("\xed\xa0\x80", 3));	 /* a surrogate */
	assert_false(utf8_valid("\xf4\x90\x80\x80", 4)); /* above U+10FFFF */
	assert_false(utf8_valid("\xe6\x97", 2));	 /* cut short */
	/* valid: as it is; else each stray byte as the four characters \xNN */
	j = json_text("/tmp/caf\xc3\xa9");
	assert_string_equal(json_string_value(j), "/tmp/caf\xc3\xa9");
	json_decref(j);
	j = json_text("/tmp/caf\xe9-\xff/\xe6\x97");
	assert_non_null(j);
	assert_string_equal(json_string_value(j), "/tmp/caf\\xe9-\\xff/\\xe6\\x97");
	json_decref(j);
	j = json_bytes("ab\xff\0zz", 8); /* stops at the NUL */
	assert_string_equal(json_string_value(j), "ab\\xff");
	json_decref(j);
	j = json_text(NULL);
	assert_true(json_is_null(j));
	json_decref(j);
}

static void test_text_esc(void **state)
{
	const char *clean = "/srv/\xe6\x97\xa5\xe6\x9c\xac/model.pth";
	char buf[64], small[12];

	(void)state;
	assert_ptr_equal(text_esc(clean, buf, sizeof(buf)), clean); /* nothing to do */
	assert_string_equal(text_esc("a\x1b[2J\x07\x7f\xc2\x9b\xff", buf, sizeof(buf)),
			    "a\\x1b[2J\\x07\\x7f\\u009b\\xff");
	/* cut to fit, never inside an escape, with "..." */
	assert_string_equal(text_esc("\x1b\x1b\x1b\x1b", small, sizeof(small)), "\\x1b\\x1b...");
	assert_string_equal(text_esc(NULL, buf, sizeof(buf)), "");
	/* utf8_trim drops a character cut short */
	strcpy(buf, "ab\xe6\x97");
	utf8_trim(buf);
	assert_string_equal(buf, "ab");
	strcpy(buf, "ab\xe6\x97\xa5");
	utf8_trim(buf);
	assert_string_equal(buf, "ab\xe6\x97\xa5");
	assert_int_equal(utf8_prefix_len("\xe6\x97\xa5\xe6\x97\xa5", 4), 3);
}

static void test_summary_escapes_terminal_controls(void **state)
{
	struct timeline *tl = new_tl();
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	timeline_set_tracing(tl, true, NULL);
	timeline_phase(tl, "evil\x1b]0;title\x07", 0, 5);
	json_array_append_new(json_object_get(timeline_json(tl), "missing_paths"),
			      json_pack("{s:s, s:i, s:s, s:f, s:f}", "path",
					"/no/\x1b[2Jsuch\xc2\x9b", "attempts", 4, "errno",
					"ENOENT\x07", "first_ms", 1.0, "last_ms", 2.0));
	timeline_print_summary(tl, f);
	fclose(f);
	assert_null(memchr(buf, 0x1b, len));
	assert_null(memchr(buf, 0x07, len));
	assert_null(strstr(buf, "\xc2\x9b"));
	assert_non_null(strstr(buf, "evil\\x1b]0;title\\x07"));
	assert_non_null(strstr(buf, "/no/\\x1b[2Jsuch\\u009b"));
	assert_non_null(strstr(buf, "ENOENT\\x07"));
	free(buf);
	timeline_free(tl);
}

/* The views: one rule for a missing field (absent, null or mistyped: none,
 * NULL, false, empty), the model's order kept, strings borrowed. */
static void test_views_one_missing_rule(void **state)
{
	json_error_t e;
	json_t *root = json_loads(
	    "{\"schema\": \"tts-launch.timeline/1\","
	    " \"marks\": {\"launch\": 0, \"spawn\": 1.5, \"bad\": \"x\", \"ready\": 900},"
	    " \"phases\": [{\"name\": \"a\", \"start_ms\": 1, \"end_ms\": 2}, 7,"
	    "   {\"name\": 3, \"start_ms\": null}],"
	    " \"files\": [{\"path\": \"/m.bin\", \"bytes_read\": 10, \"opens\": \"2\"}],"
	    " \"downloads\": [{\"path\": \"/d\", \"completed\": 1}],"
	    " \"memory\": {\"page_faults\": 5, \"fault_rate\": {\"bucket_ms\": 100,"
	    "   \"counts\": [1, null, 3]}, \"mlock_calls\": [{\"call\": \"mlockall\","
	    "   \"result\": 0}, {\"result\": -1}, {\"result\": 0.0}]},"
	    " \"tracing\": {\"enabled\": true},"
	    " \"process\": {\"command\": [\"py\", 4, \"x\"]},"
	    " \"requests\": {}}",
	    0, &e);
	struct timeline *tl;
	struct tl_view *v;

	(void)state;
	assert_non_null(root);
	tl = timeline_wrap(root);
	v = tl_view_decode(tl);
	assert_non_null(v);
	assert_int_equal(v->n_marks, 3); /* "bad" is not a time */
	assert_string_equal(v->marks[1].name, "spawn");
	assert_true(tl_view_mark(v, "ready") == 900);
	assert_false(tl_has(tl_view_mark(v, "bad")));
	assert_false(tl_has(tl_view_mark(v, "exit")));
	assert_int_equal(v->n_phases, 3); /* positions kept */
	assert_string_equal(v->phases[0].name, "a");
	assert_null(v->phases[1].name);
	assert_false(tl_has(v->phases[1].start_ms));
	assert_null(v->phases[2].name);
	assert_false(tl_has(v->phases[2].start_ms));
	assert_true(v->files[0].bytes_read == 10);
	assert_false(tl_has(v->files[0].opens)); /* a string is not a number */
	assert_true(tl_or0(v->files[0].opens) == 0);
	assert_false(tl_has(v->files[0].bytes_written));
	assert_false(v->downloads[0].completed); /* only true is true */
	assert_true(v->memory.page_faults == 5);
	assert_false(tl_has(v->memory.major_faults));
	assert_int_equal(v->memory.fault_rate.n, 3);
	assert_false(tl_has(v->memory.fault_rate.counts[1]));
	assert_int_equal(v->memory.n_mlock_calls, 3);
	assert_true(v->memory.mlock_calls[0].ok);
	assert_false(v->memory.mlock_calls[1].ok);
	assert_false(v->memory.mlock_calls[2].ok); /* a real is not the integer 0 */
	assert_null(v->memory.mlock_status);
	assert_true(v->tracing.enabled);
	assert_false(tl_has(v->tracing.events_lost));
	assert_int_equal(v->process.n_command, 3);
	assert_null(v->process.command[1]);
	assert_int_equal(v->n_requests, 0); /* not a list: empty */
	assert_int_equal(v->n_network, 0);
	assert_false(tl_has(v->sched.io_wait_ms));
	tl_view_free(v);
	timeline_free(tl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_new_has_every_key),
	    cmocka_unit_test(test_marks_and_phases_replace),
	    cmocka_unit_test(test_write_is_atomic_and_loads),
	    cmocka_unit_test(test_load_rejects_other_schema),
	    cmocka_unit_test(test_load_accepts_the_listed_versions),
	    cmocka_unit_test(test_views_one_missing_rule),
	    cmocka_unit_test(test_file_classes),
	    cmocka_unit_test(test_infer_phases),
	    cmocka_unit_test(test_summary),
	    cmocka_unit_test(test_summary_requests),
	    cmocka_unit_test(test_validate_names_the_field_and_the_bound),
	    cmocka_unit_test(test_validate_depth),
	    cmocka_unit_test(test_load_is_bounded),
	    cmocka_unit_test(test_utf8_and_json_bytes),
	    cmocka_unit_test(test_text_esc),
	    cmocka_unit_test(test_summary_escapes_terminal_controls),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
