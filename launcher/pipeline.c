/* pipeline: the order of the stages that turn the trace into the model;
 * see pipeline.h. The tracer's own decisions (lightening after the
 * requests window) are asked for here, before the snapshot, so taking a
 * snapshot has no side effect on what is traced. */
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>

#include "attrib_build.h"
#include "diagnose.h"
#include "hostprobe.h"
#include "mlock.h"
#include "phases.h"
#include "progress.h"
#include "timeline_build.h"
#include "timeline_internal.h"
#include "timeline_view.h"
#include "tracer.h"

void pipeline_record_cache_fs(struct timeline *tl)
{
	struct hf_cache_dir dirs[HF_MAX_CACHE_DIRS];
	struct tl_view *v = tl_view_decode(tl);
	const char **paths = NULL;
	json_t *list = NULL;
	int n;

	if (!v)
		return;
	paths = calloc(v->n_files ? v->n_files : 1, sizeof(*paths));
	if (paths) {
		for (size_t i = 0; i < v->n_files; i++)
			paths[i] = v->files[i].path;
		n = diagnose_cache_dirs(timeline_json(tl), dirs, HF_MAX_CACHE_DIRS, false);
		list = hostprobe_cache_fs(dirs, n, v->config_app_dir, paths, v->n_files);
	}
	if (list)
		json_object_set_new(timeline_json(tl), "cache_fs", list);
	free(paths);
	tl_view_free(v);
}

int pipeline_run(const struct pipeline_in *in, struct timeline *tl, enum pipeline_upto upto,
		 char *err, size_t errlen)
{
	if (!tl)
		return 0;
	/* collect -> build -> phases */
	if (in->tracer) {
		/* what waits in the ring buffer belongs here (and may say ready);
		 * what the detached probes sent before they went, too */
		tracer_poll(in->tracer);
		if (tracer_lighten_due(in->tracer))
			tracer_poll(in->tracer);
		timeline_build(tl, tracer_collector(in->tracer), tracer_status(in->tracer));
		phases_infer(tl);
		/* what the critical thread waits on now, for the stall line */
		attribution_live(tl, tracer_collector(in->tracer));
	}
	if (upto < PIPE_MEMORY)
		return 0;
	if (in->mlock)
		mlock_timeline(in->mlock, tl); /* memory.mlock */
	if (upto < PIPE_FINDINGS)
		return 0;
	if (in->tracer) /* attribution: the breakdown of the window (not per progress sample) */
		attribution_build(tl, tracer_collector(in->tracer));
	progress_timeline(in->progress, timeline_json(tl)); /* progress: stalls said */
	pipeline_record_cache_fs(tl);			    /* cache_fs: statfs of the caches */
	diagnose_run(tl, DIAG_ALL); /* findings: stored, printed with the summary */
	if (upto < PIPE_WRITE || !in->path || !*in->path)
		return 0;
	return timeline_write(tl, in->path, in->uid, in->gid, err, errlen);
}
