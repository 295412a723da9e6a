/* phases: the start-up phases inferred from the model (marks, files,
 * imports, downloads, mlock calls; docs/timeline.md); files, missing
 * paths and imports from the model's records (timeline_sections.h). Runs over the model
 * only, so a loaded timeline gets the same phases as the live one. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "phases.h"
#include "timeline_internal.h"
#include "timeline_sections.h"
#include "util.h"

struct span {
	double a, b;
	bool set;
};

static void span_add(struct span *s, double a, double b)
{
	if (!s->set || a < s->a)
		s->a = a;
	if (!s->set || b > s->b)
		s->b = b;
	s->set = true;
}

const char *phases_download_label(const char *name, const char *path)
{
	const char *base = path ? strrchr(path, '/') : NULL;

	if (name && *name)
		return name;
	return base ? base + 1 : path && *path ? path : "?";
}

void phases_infer(struct timeline *tl)
{
	json_t *root, *phases, *p, *cfg, *interp;
	const struct tl_sections *s;
	struct span imp = {0}, pyfiles = {0}, conf = {0}, cache = {0}, model = {0}, lock = {0};
	const char *app_dir, *model_dir;
	double spawn, exec, ready, py_exec, last_work = -1;
	size_t i;

	if (!tl)
		return;
	root = timeline_json(tl);
	s = timeline_sections(tl); /* files, missing_paths, python.imports */
	phases = json_object_get(root, "phases");
	/* drop earlier inferences: snapshots repeat */
	for (i = json_array_size(phases); i-- > 0;) {
		const char *src = jstr(json_array_get(phases, i), "source");

		if (src && !strcmp(src, "trace"))
			json_array_remove(phases, i);
	}
	cfg = json_object_get(json_object_get(json_object_get(root, "launcher"), "config"), "app");
	app_dir = jstr(cfg, "dir");
	model_dir = jstr(cfg, "model_dir");
	spawn = timeline_mark_ms(tl, "spawn");
	exec = timeline_mark_ms(tl, "exec");
	ready = timeline_mark_ms(tl, "ready");

	if (spawn >= 0)
		timeline_phase_from(tl, "launch", 0, spawn, "trace");
	if (spawn >= 0 && exec >= 0)
		timeline_phase_from(tl, "spawn", spawn, exec, "trace");

	/* a runner (uv run) starts the interpreter as its child: from the
	 * runner's exec to the interpreter's, then the interpreter's imports */
	interp = json_object_get(json_object_get(root, "python"), "interpreter");
	py_exec = exec;
	if (json_is_object(json_object_get(interp, "runner")) && jnum(interp, "exec_ms") >= 0 &&
	    exec >= 0) {
		py_exec = jnum(interp, "exec_ms");
		timeline_phase_from(tl, "runner", exec, py_exec, "trace");
	}
	/* a time that is not a number counts as 0 (jnum) */
	for (i = 0; i < s->l[TLS_IMPORTS].n; i++) {
		const struct tl_import *m = &TLS_IMPORTS_OF(s)[i];

		if (tl_or0(m->start_ms) >= py_exec)
			span_add(&imp, tl_or0(m->start_ms), tl_or0(m->end_ms));
	}
	for (i = 0; i < s->l[TLS_FILES].n; i++) {
		const struct tl_file *f = &TLS_FILES_OF(s)[i];
		const char *cls = f->class, *path = f->path;
		double a = tl_or0(f->first_ms), b = tl_or0(f->last_ms);

		if (!cls || !path)
			continue;
		if (!strcmp(cls, "python") && a >= py_exec)
			span_add(&pyfiles, a, b);
		else if (!strcmp(cls, "model"))
			span_add(&model, a, b);
		else if (!strcmp(cls, "hf_cache"))
			span_add(&cache, a, b);
		else if (!strcmp(cls, "config") && (path[0] != '/' || path_under(path, app_dir) ||
						    path_under(path, model_dir)))
			span_add(&conf, a, b);
	}
	for (i = 0; i < s->l[TLS_MISSING].n; i++) {
		const struct tl_missing *m = &TLS_MISSING_OF(s)[i];
		const char *cls = m->class;

		if (cls && (!strcmp(cls, "hf_cache") || !strcmp(cls, "download")))
			span_add(&cache, tl_or0(m->first_ms), tl_or0(m->last_ms));
	}
	/* libraries mlock a page or two for their own reasons (glibc, OpenSSL):
	 * only mlockall and large ranges are "locking the model" */
	json_array_foreach (json_object_get(json_object_get(root, "memory"), "mlock_calls"), i, p)
		if (!strcmp(jstr(p, "call") ?: "", "mlockall") || jnum(p, "len") >= 1 << 20)
			span_add(&lock, jnum(p, "start_ms"),
				 jnum(p, "start_ms") + jnum(p, "dur_ms"));

	if (!imp.set)
		imp = pyfiles; /* no USDT: Python's own files stand for its imports */
	if (py_exec >= 0 && imp.set)
		timeline_phase_from(tl, "interpreter_start", py_exec, imp.a, "trace");
	if (imp.set)
		timeline_phase_from(tl, "imports", imp.a, imp.b, "trace");
	if (conf.set)
		timeline_phase_from(tl, "config_read", conf.a, conf.b, "trace");
	if (cache.set)
		timeline_phase_from(tl, "cache_probe", cache.a, cache.b, "trace");
	json_array_foreach (json_object_get(root, "downloads"), i, p) {
		char name[PATH_MAX + 16];

		snprintf(name, sizeof(name), "download:%s",
			 phases_download_label(jstr(p, "name"), jstr(p, "path")));
		timeline_phase_from(tl, name, jnum(p, "first_ms"), jnum(p, "last_ms"), "trace");
		if (jnum(p, "last_ms") > last_work)
			last_work = jnum(p, "last_ms");
	}
	if (model.set)
		timeline_phase_from(tl, "model_load", model.a, model.b, "trace");
	if (lock.set)
		timeline_phase_from(tl, "mlock", lock.a, lock.b, "trace");
	if (ready >= 0) {
		/* from the end of the last work seen before ready to ready: building
		 * the UI and binding the port */
		struct span *all[] = {&imp, &conf, &cache, &model, &lock};

		for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++)
			if (all[k]->set && all[k]->b <= ready && all[k]->b > last_work)
				last_work = all[k]->b;
		if (last_work < 0 || last_work > ready)
			last_work = exec >= 0 ? exec : 0;
		timeline_phase_from(tl, "ready", last_work, ready, "trace");
	}
	timeline_sort_by(phases, "start_ms");
}
