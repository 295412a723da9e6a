/* timeline_sections: the records of timeline_sections.h, their JSON
 * decoder (a loaded file, a list set in the tree) and their writer, the
 * whole document through jsonw with the records at their placeholders.
 * One table per list names its keys in the order the model writes them
 * (timeline_files.c's files and missing_paths, timeline_build.c's and
 * imports.c's python.imports). */
#include "timeline_sections.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jsonw.h"
#include "util.h"

/* a key's JSON type in a record */
enum {
	TK_ABSENT,
	TK_NULL,
	TK_INT,
	TK_REAL,
	TK_STR,
	TK_TRUE,
	TK_FALSE,
};

/* a field: how the live model writes it (tl_rec_seal), and so what a
 * loaded value may be to be written back from the field */
enum ftype {
	F_STR,	    /* string, NULL: null */
	F_INT,	    /* integer, TL_NONE: null */
	F_REAL,	    /* real, TL_NONE: null */
	F_FLAG,	    /* true/false, -1: null */
	F_FLAG_OPT, /* true/false, -1: absent */
};

struct field {
	const char *key;
	unsigned char type;
	size_t off;
};

struct desc {
	const char *name; /* the tree's key */
	size_t size, kind_off, raw_off, sort_off;
	const struct field *f;
	size_t nf;
};

#define FD(T, key, type, member)                                                                   \
	{                                                                                          \
		key, type, offsetof(T, member)                                                     \
	}

static const struct field file_fields[TL_FILE_KEYS] = {
    FD(struct tl_file, "path", F_STR, path),
    FD(struct tl_file, "class", F_STR, class),
    FD(struct tl_file, "opens", F_INT, opens),
    FD(struct tl_file, "failed_opens", F_INT, failed_opens),
    FD(struct tl_file, "errno", F_STR, errno_name),
    FD(struct tl_file, "bytes_read", F_INT, bytes_read),
    FD(struct tl_file, "bytes_written", F_INT, bytes_written),
    FD(struct tl_file, "reads", F_INT, reads),
    FD(struct tl_file, "writes", F_INT, writes),
    FD(struct tl_file, "mmaps", F_INT, mmaps),
    FD(struct tl_file, "mmap_bytes", F_INT, mmap_bytes),
    FD(struct tl_file, "faults", F_INT, faults),
    FD(struct tl_file, "size", F_INT, size),
    FD(struct tl_file, "pid", F_INT, pid),
    FD(struct tl_file, "first_ms", F_REAL, first_ms),
    FD(struct tl_file, "last_ms", F_REAL, last_ms),
    FD(struct tl_file, "faults_after_ready", F_INT, faults_after_ready),
    FD(struct tl_file, "major_faults", F_INT, major_faults),
    FD(struct tl_file, "first_fault_ms", F_REAL, first_fault_ms),
    FD(struct tl_file, "last_fault_ms", F_REAL, last_fault_ms),
    FD(struct tl_file, "write_errors", F_INT, write_errors),
    FD(struct tl_file, "write_errno", F_STR, write_errno),
};

static const struct field missing_fields[TL_MISSING_KEYS] = {
    FD(struct tl_missing, "path", F_STR, path),
    FD(struct tl_missing, "attempts", F_INT, attempts),
    FD(struct tl_missing, "errno", F_STR, errno_name),
    FD(struct tl_missing, "first_ms", F_REAL, first_ms),
    FD(struct tl_missing, "last_ms", F_REAL, last_ms),
    FD(struct tl_missing, "pid", F_INT, pid),
    FD(struct tl_missing, "class", F_STR, class),
};

static const struct field import_fields[TL_IMPORT_KEYS] = {
    FD(struct tl_import, "name", F_STR, name),
    FD(struct tl_import, "pid", F_INT, pid),
    FD(struct tl_import, "start_ms", F_REAL, start_ms),
    FD(struct tl_import, "end_ms", F_REAL, end_ms),
    FD(struct tl_import, "dur_ms", F_REAL, dur_ms),
    FD(struct tl_import, "depth", F_INT, depth),
    FD(struct tl_import, "found", F_FLAG, found),
    FD(struct tl_import, "derived", F_FLAG_OPT, derived),
};

#define DESC(T, name, fields, sort)                                                                \
	{                                                                                          \
		name, sizeof(T), offsetof(T, kind_), offsetof(T, raw_), offsetof(T, sort), fields, \
		    sizeof(fields) / sizeof(fields[0])                                             \
	}

static const struct desc descs[TLS_N] = {
    [TLS_FILES] = DESC(struct tl_file, "files", file_fields, first_ms),
    [TLS_MISSING] = DESC(struct tl_missing, "missing_paths", missing_fields, first_ms),
    [TLS_IMPORTS] = DESC(struct tl_import, "imports", import_fields, start_ms),
};

static double *fnum(void *rec, const struct field *f) { return (double *)((char *)rec + f->off); }

static const char **fstr(void *rec, const struct field *f)
{
	return (const char **)((char *)rec + f->off);
}

static int *fflag(void *rec, const struct field *f) { return (int *)((char *)rec + f->off); }

static unsigned char *kinds(void *rec, const struct desc *d)
{
	return (unsigned char *)rec + d->kind_off;
}

static const json_t **raw_of(void *rec, const struct desc *d)
{
	return (const json_t **)((char *)rec + d->raw_off);
}

static void *rec_at(const struct tl_sections *s, enum tl_sec_id id, size_t i)
{
	return (char *)s->l[id].rec + i * descs[id].size;
}

char *tl_strdup(const char *s)
{
	size_t n, o;

	if (!s)
		return NULL;
	n = strlen(s);
	/* json_bytes' escape: a byte that is not UTF-8 as the text \xNN */
	return utf8_valid(s, n) ? strdup(s) : utf8_escape_bytes(s, n, &o);
}

static void rec_release(void *rec, const struct desc *d)
{
	for (size_t k = 0; k < d->nf; k++)
		if (d->f[k].type == F_STR)
			free((void *)*fstr(rec, &d->f[k]));
	json_decref((json_t *)*raw_of(rec, d));
}

int tl_sections_init(struct tl_sections *s, bool placeholders)
{
	memset(s, 0, sizeof(*s));
	for (int i = 0; placeholders && i < TLS_N; i++)
		if (!(s->ph[i] = json_array())) {
			tl_sections_free(s);
			return -1;
		}
	return 0;
}

void tl_list_clear(struct tl_sections *s, enum tl_sec_id id)
{
	for (size_t i = 0; i < s->l[id].n; i++)
		rec_release(rec_at(s, id, i), &descs[id]);
	s->l[id].n = 0;
}

void tl_sections_free(struct tl_sections *s)
{
	if (!s)
		return;
	for (int i = 0; i < TLS_N; i++) {
		tl_list_clear(s, (enum tl_sec_id)i);
		free(s->l[i].rec);
		json_decref(s->ph[i]);
	}
	memset(s, 0, sizeof(*s));
}

void *tl_list_push(struct tl_sections *s, enum tl_sec_id id)
{
	const struct desc *d = &descs[id];
	struct tl_list *l = &s->l[id];
	void *rec;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		void *n = realloc(l->rec, cap * d->size);

		if (!n)
			return NULL;
		l->rec = n;
		l->cap = cap;
	}
	rec = rec_at(s, id, l->n++);
	memset(rec, 0, d->size);
	for (size_t k = 0; k < d->nf; k++) {
		if (d->f[k].type == F_INT || d->f[k].type == F_REAL)
			*fnum(rec, &d->f[k]) = TL_NONE;
		else if (d->f[k].type == F_FLAG || d->f[k].type == F_FLAG_OPT)
			*fflag(rec, &d->f[k]) = -1;
	}
	return rec;
}

void tl_rec_seal(enum tl_sec_id id, void *rec)
{
	const struct desc *d = &descs[id];
	unsigned char *k = kinds(rec, d);

	for (size_t i = 0; i < d->nf; i++) {
		const struct field *f = &d->f[i];
		int b;

		switch (f->type) {
		case F_STR:
			k[i] = *fstr(rec, f) ? TK_STR : TK_NULL;
			break;
		case F_INT:
		case F_REAL:
			k[i] = isnan(*fnum(rec, f)) ? TK_NULL : f->type == F_INT ? TK_INT : TK_REAL;
			break;
		default:
			b = *fflag(rec, f);
			k[i] = b < 0 ? (f->type == F_FLAG ? TK_NULL : TK_ABSENT)
			       : b   ? TK_TRUE
				     : TK_FALSE;
		}
	}
}

/* ---- decoding a JSON list ---- */

/* field k of rec from v (NULL: absent), by timeline_view.h's rule; false
 * when its JSON type is not one the field writes back */
static bool decode_field(void *rec, const struct field *f, const json_t *v, unsigned char *kind)
{
	if (!v)
		*kind = TK_ABSENT;
	else if (json_is_null(v))
		*kind = TK_NULL;
	switch (f->type) {
	case F_STR:
		if (json_is_string(v)) {
			*fstr(rec, f) = strdup(json_string_value(v));
			*kind = TK_STR;
			return true;
		}
		break;
	case F_INT:
	case F_REAL:
		if (json_is_number(v)) {
			*fnum(rec, f) = json_number_value(v);
			if (json_is_real(v)) {
				*kind = TK_REAL;
				return true;
			}
			*kind = TK_INT;
			/* a double holds integers exactly to 2^53 */
			return json_integer_value(v) <= (1LL << 53) &&
			       json_integer_value(v) >= -(1LL << 53);
		}
		break;
	default:
		if (json_is_boolean(v)) {
			*fflag(rec, f) = json_is_true(v);
			*kind = json_is_true(v) ? TK_TRUE : TK_FALSE;
			return true;
		}
	}
	return !v || json_is_null(v);
}

static int absorb_one(struct tl_sections *s, enum tl_sec_id id, const json_t *e)
{
	const struct desc *d = &descs[id];
	void *rec = tl_list_push(s, id);
	bool canon = json_is_object(e);
	size_t next = 0;
	const char *key;
	json_t *v;

	if (!rec)
		return -1;
	/* its keys a subsequence of the table's, in its order */
	if (canon) {
		json_object_foreach ((json_t *)e, key, v) {
			while (next < d->nf && strcmp(d->f[next].key, key))
				next++;
			if (next == d->nf) {
				canon = false;
				break;
			}
			next++;
		}
	}
	for (size_t k = 0; k < d->nf; k++) {
		v = json_is_object(e) ? json_object_get(e, d->f[k].key) : NULL;
		if (!decode_field(rec, &d->f[k], v, &kinds(rec, d)[k]))
			canon = false;
		if (d->f[k].type == F_STR && json_is_string(v) && !*fstr(rec, &d->f[k]))
			return -1; /* out of memory */
	}
	if (!canon)
		*raw_of(rec, d) = json_incref((json_t *)e);
	return 0;
}

int tl_list_absorb(struct tl_sections *s, enum tl_sec_id id, const json_t *arr)
{
	const json_t *e;
	size_t i;

	json_array_foreach (arr, i, e)
		if (absorb_one(s, id, e) < 0)
			return -1;
	return 0;
}

static const struct field *field_of(const struct desc *d, const char *key)
{
	for (size_t k = 0; key && k < d->nf; k++)
		if (!strcmp(d->f[k].key, key))
			return &d->f[k];
	return NULL;
}

int tl_rec_set_new(struct tl_sections *s, enum tl_sec_id id, size_t i, const char *key, json_t *v)
{
	const struct desc *d = &descs[id];
	const struct field *f = field_of(d, key);
	unsigned char kind = TK_ABSENT;
	void *rec;
	int rc = -1;

	if (!f || i >= s->l[id].n || *raw_of((rec = rec_at(s, id, i)), d))
		goto out;
	if (f->type == F_STR) {
		free((void *)*fstr(rec, f));
		*fstr(rec, f) = NULL;
	} else if (f->type == F_INT || f->type == F_REAL) {
		*fnum(rec, f) = TL_NONE;
	} else {
		*fflag(rec, f) = -1;
	}
	if (decode_field(rec, f, v, &kind)) {
		kinds(rec, d)[f - d->f] = kind;
		rc = 0;
	}
out:
	json_decref(v);
	return rc;
}

/* ---- the records as JSON again ---- */

static json_t *rec_json(const struct desc *d, void *rec)
{
	const unsigned char *k = kinds(rec, d);
	json_t *o;

	if (*raw_of(rec, d))
		return json_incref((json_t *)*raw_of(rec, d));
	o = json_object();
	for (size_t i = 0; o && i < d->nf; i++) {
		const struct field *f = &d->f[i];
		json_t *v;

		switch (k[i]) {
		case TK_ABSENT:
			continue;
		case TK_INT:
			v = json_integer((json_int_t)*fnum(rec, f));
			break;
		case TK_REAL:
			v = json_real(*fnum(rec, f));
			break;
		case TK_STR:
			v = json_string(*fstr(rec, f));
			break;
		case TK_TRUE:
		case TK_FALSE:
			v = json_boolean(k[i] == TK_TRUE);
			break;
		default:
			v = json_null();
		}
		json_object_set_new(o, f->key, v);
	}
	return o;
}

json_t *tl_list_json(const struct tl_sections *s, enum tl_sec_id id)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < s->l[id].n; i++)
		json_array_append_new(a, rec_json(&descs[id], rec_at(s, id, i)));
	return a;
}

/* ---- the lists in the tree ---- */

static json_t *list_parent(json_t *root, enum tl_sec_id id)
{
	json_t *p = id == TLS_IMPORTS ? json_object_get(root, "python") : root;

	return json_is_object(p) ? p : NULL;
}

void tl_sections_place(struct tl_sections *s, enum tl_sec_id id, json_t *root)
{
	json_t *p = list_parent(root, id);

	if (p && s->ph[id])
		json_object_set(p, descs[id].name, s->ph[id]);
}

void tl_sections_unplace(struct tl_sections *s, json_t *root)
{
	for (int i = 0; i < TLS_N; i++) {
		json_t *p = list_parent(root, (enum tl_sec_id)i);

		if (s->ph[i] && p && json_object_get(p, descs[i].name) == s->ph[i])
			json_object_set_new(p, descs[i].name, tl_list_json(s, (enum tl_sec_id)i));
	}
}

void tl_sections_sync(struct tl_sections *s, json_t *root)
{
	for (int i = 0; i < TLS_N; i++) {
		enum tl_sec_id id = (enum tl_sec_id)i;
		json_t *p = list_parent(root, id);
		json_t *cur = p ? json_object_get(p, descs[id].name) : NULL;

		if (!s->ph[id])
			continue;
		if (cur == s->ph[id]) {
			/* appended to the placeholder: after the records */
			if (json_array_size(cur)) {
				tl_list_absorb(s, id, cur);
				json_array_clear(cur);
			}
			continue;
		}
		tl_list_clear(s, id);
		if (json_is_array(cur)) {
			tl_list_absorb(s, id, cur);
			json_object_set(p, descs[id].name, s->ph[id]);
		}
	}
}

int tl_sections_decode(const json_t *root, struct tl_sections *tmp)
{
	tl_sections_init(tmp, false);
	for (int i = 0; i < TLS_N; i++) {
		json_t *p = list_parent((json_t *)root, (enum tl_sec_id)i);
		json_t *arr = p ? json_object_get(p, descs[i].name) : NULL;

		if (json_is_array(arr) && tl_list_absorb(tmp, (enum tl_sec_id)i, arr) < 0) {
			tl_sections_free(tmp);
			return -1;
		}
	}
	return 0;
}

/* ---- sorting ---- */

struct sort_item {
	double key;
	size_t idx;
};

static int by_key(const void *a, const void *b)
{
	const struct sort_item *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

void tl_list_sort(struct tl_sections *s, enum tl_sec_id id)
{
	const struct desc *d = &descs[id];
	struct tl_list *l = &s->l[id];
	struct sort_item *v;
	char *out;

	if (l->n < 2)
		return;
	v = malloc(l->n * sizeof(*v));
	out = malloc(l->cap * d->size);
	if (!v || !out) {
		free(v);
		free(out);
		return;
	}
	for (size_t i = 0; i < l->n; i++) {
		double k = *(double *)((char *)rec_at(s, id, i) + d->sort_off);

		v[i] = (struct sort_item){isnan(k) ? 0 : k, i};
	}
	qsort(v, l->n, sizeof(*v), by_key);
	for (size_t i = 0; i < l->n; i++)
		memcpy(out + i * d->size, rec_at(s, id, v[i].idx), d->size);
	free(l->rec);
	l->rec = out;
	free(v);
}

/* ---- writing ---- */

static void write_value(struct jsonw *w, const json_t *v, const struct tl_sections *s);

static void write_rec(struct jsonw *w, const struct desc *d, void *rec)
{
	const unsigned char *k = kinds(rec, d);

	if (*raw_of(rec, d)) {
		write_value(w, *raw_of(rec, d), NULL);
		return;
	}
	jw_obj(w);
	for (size_t i = 0; i < d->nf; i++) {
		const struct field *f = &d->f[i];

		if (k[i] == TK_ABSENT)
			continue;
		jw_key(w, f->key);
		switch (k[i]) {
		case TK_INT:
			jw_int(w, (long long)*fnum(rec, f));
			break;
		case TK_REAL:
			jw_real(w, *fnum(rec, f));
			break;
		case TK_STR:
			jw_str(w, *fstr(rec, f));
			break;
		case TK_TRUE:
		case TK_FALSE:
			jw_bool(w, k[i] == TK_TRUE);
			break;
		default:
			jw_null(w);
		}
	}
	jw_obj_end(w);
}

static void write_list(struct jsonw *w, const struct tl_sections *s, enum tl_sec_id id)
{
	jw_arr(w);
	for (size_t i = 0; i < s->l[id].n; i++)
		write_rec(w, &descs[id], rec_at(s, id, i));
	jw_arr_end(w);
}

static void write_value(struct jsonw *w, const json_t *v, const struct tl_sections *s)
{
	const char *k;
	json_t *m;
	size_t i;

	for (int id = 0; s && id < TLS_N; id++)
		if (s->ph[id] && v == s->ph[id]) {
			write_list(w, s, (enum tl_sec_id)id);
			return;
		}
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		jw_obj(w);
		json_object_foreach ((json_t *)v, k, m) {
			jw_key(w, k);
			write_value(w, m, s);
		}
		jw_obj_end(w);
		break;
	case JSON_ARRAY:
		jw_arr(w);
		json_array_foreach (v, i, m)
			write_value(w, m, s);
		jw_arr_end(w);
		break;
	case JSON_STRING:
		jw_str(w, json_string_value(v));
		break;
	case JSON_INTEGER:
		jw_int(w, json_integer_value(v));
		break;
	case JSON_REAL:
		jw_real(w, json_real_value(v));
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		jw_bool(w, json_is_true(v));
		break;
	default:
		jw_null(w);
	}
}

int tl_json_write(const json_t *root, const struct tl_sections *s, FILE *out, int indent,
		  int precision)
{
	struct jsonw w;

	jw_init(&w, out, indent, precision);
	write_value(&w, root, s);
	return jw_error(&w);
}

int tl_list_write(const struct tl_sections *s, enum tl_sec_id id, FILE *out, int indent,
		  int precision)
{
	struct jsonw w;

	jw_init(&w, out, indent, precision);
	write_list(&w, s, id);
	return jw_error(&w);
}
