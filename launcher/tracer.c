/* tracer: loads the BPF object (the bpf/ domain files, linked into one skeleton) for the process
 * tree rooted at the forked, still blocked child and hands its ring buffer to the collector.
 *
 * Order (STYLE.md 3): open -> probe what the kernel has (autoload off for the
 * rest, listed as fallbacks) -> set targ_ rodata -> load -> insert the root
 * pid -> attach each program on its own -> ring buffer. Any failure before a
 * usable set is attached gives NULL and a reason; the service then runs
 * untraced. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "collector.h"
#include "gpu.h"
#include "hostprobe.h"
#include "interp.h"
#include "pyframes.h"
#include "trace.h"
#include "trace.skel.h"
#include "tracer.h"
#include "tracer_libcio.h"
#include "tracer_load.h"
#include "tracer_syscalls.h"
#include "ukeeper.h"
#include "util.h"

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
	struct tracer_status st;
	struct collector col; /* what the ring buffer brings (the rb callback's ctx) */
};

/* The probe table: how each program is attached, whether tracing is
 * worth anything without it (required: no tree to follow without exec and
 * fork tracking), whether it goes when the requests window ends (heavy),
 * whether it first finishes what began before (drain: sys_exit, for the
 * calls sys_enter saved) and the name it keeps meanwhile or when it stays
 * narrowed (light). After the window no program runs on every syscall or
 * every context switch of the host (BENCHMARKS.md, "Neighbours"). A
 * program not listed is attached as its section says, optional and kept. */
enum probe_kind {
	PROBE_SECTION,	/* bpf_program__attach: raw_tp/tp_btf/tp by section name */
	PROBE_PERF,	/* software perf events (attach_per_cpu, attach_fault_tick) */
	PROBE_USDT,	/* Python's USDT probes, per interpreter binary */
	PROBE_UPROBE,	/* a libc function (attach_names) */
	PROBE_SYSCALLS, /* per-syscall tracepoints ([trace] syscalls = cheap) */
};

#define DRAINING(p) p " (finishing the calls begun before the window ended)"

static const struct probe {
	const char *program;
	enum probe_kind kind;
	bool required;
	bool heavy;
	bool drain;
	const char *light; /* its name in tracing.light.kept */
} probe_table[] = {
    {"sys_enter", PROBE_SECTION, true, true, false, NULL},
    {"sys_exit", PROBE_SECTION, true, true, true, DRAINING("sys_exit")},
    /* one of the two pairs is loaded ([trace] syscalls) */
    {"syscall_enter", PROBE_SYSCALLS, true, true, false, NULL},
    {"syscall_exit", PROBE_SYSCALLS, true, true, true, DRAINING("syscall_exit")},
    {"sched_process_fork", PROBE_SECTION, false, false, false, NULL},
    {"sched_process_exec", PROBE_SECTION, true, false, false, NULL},
    {"sched_process_exit", PROBE_SECTION, false, false, false, NULL},
    {"page_fault_user", PROBE_SECTION, false, true, false, NULL},
    {"major_fault", PROBE_PERF, false, false, false, NULL},
    {"fault_tick", PROBE_PERF, false, false, false, NULL},
    {"sched_switch", PROBE_SECTION, false, true, false, NULL},
    {"block_bio_queue", PROBE_SECTION, false, true, false, NULL},
    {"block_rq_issue", PROBE_SECTION, false, true, false, NULL},
    {"block_rq_complete", PROBE_SECTION, false, true, false, NULL},
    {"inet_sock_set_state", PROBE_SECTION, false, true, false, NULL},
    {"attr_waking", PROBE_SECTION, false, true, false, NULL}, /* attribution: who woke a thread */
    {"attr_fault", PROBE_SECTION, false, true, false, NULL},  /* attribution: a fault in progress */
    /* uprobes are per inode: every process of the host that runs the file traps */
    {"py_import_start", PROBE_USDT, false, true, false, "python_imports"}, /* one name */
    {"py_import_done", PROBE_USDT, false, true, false, NULL},
    /* cheap: libc's read/write family, the tree's memory only (tracer_libcio.c) */
    {"libc_io", PROBE_UPROBE, false, true, false, "libc_io"},
    {"gai_enter", PROBE_UPROBE, false, true, false, "getaddrinfo"}, /* one name for the pair */
    {"gai_exit", PROBE_UPROBE, false, true, false, NULL},
    {"gpu_mmap", PROBE_SECTION, false, false, false, NULL}, /* a CUDA library mapped (gpu.c) */
    {"gpu_enter", PROBE_UPROBE, false, false, false, NULL}, /* per library: "cuda:PATH" */
    {"gpu_exit", PROBE_UPROBE, false, false, false, NULL},
};

static const struct probe *probe_of(const char *program)
{
	for (size_t i = 0; i < sizeof(probe_table) / sizeof(probe_table[0]); i++)
		if (!strcmp(probe_table[i].program, program))
			return &probe_table[i];
	return NULL;
}

static enum probe_kind probe_kind(const struct bpf_program *prog)
{
	const struct probe *p = probe_of(bpf_program__name(prog));
	const char *sec = bpf_program__section_name(prog);

	if (p)
		return p->kind;
	return !strncmp(sec, "uprobe", 6) || !strncmp(sec, "uretprobe", 9) ? PROBE_UPROBE
	       : !strncmp(sec, "usdt", 4)				   ? PROBE_USDT
	       : !strcmp(sec, "perf_event")				   ? PROBE_PERF
									   : PROBE_SECTION;
}

static int verbose_level;

static int print_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_WARN) {
		char *msg = NULL;
		va_list cp;

		va_copy(cp, ap);
		if (vasprintf(&msg, fmt, cp) >= 0)
			tracer_load_note(msg);
		va_end(cp);
		free(msg);
	}
	if (!verbose_level || (level == LIBBPF_DEBUG && verbose_level < 2))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static void fallback(struct tracer *t, const char *probe, const char *fmt, ...)
{
	struct tracer_fallback *n;
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	n = realloc(t->st.fallbacks, (t->st.n_fallbacks + 1) * sizeof(*n));
	if (!n)
		return;
	t->st.fallbacks = n;
	n += t->st.n_fallbacks++;
	snprintf(n->probe, sizeof(n->probe), "%s", probe);
	snprintf(n->reason, sizeof(n->reason), "%s", buf);
}

static void strv_add(char ***v, size_t *n, const char *s)
{
	char **nv = realloc(*v, (*n + 1) * sizeof(*nv)), *d;

	if (!nv)
		return;
	*v = nv;
	d = strdup(s);
	if (d)
		nv[(*n)++] = d;
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void probe_add(struct tracer *t, const char *name)
{
	strv_add(&t->st.probes, &t->st.n_probes, name);
}

/* The Python binary to put the import probes on: the interpreter this run
 * execs (the -- COMMAND when it is a python, else [app] python; a runner's
 * (uv run) is the app's .venv python), resolved to its real file (a uprobe
 * is per inode; the pid tree filters in-kernel). None when the command is
 * no python (a shell, a binary): a binary probed costs its attach and its
 * detach (keep_uprobes), and imports.c derives the imports of a python
 * started some other way from its module files. */
static int python_candidates(const struct config *cfg, char out[][PATH_MAX], int max)
{
	char found[PATH_MAX], err[CONFIG_ERR_MAX], *venv = NULL;
	const char *cand = NULL;
	int n = 0;

	if (cfg && cfg->n_command > 0 && cfg->command[0]) {
		cand = cfg->command[0];
	} else if (cfg &&
		   config_app_interpreter(cfg, found, sizeof(found), err, sizeof(err)) == 0) {
		cand = found;
		if (interp_is_runner(found))
			cand = venv = config_venv_python(cfg->app_dir);
	}
	if (cand && !strchr(cand, '/') && interp_is_python(cand)) {
		/* a bare name: where the service's PATH finds it */
		struct config c = *cfg;

		c.python = (char *)cand;
		c.source = (char *)"";
		cand = config_app_interpreter(&c, found, sizeof(found), err, sizeof(err)) == 0
			   ? found
			   : NULL;
	}
	if (!cand || !interp_is_python(cand))
		cand = NULL; /* a shell or a binary: imports, if any, are derived */
	if (cand && max > 0 && realpath(cand, out[0]))
		n = 1;
	free(venv);
	return n;
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

static void add_link(struct bpf_link ***links, size_t *n, struct bpf_link *l)
{
	struct bpf_link **nl = realloc(*links, (*n + 1) * sizeof(*nl));

	if (!nl) {
		bpf_link__destroy(l);
		return;
	}
	*links = nl;
	nl[(*n)++] = l;
}

/* a uprobe or USDT link of prog, kept with the others (keep_uprobes) */
static void add_ulink(struct tracer *t, struct bpf_link *l, const struct bpf_program *prog)
{
	const struct bpf_program **np = realloc(t->uprogs, (t->n_ulinks + 1) * sizeof(*np));

	if (!np) {
		bpf_link__destroy(l);
		return;
	}
	t->uprogs = np;
	np[t->n_ulinks] = prog;
	add_link(&t->ulinks, &t->n_ulinks, l);
}

/* prog's id (0: none, not loaded) */
static unsigned int prog_id(const struct bpf_program *prog)
{
	struct bpf_prog_info pi;
	__u32 len = sizeof(pi);

	memset(&pi, 0, sizeof(pi));
	if (!prog || bpf_program__fd(prog) < 0 ||
	    bpf_obj_get_info_by_fd(bpf_program__fd(prog), &pi, &len))
		return 0;
	return pi.id;
}

/* Removing a uprobe waits for an RCU grace period (~100-140 ms per probe
 * here, measured with strace -tt -y: each close(<bpf_link>) of a USDT link at
 * exit), paid by whoever drops the last reference to its link. So the main
 * process never drops one: right after the attach, a keeper process (a
 * grandchild, re-parented away from us so the supervisor never counts it
 * with the service's processes) holds a copy of every uprobe link fd and
 * nothing else; tts-launch disconnects its own links and lets its exit drop
 * references that are not the last. The keeper waits on a pidfd of
 * tts-launch: when tts-launch exits, however it ends (SIGKILL included), the
 * keeper closes the links (paying the grace periods where no caller waits)
 * and exits; its life is tts-launch's plus that detach. */

/* The keeper gets a copy of every link of the probe table's programs
 * (their ids: ukeeper_link_fds): the uprobe and USDT links, the syscall
 * tracepoints' (cheap: a tracepoint's perf event waits for a grace period
 * when its last reference goes, ~200 ms each here, ~50 of them), and the
 * raw tracepoints' and perf events' too: the last detach of a raw
 * tracepoint patches the kernel's text and waits (sched_waking's took
 * 75 ms, page_fault_user's 18 ms in tts-launch's exit, strace -tt). So no
 * close at tts-launch's exit is the last one: the command's exit does not
 * wait for any detach (BENCHMARKS.md, "The whole command"). */
static void keep_uprobes(struct tracer *t)
{
	unsigned int ids[sizeof(probe_table) / sizeof(probe_table[0])], of[UKEEPER_MAX_FDS];
	int fds[UKEEPER_MAX_FDS], n, n_ids = 0;
	/* cheap: the syscall tracepoints kept up past the run (ukeeper.c),
	 * closed with syscall_exit's links at the window's end */
	struct ukeeper_hold hold = {tracer_syscalls_hold,
				    prog_id(tracer_load_prog(t->skel, t->heavy, "syscall_exit"))};

	for (size_t i = 0; i < sizeof(probe_table) / sizeof(probe_table[0]); i++) {
		unsigned int id =
		    prog_id(tracer_load_prog(t->skel, t->heavy, probe_table[i].program));

		if (id)
			ids[n_ids++] = id;
	}
	n = ukeeper_link_fds(ids, n_ids, fds, UKEEPER_MAX_FDS);
	memset(of, 0, sizeof(of));
	/* the followers go with their programs' links (no program of their own) */
	for (size_t i = 0; i < t->n_followers && n < UKEEPER_MAX_FDS; i++) {
		of[n] = prog_id(t->followers[i].prog);
		fds[n++] = t->followers[i].fd;
	}
	/* with no link yet, still when CUDA may be attached later: the keeper
	 * is what continues a process held at its mapping if we die */
	if (n || bpf_program__fd(t->skel->progs.gpu_enter) >= 0)
		t->uprobes_kept =
		    ukeeper_start(fds, of, n, t->cheap ? &hold : NULL, &t->keeper_sock);
}

/* gpu.c's attaches, as probes and fallbacks */
static void gpu_note(void *ctx, const char *probe, bool ok, const char *reason)
{
	struct tracer *t = ctx;

	if (ok)
		probe_add(t, reason);
	else
		fallback(t, probe, "%s", reason);
}

/* ---- start ---- */

static void libcio_add(void *ctx, struct bpf_link *l, int follower, const struct bpf_program *prog);

/* getaddrinfo in the libc the service runs with: the launcher's own (the
 * ld.so cache's libc.so.6, which a dynamically linked interpreter loads
 * too); a uprobe is per inode, so every traced process that calls it is
 * seen. Host names of peers (names.bpf.c); without it, the TLS server name
 * and DNS answers still name most peers. */
static void attach_names(struct tracer *t, pid_t pid)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = "getaddrinfo");
	char libc[PATH_MAX], why[PATH_MAX + 128];
	struct bpf_link *le, *lx;
	Dl_info di;
	int err;

	if (!dladdr((void *)getaddrinfo, &di) || !di.dli_fname || !realpath(di.dli_fname, libc)) {
		fallback(t, "getaddrinfo", "libc not found; peer names from TLS and DNS only");
		return;
	}
	/* bound to the tree, as the libc sites of cheap: no breakpoint in any
	 * other process (a uprobe of every process is a trap in each
	 * neighbour's getaddrinfo, and installing it took ~15 ms), and a
	 * shared definition the next run finds up (ukeeper.c) */
	if (tracer_libcio_bind(t->skel->progs.gai_enter, t->skel->progs.gai_exit, pid, libc,
			       "getaddrinfo", libcio_add, t, why, sizeof(why)) == 0) {
		t->st.names = true;
		probe_add(t, "getaddrinfo");
		return;
	}
	if (verbose_level)
		fprintf(stderr, "tts-launch: getaddrinfo for every process (%s)\n", why);
	le = bpf_program__attach_uprobe_opts(t->skel->progs.gai_enter, -1, libc, 0, &uo);
	err = le ? 0 : errno;
	uo.retprobe = true;
	lx = le ? bpf_program__attach_uprobe_opts(t->skel->progs.gai_exit, -1, libc, 0, &uo) : NULL;
	if (!lx) {
		err = err ? err : errno;
		bpf_link__destroy(le);
		fallback(t, "getaddrinfo",
			 "failed to attach a uprobe to %s: %s; peer names from TLS "
			 "and DNS only",
			 libc, strerror(err));
		return;
	}
	add_ulink(t, le, t->skel->progs.gai_enter);
	add_ulink(t, lx, t->skel->progs.gai_exit);
	t->st.names = true;
	probe_add(t, "getaddrinfo");
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
	add_link(&t->links, &t->n_links, l);
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
static void attach_per_cpu(struct tracer *t, struct bpf_program *prog, __u64 config, __u64 period,
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
		probe_add(t, name);
	else
		fallback(t, name, "software perf event %s: %s", event,
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
static void attach_fault_tick(struct tracer *t, pid_t root)
{
	struct perf_event_attr attr = sw_event(PERF_COUNT_SW_TASK_CLOCK, FAULT_TICK_NS, true);

	attr.inherit = 1;
	if (perf_link(t, t->skel->progs.fault_tick, &attr, root, -1)) {
		probe_add(t, "fault_tick");
		return;
	}
	fallback(t, "fault_tick", "task-clock on the tree: %s; a per-CPU cpu-clock event instead",
		 strerror(errno));
	attach_per_cpu(t, t->skel->progs.fault_tick, PERF_COUNT_SW_CPU_CLOCK, FAULT_TICK_NS, true,
		       "fault_tick", "cpu-clock");
}

static void syscall_fail(void *ctx, const char *tp, int err)
{
	fallback(ctx, tp, "failed to attach the tracepoint syscalls/%s: %s", tp, strerror(err));
}

/* [trace] syscalls = cheap: the pair on the rare calls' tracepoints
 * (tracer_syscalls.c); without any exit there is no tree to follow. */
static int attach_syscalls(struct tracer *t, char *why, size_t whylen)
{
	if (!tracer_syscalls_attach(t->skel->progs.syscall_enter,
				    tracer_load_prog(t->skel, t->heavy, "syscall_exit"), &t->links,
				    &t->n_links, syscall_fail, t)) {
		snprintf(why, whylen, "failed to attach syscall_exit to any syscall tracepoint");
		return -1;
	}
	probe_add(t, "syscall_enter"); /* a call whose entry failed: a fallback */
	probe_add(t, "syscall_exit");
	return 0;
}

static void libcio_add(void *ctx, struct bpf_link *l, int follower, const struct bpf_program *prog)
{
	struct tracer *t = ctx;
	struct follower *nf = realloc(t->followers, (t->n_followers + 1) * sizeof(*nf));

	add_ulink(t, l, prog);
	if (!nf) {
		close(follower); /* its children are not followed: their figures from close */
		return;
	}
	t->followers = nf;
	nf[t->n_followers].fd = follower;
	nf[t->n_followers++].prog = prog;
}

/* The followers of prog (NULL: all), this process's copies */
static void followers_close(struct tracer *t, const struct bpf_program *prog)
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
static void attach_libcio(struct tracer *t, pid_t pid)
{
	char probe[PATH_MAX + 16], why[PATH_MAX + 192];

	t->libcio = tracer_libcio_start(t->skel->progs.libc_io, pid, libcio_add, t, probe,
					sizeof(probe), why, sizeof(why));
	if (*why)
		fallback(t, "libc_io", "%s", why);
	if (*probe)
		probe_add(t, probe);
	if (t->libcio) {
		t->st.approximate = tracer_libcio_approximate;
		t->skel->bss->libcio_on = 1;
	}
}

int tracer_test_load(char *why, size_t whylen)
{
	struct trace_bpf *skel, *heavy;
	struct bpf_program *prog;
	int err = hostprobe_btf(), n = 0;

	if (err) {
		snprintf(why, whylen, "kernel has no BTF (" HOSTPROBE_BTF ": %s)", strerror(err));
		return -1;
	}
	libbpf_set_print(print_libbpf);
	skel = tracer_open_load(true, -1, 0, NULL, verbose_level > 0, &heavy, why, whylen);
	if (!skel)
		return -1;
	bpf_object__for_each_program (prog, skel->obj)
		n += bpf_program__fd(prog) >= 0;
	snprintf(why, whylen, "the tracing object loads (%d programs)", n);
	trace_bpf__destroy(skel);
	return 0;
}

struct tracer *tracer_start(const struct tracer_opts *o, char *why, size_t whylen)
{
	struct tracer *t = NULL;
	struct bpf_program *prog, *it;
	char pys[3][PATH_MAX];
	struct pyframes_target pyt;
	bool have_pyt = false;
	int err, n_py;
	__u32 root, root_word, flags = 0;
	__u64 root_bits;
	struct proc_stat root_stat = {0};
	double t_open, t_load, t_attach, t_usdt;

	snprintf(why, whylen, "unknown error");
	verbose_level = o->verbose;
	libbpf_set_print(print_libbpf);

	err = hostprobe_btf();
	if (err) {
		snprintf(why, whylen, "kernel has no BTF (" HOSTPROBE_BTF ": %s)", strerror(err));
		goto fail;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(why, whylen, "failed to allocate tracer: %s", strerror(errno));
		goto fail;
	}
	t->keeper_sock = -1;
	hostprobe_tracefs_ensure(t->st.tracefs, sizeof(t->st.tracefs));
	/* requests: a window after ready for the service; as long as it runs for
	 * a command given after -- */
	if (collector_init(&t->col, o->root_pid, o->listen_port, o->cfg,
			   !o->cfg || o->cfg->n_command > 0 ? -1
							    : o->cfg->requests_window * 1000)) {
		snprintf(why, whylen, "failed to allocate tracer: %s", strerror(ENOMEM));
		goto fail;
	}

	t_open = clock_ms();
	n_py = o->cfg && !o->cfg->python_usdt ? 0 : python_candidates(o->cfg, pys, 3);
	if (!n_py)
		fallback(t, "python_imports",
			 o->cfg && !o->cfg->python_usdt
			     ? "switched off in the configuration ([trace] python_usdt)"
			     : "the command is no Python interpreter: imports, if any, "
			       "derived from module files");

	/* open -> configure -> load; first with the build kernel's minimal BTF
	 * when this is that kernel, else (or when that fails) with the full one */
	/* attribution: Python frames from the interpreter's own symbols; the
	 * first candidate that can be read is, each other one is a fallback */
	{
		char cands[3][PATH_MAX], pwhy[512];
		int n = python_candidates(o->cfg, cands, 3);
		struct pyframes_target other;

		for (int i = 0; i < n; i++) {
			if (!pyframes_find(&cands[i], 1, have_pyt ? &other : &pyt, pwhy,
					   sizeof(pwhy)))
				fallback(t, "python_frames", "%s", pwhy);
			else if (!have_pyt)
				have_pyt = true;
			else if (other.ino != pyt.ino || other.dev != pyt.dev)
				fallback(t, "python_frames",
					 "%s: frames are read for one interpreter only (%s)",
					 other.path, pyt.path);
		}
		if (!n)
			fallback(t, "python_frames", "no python interpreter found");
	}
	t->cheap = o->cfg && o->cfg->syscalls == SYSCALLS_CHEAP;
	if (t->cheap && strcmp(t->st.tracefs, "present") && strcmp(t->st.tracefs, "mounted")) {
		fallback(t, "syscalls",
			 "[trace] syscalls = cheap needs tracefs (%s): every syscall traced "
			 "(exact) instead",
			 t->st.tracefs);
		t->cheap = false;
	}
	t->st.syscalls = t->cheap ? "cheap" : "exact";
	if (t->cheap)
		t->st.approximate = tracer_syscalls_approximate;
	t->skel = tracer_open_load(n_py > 0, t->cheap ? SYSCALLS_CHEAP : SYSCALLS_EXACT,
				   (__u32)o->listen_port, have_pyt ? &pyt : NULL, o->verbose > 0,
				   &t->heavy, why, whylen);
	if (!t->skel && t->cheap) {
		/* a kernel without bpf_task_pt_regs (5.15): the raw pair */
		fallback(t, "syscalls", "%s with [trace] syscalls = cheap: exact instead", why);
		t->cheap = false;
		t->st.syscalls = "exact";
		t->st.approximate = NULL;
		t->skel = tracer_open_load(n_py > 0, SYSCALLS_EXACT, (__u32)o->listen_port,
					   have_pyt ? &pyt : NULL, o->verbose > 0, &t->heavy, why,
					   whylen);
	}
	if (!t->skel)
		goto fail;
	t->col.skel = t->skel;
	/* a _PyRuntime that moves per process: found by the launcher per process */
	if (have_pyt && !pyt.runtime &&
	    (t->col.off.note_ctx = pyframes_live_new(&pyt, bpf_map__fd(t->skel->maps.pyrt)))) {
		t->col.off.note = pyframes_note;
		t->col.off.note_free = pyframes_free;
	}

	/* the root, before any program can see it fork or exec (its thread's
	 * bit too: it is single-threaded, held before its exec) */
	root = (__u32)o->root_pid;
	root_word = root / 64;
	root_bits = 1ull << (root % 64);
	if (bpf_map__update_elem(t->skel->maps.procs, &root, sizeof(root), &flags, sizeof(flags),
				 0) ||
	    bpf_map__update_elem(t->skel->maps.treebits, &root_word, sizeof(root_word), &root_bits,
				 sizeof(root_bits), 0) ||
	    bpf_map__update_elem(t->skel->maps.procstat, &root, sizeof(root), &root_stat,
				 sizeof(root_stat), 0)) {
		snprintf(why, whylen, "failed to add pid %d to the traced tree: %s",
			 (int)o->root_pid, strerror(errno));
		goto fail;
	}

	t_load = clock_ms();
	/* attach, each program on its own (in the copy it was loaded in) */
	bpf_object__for_each_program (it, t->skel->obj) {
		const char *name = bpf_program__name(it);
		const struct probe *p = probe_of(name);
		struct bpf_link *l;

		prog = tracer_load_prog(NULL, t->heavy, name) ?: it;

		/* USDT and perf-event programs are attached below; gpu.c
		 * attaches gpu_fork(3) once it has attached a CUDA library */
		if (!bpf_program__autoload(prog) || probe_kind(prog) != PROBE_SECTION ||
		    prog == t->skel->progs.gpu_fork || prog == t->skel->progs.gpu_fork3)
			continue;
		l = bpf_program__attach(prog);
		if (!l) {
			err = errno;
			/* without exec and fork tracking there is no tree to follow */
			if (p && p->required) {
				snprintf(why, whylen, "failed to attach %s: %s", name,
					 strerror(err));
				goto fail;
			}
			fallback(t, name, "failed to attach (tracepoint missing?): %s",
				 strerror(err));
			continue;
		}
		add_link(&t->links, &t->n_links, l);
		probe_add(t, name);
	}
	if (t->cheap && attach_syscalls(t, why, whylen))
		goto fail;
	if (t->cheap)
		attach_libcio(t, (pid_t)o->root_pid);
	/* major faults: sample period 1, the program runs in the faulting task */
	attach_per_cpu(t, t->skel->progs.major_fault, PERF_COUNT_SW_PAGE_FAULTS_MAJ, 1, false,
		       "major_fault", "page-faults-maj");
	attach_fault_tick(t, (pid_t)o->root_pid);
	attach_names(t, (pid_t)o->root_pid);
	/* CUDA libraries that exist, for the root (gpu.c) */
	if (!bpf_program__autoload(t->skel->progs.gpu_enter))
		fallback(t, "cuda",
			 "the kernel lacks bpf_get_attach_cookie or bpf_send_signal_thread: "
			 "no CUDA calls traced");
	t->col.gpu = gpu_trace_new(t->skel, (pid_t)o->root_pid, o->cfg, gpu_note, t);
	t_attach = clock_ms();
	for (int i = 0; i < n_py; i++) {
		struct bpf_link *ls, *ld;
		char pname[PATH_MAX + 32];

		ls = bpf_program__attach_usdt(t->skel->progs.py_import_start, -1, pys[i], "python",
					      "import__find__load__start", NULL);
		err = ls ? 0 : errno;
		ld = ls ? bpf_program__attach_usdt(t->skel->progs.py_import_done, -1, pys[i],
						   "python", "import__find__load__done", NULL)
			: NULL;
		if (!ls || !ld) {
			err = err ? err : errno;
			bpf_link__destroy(ls);
			if (!is_elf(pys[i]))
				fallback(t, "python_imports",
					 "%s is not an ELF binary (a wrapper script such as a "
					 "pyenv shim: the interpreter it starts is not probed)",
					 pys[i]);
			else if (err == ENOENT)
				fallback(t, "python_imports",
					 "%s has no USDT probes (a CPython built without "
					 "--with-dtrace)",
					 pys[i]);
			else
				fallback(t, "python_imports", "failed to attach USDT to %s: %s",
					 pys[i], strerror(err));
			continue;
		}
		add_ulink(t, ls, t->skel->progs.py_import_start);
		add_ulink(t, ld, t->skel->progs.py_import_done);
		t->st.usdt = true;
		snprintf(pname, sizeof(pname), "python_imports:%.*s", PATH_MAX - 1, pys[i]);
		probe_add(t, pname);
	}

	t_usdt = clock_ms();

	/* ring buffer */
	t->rb =
	    ring_buffer__new(bpf_map__fd(t->skel->maps.events), collector_on_event, &t->col, NULL);
	if (!t->rb) {
		snprintf(why, whylen, "failed to create ring buffer: %s", strerror(errno));
		goto fail;
	}
	if (o->verbose)
		fprintf(stderr,
			"tts-launch: tracer: open+load %.1f ms, attach %.1f ms, USDT %.1f ms, "
			"ring buffer %.1f ms\n",
			t_load - t_open, t_attach - t_load, t_usdt - t_attach, clock_ms() - t_usdt);
	t->verbose = o->verbose;
	return t;

fail:
	tracer_free(t);
	return NULL;
}

void tracer_released(struct tracer *t)
{
	double t0 = clock_ms();

	if (!t)
		return;
	if (t->n_ulinks || bpf_program__fd(t->skel->progs.gpu_enter) >= 0 || t->cheap)
		keep_uprobes(t);
	gpu_trace_set_keeper(t->col.gpu, t->uprobes_kept ? t->keeper_sock : -1);
	if (t->verbose)
		fprintf(stderr, "tts-launch: tracer: uprobe keeper %.1f ms (after the release)\n",
			clock_ms() - t0);
}

int tracer_fd(const struct tracer *t) { return t && t->rb ? ring_buffer__epoll_fd(t->rb) : -1; }

static void drain_check(struct tracer *t);
static void libcio_check(struct tracer *t);

int tracer_poll(struct tracer *t)
{
	int n;

	if (!t || !t->rb)
		return 0;
	n = ring_buffer__consume(t->rb);
	libcio_check(t);
	if (tracer_draining(&t->drain))
		drain_check(t);
	return n < 0 ? n : 0;
}

bool tracer_ready(const struct tracer *t, double *ms)
{
	if (!t || t->col.ready_ms < 0)
		return false;
	if (ms)
		*ms = t->col.ready_ms;
	return true;
}

struct collector *tracer_collector(struct tracer *t) { return t ? &t->col : NULL; }

/* cheap with libc's probes: a close estimated all the same by a process of
 * the tree they never reached (tracer_libcio_missed) makes the read/write
 * figures approximate again, said once */
static void libcio_check(struct tracer *t)
{
	if (!t->libcio || t->libcio_missed ||
	    !tracer_libcio_missed(t->skel->maps.libc_est, t->skel->maps.libc_procs))
		return;
	t->libcio_missed = true;
	t->st.approximate = tracer_syscalls_approximate;
	fallback(t, "libc_io", "%s", tracer_libcio_missed_why);
}

const struct tracer_status *tracer_status(struct tracer *t)
{
	if (!t)
		return NULL;
	libcio_check(t);
	return &t->st;
}

unsigned long long tracer_activity(const struct tracer *t)
{
	return __atomic_load_n(&t->skel->bss->dl_activity, __ATOMIC_RELAXED);
}

void tracer_free(struct tracer *t)
{
	if (!t)
		return;
	ring_buffer__free(t->rb);
	/* kept: never detached here (the keeper drops the last references) */
	for (size_t i = 0; i < t->n_ulinks; i++) {
		if (!t->ulinks[i])
			continue; /* gone after the window */
		if (t->uprobes_kept)
			bpf_link__disconnect(t->ulinks[i]);
		bpf_link__destroy(t->ulinks[i]);
	}
	free(t->ulinks);
	free(t->uprogs);
	followers_close(t, NULL);
	free(t->followers);
	gpu_trace_free(t->col.gpu);
	t->col.gpu = NULL;
	if (t->keeper_sock >= 0)
		close(t->keeper_sock);
	for (size_t i = 0; i < t->n_links; i++)
		bpf_link__destroy(t->links[i]);
	free(t->links);
	for (size_t i = 0; i < t->drain.n; i++)
		bpf_link__destroy(t->drain.links[i]);
	free(t->drain.links);
	trace_bpf__destroy(t->heavy);
	trace_bpf__destroy(t->skel);
	collector_free(&t->col);
	strv_free(t->st.probes, t->st.n_probes);
	free(t->st.fallbacks);
	strv_free(t->st.detached, t->st.n_detached);
	strv_free(t->st.kept, t->st.n_kept);
	free(t);
}

static void strv_remove(char **v, size_t *n, const char *s)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(v[i], s)) {
			free(v[i]);
			memmove(v + i, v + i + 1, (*n - i - 1) * sizeof(*v));
			(*n)--;
			return;
		}
}

/* sys_exit (syscall_exit), kept after the window only to finish the calls
 * sys_enter saved before it (a blocking lock, a connect): detached once
 * none is left, or a while after the window; what is still in flight then
 * is dropped (docs/timeline.md, "Light probes"). Asked on every poll (the
 * supervisor's 100 ms tick). */
static void drain_check(struct tracer *t)
{
	const struct probe *p = probe_of(t->drain.program);

	if (!tracer_drain_done(&t->drain, t->skel->maps.inflight, clock_ms()))
		return;
	if (t->uprobes_kept) /* the keeper's copies (cheap): detached there */
		ukeeper_release(t->keeper_sock, &t->drain.prog_id, 1);
	strv_remove(t->st.kept, &t->st.n_kept, p->light);
	strv_add(&t->st.detached, &t->st.n_detached, p->program);
}

/* The uprobe links of prog go (lighten): this process's copies first (not
 * the last references while the keeper holds its own), then the keeper's,
 * whose close waits for the grace periods. true when one was attached. */
static bool ulinks_drop(struct tracer *t, const struct bpf_program *prog, unsigned int id)
{
	bool had = false;

	for (size_t i = 0; i < t->n_ulinks; i++)
		if (t->ulinks[i] && t->uprogs[i] == prog) {
			bpf_link__destroy(t->ulinks[i]);
			t->ulinks[i] = NULL;
			had = true;
		}
	followers_close(t, prog);
	if (had && t->uprobes_kept)
		ukeeper_release(t->keeper_sock, &id, 1);
	return had;
}

/* [trace] requests_window is over: requests are no longer kept, so the
 * heavy probes go: block, TCP states, and everything that runs on every
 * syscall or context switch of the host (sys_enter now, sys_exit once the
 * calls begun before have ended, sched_switch: faults are then counted at
 * threads' exits and on fault_tick), every user page fault
 * (page_fault_user: faults per model file) and every process of the host
 * that runs the probed python or libc (the import USDT, getaddrinfo). The
 * process tree, fault_tick, major faults and the CUDA pairs stay. mlock
 * calls after the window are the shim's to report (memory.mlock), not
 * traced. */
static void lighten(struct tracer *t)
{
	struct bpf_program *it;

	t->skel->bss->light = 1;
	t->st.light = true;
	t->st.light_ms = clock_ms();
	bpf_object__for_each_program (it, t->skel->obj) {
		/* in the copy it was loaded in */
		struct bpf_program *prog =
		    tracer_load_prog(NULL, t->heavy, bpf_program__name(it)) ?: it;
		const struct probe *p = probe_of(bpf_program__name(prog));
		bool drop = p && p->heavy, linked = false, usdt, drained = false;
		unsigned int id = prog_id(prog); /* 0: not loaded (autoload off) */

		if (!id)
			continue;
		for (size_t i = 0; i < t->n_links; i++) {
			struct bpf_link_info li;
			__u32 ll = sizeof(li);

			memset(&li, 0, sizeof(li));
			if (!t->links[i] ||
			    bpf_obj_get_info_by_fd(bpf_link__fd(t->links[i]), &li, &ll) ||
			    li.prog_id != id)
				continue;
			linked = true;
			if (drop && p->drain) {
				/* kept until its saved calls end (drain_check) */
				tracer_drain_add(&t->drain, t->links[i]);
				t->drain.program = p->program;
				t->drain.prog_id = id;
				t->drain.since_ms = t->st.light_ms;
				drained = true;
			} else if (drop) {
				bpf_link__destroy(t->links[i]);
			}
			if (drop)
				t->links[i] = NULL;
		}
		/* the keeper's copies of the links just destroyed here */
		if (drop && linked && !drained && t->uprobes_kept)
			ukeeper_release(t->keeper_sock, &id, 1);
		/* only what is attached: not a probe that fell back */
		usdt = probe_kind(prog) == PROBE_USDT;
		/* getaddrinfo and the imports go, each pair listed once; the CUDA
		 * pairs stay (gpu.c, below) */
		if (probe_kind(prog) == PROBE_UPROBE || usdt) {
			if (drop && ulinks_drop(t, prog, id) && p->light)
				strv_add(&t->st.detached, &t->st.n_detached, p->light);
			continue;
		}
		if (drained)
			strv_add(&t->st.kept, &t->st.n_kept, p->light);
		else if (drop && linked)
			strv_add(&t->st.detached, &t->st.n_detached, bpf_program__name(prog));
		else if (!drop && (linked || (usdt && t->st.usdt))) {
			const char *name = p && p->light ? p->light : bpf_program__name(prog);

			strv_add(&t->st.kept, &t->st.n_kept, name);
		}
	}
	/* the CUDA pairs stay (gpu.c) */
	if (gpu_trace_attached(t->col.gpu))
		strv_add(&t->st.kept, &t->st.n_kept, "cuda");
	/* sys_enter is gone: no call is saved from now on */
	if (tracer_draining(&t->drain))
		drain_check(t);
}

bool tracer_lighten_due(struct tracer *t)
{
	if (!t || t->st.light)
		return false;
	if (t->col.req_window_ms < 0 || t->col.ready_ms < 0 ||
	    clock_ms() < t->col.ready_ms + t->col.req_window_ms)
		return false;
	lighten(t);
	return true;
}
