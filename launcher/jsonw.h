/* jsonw: a small streaming JSON writer for outputs built without jansson
 * (render_perfetto, compare). It writes what jansson's json_dumpf writes for
 * the same values: compact or indented layout, reals as "%.17g" (or a
 * given precision) with ".0" added to integral ones and the exponent's
 * '+' and leading zeros dropped, strings with ", \, and control characters
 * escaped. A string that is not UTF-8 keeps its other bytes as the four
 * characters \xNN, the byte escape of docs/timeline.md (json_bytes). A
 * non-finite number is written as null (JSON has no NaN). */
#ifndef TTS_JSONW_H
#define TTS_JSONW_H

#include <stdbool.h>
#include <stdio.h>

/* a loaded timeline nests at most TIMELINE_MAX_DEPTH (32) levels below its root */
#define JW_MAX_DEPTH 64

struct jsonw {
	FILE *out;
	int indent;    /* spaces per level; 0: compact */
	int precision; /* significant digits of reals; 0: 17 */
	int depth;
	bool started[JW_MAX_DEPTH]; /* the container at that depth has an element */
	bool after_key;		    /* a key was written: its value comes next */
};

/* indent 0: {"a":1,"b":[2]}; indent n: one member per line, n spaces a level,
 * "key": value. */
void jw_init(struct jsonw *w, FILE *out, int indent, int precision);

void jw_obj(struct jsonw *w);
void jw_obj_end(struct jsonw *w);
void jw_arr(struct jsonw *w);
void jw_arr_end(struct jsonw *w);
void jw_key(struct jsonw *w, const char *key);

/* NULL is null */
void jw_str(struct jsonw *w, const char *s);
void jw_int(struct jsonw *w, long long v);
/* always a real: 2.0, not 2 */
void jw_real(struct jsonw *w, double v);
/* an integral value below 2^53 as an integer, else a real */
void jw_num(struct jsonw *w, double v);
void jw_bool(struct jsonw *w, bool v);
void jw_null(struct jsonw *w);
/* a value written elsewhere (by a jsonw of the same layout), as it is */
void jw_raw(struct jsonw *w, const char *json);

/* key and value in one call */
void jw_kstr(struct jsonw *w, const char *key, const char *s);
void jw_kint(struct jsonw *w, const char *key, long long v);
void jw_kreal(struct jsonw *w, const char *key, double v);
void jw_knum(struct jsonw *w, const char *key, double v);

/* 0, or -1 when the stream had an error */
int jw_error(const struct jsonw *w);

#endif
