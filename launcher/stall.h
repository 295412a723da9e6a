/* stall: what a stalled start-up waits on, from the timeline model
 * (docs/diagnose.md, "While it starts") and the attribution's live state of
 * the critical thread (attrib_live.h, filled at each snapshot of the
 * trace). A rule about the start, used by the live display (progress.c)
 * when nothing has moved for [trace] stall. Reads the model through its
 * typed views (timeline_view.h). */
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
 * {kind, message, ...evidence}; kinds "blocked" (what the critical thread
 * waits on now, from the attribution's live model, attrib_live.h: first;
 * a socket a "peer-silent" line names is said on that line, its evidence
 * under "blocked"), "connect", "peer-silent", "download-stalled", "lock",
 * "missing-path", "unknown". since_ms: the last
 * progress; now_ms: now. peers: what earlier samples saw of each peer,
 * {PEER: {in, out, t_in, t_out}} (bytes, and when each last grew), or NULL
 * to take it from the model alone (bytes_in 0 = never answered); conns: the
 * same of each connection, by stall_conn_key(), or NULL. dl: the download in
 * flight, or NULL. */
json_t *stall_waiting_on(const struct tl_view *v, const json_t *peers, const json_t *conns,
			 const struct stall_download *dl, double since_ms, double now_ms);

/* Whether the last request on connection c is answered, from the record
 * alone: 1 unanswered so far (a plain connection read nothing after it; a
 * TLS one read no more than its handshake's session tickets), 0 answered,
 * -1 cannot tell (a reused connection whose earlier answers hide the last
 * one's) or not a request (no per-connection counts, nothing sent, a bare
 * TLS handshake). */
int stall_conn_unanswered(const struct tl_connect *c);

/* Whether c got an answer to a request, judged by what it read: a TLS
 * connection more than its handshake's session tickets after one write
 * (a TLS 1.3 server sends two of ~256 bytes unasked, read with the first
 * answer), a plain one any byte. diagnose's hub-unreachable and the stall
 * lines judge a peer by this one bound. */
bool stall_conn_answered(const struct tl_connect *c);

/* The bytes that answered requests on c: all it read, but 0 for a TLS
 * connection that read no more than a handshake. A retry loop against a
 * peer that accepts and never answers moves handshakes, not answers. */
double stall_conn_answer_bytes(const struct tl_connect *c);

/* "PID START_MS PEER": a connection's key across snapshots. */
void stall_conn_key(const struct tl_connect *c, char *out, size_t len);

#endif
