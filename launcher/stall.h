/* stall: what a stalled start-up waits on, from the timeline model alone
 * (docs/diagnose.md, "While it starts"). A rule about the start, used by the
 * live display (progress.c) when nothing has moved for [trace] stall. */
#ifndef TTS_STALL_H
#define TTS_STALL_H

#include <jansson.h>

/* What a stalled service waits on, from the model: an array of
 * {kind, message, ...evidence}; kinds "connect", "peer-silent",
 * "download-stalled", "lock", "missing-path", "unknown". since_ms: the last
 * progress; now_ms: now. peers: what earlier samples saw of each peer,
 * {PEER: {in, out, t_in, t_out}} (bytes, and when each last grew), or NULL
 * to take it from the model alone (bytes_in 0 = never answered). */
json_t *stall_waiting_on(const json_t *root, const json_t *peers, double since_ms, double now_ms);

#endif
