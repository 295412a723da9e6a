/* pipeline: collect -> build -> phases -> findings -> write, the one way
 * the supervisor turns what the tracer saw into the model (and the file).
 * Each stage is its own module; this only orders them. */
#ifndef TTS_PIPELINE_H
#define TTS_PIPELINE_H

#include <stddef.h>
#include <sys/types.h>

#include "timeline.h"

struct tracer;
struct mlock_ctl;
struct progress;

enum pipeline_upto {
	PIPE_TRACE,    /* the trace sections and phases (progress sampling) */
	PIPE_MEMORY,   /* + memory.mlock (a /metrics scrape) */
	PIPE_FINDINGS, /* + stalls said, cache_fs, findings */
	PIPE_WRITE,    /* + the file, written atomically */
};

struct pipeline_in {
	struct tracer *tracer; /* NULL: untraced, the trace stages are skipped */
	struct mlock_ctl *mlock;
	struct progress *progress;
	const char *path; /* PIPE_WRITE: where; "" or NULL: not written */
	uid_t uid;
	gid_t gid;
};

/* The cache_fs stage: the model's "cache_fs" from hostprobe_cache_fs over
 * the run's caches (diagnose_cache_dirs) and the files the trace saw. Done
 * on this machine when the timeline is written; the rules read it back and
 * never look at the disk themselves. */
void pipeline_record_cache_fs(struct timeline *tl);

/* Runs the stages up to upto on tl. 0, or -1 when writing failed (err). */
int pipeline_run(const struct pipeline_in *in, struct timeline *tl, enum pipeline_upto upto,
		 char *err, size_t errlen);

#endif
