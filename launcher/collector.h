/* collector: what the kernel side sends and keeps, gathered in user space.
 * The ring buffer's records (processes, connects, listens, mlock calls,
 * imports, requests, renames) land here as they arrive; the map reads
 * (counters, fault series) are here too. timeline_build turns a collector
 * into the trace sections of the model.
 *
 * Still to do (issue 13): the per-event state below is kept as jansson
 * values; the target is plain C records, with timeline_build the only
 * module that writes JSON. No filesystem access here except the cwd of a
 * live process (paths.c), read when its exec or chdir arrives. */
#ifndef TTS_COLLECTOR_H
#define TTS_COLLECTOR_H

#include <jansson.h>
#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "attribution.h"
#include "config.h"
#include "paths.h"
#include "peers.h"
#include "trace.h"

struct trace_bpf;
struct gpu_trace;

struct collector {
	struct trace_bpf *skel; /* the maps read (owned by the tracer) */
	pid_t root;
	int listen_port; /* 0: the first TCP listen is ready */
	const struct config *cfg;

	/* from ring buffer records */
	json_t *procs;	    /* "pid" -> process object */
	json_t *connects;   /* [connect records] */
	__u64 *conn_cookie; /* the socket of each connect record (joins its outcome) */
	size_t cap_cookie;
	json_t *listens;
	json_t *mlocks;
	json_t *imports;	      /* finished imports */
	json_t *import_stack;	      /* "tid" -> [open frames] */
	double exec_ms;		      /* root's first exec, -1 */
	double ready_ms;	      /* first matching listen, -1 */
	unsigned long long user_lost; /* records user space could not keep */

	/* directories relative paths start from: kernel dev/ino -> path */
	struct path_dirs dirs;
	struct tl_path2_event *path2; /* renames and symlinks, as received */
	size_t n_path2, cap_path2;
	json_t *requests;
	struct peer_names names; /* host names of peers (peers.c) */
	double req_window_ms; /* requests accepted after ready + this are not kept; <0: no limit */
	unsigned long long req_after_window;
	struct attr_store off; /* off-CPU intervals, for the attribution (attrib_build.c) */
	struct gpu_trace *gpu; /* CUDA calls and libraries (gpu.c; the tracer's) */
};

/* An empty collector for the tree rooted at root; req_window_ms < 0: every
 * request is kept. 0, or -1 when out of memory. */
int collector_init(struct collector *c, pid_t root, int listen_port, const struct config *cfg,
		   double req_window_ms);
void collector_free(struct collector *c);
/* The ring buffer callback (ctx: the collector). */
int collector_on_event(void *ctx, void *data, size_t size);

/* The process object of pid, created when first seen. */
json_t *collector_proc(struct collector *c, pid_t pid);
/* The newest connect record of a socket (cookie), or NULL. */
json_t *collector_connect(struct collector *c, __u64 cookie);
/* "a.b.c.d:port" or "[v6]:port". */
void collector_peer_string(int family, const __u8 *addr, int port, char *out, size_t len);

/* The per-CPU counters (CNT_*), summed. */
void collector_counters(struct collector *c, __u64 out[CNT_MAX]);
/* counts[b]: faults in bucket b (TRACE_BUCKETS), summed over the CPUs. 0,
 * or -1 (errno). */
int collector_fault_series(struct collector *c, __u64 *counts);

/* A time in the model: ms, to the microsecond, never negative. */
static inline json_t *ms_json(double ms)
{
	return json_real(ms < 0 ? 0 : (double)(long long)(ms * 1000 + 0.5) / 1000);
}

#endif
