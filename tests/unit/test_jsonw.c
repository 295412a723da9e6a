/* jsonw: the writer's output is byte for byte what jansson's json_dumpf
 * writes for the same document (compact, indented, a real precision), so
 * render_perfetto and compare kept their output when they left jansson;
 * bytes that are not UTF-8 come out as the text \xNN. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "jsonw.h"

static const double reals[] = {
    0.0,     -0.0,  1.0,  6491.097, 0.195, 1e20, 1.5e-7, 1e-5, 123456789012345678.0,
    2.5e300, -3.25, 1e16, 1e17,	    0.1};
static const char *const strs[] = {"",
				   "plain",
				   "q\"b\\s/",
				   "\b\f\n\r\t",
				   "\x01\x1f\x7f",
				   "caf\xc3\xa9 \xe2\x82\xac",
				   "\xf0\x9f\x98\x80",
				   "a\\xff"};

/* the same document, once through jansson and once through jsonw */
static json_t *doc(void)
{
	json_t *o = json_object(), *a = json_array(), *r = json_array(), *s = json_array();
	json_t *d = json_pack("[s]", "x\xc3\xa9\"y");

	for (size_t i = 0; i < sizeof(reals) / sizeof(*reals); i++)
		json_array_append_new(r, json_real(reals[i]));
	for (size_t i = 0; i < sizeof(strs) / sizeof(*strs); i++)
		json_array_append_new(s, json_string(strs[i]));
	json_array_append_new(a, json_integer(0));
	json_array_append_new(a, json_integer(-42));
	json_array_append_new(a, json_integer(9007199254740991LL));
	json_array_append_new(a, json_true());
	json_array_append_new(a, json_false());
	json_array_append_new(a, json_null());
	json_array_append_new(a, json_object());
	json_array_append_new(a, json_array());
	json_object_set_new(o, "ints", a);
	json_object_set_new(o, "reals", r);
	json_object_set_new(o, "strings", s);
	json_object_set_new(o, "empty", json_object());
	json_object_set_new(o, "nested", json_pack("{s:{s:[i]}}", "a", "b", 1));
	/* deeper than one run of the writer's spaces (32) */
	for (int i = 0; i < 12; i++)
		d = json_pack("[o]", d);
	json_object_set_new(o, "deep", d);
	return o;
}

static void write_doc(struct jsonw *w)
{
	jw_obj(w);
	jw_key(w, "ints");
	jw_arr(w);
	jw_int(w, 0);
	jw_num(w, -42);
	jw_num(w, 9007199254740991.0);
	jw_bool(w, true);
	jw_bool(w, false);
	jw_str(w, NULL);
	jw_obj(w);
	jw_obj_end(w);
	jw_arr(w);
	jw_arr_end(w);
	jw_arr_end(w);
	jw_key(w, "reals");
	jw_arr(w);
	for (size_t i = 0; i < sizeof(reals) / sizeof(*reals); i++)
		jw_real(w, reals[i]);
	jw_arr_end(w);
	jw_key(w, "strings");
	jw_arr(w);
	for (size_t i = 0; i < sizeof(strs) / sizeof(*strs); i++)
		jw_str(w, strs[i]);
	jw_arr_end(w);
	jw_key(w, "empty");
	jw_obj(w);
	jw_obj_end(w);
	jw_key(w, "nested");
	jw_obj(w);
	jw_key(w, "a");
	jw_obj(w);
	jw_key(w, "b");
	jw_arr(w);
	jw_int(w, 1);
	jw_arr_end(w);
	jw_obj_end(w);
	jw_obj_end(w);
	jw_key(w, "deep");
	for (int i = 0; i < 13; i++)
		jw_arr(w);
	jw_str(w, "x\xc3\xa9\"y");
	for (int i = 0; i < 13; i++)
		jw_arr_end(w);
	jw_obj_end(w);
}

static void same_as_jansson(int indent, int precision)
{
	json_t *o = doc();
	size_t flags = indent ? JSON_INDENT(indent) : JSON_COMPACT;
	char *want, *got = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&got, &len);
	struct jsonw w;

	assert_non_null(o);
	if (precision)
		flags |= JSON_REAL_PRECISION(precision);
	want = json_dumps(o, flags);
	assert_non_null(want);
	assert_non_null(f);
	jw_init(&w, f, indent, precision);
	write_doc(&w);
	assert_int_equal(jw_error(&w), 0);
	fclose(f);
	assert_string_equal(got, want);
	free(got);
	free(want);
	json_decref(o);
}

static void test_compact(void **state)
{
	(void)state;
	same_as_jansson(0, 0);
}

static void test_indented(void **state)
{
	(void)state;
	same_as_jansson(2, 12);
	same_as_jansson(4, 0);
}

static void test_not_utf8_and_nan(void **state)
{
	char *got = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&got, &len);
	struct jsonw w;

	(void)state;
	assert_non_null(f);
	jw_init(&w, f, 0, 0);
	jw_arr(&w);
	jw_str(&w, "a\xff"
		   "b\xc3");
	jw_str(&w, "a\xc3\xa9\xff");
	jw_real(&w, NAN);
	jw_num(&w, INFINITY);
	jw_num(&w, 2.5);
	jw_arr_end(&w);
	fclose(f);
	assert_string_equal(got, "[\"a\\\\xffb\\\\xc3\",\"a\xc3\xa9\\\\xff\",null,null,2.5]");
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_compact),
	    cmocka_unit_test(test_indented),
	    cmocka_unit_test(test_not_utf8_and_nan),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
