/* timeline: the model of one start-up, in the versioned JSON format of
 * docs/timeline.md ("tts-launch.timeline/2"). The model is opaque: renderers
 * and compare read it through the typed views of timeline_view.h, so they
 * also work on a saved file; modules that still build the tree use
 * timeline_internal.h. */
#ifndef TTS_TIMELINE_H
#define TTS_TIMELINE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "config.h"

/* The version this build writes. */
#define TIMELINE_SCHEMA "tts-launch.timeline/2"
/* The versions it loads, TIMELINE_SCHEMA first (timeline.c). */
extern const char *const timeline_schemas[];
extern const size_t timeline_n_schemas;
/* Is schema one of timeline_schemas? */
bool timeline_schema_loadable(const char *schema);
/* "tts-launch.timeline/2 or tts-launch.timeline/1" into buf, for messages. */
void timeline_schema_list(char *buf, size_t len);

struct timeline;

/* A new model with every top-level key present (empty lists/objects). */
struct timeline *timeline_new(const struct config *c, int argc, char **argv);
void timeline_free(struct timeline *tl);

void timeline_mark(struct timeline *tl, const char *name, double ms);
/* ms of a mark, or -1 when absent. */
double timeline_mark_ms(const struct timeline *tl, const char *name);
void timeline_phase(struct timeline *tl, const char *name, double start_ms, double end_ms);

void timeline_set_process(struct timeline *tl, pid_t pid, char *const *argv);
/* code: exit status, or -1 when killed by signal sig. */
void timeline_set_exit(struct timeline *tl, int code, int sig, double ms);
void timeline_set_tracing(struct timeline *tl, bool enabled, const char *reason);

/* Atomic write (temp file in the same directory, fsync, rename). */
int timeline_write(const struct timeline *tl, const char *path, uid_t uid, gid_t gid, char *err,
		   size_t errlen);
/* The model as indented JSON on out (`report --format json`); 0, or -1. */
int timeline_dump(const struct timeline *tl, FILE *out);
/* What a loaded timeline may hold (docs/timeline.md, "Limits"): every
 * renderer, diagnose and compare then do bounded work on it. */
#define TIMELINE_MAX_FILE  (256u << 20) /* bytes of JSON */
#define TIMELINE_MAX_DEPTH 32		/* nesting of objects and arrays */
#define TIMELINE_MAX_MS	   1e11		/* times: 0 .. 1e11 ms (about 3 years) */
#define TIMELINE_MAX_SIZE  1e18		/* byte counts: 0 .. 1e18 */
#define TIMELINE_MAX_NUM   1e19		/* any other number: |x| <= 1e19 */

/* Load a saved timeline: at most TIMELINE_MAX_FILE bytes read, the schema
 * string checked, and every time, size and number in the limits above, and
 * the members renderers rely on of the right type; NULL with the field
 * named in err (e.g. "phases[3].end_ms = 1.7e+308 is not a time") else. */
struct timeline *timeline_load(const char *path, char *err, size_t errlen);

/* The end-of-start-up summary (systemd-analyze blame style; render_text.c). */
void timeline_print_summary(const struct timeline *tl, FILE *out);

/* A phase with its source ("launcher", "trace"): replaces one of that name
 * (phases.c infers the "trace" ones). */
void timeline_phase_from(struct timeline *tl, const char *name, double start_ms, double end_ms,
			 const char *source);

/* Class of a file by its path: "download", "model", "hf_cache", "config",
 * "python", "library", "system" or "other". cache_dirs: NULL-terminated
 * Hugging Face cache roots. */

#endif
