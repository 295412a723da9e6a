/* collector: what the kernel side sends and keeps, gathered in user space.
 * The ring buffer's records (processes, connects, listens, mlock calls,
 * imports, requests, renames) land here as they arrive; the map reads
 * (counters, fault series) are here too. timeline_build turns a collector
 * into the trace sections of the model.
 *
 * Requests, mlock calls, imports, connects and listens are plain C
 * records; the JSON of their sections is timeline_build's (timeline_net.c
 * for connects and listens). Times are kept as the model writes them
 * (coll_ms: ms to the microsecond), so readers of the records and of the
 * model see the same numbers. Processes are plain C records too, their
 * argv kept as the kernel sent it (timeline_build redacts it when it
 * writes processes[]). No
 * filesystem access here except the cwd of a live process (paths.c), read
 * when its exec or chdir arrives. */
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

/* An HTTP request the service answered (EV_REQUEST), times in ms. */
struct coll_request {
	double start_ms, end_ms, close_ms;
	__u64 faults, major_faults, model_faults, model_major_faults;
	__u64 bytes_out, bytes_in, writes;
	int pid, tid, port;
};

/* An mlock(2)/mlock2(2)/mlockall(2) call (EV_MLOCK). */
struct coll_mlock {
	int pid;
	const char *call; /* "mlock", "mlock2", "mlockall", "?" */
	__u64 len;
	int flags;
	int result;		/* the call's result, -1 when it failed */
	const char *errno_name; /* NULL: it did not fail */
	double start_ms, dur_ms;
};

/* A time as the model keeps it: ms to the microsecond, never negative
 * (what ms_json writes). */
static inline double coll_ms(double ms)
{
	return ms < 0 ? 0 : (double)(long long)(ms * 1000 + 0.5) / 1000;
}

/* A finished import (EV_IMPORT_START .. EV_IMPORT_DONE), times coll_ms. */
struct coll_import {
	char name[TRACE_MODULE_MAX + 1]; /* as the kernel sent it, NUL-terminated */
	int pid, depth;
	bool found;
	double start_ms, end_ms, dur_ms;
};

/* A process of the tree (EV_FORK, EV_EXEC, EV_EXIT, or only seen in the
 * maps); times coll_ms, <0: null. */
struct coll_proc {
	int pid, ppid;
	bool has_ppid;
	char *command; /* the exec'd file; NULL: null */
	char *argv;    /* its arguments as the kernel sent them (NUL-separated, cut) */
	size_t argv_len;
	bool has_argv; /* false: null */
	char comm[TRACE_COMM_MAX + 1];
	bool has_comm; /* false: the key is absent */
	double fork_ms, exec_ms, exit_ms;
	bool exited;	  /* exit: {code, signal}; false: null */
	int code, signal; /* signal > 0: killed (code null); else code (signal null) */
	long long execs;  /* 0: the key is absent */
};

/* A listen(2) (EV_LISTEN) by thread tid of pid, ms coll_ms. */
struct coll_listen {
	int pid, tid, port;
	double ms;
};

/* A connect(2) and what became of it (EV_CONNECT, EV_CONNECT_DONE,
 * EV_CONN_END, the TLS payload, the open connections' map at a snapshot);
 * times coll_ms. A has_ flag false: the model's value is null (or, for
 * ended_by/counts/tls, the key is absent). */
struct coll_connect {
	__u64 cookie; /* the socket (joins its outcome) */
	char peer[160];
	int family, port, pid;
	double start_ms, dur_ms;
	int ret, syscall_ret;
	bool pending;
	const char *result;	/* "pending" until the outcome */
	const char *errno_name; /* NULL: null */
	bool has_ms_to_result, has_bytes, has_established, has_closed, has_open;
	double ms_to_result, established_ms, closed_ms, open_ms;
	__u64 bytes_in, bytes_out;
	const char *ended_by; /* NULL: not ended (key absent) */
	bool has_counts;      /* reply_max and writes known */
	__u64 reply_max, writes;
	bool tls;
};

/* An import started and not done yet, innermost last per thread. */
struct coll_import_frame {
	__u32 tid;
	double start_ms;
	char name[TRACE_MODULE_MAX]; /* as the kernel sent it */
};

/* A host fact the trace cannot give, recorded when first needed: whether
 * a hub cache already held the blob of etag (downloads[].also_in). */
#define COLL_HUB_BLOBS_MAX 128
struct coll_hub_blob {
	char etag[128];
	char *blob; /* NULL: in none */
};

struct collector {
	struct trace_bpf *skel; /* the maps read (owned by the tracer) */
	pid_t root;
	int listen_port; /* 0: the first TCP listen is ready */
	const struct config *cfg;

	/* from ring buffer records */
	struct coll_proc **procs; /* in the order first seen */
	size_t n_procs, cap_procs;
	struct coll_proc **by_pid; /* the same, sorted by pid (collector_proc_find) */
	struct coll_connect *connects;
	size_t n_connects, cap_connects;
	struct coll_listen *listens;
	size_t n_listens, cap_listens;
	struct coll_mlock *mlocks;
	size_t n_mlocks, cap_mlocks;
	struct coll_import *imports; /* finished imports */
	size_t n_imports, cap_imports;
	struct coll_import_frame *open; /* imports started, not done */
	size_t n_open, cap_open;
	double exec_ms;		      /* root's first exec, -1 */
	double ready_ms;	      /* first matching listen, -1 */
	long ready_listen;	      /* its index in listens[], -1 */
	unsigned long long user_lost; /* records user space could not keep */

	/* directories relative paths start from: kernel dev/ino -> path */
	struct path_dirs dirs;
	struct tl_path2_event *path2; /* renames and symlinks, as received */
	size_t n_path2, cap_path2;
	struct coll_request *requests;
	size_t n_requests, cap_requests;
	struct peer_names names; /* host names of peers (peers.c) */
	double req_window_ms; /* requests accepted after ready + this are not kept; <0: no limit */
	unsigned long long req_after_window;
	struct attr_store off; /* off-CPU intervals, for the attribution (attrib_build.c) */
	struct gpu_trace *gpu; /* CUDA calls and libraries (gpu.c; the tracer's) */
	struct coll_hub_blob hub_blobs[COLL_HUB_BLOBS_MAX];
	int n_hub_blobs;
};

/* An empty collector for the tree rooted at root; req_window_ms < 0: every
 * request is kept. 0, or -1 when out of memory. */
int collector_init(struct collector *c, pid_t root, int listen_port, const struct config *cfg,
		   double req_window_ms);
void collector_free(struct collector *c);
/* The ring buffer callback (ctx: the collector). */
int collector_on_event(void *ctx, void *data, size_t size);

/* The record of pid, created when first seen (NULL: out of memory). */
struct coll_proc *collector_proc(struct collector *c, pid_t pid);
/* The records as interp reads them (interp.h), in the order first seen;
 * NULL when none or out of memory (free it; strings borrowed from c). */
struct interp_proc;
struct interp_proc *collector_interp_procs(const struct collector *c, size_t *n);
/* The record of pid, or NULL. */
const struct coll_proc *collector_proc_find(const struct collector *c, pid_t pid);
/* The newest connect record of a socket (cookie), or NULL. */
struct coll_connect *collector_connect(struct collector *c, __u64 cookie);
/* "a.b.c.d:port" or "[v6]:port". */
void collector_peer_string(int family, const __u8 *addr, int port, char *out, size_t len);

/* The per-CPU counters (CNT_*), summed. */
void collector_counters(struct collector *c, __u64 out[CNT_MAX]);
/* counts[b]: faults in bucket b (TRACE_BUCKETS), summed over the CPUs. 0,
 * or -1 (errno). */
int collector_fault_series(struct collector *c, __u64 *counts);

/* A time in the model: ms, to the microsecond, never negative. */
static inline json_t *ms_json(double ms) { return json_real(coll_ms(ms)); }

#endif
