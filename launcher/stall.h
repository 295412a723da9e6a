/* stall: what a stalled start-up waits on, from the timeline model alone
 * (docs/diagnose.md, "While it starts"). A rule about the start, used by the
 * live display (progress.c) when nothing has moved for [trace] stall. Reads
 * the model through its typed views (timeline_view.h). */
#ifndef TTS_STALL_H
#define TTS_STALL_H

#include <jansson.h>

#include "timeline_view.h"

/* The download in flight when the start stalled (the caller's: the live
 * display knows it and its name), or none. */
struct stall_download {
	const char *path;
	double first_ms;
	const char *name; /* "org/repo/file" as the live lines say it */
};

/* What a stalled service waits on, from the model's views v: an array of
 * {kind, message, ...evidence}; kinds "connect", "peer-silent",
 * "download-stalled", "lock", "missing-path", "unknown". since_ms: the last
 * progress; now_ms: now. peers: what earlier samples saw of each peer,
 * {PEER: {in, out, t_in, t_out}} (bytes, and when each last grew), or NULL
 * to take it from the model alone (bytes_in 0 = never answered). dl: the
 * download in flight, or NULL. */
json_t *stall_waiting_on(const struct tl_view *v, const json_t *peers,
			 const struct stall_download *dl, double since_ms, double now_ms);

#endif
