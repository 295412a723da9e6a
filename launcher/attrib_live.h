/* attrib_live: what the critical thread waits on now, for the live stall
 * line (stall.c; issue 15's "Live"). attribution_live (attrib_build.c)
 * fills it at each snapshot of the trace from the kernel's state of the
 * thread off CPU (bpf/attrib.bpf.c's attroff: the syscall it blocks in,
 * its fd's object, who woke it) classified as the attribution classifies
 * an interval (attr_classify), following a wait for a child of the tree to
 * what that child is doing. A module of its own (no libbpf): stall.c and
 * its tests read and set it. */
#ifndef TTS_ATTRIB_LIVE_H
#define TTS_ATTRIB_LIVE_H

#include <stdbool.h>

#include "attribution.h"

#define ATTR_LIVE_HOPS 4

/* One thread of the chain: the critical thread, then the child it waits for... */
struct attr_live_hop {
	int pid, tid;
	char comm[32];
	enum {
		LIVE_CPU,      /* on a CPU (no wait since since_ms) */
		LIVE_RUNNABLE, /* woken or preempted: waiting for a CPU */
		LIVE_BLOCKED,  /* in a wait */
	} state;
	enum attr_kind kind; /* LIVE_BLOCKED: the wait's kind */
	char what[96];	     /* its what (attr_classify's), or the Python function on CPU */
	char py[96];	     /* the Python function it waits in ("" none) */
	char call[32];	     /* the syscall ("" none) */
	char peer[64];	     /* net: ADDRESS:PORT, as connects[].peer says it */
	double since_ms;     /* the state began */
};

struct attr_live {
	bool valid;   /* filled from a trace */
	double at_ms; /* when */
	struct attr_live_hop hop[ATTR_LIVE_HOPS];
	int n_hops;
};

/* The last one filled (valid false before any). */
const struct attr_live *attr_live_now(void);
/* Replaces it (attribution_live; tests). NULL: none. */
void attr_live_set(const struct attr_live *l);

#endif
