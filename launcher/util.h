/* util: small helpers several modules share: fields of the timeline model
 * (a missing or mistyped field reads as 0 / NULL) and path tests. */
#ifndef TTS_UTIL_H
#define TTS_UTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

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

#endif
