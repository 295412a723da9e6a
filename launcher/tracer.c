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
#include "tracer_internal.h"
#include "tracer_libcio.h"
#include "tracer_load.h"
#include "tracer_syscalls.h"
#include "ukeeper.h"
#include "util.h"

/* The probe table: how each program is attached, whether tracing is
 * worth anything without it (required: no tree to follow without exec and
 * fork tracking), whether it goes when the requests window ends (heavy),
 * whether it first finishes what began before (drain: sys_exit, for the
 * calls sys_enter saved) and the name it keeps meanwhile or when it stays
 * narrowed (light). After the window no program runs on every syscall or
 * every context switch of the host (BENCHMARKS.md, "Neighbours"). A
 * program not listed is attached as its section says, optional and kept. */
#define DRAINING(p) p " (finishing the calls begun before the window ended)"

static const struct probe probe_table[] = {
    {"sys_enter", PROBE_SECTION, true, true, false, NULL},
    {"sys_exit", PROBE_SECTION, true, true, true, DRAINING("sys_exit")},
    /* one of the two pairs is loaded ([trace] syscalls) */
    {"syscall_enter", PROBE_SYSCALLS, true, true, false, NULL},
    {"syscall_exit", PROBE_SYSCALLS, true, true, true, DRAINING("syscall_exit")},
    /* cheap: the path lookups' exits, verified apart (syscalls.bpf.c) */
    {"syscall_exit_paths", PROBE_SYSCALLS, true, true, false, NULL},
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

const struct probe *tr_probe_of(const char *program)
{
	for (size_t i = 0; i < sizeof(probe_table) / sizeof(probe_table[0]); i++)
		if (!strcmp(probe_table[i].program, program))
			return &probe_table[i];
	return NULL;
}

enum probe_kind tr_probe_kind(const struct bpf_program *prog)
{
	const struct probe *p = tr_probe_of(bpf_program__name(prog));
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

void tr_fallback(struct tracer *t, const char *probe, const char *fmt, ...)
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

void tr_strv_add(char ***v, size_t *n, const char *s)
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

void tr_probe_add(struct tracer *t, const char *name)
{
	tr_strv_add(&t->st.probes, &t->st.n_probes, name);
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

void tr_add_link(struct bpf_link ***links, size_t *n, struct bpf_link *l)
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
void tr_add_ulink(struct tracer *t, struct bpf_link *l, const struct bpf_program *prog)
{
	const struct bpf_program **np = realloc(t->uprogs, (t->n_ulinks + 1) * sizeof(*np));

	if (!np) {
		bpf_link__destroy(l);
		return;
	}
	t->uprogs = np;
	np[t->n_ulinks] = prog;
	tr_add_link(&t->ulinks, &t->n_ulinks, l);
}

/* prog's id (0: none, not loaded) */
unsigned int tr_prog_id(const struct bpf_program *prog)
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
 * and exits; its life is tts-launch's plus that detach, plus the linger
 * of what it holds for the next run (ukeeper.c, keeper_close). */

/* The raw tracepoints the keeper holds past the run's end for the next run
 * (ukeeper.h, tphold.c): those that fire rarely (a fork, an exit, a block
 * request). Not those of every syscall (a registration there sends every
 * syscall of every task down the slow path), context switch, wake-up or
 * page fault of the host: a second registration, even a function that
 * returns at once, puts the tracepoint's iterator and an indirect call more
 * on each of them for every process of the host (a simulator start after
 * a run with those held: its CPU +1.6%, BENCHMARKS.md, "Raw tracepoints
 * held between runs"). */
static bool held_past_run(const char *tracepoint)
{
	static const char *const frequent[] = {"sys_enter", "sys_exit", "sched_switch",
					       "sched_waking", "page_fault_user"};

	for (size_t i = 0; i < sizeof(frequent) / sizeof(frequent[0]); i++)
		if (!strcmp(tracepoint, frequent[i]))
			return false;
	return true;
}

/* The loaded raw tracepoint programs' tracepoints held_past_run, into
 * out[0..max) (the names point into the objects, the keeper's copy of
 * them): how many. */
static int held_tracepoints(const struct tracer *t, const char **out, int max)
{
	struct trace_bpf *objs[2] = {t->skel, t->heavy};
	int n = 0;

	for (int o = 0; o < 2; o++) {
		struct bpf_program *p;

		if (!objs[o])
			continue;
		bpf_object__for_each_program (p, objs[o]->obj) {
			const char *sec = bpf_program__section_name(p);

			if (n < max && bpf_program__fd(p) >= 0 && !strncmp(sec, "raw_tp/", 7) &&
			    held_past_run(sec + 7))
				out[n++] = sec + 7;
		}
	}
	return n;
}

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
	struct ukeeper_hold hold = {
	    .open = tracer_syscalls_hold,
	    .prog = tr_prog_id(tracer_load_prog(t->skel, t->heavy, "syscall_exit"))};
	/* the raw tracepoints held at the end */
	const char *events[UKEEPER_MAX_TRACEPOINTS];
	/* the kept programs' maps reset once the run's links are gone */
	struct ukeeper_done done = {progcache_reset, {t->cache.rootfd, t->cache.dirfd}};

	for (size_t i = 0; i < sizeof(probe_table) / sizeof(probe_table[0]); i++) {
		unsigned int id =
		    tr_prog_id(tracer_load_prog(t->skel, t->heavy, probe_table[i].program));

		if (id)
			ids[n_ids++] = id;
	}
	if (!t->cheap)
		hold.open = NULL;
	hold.tracepoints = events;
	hold.n_tracepoints = held_tracepoints(t, events, UKEEPER_MAX_TRACEPOINTS);
	n = ukeeper_link_fds(ids, n_ids, fds, UKEEPER_MAX_FDS);
	memset(of, 0, sizeof(of));
	/* the followers go with their programs' links (no program of their own) */
	for (size_t i = 0; i < t->n_followers && n < UKEEPER_MAX_FDS; i++) {
		of[n] = tr_prog_id(t->followers[i].prog);
		fds[n++] = t->followers[i].fd;
	}
	/* with no link yet, still when CUDA may be attached later: the keeper
	 * is what continues a process held at its mapping if we die */
	if (n || bpf_program__fd(t->skel->progs.gpu_enter) >= 0 || t->cache.dirfd >= 0) {
		t->uprobes_kept = ukeeper_start(
		    fds, of, n, &hold, t->cache.dirfd >= 0 ? &done : NULL, &t->keeper_sock);
		/* the keeper holds the entry now: ours closes (a keeper that
		 * did not start leaves it not reset: the next run remakes it) */
		if (t->cache.dirfd >= 0) {
			close(t->cache.dirfd);
			t->cache.dirfd = -1;
		}
	}
}

/* [trace] keep_loaded: a fresh load kept for the next run with these
 * settings (off the path to exec: after the release) */
static void keep_programs(struct tracer *t)
{
	struct bpf_object *objs[2] = {t->skel->obj, t->heavy ? t->heavy->obj : NULL};

	if (t->cache.rootfd < 0 || t->cache.hit || !t->cache.key[0])
		return;
	if (progcache_store(&t->cache, objs, t->heavy ? 2 : 1)) {
		if (t->verbose)
			fprintf(stderr,
				"tts-launch: tracer: programs kept loaded for the next run "
				"(" PROGCACHE_ROOT "/%s)\n",
				t->cache.key);
	} else if (t->verbose) {
		fprintf(stderr, "tts-launch: tracer: programs not kept: %s\n", t->cache.why);
	}
}

/* gpu.c's attaches, as probes and fallbacks */
static void gpu_note(void *ctx, const char *probe, bool ok, const char *reason)
{
	struct tracer *t = ctx;

	if (ok)
		tr_probe_add(t, reason);
	else
		tr_fallback(t, probe, "%s", reason);
}

/* ---- start ---- */
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
	skel =
	    tracer_open_load(true, -1, 0, NULL, verbose_level > 0, NULL, NULL, &heavy, why, whylen);
	if (!skel)
		return -1;
	bpf_object__for_each_program (prog, skel->obj)
		n += bpf_program__fd(prog) >= 0;
	snprintf(why, whylen, "the tracing object loads (%d programs)", n);
	trace_bpf__destroy(heavy);
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
	struct rlimit nofile;
	double t_open, t_load, t_attach, t_usdt;
	struct early_syscalls early;
	struct tracer_load_hook hook;
	int attach_lock = -1;

	tr_early_syscalls_hook(&hook, &early);
	snprintf(why, whylen, "unknown error");
	verbose_level = o->verbose;
	libbpf_set_print(print_libbpf);

	err = hostprobe_btf();
	if (err) {
		snprintf(why, whylen, "kernel has no BTF (" HOSTPROBE_BTF ": %s)", strerror(err));
		goto fail;
	}
	/* Room for every descriptor tracing holds, checked before the first:
	 * a limit hit half-way left the service's start waiting seconds for
	 * the probes' removal, and no descriptor for the pidfile or the
	 * timeline. The soft limit is raised for this process only (the
	 * service, forked already, keeps its own). */
	if (hostprobe_nofile(true, &nofile)) {
		hostprobe_nofile_why(&nofile, why, whylen);
		goto fail;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(why, whylen, "failed to allocate tracer: %s", strerror(errno));
		goto fail;
	}
	t->keeper_sock = -1;
	t->cache.rootfd = t->cache.dirfd = -1;
	t->verbose = o->verbose;
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
		tr_fallback(t, "python_imports",
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
				tr_fallback(t, "python_frames", "%s", pwhy);
			else if (!have_pyt)
				have_pyt = true;
			else if (other.ino != pyt.ino || other.dev != pyt.dev)
				tr_fallback(t, "python_frames",
					    "%s: frames are read for one interpreter only (%s)",
					    other.path, pyt.path);
		}
		if (!n)
			tr_fallback(t, "python_frames", "no python interpreter found");
	}
	t->cheap = o->cfg && o->cfg->syscalls == SYSCALLS_CHEAP;
	if (t->cheap && strcmp(t->st.tracefs, "present") && strcmp(t->st.tracefs, "mounted")) {
		tr_fallback(t, "syscalls",
			    "[trace] syscalls = cheap needs tracefs (%s): every syscall traced "
			    "(exact) instead",
			    t->st.tracefs);
		t->cheap = false;
	}
	t->st.syscalls = t->cheap ? "cheap" : "exact";
	if (t->cheap)
		t->st.approximate = tracer_syscalls_approximate;
	/* from the load (a fresh one attaches the syscall tracepoints on its
	 * other thread) to the end of the attach: no keeper's slow detach
	 * meanwhile (ukeeper.h) */
	attach_lock = ukeeper_attach_lock();
	/* [trace] keep_loaded: the programs an earlier run kept, when its
	 * settings were these (progcache.h) */
	if (!o->cfg || o->cfg->keep_loaded) {
		if (!progcache_init(&t->cache) && o->verbose)
			fprintf(stderr, "tts-launch: tracer: programs not kept: %s\n",
				t->cache.why);
		else if (t->cache.mounted && o->verbose)
			fprintf(stderr, "tts-launch: tracer: mounted a BPF filesystem on "
					"/sys/fs/bpf (there was none), for the programs kept "
					"between runs\n");
	} else {
		progcache_forget();
	}
	/* cheap: the syscall tracepoints attached as soon as their programs
	 * have loaded, while the other programs still load (a fresh load) */
	t->skel = tracer_open_load(n_py > 0, t->cheap ? SYSCALLS_CHEAP : SYSCALLS_EXACT,
				   (__u32)o->listen_port, have_pyt ? &pyt : NULL, o->verbose > 0,
				   t->cheap ? &hook : NULL, &t->cache, &t->heavy, why, whylen);
	if (o->verbose && t->cache.rootfd >= 0 && !t->cache.hit)
		fprintf(stderr, "tts-launch: tracer: no programs kept from an earlier run: %s\n",
			t->cache.why);
	if (!t->skel && t->cheap) {
		/* a kernel without bpf_task_pt_regs (5.15): the raw pair */
		tr_fallback(t, "syscalls", "%s with [trace] syscalls = cheap: exact instead", why);
		t->cheap = false;
		t->st.syscalls = "exact";
		t->st.approximate = NULL;
		t->skel = tracer_open_load(n_py > 0, SYSCALLS_EXACT, (__u32)o->listen_port,
					   have_pyt ? &pyt : NULL, o->verbose > 0, NULL, &t->cache,
					   &t->heavy, why, whylen);
	}
	if (!t->skel)
		goto fail;
	t->col.skel = t->skel;
	t->st.programs = t->cache.hit ? "kept" : "loaded";
	/* the fault-rate series' origin (not read-only: a kept load serves
	 * runs that start at other times) */
	t->skel->bss->t0_ns = clock_t0_ns();
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
	/* a kept load has no heavy copy whose thread attached the syscall
	 * tracepoints: they are attached below, on this thread. Not on a
	 * thread of their own beside the rest: the perf events of the
	 * tracepoints and the raw tracepoints' attach take the same kernel
	 * mutexes, and the exec came later that way (+2.5 ms median, 24 pairs;
	 * libc's sites moved there too: +1.6 ms; BENCHMARKS.md, "Programs
	 * kept loaded") */
	/* attach, each program on its own (in the copy it was loaded in) */
	bpf_object__for_each_program (it, t->skel->obj) {
		const char *name = bpf_program__name(it);
		const struct probe *p = tr_probe_of(name);
		struct bpf_link *l;

		prog = tracer_load_prog(NULL, t->heavy, name) ?: it;

		/* USDT and perf-event programs are attached below; gpu.c
		 * attaches gpu_fork(3) once it has attached a CUDA library */
		if (!bpf_program__autoload(prog) || tr_probe_kind(prog) != PROBE_SECTION ||
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
			tr_fallback(t, name, "failed to attach (tracepoint missing?): %s",
				    strerror(err));
			continue;
		}
		tr_add_link(&t->links, &t->n_links, l);
		tr_probe_add(t, name);
	}
	if (t->cheap && tr_attach_syscalls(t, &early, why, whylen))
		goto fail;
	if (t->cheap)
		tr_attach_libcio(t, (pid_t)o->root_pid);
	/* major faults: sample period 1, the program runs in the faulting task */
	tr_attach_per_cpu(t, t->skel->progs.major_fault, PERF_COUNT_SW_PAGE_FAULTS_MAJ, 1, false,
			  "major_fault", "page-faults-maj");
	tr_attach_fault_tick(t, (pid_t)o->root_pid);
	tr_attach_names(t, (pid_t)o->root_pid);
	/* CUDA libraries that exist, for the root (gpu.c) */
	if (!bpf_program__autoload(t->skel->progs.gpu_enter))
		tr_fallback(t, "cuda",
			    "the kernel lacks bpf_get_attach_cookie or bpf_send_signal_thread: "
			    "no CUDA calls traced");
	t->col.gpu = gpu_trace_new(t->skel, (pid_t)o->root_pid, o->cfg, gpu_note, t);
	t_attach = clock_ms();
	tr_attach_imports(t, (pid_t)o->root_pid, pys, n_py);

	t_usdt = clock_ms();
	if (attach_lock >= 0)
		close(attach_lock);
	attach_lock = -1;

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
	return t;

fail:
	tr_early_syscalls_free(&early);
	if (attach_lock >= 0)
		close(attach_lock);
	tracer_free(t);
	return NULL;
}

void tracer_released(struct tracer *t)
{
	double t0 = clock_ms();

	if (!t)
		return;
	keep_programs(t);
	if (t->n_ulinks || bpf_program__fd(t->skel->progs.gpu_enter) >= 0 || t->cheap ||
	    t->cache.dirfd >= 0)
		keep_uprobes(t);
	gpu_trace_set_keeper(t->col.gpu, t->uprobes_kept ? t->keeper_sock : -1);
	if (t->verbose)
		fprintf(stderr, "tts-launch: tracer: uprobe keeper %.1f ms (after the release)\n",
			clock_ms() - t0);
}

int tracer_fd(const struct tracer *t) { return t && t->rb ? ring_buffer__epoll_fd(t->rb) : -1; }

void tr_drain_check(struct tracer *t);
static void libcio_check(struct tracer *t);

int tracer_poll(struct tracer *t)
{
	int n;

	if (!t || !t->rb)
		return 0;
	n = ring_buffer__consume(t->rb);
	libcio_check(t);
	if (tracer_draining(&t->drain))
		tr_drain_check(t);
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
	tr_fallback(t, "libc_io", "%s", tracer_libcio_missed_why);
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
	tr_followers_close(t, NULL);
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
	/* an entry taken and not handed to a keeper stays not reset: the
	 * next run remakes it */
	if (t->cache.dirfd >= 0)
		close(t->cache.dirfd);
	if (t->cache.rootfd >= 0)
		close(t->cache.rootfd);
	collector_free(&t->col);
	strv_free(t->st.probes, t->st.n_probes);
	free(t->st.fallbacks);
	strv_free(t->st.detached, t->st.n_detached);
	strv_free(t->st.kept, t->st.n_kept);
	free(t);
}
