/* dlsize: the size a download will have, from the sources the trace has, in
 * order of truth (docs/timeline.md, "downloads": expected_size and
 * expected_from), and how a live line says it (docs/diagnose.md,
 * "Progress"). Pure functions: timeline_downloads.c records the choice,
 * progress.c says it. */
#ifndef TTS_DLSIZE_H
#define TTS_DLSIZE_H

#include <stdbool.h>
#include <stddef.h>

enum dlsize_from {
	DLSIZE_NONE,
	DLSIZE_KERNEL,	/* renamed: the inode's i_size, the file's size */
	DLSIZE_KNOWN,	/* IndexTTS2's known size of the file: an estimate */
	DLSIZE_AT_LEAST /* the highest offset written so far: a lower bound */
};

struct dlsize_in {
	bool renamed; /* the trace saw the temp file renamed */
	double isize; /* the inode's i_size after the last write (0: none) */
	double have;  /* what the file holds so far (a resumed one: with the earlier run's) */
	double known; /* hf_known_size, 0: none */
};

struct dlsize {
	enum dlsize_from from;
	double size;	    /* 0 with DLSIZE_NONE */
	bool known_dropped; /* a known size there was, contradicted by the trace */
};

/* The expected size: the kernel's once renamed; else the known size while
 * nothing written exceeds it (neither what the file holds nor its highest
 * offset); else the highest offset, as a lower bound, when it is beyond
 * what was written (offsets written out of order); else none. A renamed
 * file without the kernel's size has none (never the known size). */
struct dlsize dlsize_expected(const struct dlsize_in *in);

/* "kernel", "known", "highest_offset"; NULL for none */
const char *dlsize_from_name(enum dlsize_from f);
enum dlsize_from dlsize_from_parse(const char *s);

/* Percent of the file (0..100), or -1 where no total is known (none, a
 * lower bound) */
double dlsize_percent(double have, double size, enum dlsize_from from);

/* The live line's tail: ", 12% of 2.1 GiB, 40 s left"; from a known size
 * ", 0% of about 2.1 GiB (known size), 9 min left"; from a lower bound
 * ", of at least 5.2 MiB so far" (no percent, no time left); "" when
 * none. rate: bytes/s (0: no time left). */
void dlsize_text(double have, double size, enum dlsize_from from, double rate, char *out,
		 size_t len);

#endif
