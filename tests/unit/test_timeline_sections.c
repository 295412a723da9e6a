/* timeline_sections: files[], missing_paths[] and python.imports[] as C
 * records: records -> JSON -> load -> the same records, the bytes jansson's
 * dump gives for the tree they were, key order, a malformed entry refused
 * with its field named, an entry the fields cannot write back kept as it
 * was, and a list set in the tree taken over. No BPF. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <glob.h>

#include "timeline.h"
#include "timeline_internal.h"
#include "timeline_sections.h"
#include "timeline_view.h"

#define FIXTURE "tests/fixtures/timelines/cold.json"

static char tmpdir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/tts-sections-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	int c;

	assert_non_null(f);
	assert_non_null(m);
	while ((c = fgetc(f)) != EOF)
		fputc(c, m);
	fclose(f);
	fclose(m);
	return buf;
}

/* what json_dumpf gives for a tree */
static char *jansson_dump(const json_t *root, size_t flags)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	assert_non_null(m);
	assert_int_equal(json_dumpf(root, m, flags), 0);
	fputc('\n', m);
	fclose(m);
	return buf;
}

static char *model_dump(const struct timeline *tl)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	assert_non_null(m);
	assert_int_equal(timeline_dump(tl, m), 0);
	fclose(m);
	return buf;
}

static struct timeline *load(const char *path)
{
	char err[1024];
	struct timeline *tl = timeline_load(path, err, sizeof(err));

	if (!tl)
		fail_msg("%s", err);
	return tl;
}

/* A model of a bare tree with the three lists as records */
static struct timeline *bare(void)
{
	struct timeline *tl = timeline_wrap(json_pack(
	    "{s:s, s:[], s:[], s:[], s:{s:b, s:[], s:s}}", "schema", TIMELINE_SCHEMA, "phases",
	    "files", "missing_paths", "python", "usdt", 0, "imports", "imports_from", "none"));

	assert_non_null(tl);
	assert_non_null(timeline_sections(tl));
	for (int i = 0; i < TLS_N; i++)
		tl_sections_place(timeline_sections(tl), (enum tl_sec_id)i, timeline_json(tl));
	return tl;
}

static void fill(struct tl_sections *s)
{
	struct tl_file *f = tl_list_push(s, TLS_FILES);
	struct tl_missing *m;
	struct tl_import *i;

	assert_non_null(f);
	f->path = tl_strdup("/m/gpt\xff.pth"); /* not UTF-8: json_text's \xNN */
	f->class = tl_strdup("model");
	f->opens = 2;
	f->failed_opens = 1;
	f->errno_name = tl_strdup("ENOENT");
	f->bytes_read = 123456789012.0;
	f->bytes_written = 0;
	f->reads = 7;
	f->writes = 0;
	f->mmaps = 1;
	f->mmap_bytes = 4096;
	f->faults = 3;
	f->size = 1 << 20;
	f->pid = 100;
	f->first_ms = 12.5;
	f->last_ms = 1000.125;
	f->faults_after_ready = 0;
	f->major_faults = 2;
	f->first_fault_ms = 13.001;
	/* last_fault_ms left TL_NONE: null */
	f->write_errors = 0;
	tl_rec_seal(TLS_FILES, f);
	f = tl_list_push(s, TLS_FILES); /* an inherited fd: no pid */
	f->path = tl_strdup("[fd] log");
	f->class = tl_strdup("other");
	f->opens = f->failed_opens = f->bytes_read = f->bytes_written = 0;
	f->reads = f->writes = f->mmaps = f->mmap_bytes = f->faults = f->size = 0;
	f->first_ms = f->last_ms = 1;
	f->faults_after_ready = f->major_faults = 0;
	f->write_errors = 1;
	f->write_errno = tl_strdup("ENOSPC");
	tl_rec_seal(TLS_FILES, f);
	m = tl_list_push(s, TLS_MISSING);
	m->path = tl_strdup("/c/config.json");
	m->attempts = 4;
	m->first_ms = 1;
	m->last_ms = 2;
	m->pid = 100;
	m->class = tl_strdup("config");
	tl_rec_seal(TLS_MISSING, m);
	i = tl_list_push(s, TLS_IMPORTS);
	i->name = tl_strdup("torch");
	i->pid = 100;
	i->start_ms = 2;
	i->end_ms = 900.5;
	i->dur_ms = 898.5;
	i->depth = 0;
	i->found = 1;
	i->derived = 1;
	tl_rec_seal(TLS_IMPORTS, i);
}

static void files_equal(const struct tl_file *a, const struct tl_file *b)
{
	assert_string_equal(a->path, b->path);
	assert_string_equal(a->class, b->class);
	if (a->errno_name || b->errno_name)
		assert_string_equal(a->errno_name, b->errno_name);
	if (a->write_errno || b->write_errno)
		assert_string_equal(a->write_errno, b->write_errno);
	assert_memory_equal(a->kind_, b->kind_, sizeof(a->kind_));
	{
		const double x[] = {a->opens,	      a->failed_opens,
				    a->bytes_read,    a->bytes_written,
				    a->reads,	      a->writes,
				    a->mmaps,	      a->mmap_bytes,
				    a->faults,	      a->size,
				    a->pid,	      a->first_ms,
				    a->last_ms,	      a->faults_after_ready,
				    a->major_faults,  a->first_fault_ms,
				    a->last_fault_ms, a->write_errors};
		const double y[] = {b->opens,	      b->failed_opens,
				    b->bytes_read,    b->bytes_written,
				    b->reads,	      b->writes,
				    b->mmaps,	      b->mmap_bytes,
				    b->faults,	      b->size,
				    b->pid,	      b->first_ms,
				    b->last_ms,	      b->faults_after_ready,
				    b->major_faults,  b->first_fault_ms,
				    b->last_fault_ms, b->write_errors};

		for (size_t k = 0; k < sizeof(x) / sizeof(x[0]); k++)
			assert_true((tl_has(x[k]) == tl_has(y[k])) &&
				    (!tl_has(x[k]) || x[k] == y[k]));
	}
}

/* records -> timeline_write -> timeline_load: the same records */
static void test_round_trip(void **state)
{
	struct timeline *tl = bare(), *back;
	const struct tl_sections *s, *t;
	char path[128], err[512];

	(void)state;
	fill(timeline_sections(tl));
	snprintf(path, sizeof(path), "%s/rt.json", tmpdir);
	assert_int_equal(timeline_write(tl, path, getuid(), getgid(), err, sizeof(err)), 0);
	back = load(path);
	s = timeline_sections(tl);
	t = timeline_sections(back);
	assert_int_equal(t->l[TLS_FILES].n, 2);
	assert_int_equal(t->l[TLS_MISSING].n, 1);
	assert_int_equal(t->l[TLS_IMPORTS].n, 1);
	assert_string_equal(TLS_FILES_OF(t)[0].path, "/m/gpt\\xff.pth");
	assert_false(tl_has(TLS_FILES_OF(t)[1].pid));
	assert_true(TLS_FILES_OF(t)[0].bytes_read == 123456789012.0);
	for (size_t i = 0; i < 2; i++)
		files_equal(&TLS_FILES_OF(s)[i], &TLS_FILES_OF(t)[i]);
	assert_string_equal(TLS_MISSING_OF(t)[0].path, "/c/config.json");
	assert_null(TLS_MISSING_OF(t)[0].errno_name);
	assert_true(TLS_MISSING_OF(t)[0].pid == 100);
	assert_memory_equal(TLS_MISSING_OF(s)[0].kind_, TLS_MISSING_OF(t)[0].kind_,
			    TL_MISSING_KEYS);
	assert_string_equal(TLS_IMPORTS_OF(t)[0].name, "torch");
	assert_int_equal(TLS_IMPORTS_OF(t)[0].found, 1);
	assert_int_equal(TLS_IMPORTS_OF(t)[0].derived, 1);
	assert_true(TLS_IMPORTS_OF(t)[0].end_ms == 900.5);
	/* the lists are out of the loaded tree: placeholders (empty) */
	assert_int_equal(json_array_size(json_object_get(timeline_json(back), "files")), 0);
	/* and the same document again */
	{
		char *a = model_dump(tl), *b = model_dump(back);

		assert_string_equal(a, b);
		free(a);
		free(b);
	}
	timeline_free(back);
	timeline_free(tl);
}

/* The keys of a record in the order the model always wrote them */
static void test_key_order(void **state)
{
	static const char *keys[] = {"\"path\"",
				     "\"class\"",
				     "\"opens\"",
				     "\"failed_opens\"",
				     "\"errno\"",
				     "\"bytes_read\"",
				     "\"bytes_written\"",
				     "\"reads\"",
				     "\"writes\"",
				     "\"mmaps\"",
				     "\"mmap_bytes\"",
				     "\"faults\"",
				     "\"size\"",
				     "\"pid\"",
				     "\"first_ms\"",
				     "\"last_ms\"",
				     "\"faults_after_ready\"",
				     "\"major_faults\"",
				     "\"first_fault_ms\"",
				     "\"last_fault_ms\"",
				     "\"write_errors\"",
				     "\"write_errno\""};
	struct tl_sections s;
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	const char *at;

	(void)state;
	assert_int_equal(tl_sections_init(&s, false), 0);
	fill(&s);
	assert_int_equal(tl_list_write(&s, TLS_FILES, m, 0, 15), 0);
	fclose(m);
	at = buf;
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		const char *p = strstr(at, keys[k]);

		if (!p)
			fail_msg("%s missing or out of order in %s", keys[k], buf);
		at = p;
	}
	/* integers as integers, times as reals, nothing as null */
	assert_non_null(strstr(buf, "\"opens\":2,"));
	assert_non_null(strstr(buf, "\"first_ms\":12.5,"));
	assert_non_null(strstr(buf, "\"last_fault_ms\":null,"));
	assert_non_null(strstr(buf, "\"pid\":null,")); /* the inherited fd */
	assert_non_null(strstr(buf, "\"path\":\"/m/gpt\\\\xff.pth\""));
	free(buf);
	buf = NULL;
	m = open_memstream(&buf, &len);
	assert_int_equal(tl_list_write(&s, TLS_IMPORTS, m, 0, 15), 0);
	fclose(m);
	assert_string_equal(buf,
			    "[{\"name\":\"torch\",\"pid\":100,\"start_ms\":2.0,\"end_ms\":900.5,"
			    "\"dur_ms\":898.5,\"depth\":0,\"found\":true,\"derived\":true}]");
	free(buf);
	tl_sections_free(&s);
}

/* Saved files: timeline_write and timeline_dump give what json_dumpf gave
 * for the whole tree, byte for byte (each fixture that loads) */
static void same_bytes(const char *fixture)
{
	char err[1024], path[128], *a, *b;
	struct timeline *tl = timeline_load(fixture, err, sizeof(err));
	json_t *raw = json_load_file(fixture, 0, NULL);

	if (!tl) { /* a hostile one: refused, nothing to write */
		json_decref(raw);
		return;
	}
	assert_non_null(raw);
	assert_int_equal(timeline_sections(tl)->l[TLS_FILES].n,
			 json_array_size(json_object_get(raw, "files")));
	a = jansson_dump(raw, JSON_INDENT(2));
	b = model_dump(tl);
	if (strcmp(a, b))
		fail_msg("timeline_dump of %s differs from json_dumpf", fixture);
	free(a);
	free(b);
	snprintf(path, sizeof(path), "%s/w.json", tmpdir);
	assert_int_equal(timeline_write(tl, path, getuid(), getgid(), err, sizeof(err)), 0);
	a = jansson_dump(raw, JSON_INDENT(1) | JSON_REAL_PRECISION(15));
	b = slurp(path);
	if (strcmp(a, b))
		fail_msg("timeline_write of %s differs from json_dumpf", fixture);
	free(a);
	free(b);
	timeline_free(tl);
	json_decref(raw);
}

static void test_same_bytes_as_jansson(void **state)
{
	const char *dirs[] = {"tests/fixtures/timelines/", "tests/fixtures/timelines-diagnose/",
			      "tests/fixtures/timelines-hostile/"};
	json_t *raw = json_load_file(FIXTURE, 0, NULL);
	int n = 0;

	(void)state;
	assert_non_null(raw);
	assert_true(json_array_size(json_object_get(raw, "files")) > 0); /* the big one */
	json_decref(raw);
	for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
		char pat[128];
		glob_t g;

		snprintf(pat, sizeof(pat), "%s*.json", dirs[d]);
		assert_int_equal(glob(pat, 0, NULL, &g), 0);
		for (size_t i = 0; i < g.gl_pathc; i++, n++)
			same_bytes(g.gl_pathv[i]);
		globfree(&g);
	}
	assert_true(n >= 20);
}

static char *write_tmp(const char *name, const char *text)
{
	static char path[160];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static void refused(const char *text, const char *field)
{
	char err[1024];
	struct timeline *tl = timeline_load(write_tmp("bad.json", text), err, sizeof(err));

	assert_null(tl);
	if (!strstr(err, field))
		fail_msg("\"%s\" not named in: %s", field, err);
}

/* A malformed entry is refused, the field named */
static void test_malformed_refused(void **state)
{
	(void)state;
	refused("{\"schema\": \"" TIMELINE_SCHEMA "\", \"files\": [{\"path\": \"/a\"}, "
		"{\"path\": \"/b\", \"first_ms\": \"soon\"}]}",
		"files[1].first_ms is not a time");
	refused("{\"schema\": \"" TIMELINE_SCHEMA "\", \"files\": [{\"path\": \"/a\", "
		"\"bytes_read\": -5}]}",
		"files[0].bytes_read = -5 is not a size");
	refused("{\"schema\": \"" TIMELINE_SCHEMA "\", \"missing_paths\": [{\"attempts\": 2}]}",
		"missing_paths[0].path is missing or not a string");
	refused("{\"schema\": \"" TIMELINE_SCHEMA "\", \"files\": [7]}",
		"files[0] is not an object");
	refused("{\"schema\": \"" TIMELINE_SCHEMA "\", \"python\": {\"imports\": [{\"name\": "
		"\"x\", \"start_ms\": 1e300}]}}",
		"python.imports[0].start_ms = 1e+300 is not a time");
}

/* An entry the fields cannot write back (another order, a key of its own,
 * a mistyped value) is written as it was; readers read its fields */
static void test_odd_entry_kept(void **state)
{
	static const char text[] =
	    "{\"schema\": \"" TIMELINE_SCHEMA "\", \"files\": ["
	    "{\"bytes_read\": 5, \"path\": \"/b\", \"class\": \"model\"},"
	    "{\"path\": \"/c\", \"note\": [1, {\"x\": true}], \"opens\": 2},"
	    "{\"path\": \"/d\", \"opens\": \"two\", \"first_ms\": 3},"
	    "{\"path\": \"/e\", \"size\": 18014398509481985}],"
	    " \"python\": {\"usdt\": false, \"imports\": [{\"name\": \"a\", \"found\": 1}]}}";
	json_t *raw = json_loads(text, 0, NULL);
	struct timeline *tl = load(write_tmp("odd.json", text));
	struct tl_view *v = tl_view_decode(tl);
	char *a, *b;

	(void)state;
	assert_non_null(v);
	assert_int_equal(v->n_files, 4);
	assert_true(v->files[0].bytes_read == 5);
	assert_string_equal(v->files[0].class, "model");
	assert_true(v->files[1].opens == 2);
	assert_false(tl_has(v->files[2].opens)); /* a string: none */
	assert_true(v->files[2].first_ms == 3);	 /* an integer time */
	assert_int_equal(v->n_imports, 1);
	assert_int_equal(v->imports[0].found, -1); /* not a flag */
	/* the view points into the model's records */
	assert_ptr_equal(v->files, TLS_FILES_OF(timeline_sections(tl)));
	tl_view_free(v);
	a = jansson_dump(raw, JSON_INDENT(2));
	b = model_dump(tl);
	assert_string_equal(a, b);
	free(a);
	free(b);
	timeline_free(tl);
	json_decref(raw);
}

/* A list set in the tree (or appended to the placeholder) becomes the
 * records; one deleted from it leaves none */
static void test_tree_taken_over(void **state)
{
	struct timeline *tl = bare();
	json_t *root = timeline_json(tl);
	struct tl_sections *s;

	(void)state;
	json_object_set_new(root, "files",
			    json_pack("[{s:s, s:i}, {s:s, s:i}]", "path", "/a", "opens", 1, "path",
				      "/b", "opens", 2));
	s = timeline_sections(tl);
	assert_int_equal(s->l[TLS_FILES].n, 2);
	assert_string_equal(TLS_FILES_OF(s)[1].path, "/b");
	assert_ptr_equal(json_object_get(root, "files"), s->ph[TLS_FILES]);
	json_array_append_new(json_object_get(root, "files"), json_pack("{s:s}", "path", "/c"));
	s = timeline_sections(tl);
	assert_int_equal(s->l[TLS_FILES].n, 3);
	assert_string_equal(TLS_FILES_OF(s)[2].path, "/c");
	assert_int_equal(json_array_size(json_object_get(root, "files")), 0);
	/* an edit in place */
	assert_int_equal(tl_rec_set_new(s, TLS_FILES, 0, "bytes_read", json_integer(9)), 0);
	assert_true(TLS_FILES_OF(s)[0].bytes_read == 9);
	assert_int_equal(tl_rec_set_new(s, TLS_FILES, 0, "bytes_read", json_string("x")), -1);
	assert_int_equal(tl_rec_set_new(s, TLS_FILES, 0, "no_such_key", json_integer(1)), -1);
	/* sorted by first_ms, stably; no time sorts as 0 */
	tl_rec_set_new(s, TLS_FILES, 0, "first_ms", json_real(5));
	tl_rec_set_new(s, TLS_FILES, 2, "first_ms", json_real(1));
	tl_list_sort(s, TLS_FILES);
	assert_string_equal(TLS_FILES_OF(s)[0].path, "/b");
	assert_string_equal(TLS_FILES_OF(s)[1].path, "/c");
	assert_string_equal(TLS_FILES_OF(s)[2].path, "/a");
	json_object_del(root, "files");
	s = timeline_sections(tl);
	assert_int_equal(s->l[TLS_FILES].n, 0);
	timeline_free(tl);
}

/* A tree that outlives its model gets its lists back as JSON */
static void test_tree_outlives_model(void **state)
{
	json_t *root = json_pack("{s:s, s:[{s:s, s:i}]}", "schema", TIMELINE_SCHEMA, "files",
				 "path", "/a", "opens", 1);
	struct timeline *tl = timeline_wrap(json_incref(root));

	(void)state;
	assert_int_equal(timeline_sections(tl)->l[TLS_FILES].n, 1);
	timeline_free(tl);
	assert_int_equal(json_array_size(json_object_get(root, "files")), 1);
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(root, "files"), 0), "path")),
			    "/a");
	json_decref(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_key_order),
	    cmocka_unit_test(test_same_bytes_as_jansson),
	    cmocka_unit_test(test_malformed_refused),
	    cmocka_unit_test(test_odd_entry_kept),
	    cmocka_unit_test(test_tree_taken_over),
	    cmocka_unit_test(test_tree_outlives_model),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
