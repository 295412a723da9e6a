/* tracer: loads and attaches the BPF programs for the process tree rooted at
 * one pid, before that pid execs; collects events and map aggregates into the
 * timeline model. Tracing never stops the service from starting: any failure
 * gives NULL and a reason, and the service runs untraced. */
#ifndef TTS_TRACER_H
#define TTS_TRACER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "config.h"
#include "timeline.h"

struct tracer;

struct tracer_opts {
	pid_t root_pid;	 /* forked child, blocked before exec */
	int listen_port; /* the ready port; 0: the first TCP listen */
	const struct config *cfg;
	int verbose; /* libbpf logs on stderr */
};

struct tracer *tracer_start(const struct tracer_opts *o, char *why, size_t whylen);
/* An fd for epoll (readable when events wait). */
int tracer_fd(const struct tracer *t);
/* Consume waiting events without blocking. <0 on a fatal error. */
int tracer_poll(struct tracer *t);
/* True once the service listened on the port; *ms is when. */
bool tracer_ready(const struct tracer *t, double *ms);
/* Copy everything collected so far into the model (may be called again). */
void tracer_snapshot(struct tracer *t, struct timeline *tl);
/* Bytes written to files and received from peers so far: changes while a
 * download moves. Read from mapped memory, so cheap enough for every tick. */
unsigned long long tracer_activity(const struct tracer *t);
void tracer_free(struct tracer *t);

#endif
