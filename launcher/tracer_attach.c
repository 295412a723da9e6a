/* tracer_attach: the attach of each kind of probe the probe table
 * (tracer.c) names beyond a program's own section: software perf events per
 * CPU, the fault tick on the tree, the per-syscall tracepoints, libc's
 * sites bound to the tree (tracer_libcio.c) and getaddrinfo. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "elfsym.h"
#include "trace.h"
#include "trace.skel.h"
#include "tracer_internal.h"
#include "tracer_libcio.h"
#include "tracer_load.h"
#include "ukeeper.h"
#include "usdtarg.h"
#include "util.h"

static void libcio_add(void *ctx, struct bpf_link *l, int follower, const struct bpf_program *prog);

static void libcio_add(void *ctx, struct bpf_link *l, int follower, const struct bpf_program *prog);

/* A pair of uprobes on file for every process of the host (no tracefs to
 * bind them to the tree): progs[i] at off[i] with uo[i]. Both or neither:
 * 0 with both kept, or the errno. */
static int pair_host_wide(struct tracer *t, struct bpf_program *const *progs, const char *file,
			  const uint64_t *off, const struct bpf_uprobe_opts *uo)
{
	struct bpf_link *l[2] = {NULL, NULL};

	for (int i = 0; i < 2; i++) {
		l[i] = bpf_program__attach_uprobe_opts(progs[i], -1, file, (size_t)off[i], &uo[i]);
		if (!l[i]) {
			int err = errno;

			bpf_link__destroy(l[0]);
			return err;
		}
	}
	for (int i = 0; i < 2; i++)
		tr_add_ulink(t, l[i], progs[i]);
	return 0;
}

/* getaddrinfo in the libc the service runs with: the launcher's own (the
 * ld.so cache's libc.so.6, which a dynamically linked interpreter loads
 * too); a uprobe is per inode, so every traced process that calls it is
 * seen. Host names of peers (names.bpf.c); without it, the TLS server name
 * and DNS answers still name most peers. */
void tr_attach_names(struct tracer *t, pid_t pid)
{
	struct bpf_program *progs[2] = {t->skel->progs.gai_enter, t->skel->progs.gai_exit};
	const struct bpf_uprobe_opts uo[2] = {
	    {.sz = sizeof(uo[0]), .func_name = "getaddrinfo"},
	    {.sz = sizeof(uo[1]), .func_name = "getaddrinfo", .retprobe = true}};
	const uint64_t off[2] = {0, 0};
	char libc[PATH_MAX], why[PATH_MAX + 128];
	Dl_info di;
	int err;

	if (!dladdr((void *)getaddrinfo, &di) || !di.dli_fname || !realpath(di.dli_fname, libc)) {
		tr_fallback(t, "getaddrinfo", "libc not found; peer names from TLS and DNS only");
		return;
	}
	/* bound to the tree, as the libc sites of cheap: no breakpoint in any
	 * other process (a uprobe of every process is a trap in each
	 * neighbour's getaddrinfo, and installing it took ~15 ms), and a
	 * shared definition the next run finds up (ukeeper.c) */
	if (tracer_libcio_bind(t->skel->progs.gai_enter, t->skel->progs.gai_exit, pid, libc,
			       "getaddrinfo", libcio_add, t, why, sizeof(why)) == 0) {
		t->st.names = true;
		tr_probe_add(t, "getaddrinfo");
		return;
	}
	if (t->verbose)
		fprintf(stderr, "tts-launch: getaddrinfo for every process (%s)\n", why);
	if ((err = pair_host_wide(t, progs, libc, off, uo))) {
		tr_fallback(t, "getaddrinfo",
			    "failed to attach a uprobe to %s: %s; peer names from TLS "
			    "and DNS only",
			    libc, strerror(err));
		return;
	}
	t->st.names = true;
	tr_probe_add(t, "getaddrinfo");
}

/* Does path start with the ELF magic? */
static bool is_elf(const char *path)
{
	char m[4] = {0};
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool ok = fd >= 0 && read(fd, m, 4) == 4 && !memcmp(m, "\177ELF", 4);

	if (fd >= 0)
		close(fd);
	return ok;
}

/* Python's import probes (python.bpf.c) in the interpreter binary py: the
 * USDT notes read here, each probe a uprobe at its address with its
 * semaphore (ref_ctr_offset) and its arguments' places in the cookie, bound
 * to the tree like the libc sites (no other python of the host traps, nor
 * takes the probe's branch: the kernel counts the semaphore up in the tree's
 * processes only); for every process of the host when tracefs is not
 * there, as libbpf's USDT attach did. 0, or an errno with why said. */
static int import_probes(struct tracer *t, pid_t pid, const char *py, char *why, size_t whylen)
{
	/* each probe, and the one argument its program reads (cookie half) */
	static const char *const probe[2] = {"import__find__load__start",
					     "import__find__load__done"};
	static const char *const tag[2] = {"pyimport", "pyimport_done"};
	static const int arg[2] = {0, 1}; /* the name; found */
	struct bpf_program *progs[2] = {t->skel->progs.py_import_start,
					t->skel->progs.py_import_done};
	uint64_t cookie[2], off[2], sema[2];
	struct elfsym *e = elfsym_open(py, why, whylen);
	int err;

	if (!e)
		return ENOEXEC;
	for (int i = 0; i < 2; i++) {
		struct elfsym_usdt u;
		const char *bad = NULL;
		uint32_t loc;

		/* the first note of each (CPython has one per probe) */
		if (!elfsym_usdt(e, "python", probe[i], &u)) {
			elfsym_close(e);
			snprintf(why, whylen,
				 "%s has no USDT probes (a CPython built without --with-dtrace)",
				 py);
			return ENOENT;
		}
		if (usdtarg_loc(u.args, arg[i], &loc, &bad)) {
			elfsym_close(e);
			snprintf(why, whylen, "%s: USDT probe %s, argument %d (\"%s\"): %s", py,
				 probe[i], arg[i] + 1, u.args, bad);
			return EINVAL;
		}
		cookie[i] = (uint64_t)loc << (32 * arg[i]);
		off[i] = u.offset;
		sema[i] = u.sema_offset;
	}
	elfsym_close(e);
	if (!tracer_libcio_bind_at(progs, pid, py, tag, off, sema, cookie, libcio_add, t, why,
				   whylen))
		return 0;
	if (t->verbose)
		fprintf(stderr, "tts-launch: Python's import probes for every process (%s)\n", why);
	{
		const struct bpf_uprobe_opts uo[2] = {
		    {.sz = sizeof(uo[0]), .ref_ctr_offset = sema[0], .bpf_cookie = cookie[0]},
		    {.sz = sizeof(uo[1]), .ref_ctr_offset = sema[1], .bpf_cookie = cookie[1]}};

		if ((err = pair_host_wide(t, progs, py, off, uo)))
			snprintf(why, whylen, "failed to attach a uprobe to %s: %s", py,
				 strerror(err));
		return err;
	}
}

void tr_attach_imports(struct tracer *t, pid_t pid, char (*pys)[PATH_MAX], int n_py)
{
	for (int i = 0; i < n_py; i++) {
		char pname[PATH_MAX + 32], why[PATH_MAX + 256];

		if (!bpf_program__autoload(t->skel->progs.py_import_start)) {
			tr_fallback(
			    t, "python_imports",
			    "the kernel lacks bpf_get_attach_cookie (5.15): imports derived "
			    "from module files");
			return;
		}
		if (!is_elf(pys[i])) {
			tr_fallback(
			    t, "python_imports",
			    "%s is not an ELF binary (a wrapper script such as a pyenv shim: "
			    "the interpreter it starts is not probed)",
			    pys[i]);
			continue;
		}
		if (import_probes(t, pid, pys[i], why, sizeof(why))) {
			tr_fallback(t, "python_imports", "%s", why);
			continue;
		}
		t->st.usdt = true;
		snprintf(pname, sizeof(pname), "python_imports:%.*s", PATH_MAX - 1, pys[i]);
		tr_probe_add(t, pname);
	}
}

/* prog on a new software perf event attr of pid (-1: all) on cpu (-1:
 * any): the link, kept with the tracer's, or NULL with errno set. */
static struct bpf_link *perf_link(struct tracer *t, struct bpf_program *prog,
				  struct perf_event_attr *attr, pid_t pid, int cpu)
{
	int fd = (int)syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC), err;
	struct bpf_link *l;

	if (fd < 0)
		return NULL;
	l = bpf_program__attach_perf_event(prog, fd);
	if (!l) {
		err = errno;
		close(fd);
		errno = err;
		return NULL;
	}
	tr_add_link(&t->links, &t->n_links, l);
	return l;
}

static struct perf_event_attr sw_event(__u64 config, __u64 period, bool user_only)
{
	struct perf_event_attr attr = {
	    .type = PERF_TYPE_SOFTWARE,
	    .size = sizeof(attr),
	    .config = config,
	    .sample_period = period,
	    .exclude_kernel = user_only,
	};

	return attr;
}

/* A BPF program on a software perf event, one event per CPU (user_only:
 * samples that interrupt kernel code are skipped): listed under name in the
 * probes, or switched off with a fallback naming the event. */
void tr_attach_per_cpu(struct tracer *t, struct bpf_program *prog, __u64 config, __u64 period,
		       bool user_only, const char *name, const char *event)
{
	struct perf_event_attr attr = sw_event(config, period, user_only);
	int ncpu = libbpf_num_possible_cpus(), attached = 0, err = 0;

	for (int cpu = 0; cpu < ncpu; cpu++) {
		if (perf_link(t, prog, &attr, -1, cpu))
			attached++;
		else if (errno != ENODEV) /* a possible CPU that is offline has no events */
			err = errno;
	}
	if (attached && !err)
		tr_probe_add(t, name);
	else
		tr_fallback(t, name, "software perf event %s: %s", event,
			    strerror(err ? err : ENODEV));
}

/* 99 Hz (issue 15: the attribution's CPU samples; off the beat of 100 Hz
 * timers), about 10.1 ms */
#define FAULT_TICK_NS (1000 * 1000 * 1000 / 99)

/* fault_tick: every ~10 ms of the tree's own user-mode run time (task-clock
 * counts ns; inherited by every thread and process the root starts, so an
 * idle machine is never woken for it): the fault-rate series of threads
 * that do not leave the CPU. A kernel that cannot inherit the event gets
 * the per-CPU cpu-clock instead, which ticks whether the tree runs or not. */
void tr_attach_fault_tick(struct tracer *t, pid_t root)
{
	struct perf_event_attr attr = sw_event(PERF_COUNT_SW_TASK_CLOCK, FAULT_TICK_NS, true);

	attr.inherit = 1;
	if (perf_link(t, t->skel->progs.fault_tick, &attr, root, -1)) {
		tr_probe_add(t, "fault_tick");
		return;
	}
	tr_fallback(t, "fault_tick",
		    "task-clock on the tree: %s; a per-CPU cpu-clock event instead",
		    strerror(errno));
	tr_attach_per_cpu(t, t->skel->progs.fault_tick, PERF_COUNT_SW_CPU_CLOCK, FAULT_TICK_NS,
			  true, "fault_tick", "cpu-clock");
}

static void syscall_fail(void *ctx, const char *tp, int err)
{
	tr_fallback(ctx, tp, "failed to attach the tracepoint syscalls/%s: %s", tp, strerror(err));
}

/* On the heavy copy's thread: nothing of the tracer is touched there, the
 * failures are kept for tr_attach_syscalls to say */
static void early_fail(void *ctx, const char *tp, int err)
{
	struct early_syscalls *e = ctx;

	if (e->nfail == EARLY_FAILS_MAX) {
		e->nfail_more++;
		return;
	}
	snprintf(e->fail[e->nfail].tp, sizeof(e->fail[e->nfail].tp), "%s", tp);
	e->fail[e->nfail++].err = err;
}

static void early_attach(struct trace_bpf *heavy, void *arg)
{
	struct early_syscalls *e = arg;
	double t0 = clock_ms();

	e->exits = tracer_syscalls_attach(heavy->progs.syscall_enter, heavy->progs.syscall_exit,
					  heavy->progs.syscall_exit_paths, &e->links, &e->n,
					  early_fail, e);
	e->ms = clock_ms() - t0;
	e->ran = true;
}

struct doomed_links {
	struct bpf_link **links;
	size_t n;
};

static void *destroy_links(void *arg)
{
	struct doomed_links *d = arg;

	for (size_t i = 0; i < d->n; i++)
		bpf_link__destroy(d->links[i]);
	free(d->links);
	free(d);
	return NULL;
}

/* The last close of a syscall tracepoint's perf event waits for grace
 * periods (BENCHMARKS.md: up to ~200 ms each here): a failed load, a
 * retry, then the untraced start would wait for ~54 of them. They are
 * closed on a thread of their own; if it cannot start, here. */
void tr_early_syscalls_free(struct early_syscalls *e)
{
	struct doomed_links *d;
	pthread_t th;

	if (e->n && (d = malloc(sizeof(*d)))) {
		*d = (struct doomed_links){e->links, e->n};
		if (!pthread_create(&th, NULL, destroy_links, d)) {
			pthread_detach(th);
			memset(e, 0, sizeof(*e));
			return;
		}
		free(d);
	}
	for (size_t i = 0; i < e->n; i++)
		bpf_link__destroy(e->links[i]);
	free(e->links);
	memset(e, 0, sizeof(*e));
}

static void early_undo(void *arg) { tr_early_syscalls_free(arg); }

void tr_early_syscalls_hook(struct tracer_load_hook *h, struct early_syscalls *e)
{
	memset(e, 0, sizeof(*e));
	h->heavy_loaded = early_attach;
	h->undo = early_undo;
	h->arg = e;
}

/* [trace] syscalls = cheap: the pair on the rare calls' tracepoints
 * (tracer_syscalls.c); without any exit there is no tree to follow. */
int tr_attach_syscalls(struct tracer *t, struct early_syscalls *e, char *why, size_t whylen)
{
	int exits;

	if (e && e->ran) {
		if (t->verbose)
			fprintf(stderr,
				"tts-launch: tracer: %zu syscall tracepoints attached beside the "
				"load in %.1f ms\n",
				e->n, e->ms);
		for (size_t i = 0; i < e->n; i++)
			tr_add_link(&t->links, &t->n_links, e->links[i]);
		for (int i = 0; i < e->nfail; i++)
			syscall_fail(t, e->fail[i].tp, e->fail[i].err);
		if (e->nfail_more)
			tr_fallback(t, "syscalls", "%d more syscall tracepoints failed to attach",
				    e->nfail_more);
		exits = e->exits;
		free(e->links);
		memset(e, 0, sizeof(*e));
	} else {
		exits = tracer_syscalls_attach(
		    tracer_load_prog(t->skel, t->heavy, "syscall_enter"),
		    tracer_load_prog(t->skel, t->heavy, "syscall_exit"),
		    tracer_load_prog(t->skel, t->heavy, "syscall_exit_paths"), &t->links,
		    &t->n_links, syscall_fail, t);
	}
	if (!exits) {
		snprintf(why, whylen, "failed to attach syscall_exit to any syscall tracepoint");
		return -1;
	}
	tr_probe_add(t, "syscall_enter"); /* a call whose entry failed: a fallback */
	tr_probe_add(t, "syscall_exit");
	tr_probe_add(t, "syscall_exit_paths");
	return 0;
}

static void libcio_add(void *ctx, struct bpf_link *l, int follower, const struct bpf_program *prog)
{
	struct tracer *t = ctx;
	struct follower *nf = realloc(t->followers, (t->n_followers + 1) * sizeof(*nf));

	tr_add_ulink(t, l, prog);
	if (!nf) {
		close(follower); /* its children are not followed: their figures from close */
		return;
	}
	t->followers = nf;
	nf[t->n_followers].fd = follower;
	nf[t->n_followers++].prog = prog;
}

/* The followers of prog (NULL: all), this process's copies */
void tr_followers_close(struct tracer *t, const struct bpf_program *prog)
{
	size_t kept = 0;

	for (size_t i = 0; i < t->n_followers; i++)
		if (!prog || t->followers[i].prog == prog)
			close(t->followers[i].fd);
		else
			t->followers[kept++] = t->followers[i];
	t->n_followers = kept;
}

/* cheap: libc's read/write family for the tree of pid (tracer_libcio.c):
 * every function probed, its figures are exact, else approximate */
void tr_attach_libcio(struct tracer *t, pid_t pid)
{
	char probe[PATH_MAX + 16], why[PATH_MAX + 192];

	t->libcio = tracer_libcio_start(t->skel->progs.libc_io, pid, libcio_add, t, probe,
					sizeof(probe), why, sizeof(why));
	if (*why)
		tr_fallback(t, "libc_io", "%s", why);
	if (*probe)
		tr_probe_add(t, probe);
	if (t->libcio) {
		t->st.approximate = tracer_libcio_approximate;
		t->skel->bss->libcio_on = 1;
	}
}
