/* tracer: opens, probes, configures, loads and attaches the BPF programs
 * for the process tree rooted at one pid, before that pid execs (a probe
 * table says which are required, which are heavy), and lightens them when
 * the requests window ends. What the programs report is gathered by the
 * collector (collector.h) and turned into the model by timeline_build.
 * Tracing never stops the service from starting: any failure gives NULL
 * and a reason, and the service runs untraced. */
#ifndef TTS_TRACER_H
#define TTS_TRACER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "config.h"

struct collector;

struct tracer;

struct tracer_opts {
	pid_t root_pid;	 /* forked child, blocked before exec */
	int listen_port; /* the ready port; 0: the first TCP listen */
	const struct config *cfg;
	int verbose; /* libbpf logs on stderr */
};

/* What the tracer attached, what fell back, and how it lightened: plain
 * data for the model's tracing section (timeline_build). */
struct tracer_fallback {
	char probe[64];
	char reason[256];
};

struct tracer_status {
	char **probes; /* attached, by name ("python_imports:PATH" per interpreter) */
	size_t n_probes;
	struct tracer_fallback *fallbacks;
	size_t n_fallbacks;
	bool usdt;	   /* python import probes attached */
	bool names;	   /* the getaddrinfo uprobes attached (peer names) */
	char tracefs[160]; /* "present", "mounted" or "unavailable: why" */
	bool light;	   /* lightened (the requests window ended) */
	double light_ms;
	char **detached, **kept;
	size_t n_detached, n_kept;
	const char *syscalls;		/* "exact" or "cheap" ([trace] syscalls, as it could be) */
	const char *programs;		/* "kept" (since an earlier run: progcache.h) or "loaded" */
	const char *const *approximate; /* cheap: the figures it gives approximately; NULL-ended */
};

struct tracer *tracer_start(const struct tracer_opts *o, char *why, size_t whylen);
/* The service was released (it execs now): the uprobe keeper takes the
 * links' last references (ukeeper.c), off the path from launch to exec.
 * Before any event is handled: a CUDA library's attach goes to it. */
void tracer_released(struct tracer *t);
/* An fd for epoll (readable when events wait). */
int tracer_fd(const struct tracer *t);
/* Consume waiting events without blocking. <0 on a fatal error. */
int tracer_poll(struct tracer *t);
/* True once the service listened on the port; *ms is when. */
bool tracer_ready(const struct tracer *t, double *ms);
/* What the ring buffer and the maps hold, for timeline_build. */
struct collector *tracer_collector(struct tracer *t);
const struct tracer_status *tracer_status(struct tracer *t);
/* Bytes written to files and received from peers so far: changes while a
 * download moves. Read from mapped memory, so cheap enough for every tick. */
unsigned long long tracer_activity(const struct tracer *t);
/* tracer_new's failure path (the run goes on untraced); a run that traced
 * leaves its tracer to the process's exit (supervise.c, session_free),
 * which is faster. */
void tracer_free(struct tracer *t);
/* [trace] requests_window is over (ready + window): detach the heavy probes
 * and narrow the rest (tracing.light). The tracer's own decision, asked for
 * by the pipeline after draining the ring buffer (the ready mark comes
 * from it); true when it lightened now. */
bool tracer_lighten_due(struct tracer *t);
/* The supervisor's window is over (its ready: the tracer's, or the port
 * seen listening in /proc first): lighten now, whatever the tracer's own
 * ready says (a listen seen after /proc's, by a few ms under load, or
 * never: the window's timeline would go without tracing.light, and the
 * host-wide probes would stay). */
void tracer_lighten_now(struct tracer *t);
/* doctor: open and load the real BPF object (nothing attached), then free
 * it. 0 with what loaded in why, or -1 with the reason. */
int tracer_test_load(char *why, size_t whylen);

#endif
