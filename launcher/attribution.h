/* attribution: the exclusive breakdown of the start-up window (exec ->
 * ready, or -> the root's exit when it never gets ready) into causes:
 * every millisecond of the window in exactly one cause, the causes summing
 * to the window (docs/timeline.md, "attribution"; issue 15).
 *
 * Pure arithmetic over plain records, no model and no kernel: the kernel's
 * off-CPU intervals (struct tl_off_event, bpf/attrib.bpf.c) are classified
 * by attr_classify into a kind and a `what`; attr_breakdown walks the
 * critical thread through the window (the on-CPU gaps between its
 * intervals are cpu), hopping once to the thread or process that woke it
 * when it waited on one of the tree (a futex, a pipe, wait4), and sums the
 * pieces by (kind, what). attrib_build.c feeds it from the collector and
 * writes the section. */
#ifndef TTS_ATTRIBUTION_H
#define TTS_ATTRIBUTION_H

#include <stdbool.h>
#include <stddef.h>

#include "attrib_samples.h"
#include "trace.h"

enum attr_kind {
	AK_CPU,
	AK_DISK,
	AK_FAULT,
	AK_NET,
	AK_SLEEP,
	AK_LOCK,
	AK_CHILD,
	AK_GPU,
	AK_RUNQ,
	AK_OTHER,
	AK_N,
};

/* "cpu", "disk", ... "runqueue", "other" */
const char *attr_kind_name(enum attr_kind k);
/* The kind named s, or AK_N. */
enum attr_kind attr_kind_of(const char *s);

/* The records the kernel sent, as they came (the collector keeps them):
 * off-CPU intervals, Python code objects' names, on-CPU samples. */
struct attr_store {
	struct tl_off_event *recs;
	size_t n, cap;
	struct tl_pycode_event *codes;
	size_t n_codes, cap_codes;
	struct tl_pysample_event *samples;
	size_t n_samples, cap_samples;
	unsigned long long lost; /* could not be kept (out of memory) */
	/* the mappings native samples (PYSAMPLE_NATIVE) fall in: such a
	 * sample is kept with code = its name's index (attr_store_native) */
	struct attr_natives *natives;
	/* told each off-CPU record's process (pyframes_note), freed with it */
	void (*note)(void *ctx, int pid);
	void (*note_free)(void *ctx);
	void *note_ctx;
};

/* One record of type EV_OFFCPU, EV_PYCODE or EV_PYSAMPLE (others ignored). */
void attr_store_add(struct attr_store *s, const void *data, size_t size);
/* "qualname (file:line)" of code object code in process pid; false if unknown. */
bool attr_store_pyname(const struct attr_store *s, int pid, __u64 code, char *out, size_t len);
/* The library a native sample (code: as kept) was in, or NULL. */
const char *attr_store_native(const struct attr_store *s, __u64 code);
void attr_store_free(struct attr_store *s);

/* What a wait on a task of the tree becomes (attr_classify's result). */
enum attr_hop {
	HOP_NONE,    /* the wait is its own cause */
	HOP_WAKER,   /* a thread of the same process woke it: what that one did */
	HOP_PROCESS, /* another process of the tree woke it: child, or followed */
};

/* One classified off-CPU interval of one thread; times in ms. */
struct attr_off {
	double start, end;
	double wake; /* woken (runnable from then on); <0: not seen */
	int pid, tid;
	int waker_pid, waker_tid;
	enum attr_kind kind;
	enum attr_hop hop;
	char what[96];
	char py[96]; /* the Python function it blocked in ("" none) */
};

/* Names attr_classify needs from outside: the path of a file (dev/ino),
 * the host:port of a peer, the command of a process of the tree. Each
 * writes into out and returns false when it does not know. */
struct attr_names {
	bool (*file)(void *ctx, __u64 dev, __u64 ino, char *out, size_t len);
	bool (*peer)(void *ctx, int family, const __u8 *addr, int port, char *out, size_t len);
	bool (*in_tree)(void *ctx, int pid); /* a process of the traced tree */
	/* the Python function of code object code in pid (NULL: never) */
	bool (*pyfunc)(void *ctx, int pid, __u64 code, char *out, size_t len);
	void *ctx;
};

/* The syscall's name ("read"), or NULL for one this table lacks. */
const char *attr_syscall_name(int nr);
/* Classify one kernel record (ms from clock_ns_to_ms by the caller). */
void attr_classify(const struct tl_off_event *e, double start_ms, double end_ms, double wake_ms,
		   const struct attr_names *nm, struct attr_off *out);

/* A process of the tree: its main thread's lifetime and its name. */
struct attr_proc {
	int pid, ppid;
	double start, end; /* exec (or fork) .. exit; end <0: still running */
	const char *comm;
	bool followed; /* the process that gets ready, or an ancestor of it */
};

/* A top-level import in a process (depth 0): cpu inside it is the import's. */
struct attr_import {
	int pid;
	double start, end;
	const char *name;
};

/* A Python function seen on CPU in a main thread at an instant; native:
 * no Python frame, func is the library the thread ran in (cpu in it is
 * still an import's when one is in progress) */
struct attr_sample {
	int tid;
	double t;
	const char *func;
	bool native;
};

/* A thread's time inside a CUDA call (gpu.c's spans): the critical
 * path's time in it is kind gpu, what the call's name ("CUDA init" for the
 * device-init calls). */
struct attr_gpu_call {
	int tid;
	double start, end;
	const char *what;
};

struct attr_input {
	double start, end; /* the window */
	int root;	   /* the critical process to begin with */
	const struct attr_off *offs;
	size_t n_offs;
	const struct attr_proc *procs;
	size_t n_procs;
	const struct attr_import *imports; /* sorted by start */
	size_t n_imports;
	const struct attr_sample *samples; /* sorted by tid, then t */
	size_t n_samples;
	/* the thread that listened (made it ready) when it is not its
	 * process's main thread: from listen_from (its first sign of life) on,
	 * a wait of that main thread on nothing of its own (a sleep, a futex,
	 * a wait in no file or socket) is what the listener did meanwhile */
	int listen_pid, listen_tid;
	double listen_from;
	/* the threads' CUDA calls (any order; they may nest or overlap) */
	const struct attr_gpu_call *gpu;
	size_t n_gpu;
};

struct attr_cause {
	enum attr_kind kind;
	char what[96];
	long long us; /* microseconds: the causes' us sum to the window's exactly */
	unsigned long long pieces;
};

#define ATTR_MAX_CAUSES 40   /* kept by size; the rest summed per kind */
#define ATTR_HOPS	3    /* waits on threads of a process followed this deep */
#define ATTR_MAX_SEGS	2000 /* the strip's runs: past that, short ones join their neighbour */

/* A run of one kind along the critical path, in time order (the strip):
 * what its longest piece was (a run of cpu over several functions is named
 * by the one that ran longest in it). */
struct attr_seg {
	double start, end;
	enum attr_kind kind;
	char what[96];
	double longest; /* ms of that piece */
};

struct attr_result {
	long long window_us, explained_us;
	struct attr_cause *causes; /* largest first */
	size_t n_causes;
	struct attr_seg *segs; /* the window in time order, adjacent pieces of a kind merged */
	size_t n_segs;
	bool segs_cut; /* more than ATTR_MAX_SEGS runs: the strip ends early */
	/* the samples the walk met on the critical path, each named by the
	 * cause its instant counts for (attrib_samples.h) */
	struct attr_samples samples;
};

/* The breakdown of in's window. 0, or -1 when out of memory. */
int attr_breakdown(const struct attr_input *in, struct attr_result *out);
void attr_result_free(struct attr_result *r);

#endif
