/* jsonw: the writer of jsonw.h. Layout as jansson's dump: an element is
 * preceded by "," when it is not its container's first, then (indented)
 * a newline and the level's spaces; a container that got elements closes
 * on its own line; an empty one is "{}" or "[]". */
#include <math.h>
#include <string.h>

#include "fmtg.h"
#include "jsonw.h"
/* util.h names jansson's type in prototypes this file does not use; it is
 * compiled without jansson (the Makefile's NO_JANSSON) */
typedef struct json_t json_t;
#include "util.h"

void jw_init(struct jsonw *w, FILE *out, int indent, int precision)
{
	memset(w, 0, sizeof(*w));
	w->out = out;
	w->indent = indent;
	w->precision = precision;
}

/* The writer is the stream's only user while it writes: the unlocked
 * stdio calls (a timeline of 1 MiB is ~10^6 characters, each fputc a
 * lock taken and given back) */
static void put(FILE *out, char c) { fputc_unlocked(c, out); }

static void puts_n(FILE *out, const char *s, size_t n) { fwrite_unlocked(s, 1, n, out); }

static void put_s(FILE *out, const char *s) { puts_n(out, s, strlen(s)); }

static void newline(struct jsonw *w, int depth)
{
	static const char spaces[] = "                                ";
	int n;

	if (w->indent <= 0)
		return;
	put(w->out, '\n');
	for (n = depth * w->indent; n > 0; n -= (int)sizeof(spaces) - 1)
		puts_n(w->out, spaces,
		       n < (int)sizeof(spaces) - 1 ? (size_t)n : sizeof(spaces) - 1);
}

/* before any value: the separator and indentation its place needs */
static void value_begin(struct jsonw *w)
{
	if (w->after_key) {
		w->after_key = false;
		return;
	}
	if (!w->depth)
		return;
	if (w->started[w->depth])
		put(w->out, ',');
	w->started[w->depth] = true;
	newline(w, w->depth);
}

static void container_open(struct jsonw *w, char c)
{
	value_begin(w);
	put(w->out, c);
	if (w->depth + 1 < JW_MAX_DEPTH)
		w->depth++;
	w->started[w->depth] = false;
}

static void container_close(struct jsonw *w, char c)
{
	if (w->started[w->depth])
		newline(w, w->depth - 1);
	put(w->out, c);
	if (w->depth > 0)
		w->depth--;
}

void jw_obj(struct jsonw *w) { container_open(w, '{'); }
void jw_obj_end(struct jsonw *w) { container_close(w, '}'); }
void jw_arr(struct jsonw *w) { container_open(w, '['); }
void jw_arr_end(struct jsonw *w) { container_close(w, ']'); }

/* a byte written as it is: printable ASCII but for " and \ */
static bool plain(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

static void string(FILE *out, const char *s)
{
	size_t n = strlen(s);

	put(out, '"');
	for (size_t i = 0, l; i < n; i += l) {
		unsigned char c = (unsigned char)s[i];

		if (plain(c)) {
			/* the run of plain bytes (and well-formed UTF-8) at once */
			for (l = 1; i + l < n; l++) {
				unsigned char d = (unsigned char)s[i + l];
				size_t k;

				if (plain(d))
					continue;
				if (d < 0x80 || !(k = utf8_char_len(s + i + l, n - i - l)))
					break;
				l += k - 1;
			}
			puts_n(out, s + i, l);
			continue;
		}
		l = utf8_char_len(s + i, n - i);
		if (!l) {
			/* not UTF-8: the byte as the text \xNN (its backslash escaped) */
			fprintf(out, "\\\\x%02x", c);
			l = 1;
		} else if (c == '"' || c == '\\') {
			put(out, '\\');
			put(out, (char)c);
		} else if (c == '\b') {
			put_s(out, "\\b");
		} else if (c == '\f') {
			put_s(out, "\\f");
		} else if (c == '\n') {
			put_s(out, "\\n");
		} else if (c == '\r') {
			put_s(out, "\\r");
		} else if (c == '\t') {
			put_s(out, "\\t");
		} else if (c < 0x20) {
			fprintf(out, "\\u%04X", c);
		} else {
			puts_n(out, s + i, l);
		}
	}
	put(out, '"');
}

void jw_key(struct jsonw *w, const char *key)
{
	value_begin(w);
	string(w->out, key ? key : "");
	put_s(w->out, w->indent > 0 ? ": " : ":");
	w->after_key = true;
}

void jw_str(struct jsonw *w, const char *s)
{
	if (!s) {
		jw_null(w);
		return;
	}
	value_begin(w);
	string(w->out, s);
}

void jw_int(struct jsonw *w, long long v)
{
	char buf[24];

	value_begin(w);
	puts_n(w->out, buf, (size_t)snprintf(buf, sizeof(buf), "%lld", v));
}

void jw_real(struct jsonw *w, double v)
{
	char buf[64], *e;
	size_t len;

	if (!isfinite(v)) {
		jw_null(w);
		return;
	}
	value_begin(w);
	/* %.*g without printf's multi-precision conversion (fmtg.h) */
	len = (size_t)fmt_g(buf, sizeof(buf) - 3, w->precision ? w->precision : 17, v);
	if (!strchr(buf, '.') && !strchr(buf, 'e'))
		strcpy(buf + len, ".0");
	/* 1e+20 -> 1e20, 1e-05 -> 1e-5 */
	e = strchr(buf, 'e');
	if (e) {
		char *start = e + 1, *end = start + 1;

		if (*start == '-')
			start++;
		while (*end == '0')
			end++;
		if (end != start)
			memmove(start, end, strlen(end) + 1);
	}
	put_s(w->out, buf);
}

void jw_num(struct jsonw *w, double v)
{
	if (isfinite(v) && v == floor(v) && fabs(v) < 9007199254740992.0)
		jw_int(w, (long long)v);
	else
		jw_real(w, v);
}

void jw_bool(struct jsonw *w, bool v)
{
	value_begin(w);
	put_s(w->out, v ? "true" : "false");
}

void jw_null(struct jsonw *w)
{
	value_begin(w);
	put_s(w->out, "null");
}

void jw_raw(struct jsonw *w, const char *json)
{
	value_begin(w);
	put_s(w->out, json);
}

void jw_kstr(struct jsonw *w, const char *key, const char *s)
{
	jw_key(w, key);
	jw_str(w, s);
}

void jw_kint(struct jsonw *w, const char *key, long long v)
{
	jw_key(w, key);
	jw_int(w, v);
}

void jw_kreal(struct jsonw *w, const char *key, double v)
{
	jw_key(w, key);
	jw_real(w, v);
}

void jw_knum(struct jsonw *w, const char *key, double v)
{
	jw_key(w, key);
	jw_num(w, v);
}

int jw_error(const struct jsonw *w) { return ferror(w->out) ? -1 : 0; }
