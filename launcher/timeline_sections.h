/* timeline_sections: the model's three big lists, files[], missing_paths[]
 * and python.imports[], held as C records (timeline_view.h's struct
 * tl_file, tl_missing, tl_import), never as a jansson tree: a simulator's
 * start has ~2000 files of 22 keys, ~6 MiB as jansson objects, ~0.4 MiB
 * as records. The tree holds a placeholder (an empty array, this module's)
 * where each list goes; timeline_write and timeline_dump write the tree
 * with the records spliced in at their placeholders (tl_json_write), in
 * the key order and number formatting jansson's dump gives. A list a
 * module sets in the tree (or appends to the placeholder) is taken over
 * into records by the next tl_sections_sync, so a tree built by hand
 * (tests, an older module) reads the same.
 *
 * Each record keeps each key's JSON type (absent, null, integer, real...);
 * an entry of a loaded file that the fields cannot write back as it was
 * (keys in another order, an unknown key, a mistyped value, an integer
 * past 2^53) keeps its JSON too, for writing only: readers read the fields
 * (timeline_view.h's missing-field rule) either way. */
#ifndef TTS_TIMELINE_SECTIONS_H
#define TTS_TIMELINE_SECTIONS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "timeline_view.h"

enum tl_sec_id { TLS_FILES, TLS_MISSING, TLS_IMPORTS, TLS_N };

struct tl_list {
	void *rec; /* struct tl_file, tl_missing or tl_import; strings owned */
	size_t n, cap;
};

struct tl_sections {
	struct tl_list l[TLS_N];
	json_t *ph[TLS_N]; /* the placeholders; NULL: not placed (a view's copy) */
};

#define TLS_FILES_OF(s)	  ((struct tl_file *)(s)->l[TLS_FILES].rec)
#define TLS_MISSING_OF(s) ((struct tl_missing *)(s)->l[TLS_MISSING].rec)
#define TLS_IMPORTS_OF(s) ((struct tl_import *)(s)->l[TLS_IMPORTS].rec)

/* placeholders: with them for a model, without for a view's own copy; 0,
 * or -1 when out of memory */
int tl_sections_init(struct tl_sections *s, bool placeholders);
void tl_sections_free(struct tl_sections *s);

/* Drop every record of a list. */
void tl_list_clear(struct tl_sections *s, enum tl_sec_id id);
/* A new record at the end: numbers TL_NONE, strings NULL, flags -1; NULL
 * when out of memory. Set its fields (strings malloc'd: tl_strdup), then
 * tl_rec_seal it. */
void *tl_list_push(struct tl_sections *s, enum tl_sec_id id);
/* Each key's JSON type from the record's values, as the live model writes
 * it: its integers and reals, null for TL_NONE / NULL / -1 (an import's
 * `derived` left -1 is absent). */
void tl_rec_seal(enum tl_sec_id id, void *rec);
/* s as timeline_files writes it: json_text's escape of bytes that are not
 * UTF-8; NULL for NULL (or out of memory) */
char *tl_strdup(const char *s);

/* Sort a list by its first_ms (files, missing) or start_ms (imports),
 * stably; a time that is not a number sorts as 0 (timeline_sort_by). */
void tl_list_sort(struct tl_sections *s, enum tl_sec_id id);

/* Append the entries of the JSON list arr as records (any entry: what the
 * fields cannot write back keeps its JSON); 0, or -1 when out of memory. */
int tl_list_absorb(struct tl_sections *s, enum tl_sec_id id, const json_t *arr);

/* Put list id's placeholder at its place in root (files, missing_paths;
 * python.imports when root has a python object). */
void tl_sections_place(struct tl_sections *s, enum tl_sec_id id, json_t *root);

/* Set the key of record i of list id from v (NULL: the key absent), as a
 * loaded entry's value is read; takes v over. For code that edits a
 * model's list in place (the unit tests' variants of a fixture); 0, or -1
 * when there is no such record or key, the record keeps its loaded JSON,
 * or v's type is not the key's. */
int tl_rec_set_new(struct tl_sections *s, enum tl_sec_id id, size_t i, const char *key, json_t *v);

/* The list as a new JSON array, each entry as the writer writes it. */
json_t *tl_list_json(const struct tl_sections *s, enum tl_sec_id id);

/* The records back in root as JSON arrays where their placeholders are:
 * for a tree that outlives its model (timeline_free of a tree someone
 * else still holds). */
void tl_sections_unplace(struct tl_sections *s, json_t *root);

/* Bring the records up to date with root: a list found in the tree
 * instead of the placeholder replaces the records (and the placeholder
 * takes its place), entries appended to a placeholder are appended to
 * them, a list gone from the tree (deleted, null) empties them. */
void tl_sections_sync(struct tl_sections *s, json_t *root);

/* The records of root without touching it: decoded into tmp (no
 * placeholders); 0, or -1 when out of memory (tmp freed). */
int tl_sections_decode(const json_t *root, struct tl_sections *tmp);

/* root as JSON on out, the records at their placeholders (s may be NULL):
 * indent spaces a level, reals with precision digits (0: 17), as
 * json_dumpf(JSON_INDENT(indent) | JSON_REAL_PRECISION(precision)) writes
 * the tree the records were; 0, or -1 when the stream failed. */
int tl_json_write(const json_t *root, const struct tl_sections *s, FILE *out, int indent,
		  int precision);

/* One list alone as a JSON array (the unit tests' view of the writer). */
int tl_list_write(const struct tl_sections *s, enum tl_sec_id id, FILE *out, int indent,
		  int precision);

#endif
