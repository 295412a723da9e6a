/* imports: the python section: USDT imports, or imports derived from the
 * interpreter's module files when it has no probes (issue 14). */
#include "imports.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector.h"
#include "interp.h"
#include "timeline_sections.h"
#include "util.h"

/* The part of path below the library root it was found in: the last
 * site-packages or dist-packages, else the standard library's
 * lib/pythonX.Y (and its lib-dynload); NULL for any other path. */
static const char *library_rel(const char *path)
{
	const char *roots[] = {"/site-packages/", "/dist-packages/"}, *rel = NULL, *p;

	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++)
		for (p = strstr(path, roots[i]); p; p = strstr(p + 1, roots[i]))
			if (!rel || p + strlen(roots[i]) > rel)
				rel = p + strlen(roots[i]);
	if (!rel && (p = strstr(path, "/lib/python")) && (p = strchr(p + 11, '/')))
		rel = p + 1;
	if (rel && !strncmp(rel, "lib-dynload/", 12))
		rel += 12;
	return rel && *rel ? rel : NULL;
}

static bool identifier(const char *s, size_t n)
{
	if (!n || !(isalpha((unsigned char)*s) || *s == '_'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return false;
	return true;
}

bool imports_module_of(const char *path, char *out, size_t len)
{
	const char *rel = library_rel(path), *base, *p;
	size_t off = 0, stem;

	if (!rel || !len)
		return false;
	base = strrchr(rel, '/');
	base = base ? base + 1 : rel;
	stem = strcspn(base, ".");
	if (str_ends_with(base, ".pyc") || str_ends_with(base, ".py")) {
		/* parser.cpython-311.pyc, parser.cpython-311.opt-1.pyc, parser.py */
	} else if (str_ends_with(base, ".so")) {
		/* extension modules, not the libraries a package ships beside them */
		if (!strstr(base, ".cpython-") && !strstr(base, ".abi3.") &&
		    !strstr(path, "/lib-dynload/"))
			return false;
	} else {
		return false;
	}
	out[0] = '\0';
	/* the package directories, without __pycache__ */
	for (p = rel; p < base;) {
		size_t n = strcspn(p, "/");

		if (!(n == 11 && !strncmp(p, "__pycache__", 11))) {
			if (!identifier(p, n) || off + n + 2 > len)
				return false;
			off += (size_t)snprintf(out + off, len - off, "%s%.*s", off ? "." : "",
						(int)n, p);
		}
		p += n + 1;
	}
	if (stem == 8 && !strncmp(base, "__init__", 8))
		return off > 0;
	if (!identifier(base, stem) || off + stem + 2 > len)
		return false;
	snprintf(out + off, len - off, "%s%.*s", off ? "." : "", (int)stem, base);
	return true;
}

/* a module being derived: its first file's pid, its span, where it first
 * appeared among the files */
struct dmod {
	char *name;
	double pid, a, b;
	size_t first;
};

static int by_name(const void *x, const void *y)
{
	const struct dmod *p = x, *q = y;
	int c = strcmp(p->name, q->name);

	return c ? c : p->first < q->first ? -1 : p->first > q->first;
}

static int by_first(const void *x, const void *y)
{
	const struct dmod *p = x, *q = y;

	return p->first < q->first ? -1 : p->first > q->first;
}

/* qsort by start alone (ties as qsort leaves them), of pointers: the order
 * this always gave */
static int by_start(const void *x, const void *y)
{
	double a = (*(struct dmod *const *)x)->a, b = (*(struct dmod *const *)y)->a;

	return a < b ? -1 : a > b;
}

size_t imports_derive(struct tl_sections *s)
{
	const struct tl_file *files = TLS_FILES_OF(s);
	size_t nf = s->l[TLS_FILES].n, n = 0, m = 0, added = 0;
	struct dmod *d = nf ? calloc(nf, sizeof(*d)) : NULL, **v = NULL;
	char name[512];

	for (size_t i = 0; d && i < nf; i++) {
		const struct tl_file *f = &files[i];
		double a = tl_or0(f->first_ms), b = tl_or0(f->last_ms);

		if (!f->path || !(tl_or0(f->opens) > 0) || !(a >= 0) ||
		    !imports_module_of(f->path, name, sizeof(name)))
			continue;
		if (!(b >= a))
			b = a;
		if (!(d[n].name = strdup(name)))
			continue;
		d[n].pid = (int)tl_or0(f->pid);
		d[n].a = a;
		d[n].b = b;
		d[n].first = n;
		n++;
	}
	/* a module's files (source stat'd, .pyc read): one span, the first
	 * file's pid, in the order modules first appeared */
	if (n)
		qsort(d, n, sizeof(*d), by_name);
	for (size_t i = 0; i < n; i++) {
		if (m && !strcmp(d[m - 1].name, d[i].name)) {
			if (d[i].a < d[m - 1].a)
				d[m - 1].a = d[i].a;
			if (d[i].b > d[m - 1].b)
				d[m - 1].b = d[i].b;
			free(d[i].name);
			continue;
		}
		d[m++] = d[i];
	}
	if (m)
		qsort(d, m, sizeof(*d), by_first);
	v = m ? calloc(m, sizeof(*v)) : NULL;
	for (size_t i = 0; v && i < m; i++)
		v[i] = &d[i];
	if (v)
		qsort(v, m, sizeof(*v), by_start);
	for (size_t i = 0; v && i < m; i++) {
		struct tl_import *r = tl_list_push(s, TLS_IMPORTS);

		if (!r)
			break;
		r->name = v[i]->name;
		v[i]->name = NULL;
		r->pid = v[i]->pid;
		r->start_ms = coll_ms(v[i]->a);
		r->end_ms = coll_ms(v[i]->b);
		r->dur_ms = coll_ms(v[i]->b - v[i]->a);
		r->depth = 0;
		r->found = 1;
		r->derived = 1;
		tl_rec_seal(TLS_IMPORTS, r);
		added++;
	}
	for (size_t i = 0; i < m; i++)
		free(d[i].name);
	free(v);
	free(d);
	return added;
}

void imports_snapshot(json_t *root, struct tl_sections *s, bool usdt)
{
	json_t *py, *process = json_object_get(root, "process");
	pid_t main = (pid_t)jnum(process, "pid");
	bool derived = false;

	if (!s->l[TLS_IMPORTS].n && imports_derive(s)) {
		derived = true;
		json_array_append_new(
		    json_object_get(json_object_get(root, "tracing"), "fallbacks"),
		    json_pack("{s:s, s:s}", "probe", "python_imports", "reason",
			      "no USDT import events: imports derived from the "
			      "interpreter's module files (python.imports[].derived)"));
	}
	/* the records at the placeholder (timeline_sections.h) */
	py = json_pack("{s:b, s:O, s:s, s:o}", "usdt", usdt, "imports", s->ph[TLS_IMPORTS],
		       "imports_from",
		       derived		     ? "module_files"
		       : s->l[TLS_IMPORTS].n ? "usdt"
					     : "none",
		       "interpreter", interp_json(json_object_get(root, "processes"), main));
	json_object_set_new(root, "python", py);
}
