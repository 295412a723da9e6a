/* diagnose_memory: the --check-memory rules (docs/diagnose.md): model
 * pages read back from disk while requests were served. Reads the model
 * through its typed views only (c->view); rows at the end; the engine is
 * diagnose.c. */
#include <stdio.h>
#include <string.h>

#include "diagnose_rules.h"
#include "util.h"

/* A request that faulted a model page in from disk: at least this many
 * major faults inside model file mappings (docs/diagnose.md). Minor faults
 * on pages already in memory (a warm start's first request maps them in)
 * cost microseconds and are no finding. */
#define LAZY_MIN_MAJOR 1

static void rule_lazy_faults(struct diag_ctx *c)
{
	const struct tl_view *v = c->view;
	double faults = 0, major = 0;
	size_t n = 0;
	json_t *list = json_array();

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
	diag_add(
	    c, DIAG_WARNING, "model pages read from disk during requests",
	    json_pack("{s:o, s:f, s:f, s:s?}", "requests", list, "faults", faults, "major_faults",
		      major, "mlock", c->mlock),
	    -1,
	    c->mlock && strcmp(c->mlock, "off")
		? "mlock is on but did not cover these pages: use --mlock=all, or check the "
		  "mlock result in the timeline (memory.mlock)"
		: "start with --mlock=models (or [mlock] mode = models) so model pages are locked "
		  "in memory once loaded",
	    "%zu request%s read %.0f model page%s back from disk (%.0f model-file faults in all)",
	    n, n == 1 ? "" : "s", major, major == 1 ? "" : "s", faults);
}

const struct diag_rule diag_memory_rules[] = {
    {"lazy-model-faults", rule_lazy_faults},
    {NULL, NULL},
};
