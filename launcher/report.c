/* report: `tts-launch report TIMELINE.json [--format F] [-o FILE]`. The
 * verb's arguments are checked in main.c; this loads, renders and writes. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "atomicfile.h"
#include "report.h"
#include "timeline.h"

#define EXIT_USAGE 2

/* -o FILE: a temp file in the same directory, renamed over FILE once
 * complete, so a reader (node_exporter's textfile collector) never sees
 * half a file; a device or FIFO there is written in place (safefile.h). */
int report_write(const char *path, const struct renderer *r, const char *output)
{
	struct atomic_file a = ATOMIC_FILE_INIT;
	char err[512];
	struct timeline *tl;
	FILE *out = stdout;
	int rc = 0;

	tl = timeline_load(path, err, sizeof(err));
	if (!tl) {
		fprintf(stderr, "tts-launch: %s\n", err);
		return EXIT_USAGE;
	}
	if (output &&
	    (atomic_begin(&a, output, err, sizeof(err)) < 0 || !(out = atomic_stream(&a)))) {
		fprintf(stderr, "tts-launch: cannot write the report: %s\n",
			a.path ? strerror(errno) : err);
		atomic_abort(&a); /* nothing half-written stays behind */
		timeline_free(tl);
		return 1;
	}
	errno = 0;
	if (r->render(tl, out) < 0 || fflush(out) == EOF || ferror(out)) {
		fprintf(stderr, "tts-launch: failed to write the %s report to %s: %s\n", r->name,
			output ? output : "stdout", strerror(errno ? errno : EIO));
		rc = 1;
	}
	if (output) {
		if (fclose(out) == EOF && !rc) {
			fprintf(stderr, "tts-launch: failed to write %s: %s\n", output,
				strerror(errno));
			rc = 1;
		}
		/* node_exporter reads textfiles as its own user: 0644 like any
		 * report, set on the open descriptor */
		if (!rc && atomic_commit(&a, 0644, (uid_t)-1, (gid_t)-1, err, sizeof(err)) < 0) {
			fprintf(stderr, "tts-launch: %s\n", err);
			rc = 1;
		}
		atomic_abort(&a);
	}
	timeline_free(tl);
	return rc;
}
