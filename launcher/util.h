/* util: small helpers several modules share: fields of the timeline model
 * (a missing or mistyped field reads as 0 / NULL) and path tests. */
#ifndef TTS_UTIL_H
#define TTS_UTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* FNV-1a, 64 bits, over n bytes at p, on from h (FNV1A_START for a
 * first call): names and cache keys, not secrets */
#define FNV1A_START 0xcbf29ce484222325ull
uint64_t fnv1a(uint64_t h, const void *p, size_t n);
double jnum(const json_t *o, const char *key);
const char *jstr(const json_t *o, const char *key);
bool str_ends_with(const char *s, const char *suffix);
/* Is path dir itself or inside it (dir may end in '/')? */
bool path_under(const char *path, const char *dir);

/* path joined to base when relative (alone when base is NULL or ""),
 * normalised lexically: "." dropped, ".." resolved, no symlinks followed
 * (traced names are what the process asked for). Always absolute; a NULL
 * path gives "?". */
void path_resolve(const char *base, const char *path, char *out, size_t len);
/* The last component of path ("?" for NULL). */
const char *base_name(const char *path);

/* "512 B", "1.5 MiB": sizes in messages and findings. */
void fmt_bytes(char *buf, size_t len, double bytes);

/* An index of the objects of arr by their string member key: a new object
 * mapping each value to its element, the first (last: the last) of equal
 * ones; elements without the member are left out. One pass, so lookups in
 * a loop over another list stay linear (a hostile timeline may hold
 * 20,000 of each). */
json_t *json_index(const json_t *arr, const char *key, bool last);

/* ---- bytes from outside: kernel strings, loaded timelines ---- */

/* Length (1-4) of the well-formed UTF-8 character at s[0..n), 0 when the
 * bytes there are not one (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF). */
size_t utf8_char_len(const char *s, size_t n);
/* Does s[0..n) hold only well-formed UTF-8? */
bool utf8_valid(const char *s, size_t n);
/* The longest prefix of s, at most max bytes, that ends on a character
 * boundary (a label cut inside a character is invalid UTF-8). */
size_t utf8_prefix_len(const char *s, size_t max);
/* Cut a trailing incomplete character off s in place (after a truncating
 * snprintf). */
void utf8_trim(char *s);

/* s[0..n) as a NUL-terminated string (malloc'd, its length in *len): its
 * well-formed UTF-8 as it is, each other byte as the four characters \xNN
 * (lower-case hex), the byte escape of docs/timeline.md; NULL when out of
 * memory. */
char *utf8_escape_bytes(const char *s, size_t n, size_t *len);

/* A JSON string of the bytes s[0..max) (up to a NUL): one helper for every
 * kernel string that becomes JSON (paths, argv, comm, peers). Well-formed
 * UTF-8 is kept as it is; each other byte becomes the four characters
 * \xNN (lower-case hex), the byte escape of docs/timeline.md, so a path
 * that is not UTF-8 is kept, not dropped (jansson refuses it). NULL only
 * when out of memory; a NULL s gives null. */
json_t *json_bytes(const char *s, size_t max);
/* json_bytes of a NUL-terminated string. */
json_t *json_text(const char *s);

/* s for a terminal (text reports, summaries): control characters (C0, DEL,
 * C1) and bytes that are not UTF-8 written as \xNN (C1 as \u00NN), so a
 * path cannot move the cursor, ring the bell or retitle the window. Returns
 * s itself when nothing needs escaping, else buf (len bytes, cut at a
 * character boundary with "..." when it does not fit). "" for NULL. */
const char *text_esc(const char *s, char *buf, size_t len);
/* The same escape, written to out with no length limit. */
void fput_esc(const char *s, FILE *out);

#endif
