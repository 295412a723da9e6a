/* diagnose_memory: the --check-memory rules (docs/diagnose.md): model
 * pages faulted in while requests were served. Rows at the end; the engine
 * is diagnose.c. */
#include <stdio.h>
#include <string.h>

#include "diagnose_rules.h"
#include "util.h"

static void rule_lazy_faults(struct diag_ctx *c)
{
	json_t *r, *list = json_array();
	size_t i;
	double faults = 0;

	/* needs per-request fault counts (requests[]); without them the trace
	 * cannot tell load-time faults from request-time ones */
	json_array_foreach (json_object_get(c->root, "requests"), i, r) {
		/* faults inside model file mappings (minor and major): not any
		 * major fault, which a library page or a log file can cause */
		double mf = jnum(r, "model_faults");

		if (mf <= 0)
			continue;
		faults += mf;
		json_array_append_new(list, json_incref(r));
	}
	if (!json_array_size(list)) {
		json_decref(list);
		return;
	}
	diag_add(
	    c, DIAG_WARNING, "model pages faulted in during requests",
	    json_pack("{s:o, s:f, s:s?}", "requests", list, "faults", faults, "mlock", c->mlock),
	    -1,
	    c->mlock && strcmp(c->mlock, "off")
		? "mlock is on but did not cover these pages: use --mlock=all, or check the "
		  "mlock result in the timeline (memory.mlock)"
		: "start with --mlock=models (or [mlock] mode = models) so model pages are locked "
		  "in memory once loaded",
	    "%zu request%s faulted %.0f model pages in", json_array_size(list),
	    json_array_size(list) == 1 ? "" : "s", faults);
}

const struct diag_rule diag_memory_rules[] = {
    {"lazy-model-faults", rule_lazy_faults},
    {NULL, NULL},
};
