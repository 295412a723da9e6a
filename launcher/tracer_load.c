/* tracer_load: the tracer's open -> configure (rodata) -> load of the BPF
 * object (tracer.c's first stage, STYLE.md 3): the build kernel's minimal
 * BTF first when this is that kernel, the full one else; which programs
 * are loaded (USDT, CUDA, which syscall pair); why a load failed. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "classify.h"
#include "clock.h"
#include "config.h"
#include "hostprobe.h"
#include "progcache.h"
#include "pyframes.h"
#include "trace.h"
#include "trace.minbtf.h"
#include "trace.skel.h"
#include "tracer_load.h"

/* The build-time kernel's minimal BTF is exact for that kernel only: same
 * release, version and BTF size (see the Makefile's BTFGen rule). */
static bool min_btf_matches(void)
{
	char id[512];

	return hostprobe_kernel_id(id, sizeof(id)) == 0 && !strcmp(id, trace_min_btf_kernel);
}

/* libbpf 1.1 takes a custom BTF only as a path: hand it a memfd's. */
static int min_btf_fd(void)
{
	/* not memfd_create(): <sys/mman.h> defines MLOCK_ONFAULT, which
	 * config.h's enum mlock_mode also names */
	int fd = (int)syscall(SYS_memfd_create, "trace.min.btf", 1 /* MFD_CLOEXEC */);

	if (fd < 0)
		return -1;
	if (write(fd, trace_min_btf, sizeof(trace_min_btf)) != (ssize_t)sizeof(trace_min_btf)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The last program the verifier rejected, and the last line of its log */
static char rejected_prog[64], rejected_why[160];

/* libbpf's warnings come from both loading threads (load_split) */
static pthread_mutex_t note_lock = PTHREAD_MUTEX_INITIALIZER;

static void note_locked(const char *msg);

void tracer_load_note(const char *msg)
{
	pthread_mutex_lock(&note_lock);
	note_locked(msg);
	pthread_mutex_unlock(&note_lock);
}

static void note_locked(const char *msg)
{
	const char *p = strstr(msg, "prog '"), *q, *end, *line;
	size_t n;

	if (!p || !strstr(msg, "BEGIN PROG LOAD LOG") || !(q = strchr(p + 6, '\'')))
		return;
	n = (size_t)(q - p - 6);
	snprintf(rejected_prog, sizeof(rejected_prog), "%.*s", (int)(n < 63 ? n : 63), p + 6);
	rejected_why[0] = '\0';
	/* the verifier's verdict: the last line before its statistics
	 * ("processed N insns ...") and the end marker */
	end = strstr(msg, "-- END PROG LOAD LOG --");
	if (!end)
		end = msg + strlen(msg);
	for (q = end; q > msg;) {
		while (q > msg && (q[-1] == '\n' || q[-1] == ' '))
			q--;
		for (line = q; line > msg && line[-1] != '\n'; line--)
			;
		if (memmem(line, (size_t)(q - line), "BEGIN PROG LOAD LOG", 19))
			break; /* no verdict in the log */
		if (q > line && strncmp(line, "processed ", 10) &&
		    strncmp(line, "verification time", 17) && strncmp(line, "stack depth", 11)) {
			snprintf(rejected_why, sizeof(rejected_why), "%.*s", (int)(q - line), line);
			break;
		}
		q = line;
	}
}

bool tracer_load_rejection(char *why, size_t whylen)
{
	if (!rejected_prog[0])
		return false;
	snprintf(why, whylen,
		 "this kernel's BPF verifier rejected program '%s' (%s): this build does not fit "
		 "this kernel; rebuild it here (make), and if that does not help, report it with "
		 "the output of `tts-launch run -v`",
		 rejected_prog, rejected_why[0] ? rejected_why : "its log: tts-launch run -v");
	return true;
}

/* -v: each program's verification as the kernel tells it (BPF_LOG_STATS:
 * "verification time N usec", "processed N insns"), not the whole log */
#define STATS_LOG 4
#define STATS_BUF 512

struct load_stats {
	int n;
	struct bpf_program *prog[64];
	char buf[64][STATS_BUF];
};

/* the programs of skel that load, after those armed already */
static void stats_arm_more(struct trace_bpf *skel, struct load_stats *st)
{
	struct bpf_program *p;

	bpf_object__for_each_program (p, skel->obj) {
		if (!bpf_program__autoload(p) || st->n >= 64)
			continue;
		st->buf[st->n][0] = '\0';
		bpf_program__set_log_level(p, STATS_LOG);
		bpf_program__set_log_buf(p, st->buf[st->n], STATS_BUF);
		st->prog[st->n++] = p;
	}
}

static void stats_arm(struct trace_bpf *skel, struct load_stats *st)
{
	st->n = 0;
	stats_arm_more(skel, st);
}

/* one line per program, the slowest first, and the sum */
static void stats_print(const struct load_stats *st)
{
	long us[64], insns[64], total = 0;
	int order[64];

	for (int i = 0; i < st->n; i++) {
		const char *v = strstr(st->buf[i], "verification time "),
			   *q = strstr(st->buf[i], "processed ");

		us[i] = v ? atol(v + 18) : -1;
		insns[i] = q ? atol(q + 10) : -1;
		total += us[i] > 0 ? us[i] : 0;
		order[i] = i;
		for (int j = i; j > 0 && us[order[j]] > us[order[j - 1]]; j--) {
			int t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	}
	fprintf(stderr, "tts-launch: tracer: %d programs verified in %.1f ms:", st->n, total / 1e3);
	for (int k = 0; k < st->n; k++) {
		int i = order[k];

		fprintf(stderr, "%s %s %.1f ms (%ld insns, %zu B)", k ? "," : "",
			bpf_program__name(st->prog[i]), us[i] / 1e3, insns[i],
			bpf_program__insn_cnt(st->prog[i]) * 8);
	}
	fputc('\n', stderr);
}

static void load_failure(char *why, size_t whylen, int err)
{
	char lb[128];
	const char *ld = hostprobe_lockdown(lb, sizeof(lb));

	if (ld)
		snprintf(why, whylen, "kernel lockdown (%s) forbids BPF tracing", ld);
	else if (err == EACCES &&
		 (hostprobe_has_cap(CAP_BPF) || hostprobe_has_cap(CAP_SYS_ADMIN)) &&
		 tracer_load_rejection(why, whylen))
		; /* with the capabilities held, EACCES is the verifier's answer */
	else if (err == EPERM || err == EACCES)
		snprintf(why, whylen,
			 "not permitted to load BPF programs (run as root, or with CAP_BPF and "
			 "CAP_PERFMON): %s",
			 strerror(err));
	else
		snprintf(why, whylen, "failed to load BPF programs: %s", strerror(err));
}

/* What every copy of the object is opened and configured with */
struct load_cfg {
	bool usdt;
	int syscalls;
	__u32 ready_port;
	const struct pyframes_target *py;
	const char *btfpath; /* the minimal BTF, or NULL */
	bool cuda;	     /* the kernel has what the CUDA probes need */
	bool cookie;	     /* bpf_get_attach_cookie: the import probes' arguments */
	uint64_t model_val[TRACE_MODEL_SUFFIXES], model_mask[TRACE_MODEL_SUFFIXES];
};

/* open -> configure (autoload, rodata): the same for each copy */
static struct trace_bpf *open_configured(const struct load_cfg *lc)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .btf_custom_path = lc->btfpath);
	struct trace_bpf *skel = trace_bpf__open_opts(&oo);

	if (!skel)
		return NULL;
	if (lc->syscalls == SYSCALLS_CHEAP) {
		bpf_program__set_autoload(skel->progs.sys_enter, false);
		bpf_program__set_autoload(skel->progs.sys_exit, false);
	} else if (lc->syscalls == SYSCALLS_EXACT) {
		bpf_program__set_autoload(skel->progs.syscall_enter, false);
		bpf_program__set_autoload(skel->progs.syscall_exit, false);
		bpf_program__set_autoload(skel->progs.syscall_exit_paths, false);
		bpf_program__set_autoload(skel->progs.libc_io, false);
	}
	skel->rodata->targ_cheap = lc->syscalls == SYSCALLS_CHEAP;
	if (!lc->usdt || !lc->cookie) {
		bpf_program__set_autoload(skel->progs.py_import_start, false);
		bpf_program__set_autoload(skel->progs.py_import_done, false);
	}
	if (!lc->cuda) {
		bpf_program__set_autoload(skel->progs.gpu_enter, false);
		bpf_program__set_autoload(skel->progs.gpu_exit, false);
		bpf_program__set_autoload(skel->progs.gpu_mmap, false);
	} else {
		/* a child forked without exec from a process with CUDA
		 * probes: held for its own (gpu.c attaches them) */
		bpf_program__set_autoload(skel->progs.gpu_fork, true);
		bpf_program__set_autoload(skel->progs.gpu_fork3, true);
	}
	skel->rodata->targ_ready_port = lc->ready_port;
	if (lc->py) /* attribution: the interpreter whose frames are read */
		pyframes_configure(skel, lc->py);
	memcpy((void *)skel->rodata->targ_model_suf, lc->model_val, sizeof(lc->model_val));
	memcpy((void *)skel->rodata->targ_model_mask, lc->model_mask, sizeof(lc->model_mask));
	return skel;
}

/* ---- the load in two threads ----
 *
 * The verifier is most of a load (-v: ~50 ms of ~55 on these 2-core VMs),
 * one program after another, and the syscall pair's exit program alone is
 * about half of it. So the object is loaded as three copies of itself: the
 * maps copy (no program: creates, fills and freezes every map), then, side
 * by side, the main copy (every program but the pair's: heavy_prog) on this
 * thread and the heavy copy (those only; then the hook, which attaches
 * them) on another, both on the maps copy's maps
 * (bpf_map__reuse_fd). All programs see the same maps and the same frozen
 * .rodata, so the verifier's view is what one load gives. A map whose name
 * the kernel shortens (over 15 characters; libbpf's USDT maps were) would
 * keep its own per copy, as libbpf finds those by their full name.
 *
 * Creating the maps is ~12 ms of the maps copy's ~18 (each preallocated
 * element of an LRU hash, each per-CPU slot, is allocated there), while
 * opening the two copies takes the other thread ~5 ms. So that thread then
 * creates the preallocated maps itself (side_map: from the heavy copy's
 * definitions, without their BTF types, which no program needs), and the
 * maps copy creates the rest. That thread starts first: the maps copy's
 * open (~2 ms) is made meanwhile, not before it. */

/* the heavy copy's programs: the active syscall pair's exit programs
 * (cheap: the path lookups' apart from the other calls', syscalls.bpf.c)
 * and, in cheap, its entry program, so that the heavy copy holds all three
 * that its thread attaches to the syscall tracepoints (tracer_load_hook) */
static bool heavy_prog(struct trace_bpf *skel, int syscalls, const struct bpf_program *p)
{
	return syscalls == SYSCALLS_CHEAP
		   ? p == skel->progs.syscall_exit || p == skel->progs.syscall_exit_paths ||
			 p == skel->progs.syscall_enter
		   : p == skel->progs.sys_exit;
}

/* a map every copy shares (the kernel keeps 15 characters of a name) */
static bool shared_map(const struct bpf_map *m)
{
	return strlen(bpf_map__name(m)) < 16 /* BPF_OBJ_NAME_LEN */;
}

/* a map whose creation allocates all of it: made on the other thread */
static bool side_map(const struct bpf_map *m)
{
	enum bpf_map_type t = bpf_map__type(m);

	return shared_map(m) && !bpf_map__is_internal(m) &&
	       (t == BPF_MAP_TYPE_LRU_HASH || t == BPF_MAP_TYPE_LRU_PERCPU_HASH ||
		(t == BPF_MAP_TYPE_PERCPU_ARRAY && bpf_map__max_entries(m) > 1));
}

#define SIDE_MAPS_MAX 16

/* a thread's part: open the two copies and create the side maps, or load
 * one copy */
struct load_job {
	const struct load_cfg *lc;
	struct trace_bpf *skel[2];
	const struct tracer_load_hook *hook; /* run after skel[0]'s load */
	bool hooked;
	int other_failed; /* the other copy's load failed: no hook (atomic) */
	int err;
	int nside;
	struct side_fd {
		char name[16]; /* a copy: bpf_map__reuse_fd frees the map's own */
		int fd;
	} side[SIDE_MAPS_MAX];
};

static int side_fd(const struct load_job *j, const char *name)
{
	for (int i = 0; i < j->nside; i++)
		if (!strcmp(j->side[i].name, name))
			return j->side[i].fd;
	return -1;
}

static void side_close(struct load_job *j)
{
	for (int i = 0; i < j->nside; i++)
		close(j->side[i].fd);
	j->nside = 0;
}

static int side_create(struct load_job *j, const struct bpf_object *obj)
{
	struct bpf_map *m;

	bpf_object__for_each_map (m, obj) {
		LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = bpf_map__map_flags(m),
			    .numa_node = bpf_map__numa_node(m), .map_extra = bpf_map__map_extra(m));
		int fd;

		if (!side_map(m))
			continue;
		if (j->nside == SIDE_MAPS_MAX)
			return -E2BIG;
		fd = bpf_map_create(bpf_map__type(m), bpf_map__name(m), bpf_map__key_size(m),
				    bpf_map__value_size(m), bpf_map__max_entries(m), &o);
		if (fd < 0)
			return -errno;
		snprintf(j->side[j->nside].name, sizeof(j->side[j->nside].name), "%s",
			 bpf_map__name(m));
		j->side[j->nside++].fd = fd;
	}
	return 0;
}

/* every shared map of into on the side map of that name or from's */
static int reuse_maps(struct trace_bpf *into, struct trace_bpf *from, const struct load_job *side)
{
	struct bpf_map *m;

	bpf_object__for_each_map (m, into->obj) {
		struct bpf_map *f = bpf_object__find_map_by_name(from->obj, bpf_map__name(m));
		int fd, err;

		if (!shared_map(m))
			continue;
		fd = side_map(m) ? side_fd(side, bpf_map__name(m)) : f ? bpf_map__fd(f) : -1;
		if (fd < 0)
			return -ENOENT;
		if ((err = bpf_map__reuse_fd(m, fd)))
			return err;
	}
	return 0;
}

static void *open_copies(void *arg)
{
	struct load_job *j = arg;

	j->skel[0] = open_configured(j->lc);
	j->skel[1] = open_configured(j->lc);
	j->err = j->skel[1] ? side_create(j, j->skel[1]->obj) : -ENOMEM;
	return NULL;
}

static void *load_copy(void *arg)
{
	struct load_job *j = arg;

	j->err = trace_bpf__load(j->skel[0]);
	if (!j->err && j->hook && !__atomic_load_n(&j->other_failed, __ATOMIC_ACQUIRE)) {
		j->hook->heavy_loaded(j->skel[0], j->hook->arg);
		j->hooked = true;
	}
	return NULL;
}

/* The three copies; 0 with *main and *heavy loaded, else a negative errno
 * and nothing loaded or attached (hook's undo run). The main and heavy
 * copies are opened on another thread while this one opens the maps copy
 * and creates the maps. */
static int load_split(const struct load_cfg *lc, struct load_stats *st,
		      const struct tracer_load_hook *hook, struct trace_bpf **main,
		      struct trace_bpf **heavy)
{
	struct trace_bpf *maps, *m, *h;
	struct load_job opened = {.lc = lc}, hl = {.lc = lc, .hook = hook};
	struct bpf_program *p;
	struct bpf_map *map;
	pthread_t th;
	int err = -ENOMEM;

	if ((err = -pthread_create(&th, NULL, open_copies, &opened)))
		return err;
	maps = open_configured(lc);
	if (maps) {
		bpf_object__for_each_program (p, maps->obj)
			bpf_program__set_autoload(p, false);
		bpf_object__for_each_map (map, maps->obj)
			if (side_map(map))
				bpf_map__set_autocreate(map, false);
		err = trace_bpf__load(maps);
	} else {
		err = errno ? -errno : -ENOMEM;
	}
	pthread_join(th, NULL);
	m = opened.skel[0];
	h = opened.skel[1];
	if (!err)
		err = opened.err;
	if (!err && (!m || !h))
		err = -ENOMEM;
	if (err)
		goto fail;
	bpf_object__for_each_program (p, h->obj)
		bpf_program__set_autoload(p, heavy_prog(h, lc->syscalls, p) &&
						 bpf_program__autoload(p));
	bpf_object__for_each_program (p, m->obj)
		if (heavy_prog(m, lc->syscalls, p))
			bpf_program__set_autoload(p, false);
	if ((err = reuse_maps(m, maps, &opened)) || (err = reuse_maps(h, maps, &opened)))
		goto fail;
	side_close(&opened); /* each copy holds its own */
	if (st) {
		stats_arm(m, st);
		stats_arm_more(h, st);
	}
	hl.skel[0] = h;
	if ((err = -pthread_create(&th, NULL, load_copy, &hl)))
		goto fail;
	err = trace_bpf__load(m);
	if (err) /* nothing to attach for a load that fails */
		__atomic_store_n(&hl.other_failed, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	if (!err)
		err = hl.err;
	if (err)
		goto fail;
	trace_bpf__destroy(maps);
	*main = m;
	*heavy = h;
	return 0;
fail:
	if (hl.hooked)
		hook->undo(hook->arg);
	side_close(&opened);
	trace_bpf__destroy(maps);
	trace_bpf__destroy(m);
	trace_bpf__destroy(h);
	return err ? err : -EINVAL;
}

struct bpf_program *tracer_load_prog(struct trace_bpf *skel, struct trace_bpf *heavy,
				     const char *name)
{
	struct trace_bpf *in[2] = {skel, heavy};

	for (int i = 0; i < 2; i++) {
		struct bpf_program *p =
		    in[i] ? bpf_object__find_program_by_name(in[i]->obj, name) : NULL;

		if (p && bpf_program__fd(p) >= 0)
			return p;
	}
	return NULL;
}

/* The object with the programs and maps of the cache's entry for its
 * settings (progcache.h), or NULL: load afresh (the entry's key is then in
 * cache for progcache_store, and why not in cache->why). */
static struct trace_bpf *open_kept(struct load_cfg *lc, struct progcache *cache, bool min_btf)
{
	char btfpath[64];
	int bfd = min_btf ? min_btf_fd() : -1;
	struct trace_bpf *skel;

	lc->btfpath = NULL;
	if (bfd >= 0) {
		snprintf(btfpath, sizeof(btfpath), "/proc/self/fd/%d", bfd);
		lc->btfpath = btfpath;
	}
	skel = open_configured(lc);
	lc->btfpath = NULL;
	if (!skel)
		snprintf(cache->why, sizeof(cache->why), "the object did not open: %s",
			 strerror(errno));
	if (skel) {
		progcache_key(cache, skel->obj, bfd >= 0);
		if (progcache_take(cache, skel->obj)) {
			if (!trace_bpf__load(skel) && progcache_loaded(cache)) {
				if (bfd >= 0)
					close(bfd);
				return skel;
			}
			progcache_drop(cache);
		}
		trace_bpf__destroy(skel);
	}
	if (bfd >= 0)
		close(bfd);
	return NULL;
}

/* first with the build kernel's minimal BTF when this is that kernel, else
 * (or when that fails) with the full one; in two threads (load_split) when
 * one syscall pair is loaded, one after another when that fails or both
 * are (the doctor). */
static struct trace_bpf *open_load(bool usdt, int syscalls, __u32 ready_port,
				   const struct pyframes_target *py, bool stats,
				   const struct tracer_load_hook *hook, struct progcache *cache,
				   struct trace_bpf **heavy, char *why, size_t whylen)
{
	struct load_cfg lc = {usdt, syscalls, ready_port, py, NULL, false, false, {0}, {0}};
	struct trace_bpf *skel = NULL;
	struct load_stats *st = stats ? malloc(sizeof(*st)) : NULL;
	int err;

	*heavy = NULL;
	/* the import and CUDA probes need the attach cookie (5.15), CUDA a stopping
	 * signal (5.5): without them the rest still loads. Asked once for
	 * every copy of the object. */
	lc.cookie =
	    libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_get_attach_cookie, NULL) > 0;
	lc.cuda = lc.cookie && libbpf_probe_bpf_helper(BPF_PROG_TYPE_TRACEPOINT,
						       BPF_FUNC_send_signal_thread, NULL) > 0;
	/* more suffixes than the kernel holds would be model files to the
	 * launcher only: a build-time limit, said at once */
	if (classify_model_keys(lc.model_val, lc.model_mask, TRACE_MODEL_SUFFIXES) >
	    TRACE_MODEL_SUFFIXES)
		fprintf(stderr, "tts-launch: warning: classify.c has more model suffixes "
				"than TRACE_MODEL_SUFFIXES (bpf/trace.h): raise it\n");
	if (cache && cache->rootfd >= 0 && syscalls >= 0 &&
	    (skel = open_kept(&lc, cache, min_btf_matches()))) {
		if (st)
			fprintf(stderr,
				"tts-launch: tracer: programs kept loaded since an earlier run "
				"(" PROGCACHE_ROOT "/%s): none verified\n",
				cache->key);
		free(st);
		return skel;
	}
	for (int attempt = min_btf_matches() ? 0 : 1; attempt < 2; attempt++) {
		char btfpath[64];
		int bfd = attempt == 0 ? min_btf_fd() : -1;

		lc.btfpath = NULL;
		if (bfd >= 0) {
			snprintf(btfpath, sizeof(btfpath), "/proc/self/fd/%d", bfd);
			lc.btfpath = btfpath;
		}
		if (syscalls >= 0) {
			err = load_split(&lc, st, hook, &skel, heavy);
			if (!err) {
				if (bfd >= 0)
					close(bfd);
				if (st)
					stats_print(st);
				free(st);
				return skel;
			}
			if (-err == EPERM || (attempt == 1 && -err == EACCES)) {
				if (bfd >= 0)
					close(bfd);
				load_failure(why, whylen, -err);
				break;
			}
		}
		skel = open_configured(&lc);
		if (!skel) {
			err = errno;
			if (bfd >= 0)
				close(bfd);
			snprintf(why, whylen, "failed to open BPF object: %s", strerror(err));
			free(st);
			return NULL;
		}
		if (st)
			stats_arm(skel, st);
		err = trace_bpf__load(skel);
		if (bfd >= 0)
			close(bfd);
		if (!err) {
			if (st)
				stats_print(st);
			free(st);
			return skel;
		}
		trace_bpf__destroy(skel);
		skel = NULL;
		if (attempt == 1 || -err == EPERM || -err == EACCES) {
			load_failure(why, whylen, -err);
			break;
		}
	}
	free(st);
	return NULL;
}

struct trace_bpf *tracer_open_load(bool usdt, int syscalls, __u32 ready_port,
				   const struct pyframes_target *py, bool stats,
				   const struct tracer_load_hook *hook, struct progcache *cache,
				   struct trace_bpf **heavy, char *why, size_t whylen)
{
	struct trace_bpf *skel =
	    open_load(usdt, syscalls, ready_port, py, stats, hook, cache, heavy, why, whylen);

	/* a program given its own log (the stats) gets no verdict logged by
	 * libbpf, and a long log overflows the stats' buffer: a failed load
	 * with the stats is made again without, for the reason */
	if (!skel && stats)
		skel = open_load(usdt, syscalls, ready_port, py, false, hook, NULL, heavy, why,
				 whylen);
	return skel;
}
