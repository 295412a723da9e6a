#include "util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double jnum(const json_t *o, const char *key) { return json_number_value(json_object_get(o, key)); }

const char *jstr(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

json_t *json_index(const json_t *arr, const char *key, bool last)
{
	json_t *idx = json_object(), *e;
	size_t i;

	json_array_foreach (arr, i, e) {
		const char *k = json_string_value(json_object_get(e, key));

		if (idx && k && (last || !json_object_get(idx, k)))
			json_object_set(idx, k, e);
	}
	return idx;
}

bool str_ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

bool path_under(const char *path, const char *dir)
{
	size_t n = dir ? strlen(dir) : 0;

	while (n > 1 && dir[n - 1] == '/')
		n--;
	return n && !strncmp(path, dir, n) && (path[n] == '/' || !path[n]);
}

void fmt_bytes(char *buf, size_t len, double b)
{
	const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int i = 0;

	while (b >= 1024 && i < 4) {
		b /= 1024;
		i++;
	}
	snprintf(buf, len, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

void path_resolve(const char *base, const char *path, char *out, size_t len)
{
	char tmp[PATH_MAX * 2], *parts[512], *save = NULL, *tok;
	size_t n = 0, o = 0;

	if (!path) {
		snprintf(out, len, "?");
		return;
	}
	if (path[0] == '/' || !base || !*base)
		snprintf(tmp, sizeof(tmp), "%s", path);
	else
		snprintf(tmp, sizeof(tmp), "%s/%s", base, path);
	for (tok = strtok_r(tmp, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
		if (!strcmp(tok, "."))
			continue;
		if (!strcmp(tok, "..")) {
			if (n)
				n--;
			continue;
		}
		if (n < sizeof(parts) / sizeof(parts[0]))
			parts[n++] = tok;
	}
	out[0] = 0;
	for (size_t i = 0; i < n && o + 1 < len; i++) {
		int w = snprintf(out + o, len - o, "/%s", parts[i]);

		if (w < 0 || (size_t)w >= len - o)
			break;
		o += (size_t)w;
	}
	if (!n)
		snprintf(out, len, "/");
}

const char *base_name(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;

	return s ? s + 1 : path ? path : "?";
}

/* ---- bytes from outside ---- */

size_t utf8_char_len(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len;

	if (!n)
		return 0;
	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4;
	else
		return 0; /* a continuation byte, C0/C1 (overlong) or F5..FF */
	/* the second byte's range rules out overlong forms, surrogates
	 * (ED A0..BF) and code points above U+10FFFF (F4 90..) */
	if (p[0] == 0xe0)
		lo = 0xa0;
	else if (p[0] == 0xed)
		hi = 0x9f;
	else if (p[0] == 0xf0)
		lo = 0x90;
	else if (p[0] == 0xf4)
		hi = 0x8f;
	if (n < len || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return len;
}

bool utf8_valid(const char *s, size_t n)
{
	for (size_t i = 0, l; i < n; i += l)
		if (!(l = utf8_char_len(s + i, n - i)))
			return false;
	return true;
}

size_t utf8_prefix_len(const char *s, size_t max)
{
	size_t l = strlen(s);

	if (l <= max)
		return l;
	while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
		max--;
	return max;
}

void utf8_trim(char *s)
{
	size_t l = strlen(s), k = l;

	/* back to the lead byte of the last character, if it is cut short */
	while (k > 0 && l - k < 4 && ((unsigned char)s[k - 1] & 0xc0) == 0x80)
		k--;
	if (k > 0 && (unsigned char)s[k - 1] >= 0xc0 && !utf8_char_len(s + k - 1, l - k + 1))
		s[k - 1] = 0;
}

char *utf8_escape_bytes(const char *s, size_t n, size_t *len)
{
	char *buf = malloc(4 * n + 1);
	size_t o = 0;

	if (!buf)
		return NULL;
	for (size_t i = 0, l; i < n; i += l) {
		l = utf8_char_len(s + i, n - i);
		if (l) {
			memcpy(buf + o, s + i, l);
			o += l;
		} else {
			o += (size_t)sprintf(buf + o, "\\x%02x", (unsigned char)s[i]);
			l = 1;
		}
	}
	buf[o] = 0;
	*len = o;
	return buf;
}

json_t *json_bytes(const char *s, size_t max)
{
	size_t n, o;
	char *buf;
	json_t *j;

	if (!s)
		return json_null();
	n = strnlen(s, max);
	if (utf8_valid(s, n))
		return json_stringn(s, n);
	buf = utf8_escape_bytes(s, n, &o);
	if (!buf)
		return NULL;
	j = json_stringn(buf, o);
	free(buf);
	return j;
}

json_t *json_text(const char *s) { return json_bytes(s, s ? strlen(s) : 0); }

/* The escape of the character at s (l bytes, 0: not UTF-8) into e, or 0
 * when it is printed as it is. */
static int esc_char(const unsigned char *s, size_t l, char e[8])
{
	if (!l || (l == 1 && (s[0] < 0x20 || s[0] == 0x7f)))
		return snprintf(e, 8, "\\x%02x", s[0]);
	if (l == 2 && s[0] == 0xc2 && s[1] < 0xa0) /* U+0080..U+009F: C1 controls */
		return snprintf(e, 8, "\\u00%02x", s[1]);
	return 0;
}

const char *text_esc(const char *s, char *buf, size_t len)
{
	size_t n, o = 0, need = 0, room;
	char e[8];

	if (!s)
		return "";
	n = strlen(s);
	for (size_t i = 0, l; i < n; i += l ? l : 1) {
		int w;

		l = utf8_char_len(s + i, n - i);
		w = esc_char((const unsigned char *)s + i, l, e);
		need += w ? (size_t)w : l;
	}
	if (need == n)
		return s; /* nothing escaped */
	if (!len)
		return "";
	/* what fits: everything, or as much as leaves room for "..." */
	room = need < len ? need : len > 4 ? len - 4 : 0;
	for (size_t i = 0, l; i < n; i += l) {
		int w;
		size_t k;

		l = utf8_char_len(s + i, n - i);
		w = esc_char((const unsigned char *)s + i, l, e);
		if (!l)
			l = 1;
		k = w ? (size_t)w : l;
		if (o + k > room)
			break;
		memcpy(buf + o, w ? e : s + i, k);
		o += k;
	}
	buf[o] = 0;
	if (need >= len && len > 4)
		strcat(buf, "...");
	return buf;
}

void fput_esc(const char *s, FILE *out)
{
	size_t n = s ? strlen(s) : 0;

	for (size_t i = 0, l; i < n; i += l) {
		char e[8];
		int w;

		l = utf8_char_len(s + i, n - i);
		w = esc_char((const unsigned char *)s + i, l, e);
		if (!l)
			l = 1;
		if (w)
			fwrite(e, 1, (size_t)w, out);
		else
			fwrite(s + i, 1, l, out);
	}
}

uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}
