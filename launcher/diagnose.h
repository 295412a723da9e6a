/* diagnose: rules over the timeline model (docs/diagnose.md), run by an
 * engine over a rule table (diagnose.c; the rules in diagnose_io.c,
 * diagnose_download.c, diagnose_memory.c). They read only the model, so
 * they give the same answer at start-up and on a saved timeline anywhere:
 * what they need from the machine is recorded into the model when it is
 * written (pipeline_record_cache_fs). Each finding: id, severity, title,
 * message, evidence, fix. Also the download facts the live display
 * (progress.c) and the stall explanation (stall.c) share with the rules. */
#ifndef TTS_DIAGNOSE_H
#define TTS_DIAGNOSE_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "hfcache.h"
#include "timeline.h"

enum diag_check {
	DIAG_IO = 1 << 0, /* missing-path loops, cache file system, locks, read amplification */
	DIAG_DOWNLOAD = 1 << 1, /* hub, DNS, slow/interrupted downloads, wrong cache */
	DIAG_MEMORY = 1 << 2,	/* model pages faulted during requests */
	DIAG_EXIT = 1 << 3,	/* why a start failed (in DIAG_ALL: run, no --check-*) */
	DIAG_ALL = DIAG_IO | DIAG_DOWNLOAD | DIAG_MEMORY | DIAG_EXIT,
};

/* DIAG_INFO: a fact, no problem on this machine; it does not change the
 * level (diagnose's exit code) */
enum diag_level { DIAG_CLEAN = 0, DIAG_WARNING = 1, DIAG_ERROR = 2, DIAG_INFO = 3 };

/* Run the selected rules; replaces the model's "findings". Returns the worst
 * severity found (enum diag_level). */
int diagnose_run(struct timeline *tl, unsigned checks);

/* The model's findings as text, one block each; nothing when there are none. */
void diagnose_print(const struct timeline *tl, FILE *out);
/* The same for a findings array of one's own (the live session's findings
 * not said yet); nothing for NULL or none. */
void diagnose_print_findings(const json_t *findings, FILE *out);

/* The worst severity among the model's findings. */
int diagnose_level(const struct timeline *tl);

/* `tts-launch diagnose`: load, run, print (text|json). Exit 0 clean, 1
 * warnings, 2 errors or an unreadable timeline. */
int diagnose_command(const char *path, unsigned checks, const char *format);

/* The Hugging Face caches of the run (hfcache.h) from the model's
 * launcher.config: its [app] and the environment recorded there. */
int diagnose_cache_dirs(const json_t *root, struct hf_cache_dir *out, int max, bool with_model_dir);
/* The same from the views of a model (timeline_view.h). */
struct tl_view;
int diagnose_cache_dirs_view(const struct tl_view *v, struct hf_cache_dir *out, int max,
			     bool with_model_dir);

/* A path whose failed look-ups are normal, not a problem: the interpreter's
 * and libc's search paths (class system, python, library), ~/.netrc. The
 * one definition: the rules, the stall explanation. */
bool diagnose_benign_missing(const char *path, const char *cls);

/* Downloads in flight and whether one was renamed to its final name:
 * tl_view_downloads_in_flight, tl_view_renamed (timeline_view.h). */

#endif
