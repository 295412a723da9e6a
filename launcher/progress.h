/* progress: live download progress and stall detection, from the timeline
 * model alone (the supervisor snapshots the tracer into it about once a
 * second and hands it here). Files being written under the Hugging Face
 * caches and the model directory are shown with their size so far and rate;
 * when nothing progresses for [trace] stall, it says what the service waits
 * on (docs/diagnose.md, "While it starts"). It reads the model through its
 * typed views (timeline_view.h), decoded once per sample; the tree itself
 * only for the caches of the run (diagnose_cache_dirs) and to store its
 * "progress" key. */
#ifndef TTS_PROGRESS_H
#define TTS_PROGRESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "config.h"
#include "timeline_view.h"

struct progress;

/* Where lines go. emit: one complete line ("tts-launch: ...\n"); terminal:
 * also on the terminal (else the log only). */
typedef void (*progress_emit_fn)(void *arg, const char *line, bool terminal);

struct progress_opts {
	enum progress_mode mode; /* auto is resolved by the caller's tty/foreground state */
	double stall_s;		 /* 0: no stall messages */
	double log_every_s;	 /* log mode: a line per active file this often */
	FILE *tty;		 /* tty mode: the status line goes here */
	progress_emit_fn emit;
	void *arg;
};

/* NULL when there is nothing to do (mode off and no stall detection). */
struct progress *progress_new(const struct progress_opts *o);
void progress_free(struct progress *p);

/* One look at the model (freshly snapshotted) at now_ms (ms since launch).
 * Prints progress lines and stall messages through the options. */
void progress_sample(struct progress *p, const json_t *root, double now_ms);

/* Erase the status line (tty mode) before other output; redrawn at the next
 * sample. Safe with NULL. */
void progress_clear(struct progress *p);

/* The stalls reported, and the cost of the snapshots, into the model's
 * top-level "progress" key (docs/diagnose.md). */
void progress_timeline(struct progress *p, json_t *root);

/* The supervisor measures each tracer snapshot and reports its cost here. */
void progress_snapshot_cost(struct progress *p, double ms);

/* "<org>/<repo>/<file>" for a blob being downloaded: from the snapshot's
 * link to it once made (returns true: exact), else from the snapshot path
 * the service probed just before opening it (a guess), else the path
 * shortened. */
bool progress_download_name(const struct tl_view *v, const char *path, double first_ms, char *out,
			    size_t len);

#endif
