/* lasttl: the last timeline a run started in a directory wrote, so that
 * `tts-launch diagnose` without arguments and without a config file of its
 * own (./tts-launch.ini, /etc/tts-launch.ini) answers about it, in the
 * directory the run was started in (after `make demo`: the checkout). As
 * root only: one small file, RUN_DIR/last-timeline (root's directory, which
 * no one else may write; the file 0644, replaced whole), one line per
 * directory, the most recent first, at most LASTTL_MAX: the directory, the
 * timeline and the config of the run, tab-separated. A run that is not
 * root's records nothing; names holding a tab or a newline are not kept. */
#ifndef TTS_LASTTL_H
#define TTS_LASTTL_H

#include <stddef.h>

#define LASTTL_FILE "last-timeline"
#define LASTTL_MAX  16

/* Record that timeline (absolute) was written by a run started in cwd,
 * with config (its source as loaded: a path, or "(built-in defaults)").
 * Quiet: a failure only means `diagnose` will not find it. */
void lasttl_note(const char *cwd, const char *timeline, const char *config);

/* The last one recorded for cwd: 0 with both filled, -1 when none (or not
 * to be trusted: RUN_DIR or the file not root's alone, a link). */
int lasttl_read(const char *cwd, char *timeline, size_t tlen, char *config, size_t clen);

/* The same in dir, whose owner (and the file's) must be uid (tests). */
void lasttl_note_in(const char *dir, unsigned uid, const char *cwd, const char *timeline,
		    const char *config);
int lasttl_read_in(const char *dir, unsigned uid, const char *cwd, char *timeline, size_t tlen,
		   char *config, size_t clen);

#endif
