/* diagnose_memory: the --check-memory rules (docs/diagnose.md): model
 * pages read back from disk while requests were served. Reads the model
 * through its typed views only (c->view); rows at the end; the engine is
 * diagnose.c. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "diagnose_rules.h"
#include "util.h"

/* A request that faulted a model page in from disk: at least this many
 * major faults inside model file mappings (docs/diagnose.md). Minor faults
 * on pages already in memory (a warm start's first request maps them in)
 * cost microseconds and are no finding. */
#define LAZY_MIN_MAJOR 1

/* The model files whose pages were read back from disk (files[]: class
 * model, major faults), each with whether it was opened after mlock locked
 * (memory.mlock: locked, start_ms + dur_ms): mlockall(MCL_CURRENT), or
 * mlock() of the model mappings then, covers only what was mapped then.
 * *n_after: how many were; *n: how many in all. */
static json_t *faulted_files(struct diag_ctx *c, double locked_at, size_t *n, size_t *n_after)
{
	json_t *out = json_array();

	*n = *n_after = 0;
	for (size_t i = 0; i < c->view->n_files; i++) {
		const struct tl_file *f = &c->view->files[i];
		const char *path = f->path, *cls = f->class;
		bool after = locked_at >= 0 && tl_or0(f->first_ms) > locked_at;
		char abs[PATH_MAX];

		if (!path || !cls || strcmp(cls, "model") || tl_or0(f->major_faults) < 1)
			continue;
		path_resolve(c->app_dir, path, abs, sizeof(abs));
		json_array_append_new(out,
				      json_pack("{s:s, s:f, s:f, s:b}", "path", abs, "major_faults",
						f->major_faults, "opened_ms", tl_or0(f->first_ms),
						"mapped_after_lock", after));
		(*n)++;
		*n_after += after;
	}
	return out;
}

static void rule_lazy_faults(struct diag_ctx *c)
{
	const struct tl_view *v = c->view;
	const char *status = v->memory.mlock_status;
	double faults = 0, major = 0, locked_at = -1;
	size_t n = 0, n_files, n_after;
	json_t *list = json_array(), *files;
	char fix[PATH_MAX + 900], after[PATH_MAX + 300] = "";
	bool on = c->mlock && strcmp(c->mlock, "off");

	/* needs per-request model-file fault counts (requests[]); without them
	 * the trace cannot tell load-time faults from request-time ones */
	for (size_t i = 0; i < v->n_requests; i++) {
		const struct tl_request *r = &v->requests[i];
		/* faults inside model file mappings: not any major fault, which a
		 * library page or a log file can cause */
		double mf = tl_or0(r->model_faults), mj = tl_or0(r->model_major_faults);

		if (mj < LAZY_MIN_MAJOR)
			continue;
		faults += mf;
		major += mj;
		n++;
		json_array_append_new(list, json_pack("{s:f, s:f, s:f, s:f}", "start_ms",
						      tl_or0(r->start_ms), "latency_ms",
						      tl_or0(r->latency_ms), "model_faults", mf,
						      "model_major_faults", mj));
	}
	if (!n) {
		json_decref(list);
		return;
	}
	if (status && !strcmp(status, "locked") && tl_has(v->memory.mlock_start_ms))
		locked_at = v->memory.mlock_start_ms + tl_or0(v->memory.mlock_dur_ms);
	files = faulted_files(c, locked_at, &n_files, &n_after);
	if (!on)
		snprintf(fix, sizeof(fix),
			 "start with --mlock=models (or [mlock] mode = models) so model pages are "
			 "locked in memory once loaded");
	else if (!status || strcmp(status, "locked"))
		/* the lock did not happen: its own line and fix say why */
		snprintf(fix, sizeof(fix),
			 "mlock (%s) did not lock: it %s (memory.mlock, the mlock line at the "
			 "start): %s",
			 c->mlock, status ? status : "reported nothing",
			 v->memory.mlock_fix ?: "see docs/mlock.md, Failures and their fixes");
	else if (n_after && n_after == n_files)
		/* the truth of MCL_CURRENT: not a failure of the lock */
		snprintf(fix, sizeof(fix),
			 "mlock (%s) locked at %.1f s what was mapped then; %s was mapped after "
			 "it (opened at %.1f s), so no lock covers it: lock once it is mapped, "
			 "[mlock] trigger = signal and `kill -USR2 PID` after the first request "
			 "(each signal locks again, covering what was mapped since), or trigger = "
			 "delay; or have the service map its weights before it listens",
			 c->mlock, locked_at / 1000,
			 json_string_value(json_object_get(json_array_get(files, 0), "path")),
			 jnum(json_array_get(files, 0), "opened_ms") / 1000);
	else if (!strcmp(c->mlock, "models"))
		snprintf(
		    fix, sizeof(fix),
		    "mlock (models) locked at %.1f s, but not these files' pages: check that "
		    "[mlock] patterns match their names (a hub cache blob: its snapshot name), "
		    "or a weights file torch.load copied; --mlock=all locks everything mapped",
		    locked_at / 1000);
	else
		snprintf(fix, sizeof(fix),
			 "mlock (%s) locked at %.1f s; the pages read back were not locked then "
			 "(mode onfault pins a page only once touched; a mapping replaced since): "
			 "--mlock=all, or lock again with [mlock] trigger = signal",
			 c->mlock, locked_at / 1000);
	if (n_after) {
		const json_t *first = NULL, *x;
		size_t i;

		json_array_foreach (files, i, x)
			if (!first && json_is_true(json_object_get(x, "mapped_after_lock")))
				first = x;
		if (n_after == 1)
			snprintf(after, sizeof(after),
				 "; %s was mapped after mlock locked at %.1f s: the lock does not "
				 "cover it",
				 jstr(first, "path"), locked_at / 1000);
		else
			snprintf(
			    after, sizeof(after),
			    "; %zu of the %zu files read back were mapped after mlock locked at "
			    "%.1f s (%s first): the lock does not cover them",
			    n_after, n_files, locked_at / 1000, jstr(first, "path"));
	}
	diag_add(c, DIAG_WARNING, "model pages read from disk during requests",
		 json_pack("{s:o, s:f, s:f, s:s?, s:s?, s:o, s:o}", "requests", list, "faults",
			   faults, "major_faults", major, "mlock", c->mlock, "mlock_status", status,
			   "locked_at_ms", locked_at >= 0 ? json_real(locked_at) : json_null(),
			   "files", files),
		 -1, fix,
		 "%zu request%s read %.0f model page%s back from disk (%.0f model-file faults in "
		 "all)%s",
		 n, n == 1 ? "" : "s", major, major == 1 ? "" : "s", faults, after);
}

const struct diag_rule diag_memory_rules[] = {
    {"lazy-model-faults", rule_lazy_faults},
    {NULL, NULL},
};
