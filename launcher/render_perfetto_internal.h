/* render_perfetto_internal: what render_perfetto.c shares with the parts
 * of the export kept in files of their own (render_perfetto_attr.c): the
 * event list and the writers of events and their arguments. */
#ifndef TTS_RENDER_PERFETTO_INTERNAL_H
#define TTS_RENDER_PERFETTO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "jsonw.h"
#include "timeline.h"

/* One trace event, written once all are sorted: the members in the order
 * name, cat, ph, s, id, ts, dur, pid, tid, args (those it has). */
struct event {
	char *name, *id, *args; /* owned; args: a JSON object, or NULL */
	const char *cat, *scope;
	char ph;
	bool has_ts, has_dur;
	long long ts, dur;
	int pid, tid;
};

struct events {
	struct event *v;
	size_t n, cap;
	int next_lane_tid;
	bool failed; /* out of memory somewhere */
};

/* The arguments of one event: an object written by jsonw into memory. */
struct args {
	char *buf;
	size_t len;
	FILE *f;
	struct jsonw w;
};

/* ms to the trace's microseconds */
long long pf_us(double ms);
/* An args object begun (NULL when out of memory), and its text (owned). */
struct jsonw *pf_args_begin(struct args *a);
char *pf_args_end(struct args *a);
/* Add ev: its args taken over, name and id copied. */
void pf_ev_add(struct events *e, struct event ev, const char *name, const char *id);
/* metadata: {"name": what, "ph": "M", ..., "args": {key: val}} */
void pf_meta_str(struct events *e, const char *what, int pid, int tid, const char *key,
		 const char *val);
void pf_meta_int(struct events *e, const char *what, int pid, int tid, const char *key,
		 long long val);

/* The attribution (render_perfetto_attr.c): the critical thread's state
 * track on the service spid, and the CPU samples on their threads. */
void perfetto_attribution(struct events *e, const struct timeline *tl, int spid);

#endif
