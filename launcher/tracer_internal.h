/* tracer_internal: what the tracer's files share (tracer.c: the probe
 * table, start and stop; tracer_attach.c: the attach of each kind of probe;
 * tracer_lighten.c: the requests window's end); nothing else includes it. */
#ifndef TTS_TRACER_INTERNAL_H
#define TTS_TRACER_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "collector.h"
#include "progcache.h"
#include "tracer.h"
#include "tracer_syscalls.h"

struct bpf_link;
struct bpf_program;
struct ring_buffer;
struct trace_bpf;

/* A tree-bound uprobe's follower (tracer_libcio.c): its fd, and the
 * program whose links it goes with */
struct follower {
	int fd;
	const struct bpf_program *prog;
};

struct tracer {
	struct trace_bpf *skel;
	struct trace_bpf *heavy; /* the copy the syscall pair's exit was loaded in, or NULL */
	struct ring_buffer *rb;
	struct bpf_link **links;
	size_t n_links;
	struct bpf_link **ulinks;	   /* uprobes (USDT): slow to remove */
	const struct bpf_program **uprogs; /* each one's program */
	size_t n_ulinks;
	struct follower
	    *followers; /* inherited perf events of tree-bound uprobes (tracer_libcio.c) */
	size_t n_followers;
	bool uprobes_kept;	   /* a keeper holds their last references (keep_uprobes) */
	int verbose;		   /* tracer_opts.verbose */
	int keeper_sock;	   /* later uprobe links go to the keeper here (gpu.c); -1 */
	struct tracer_drain drain; /* the syscall exit program after the window */
	bool cheap;		   /* [trace] syscalls = cheap, and it can be */
	bool libcio;		   /* cheap: libc's read/write family probed (tracer_libcio.c) */
	bool libcio_missed;	   /* ... and a close was estimated all the same (libcio_check) */
	struct progcache cache;	   /* [trace] keep_loaded: the programs' entry (progcache.h) */
	struct tracer_status st;
	struct collector col; /* what the ring buffer brings (the rb callback's ctx) */
};

/* How a program of the probe table (tracer.c) is attached, whether tracing is
 * worth anything without it (required: no tree to follow without exec and
 * fork tracking), whether it goes when the requests window ends (heavy),
 * whether it first finishes what began before (drain: sys_exit, for the
 * calls sys_enter saved) and the name it keeps meanwhile or when it stays
 * narrowed (light). */
enum probe_kind {
	PROBE_SECTION,	/* bpf_program__attach: raw_tp/tp_btf/tp by section name */
	PROBE_PERF,	/* software perf events (attach_per_cpu, attach_fault_tick) */
	PROBE_USDT,	/* Python's USDT probes, per interpreter binary */
	PROBE_UPROBE,	/* a libc function (attach_names) */
	PROBE_SYSCALLS, /* per-syscall tracepoints ([trace] syscalls = cheap) */
};

struct probe {
	const char *program;
	enum probe_kind kind;
	bool required;
	bool heavy;
	bool drain;
	const char *light; /* its name in tracing.light.kept */
};

/* tracer.c */
const struct probe *tr_probe_of(const char *program); /* NULL: not in the table */
enum probe_kind tr_probe_kind(const struct bpf_program *prog);
unsigned int tr_prog_id(const struct bpf_program *prog); /* 0: not loaded */
void tr_fallback(struct tracer *t, const char *probe, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void tr_probe_add(struct tracer *t, const char *name);
void tr_strv_add(char ***v, size_t *n, const char *s);
void tr_add_link(struct bpf_link ***links, size_t *n, struct bpf_link *l);
void tr_add_ulink(struct tracer *t, struct bpf_link *l, const struct bpf_program *prog);
/* the followers of prog's links (NULL: all) closed */
void tr_followers_close(struct tracer *t, const struct bpf_program *prog);

/* tracer_attach.c */
void tr_attach_names(struct tracer *t, pid_t pid);
/* Python's import probes in each interpreter pys[0..n_py), bound to the
 * tree of pid (tracer_attach.c) */
void tr_attach_imports(struct tracer *t, pid_t pid, char (*pys)[PATH_MAX], int n_py);
void tr_attach_per_cpu(struct tracer *t, struct bpf_program *prog, __u64 config, __u64 period,
		       bool user_only, const char *probe, const char *event);
void tr_attach_fault_tick(struct tracer *t, pid_t root);
/* cheap: the syscall tracepoints, attached on the heavy copy's thread
 * while the rest loads (tr_early_syscalls_hook fills one for
 * tracer_open_load), kept here until tr_attach_syscalls takes them */
#define EARLY_FAILS_MAX 64
struct early_syscalls {
	bool ran;
	int exits;
	double ms; /* the attach's time there */
	struct bpf_link **links;
	size_t n;
	int nfail, nfail_more; /* nfail_more: beyond fail[] */
	struct {
		char tp[48];
		int err;
	} fail[EARLY_FAILS_MAX];
};
struct tracer_load_hook;
void tr_early_syscalls_hook(struct tracer_load_hook *h, struct early_syscalls *e);
/* its links destroyed (on a thread of their own), if tr_attach_syscalls
 * did not take them */
void tr_early_syscalls_free(struct early_syscalls *e);
/* The pair on the tracepoints: e's when its attach ran (e NULL, or not
 * run: now, on this thread) */
int tr_attach_syscalls(struct tracer *t, struct early_syscalls *e, char *why, size_t whylen);
void tr_attach_libcio(struct tracer *t, pid_t pid);

/* tracer_lighten.c */
void tr_drain_check(struct tracer *t);

#endif
