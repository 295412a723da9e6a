/* imports: the python section: USDT imports, or imports derived from the
 * interpreter's module files when it has no probes (issue 14). */
#include "imports.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"
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

/* A time in the model: ms to the microsecond (as collector.h's ms_json). */
static json_t *ms_json(double ms)
{
	return json_real(ms < 0 ? 0 : (double)(long long)(ms * 1000 + 0.5) / 1000);
}

static int by_start(const void *a, const void *b)
{
	double x = jnum(*(json_t *const *)a, "start_ms"), y = jnum(*(json_t *const *)b, "start_ms");

	return x < y ? -1 : x > y;
}

json_t *imports_derive(json_t *root)
{
	json_t *byname = json_object(), *out = json_array(), *f, *e, **v;
	char name[512];
	const char *k;
	size_t i, n = 0;

	json_array_foreach (json_object_get(root, "files"), i, f) {
		const char *path = jstr(f, "path");
		double a = jnum(f, "first_ms"), b = jnum(f, "last_ms");

		if (!path || !(jnum(f, "opens") > 0) || !(a >= 0) ||
		    !imports_module_of(path, name, sizeof(name)))
			continue;
		if (!(b >= a))
			b = a;
		e = json_object_get(byname, name);
		if (!e) {
			json_object_set_new(byname, name,
					    json_pack("{s:s, s:i, s:f, s:f}", "name", name, "pid",
						      (int)jnum(f, "pid"), "start_ms", a, "end_ms",
						      b));
			continue;
		}
		/* a module's files (source stat'd, .pyc read): one span */
		if (a < jnum(e, "start_ms"))
			json_object_set_new(e, "start_ms", json_real(a));
		if (b > jnum(e, "end_ms"))
			json_object_set_new(e, "end_ms", json_real(b));
	}
	v = calloc(json_object_size(byname) + 1, sizeof(*v));
	json_object_foreach (byname, k, e)
		if (v)
			v[n++] = e;
	if (n)
		qsort(v, n, sizeof(*v), by_start);
	for (i = 0; i < n; i++) {
		double a = jnum(v[i], "start_ms"), b = jnum(v[i], "end_ms");

		json_array_append_new(out, json_pack("{s:O, s:O, s:o, s:o, s:o, s:i, s:b, s:b}",
						     "name", json_object_get(v[i], "name"), "pid",
						     json_object_get(v[i], "pid"), "start_ms",
						     ms_json(a), "end_ms", ms_json(b), "dur_ms",
						     ms_json(b - a), "depth", 0, "found", 1,
						     "derived", 1));
	}
	free(v);
	json_decref(byname);
	return out;
}

void imports_snapshot(json_t *root, json_t *usdt_imports, bool usdt)
{
	json_t *py, *imports = usdt_imports ? json_incref(usdt_imports) : json_array();
	json_t *derived = NULL;
	json_t *process = json_object_get(root, "process");
	pid_t main = (pid_t)jnum(process, "pid");

	if (json_array_size(imports) == 0) {
		derived = imports_derive(root);
		if (json_array_size(derived)) {
			json_decref(imports);
			imports = json_incref(derived);
			json_array_append_new(
			    json_object_get(json_object_get(root, "tracing"), "fallbacks"),
			    json_pack("{s:s, s:s}", "probe", "python_imports", "reason",
				      "no USDT import events: imports derived from the "
				      "interpreter's module files (python.imports[].derived)"));
		}
	}
	py = json_pack("{s:b, s:O, s:s, s:o}", "usdt", usdt, "imports", imports, "imports_from",
		       derived && imports == derived ? "module_files"
		       : json_array_size(imports)    ? "usdt"
						     : "none",
		       "interpreter", interp_json(json_object_get(root, "processes"), main));
	json_object_set_new(root, "python", py);
	json_decref(imports);
	json_decref(derived);
}
