/* diagnose: rules over the timeline model (docs/diagnose.md). They read only
 * the model (plus, for downloads left behind, whether the .incomplete file
 * is still on disk), so they run the same at start-up and on a saved
 * timeline. Each finding: id, severity, title, message, evidence, fix. */
#ifndef TTS_DIAGNOSE_H
#define TTS_DIAGNOSE_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

#include "hfcache.h"
#include "timeline.h"

enum diag_check {
	DIAG_IO = 1 << 0, /* missing-path loops, cache file system, locks, read amplification */
	DIAG_DOWNLOAD = 1 << 1, /* hub, DNS, slow/interrupted downloads, wrong cache */
	DIAG_MEMORY = 1 << 2,	/* model pages faulted during requests */
	DIAG_ALL = DIAG_IO | DIAG_DOWNLOAD | DIAG_MEMORY,
};

enum diag_level { DIAG_CLEAN = 0, DIAG_WARNING = 1, DIAG_ERROR = 2 };

/* Run the selected rules; replaces the model's "findings". Returns the worst
 * severity found (enum diag_level). */
int diagnose_run(struct timeline *tl, unsigned checks);

/* The model's findings as text, one block each; nothing when there are none. */
void diagnose_print(const struct timeline *tl, FILE *out);

/* The worst severity among the model's findings. */
int diagnose_level(const struct timeline *tl);

/* `tts-launch diagnose`: load, run, print (text|json). Exit 0 clean, 1
 * warnings, 2 errors or an unreadable timeline. */
int diagnose_command(const char *path, unsigned checks, const char *format);

/* The Hugging Face caches of the run (hfcache.h) from the model's
 * launcher.config: its [app] and the environment recorded there. */
int diagnose_cache_dirs(const json_t *root, struct hf_cache_dir *out, int max, bool with_model_dir);

/* statfs of each cache directory (or the nearest existing parent): file
 * system type, read-only, persistent; into the model's "cache_fs". Done on
 * this machine when the timeline is written; the rules read it back. */
void diagnose_record_cache_fs(struct timeline *tl);

#endif
