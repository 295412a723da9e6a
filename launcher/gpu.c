/* gpu: the CUDA side of a start-up (issue 18; gpu.h, docs/gpu.md).
 *
 * Where the probes go: a uprobe is per file (inode), so each CUDA library a
 * process of the tree maps gets the pair of bpf/gpu.bpf.c on each probed
 * function, filtered to that process (perf_event_open's pid: only its mm
 * gets the breakpoints; other GPU jobs on the host get none). Nothing is
 * attached before the start (issue 17: most services never map CUDA, and
 * each uprobe costs its attach): gpu_mmap reports every libcuda* file a
 * process of the tree maps, a dlopen or ld.so's mapping of a DT_NEEDED
 * library alike, with the process stopped; it is confirmed by its exported
 * symbols (elfsym), attached with that pid, and the process continued. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "clock.h"
#include "elfsym.h"
#include "gpu.h"
#include "gpu_internal.h"
#include "gpu_trace.h"
#include "trace.h"
#include "trace.skel.h"

static const struct gpu_fn fns[] = {
    {GPU_CUDA_GET_DEVICE_COUNT, LIB_RUNTIME, {"cudaGetDeviceCount"}, "cudaGetDeviceCount"},
    {GPU_CUDA_SET_DEVICE, LIB_RUNTIME, {"cudaSetDevice"}, "cudaSetDevice"},
    {GPU_CUDA_MALLOC, LIB_RUNTIME, {"cudaMalloc"}, "cudaMalloc"},
    {GPU_CUDA_FREE, LIB_RUNTIME, {"cudaFree"}, "cudaFree"},
    {GPU_CUDA_MEMCPY, LIB_RUNTIME, {"cudaMemcpy"}, "cudaMemcpy"},
    {GPU_CUDA_MEMCPY_ASYNC, LIB_RUNTIME, {"cudaMemcpyAsync"}, "cudaMemcpyAsync"},
    {GPU_CUDA_DRIVER_VERSION, LIB_RUNTIME, {"cudaDriverGetVersion"}, "cudaDriverGetVersion"},
    {GPU_CU_INIT, LIB_DRIVER, {"cuInit"}, "cuInit"},
    {GPU_CU_CTX_CREATE, LIB_DRIVER, {"cuCtxCreate_v4", "cuCtxCreate_v2"}, "cuCtxCreate"},
    {GPU_CU_PRIMARY_CTX_RETAIN,
     LIB_DRIVER,
     {"cuDevicePrimaryCtxRetain"},
     "cuDevicePrimaryCtxRetain"},
    {GPU_CU_MEM_ALLOC, LIB_DRIVER, {"cuMemAlloc_v2"}, "cuMemAlloc"},
    {GPU_CU_MEM_FREE, LIB_DRIVER, {"cuMemFree_v2"}, "cuMemFree"},
    {GPU_CU_MEMCPY_HTOD, LIB_DRIVER, {"cuMemcpyHtoD_v2"}, "cuMemcpyHtoD"},
    {GPU_CU_MEMCPY_HTOD_ASYNC, LIB_DRIVER, {"cuMemcpyHtoDAsync_v2"}, "cuMemcpyHtoDAsync"},
    {GPU_CU_DRIVER_VERSION, LIB_DRIVER, {"cuDriverGetVersion"}, "cuDriverGetVersion"},
    {GPU_CUDA_MEM_GET_INFO, LIB_RUNTIME, {"cudaMemGetInfo"}, "cudaMemGetInfo"},
    {GPU_CUDA_GET_DEVICE_PROPERTIES,
     LIB_RUNTIME,
     {"cudaGetDeviceProperties_v2", "cudaGetDeviceProperties"},
     "cudaGetDeviceProperties"},
    {GPU_CU_MEM_GET_INFO, LIB_DRIVER, {"cuMemGetInfo_v2"}, "cuMemGetInfo"},
    {GPU_CUDA_RUNTIME_VERSION, LIB_RUNTIME, {"cudaRuntimeGetVersion"}, "cudaRuntimeGetVersion"},
    {GPU_CUDA_MALLOC_ASYNC, LIB_RUNTIME, {"cudaMallocAsync"}, "cudaMallocAsync"},
    {GPU_CUDA_FREE_ASYNC, LIB_RUNTIME, {"cudaFreeAsync"}, "cudaFreeAsync"},
    {GPU_CU_MEM_ALLOC_ASYNC, LIB_DRIVER, {"cuMemAllocAsync"}, "cuMemAllocAsync"},
    {GPU_CU_MEM_FREE_ASYNC, LIB_DRIVER, {"cuMemFreeAsync"}, "cuMemFreeAsync"},
    {GPU_CU_MEM_CREATE, LIB_DRIVER, {"cuMemCreate"}, "cuMemCreate"},
    {GPU_CU_MEM_RELEASE, LIB_DRIVER, {"cuMemRelease"}, "cuMemRelease"},
};
#define N_FNS (sizeof(fns) / sizeof(fns[0]))

const struct gpu_fn *gpu_fn_of(__u32 fn)
{
	for (size_t i = 0; i < N_FNS; i++)
		if (fns[i].fn == fn)
			return &fns[i];
	return NULL;
}

/* ---- the libraries ---- */

/* Where path's probed functions are (file offsets, 0: not exported), and
 * its kind by what it exports: cudaGetDeviceCount (runtime) or cuInit
 * (driver). One walk of its .dynsym, where libbpf's func_name would read
 * the file again for each probe. */
static enum lib_kind lib_resolve(const char *path, uint64_t off[N_FNS])
{
	const char *names[2 * N_FNS];
	struct elfsym_sym syms[2 * N_FNS];
	enum lib_kind kind = LIB_NONE;
	struct elfsym *e;
	char why[PATH_MAX + 64];

	memset(off, 0, N_FNS * sizeof(off[0]));
	if (!(e = elfsym_open(path, why, sizeof(why))))
		return LIB_NONE;
	for (size_t i = 0; i < N_FNS; i++) {
		names[2 * i] = fns[i].sym[0];
		names[2 * i + 1] = fns[i].sym[1] ? fns[i].sym[1] : fns[i].sym[0];
	}
	elfsym_lookup(e, names, 2 * N_FNS, true, syms);
	elfsym_close(e);
	for (size_t i = 0; i < N_FNS; i++) {
		const struct elfsym_sym *s = syms[2 * i].found ? &syms[2 * i] : &syms[2 * i + 1];

		off[i] = s->found ? s->offset : 0;
		if (off[i] && fns[i].fn == GPU_CUDA_GET_DEVICE_COUNT)
			kind = LIB_RUNTIME;
		else if (off[i] && fns[i].fn == GPU_CU_INIT && kind == LIB_NONE)
			kind = LIB_DRIVER;
	}
	return kind;
}

/* the kernel's s_dev of a file (MKDEV: major << 20 | minor) */
static void kernel_id(const struct stat *st, __u64 *dev, __u64 *ino)
{
	*dev = ((__u64)major(st->st_dev) << 20) | minor(st->st_dev);
	*ino = st->st_ino;
}

/* The pairs of lib's kind on path, for pid; the links in *out, their
 * number returned. */
static int attach_lib(struct gpu_trace *g, const char *path, enum lib_kind kind,
		      const uint64_t off[N_FNS], pid_t pid, struct bpf_link **out, int max)
{
	int n = 0;

	for (size_t i = 0; i < N_FNS && n + 2 <= max; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = fns[i].fn);
		struct bpf_link *le, *lx;

		if (fns[i].kind != kind || !off[i])
			continue; /* not exported by this version */
		le = bpf_program__attach_uprobe_opts(g->skel->progs.gpu_enter, pid, path,
						     (size_t)off[i], &uo);
		if (!le)
			continue;
		uo.retprobe = true;
		lx = bpf_program__attach_uprobe_opts(g->skel->progs.gpu_exit, pid, path,
						     (size_t)off[i], &uo);
		if (!lx) {
			bpf_link__destroy(le);
			continue;
		}
		out[n++] = le;
		out[n++] = lx;
	}
	return n;
}

static struct gpu_lib *lib_add(struct gpu_trace *g, const char *path, enum lib_kind kind, pid_t pid)
{
	struct gpu_lib *l;

	if (g->n_libs >= GPU_MAX_LIBS)
		return NULL;
	l = &g->libs[g->n_libs++];
	snprintf(l->path, sizeof(l->path), "%s", path);
	l->kind = kind;
	l->pid = pid;
	l->ms = -1;
	return l;
}

struct gpu_trace *gpu_trace_new(struct trace_bpf *skel, pid_t root, const struct config *cfg,
				gpu_note_fn note_fn, void *ctx)
{
	struct gpu_trace *g = calloc(1, sizeof(*g));

	(void)cfg;
	if (!g)
		return NULL;
	g->skel = skel;
	g->root = root;
	g->keeper = -1;
	g->note = note_fn;
	g->ctx = ctx;
	return g;
}

/* Hands the keeper copies of fds (SCM_RIGHTS) with one byte: 'l' links
 * (it drops their last references), 'h' the gpuseen map (ukeeper.c). */
static bool keeper_send(struct gpu_trace *g, char byte, const int *fds, int n)
{
	char cbuf[CMSG_SPACE(64 * sizeof(int))];
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf};
	struct cmsghdr *cm;

	if (g->keeper < 0 || n <= 0 || n > 64)
		return false;
	memset(cbuf, 0, sizeof(cbuf));
	m.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
	cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, (size_t)n * sizeof(int));
	return sendmsg(g->keeper, &m, MSG_NOSIGNAL) == 1;
}

void gpu_trace_set_keeper(struct gpu_trace *g, int sock)
{
	int seen;

	if (!g)
		return;
	g->keeper = sock;
	/* before anything of the tree runs: a process held at its mapping is
	 * continued by the keeper if tts-launch dies before it does */
	seen = g->skel ? bpf_map__fd(g->skel->maps.gpuseen) : -1;
	if (seen >= 0)
		keeper_send(g, 'h', &seen, 1);
}

static bool keep_links(struct gpu_trace *g, struct bpf_link **l, int n)
{
	int fds[64] = {0};

	for (int i = 0; i < n && i < 64; i++)
		fds[i] = bpf_link__fd(l[i]);
	return keeper_send(g, 'l', fds, n);
}

/* Where pid's fd points (the library being mapped), else its mapping of
 * dev/ino in /proc/pid/maps. */
static bool mapped_path(const struct tl_gpu_map_event *e, char *out, size_t len)
{
	char p[64], line[PATH_MAX + 128];
	ssize_t n;
	struct stat st;
	__u64 dev, ino;
	FILE *f;

	snprintf(p, sizeof(p), "/proc/%u/fd/%d", e->pid, e->fd);
	n = readlink(p, out, len - 1);
	if (n > 0) {
		out[n] = 0;
		if (stat(out, &st) == 0) {
			kernel_id(&st, &dev, &ino);
			if (dev == e->dev && ino == e->ino)
				return true;
		}
	}
	snprintf(p, sizeof(p), "/proc/%u/maps", e->pid);
	f = fopen(p, "re");
	while (f && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');

		if (!path)
			continue;
		path[strcspn(path, "\n")] = 0;
		if (stat(path, &st) == 0) {
			kernel_id(&st, &dev, &ino);
			if (dev == e->dev && ino == e->ino) {
				snprintf(out, len, "%s", path);
				fclose(f);
				return true;
			}
		}
	}
	if (f)
		fclose(f);
	return false;
}

static void note(struct gpu_trace *g, const char *probe, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void note(struct gpu_trace *g, const char *probe, bool ok, const char *fmt, ...)
{
	char buf[PATH_MAX + 128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	g->note(g->ctx, probe, ok, buf);
}

/* held at its mmap (gpu_mmap): let it go, attached or not, and say so in
 * gpuseen (the keeper continues only the ones still held) */
static void let_go(struct gpu_trace *g, const struct tl_head *h, __u64 dev, __u64 ino)
{
	struct gpu_seen_key k = {.tgid = h->pid, .dev = dev, .ino = ino};
	__u32 gone = GPU_SEEN_GONE;
	int fd = g->skel ? bpf_map__fd(g->skel->maps.gpuseen) : -1;

	kill((pid_t)h->pid, SIGCONT);
	if (fd >= 0 && (dev || ino))
		bpf_map_update_elem(fd, &k, &gone, BPF_EXIST);
}

int gpu_continue_held(int seen_fd)
{
	struct gpu_seen_key k, next, *prev = NULL;
	int n = 0;

	while (bpf_map_get_next_key(seen_fd, prev, &next) == 0) {
		__u32 v;

		if (bpf_map_lookup_elem(seen_fd, &next, &v) == 0 && v == GPU_SEEN_HELD &&
		    kill((pid_t)next.tgid, SIGCONT) == 0)
			n++;
		k = next;
		prev = &k;
	}
	return n;
}

/* Keep n links of an attach (the keeper drops their last references). */
static void keep_late(struct gpu_trace *g, struct bpf_link **links, int n)
{
	bool kept = keep_links(g, links, n);

	for (int i = 0; i < n; i++) {
		if (g->n_late >= GPU_MAX_LATE) {
			bpf_link__destroy(links[i]);
			continue;
		}
		g->late_kept[g->n_late] = kept;
		g->late[g->n_late++] = links[i];
	}
}

/* pid has CUDA probes: a child it forks without exec is held (gpu_fork),
 * whose programs are attached now, at the first such process, when the
 * tracer loaded them (bpf/gpu.bpf.c: "?", not loaded by default) */
static void has_probes(struct gpu_trace *g, pid_t pid)
{
	struct bpf_program *progs[2] = {g->skel->progs.gpu_fork, g->skel->progs.gpu_fork3};
	__u32 k = (__u32)pid, one = 1;

	bpf_map__update_elem(g->skel->maps.gpuprocs, &k, sizeof(k), &one, sizeof(one), BPF_ANY);
	if (g->fork_tried)
		return;
	g->fork_tried = true;
	for (int i = 0; i < 2; i++) {
		if (bpf_program__fd(progs[i]) < 0)
			continue;
		g->fork_links[i] = bpf_program__attach(progs[i]);
		if (g->note)
			note(g, bpf_program__name(progs[i]), g->fork_links[i] != NULL, "%s%s",
			     g->fork_links[i] ? "" : "failed to attach (tracepoint missing?): ",
			     g->fork_links[i] ? bpf_program__name(progs[i]) : strerror(errno));
	}
}

/* A child forked (no exec) from parent, held by gpu_fork: its parent's
 * libraries attached for it, then continued. */
static void on_fork(struct gpu_trace *g, const struct tl_gpu_map_event *e)
{
	struct gpu_seen_key k = {.tgid = e->pid};
	__u32 gone = GPU_SEEN_GONE;
	pid_t parent = (pid_t)e->ino, child = (pid_t)e->pid;
	int n_libs = g->n_libs;

	for (int i = 0; i < n_libs; i++) {
		struct gpu_lib src = g->libs[i], *l;
		struct bpf_link *links[64];
		uint64_t off[N_FNS];
		int n;

		if (src.pid != parent || src.n_probes <= 0 ||
		    lib_resolve(src.path, off) != src.kind)
			continue;
		n = attach_lib(g, src.path, src.kind, off, child, links, 64);
		l = lib_add(g, src.path, src.kind, child);
		if (l) {
			l->ms = clock_ns_to_ms(e->ts_ns);
			l->n_probes = n / 2;
			l->forked = true;
		}
		/* tracing.probes has its cuda:PATH (the parent's attach) */
		if (n) {
			keep_late(g, links, n);
			has_probes(g, child);
		}
		if (l)
			l->held_ms = clock_ms() - l->ms;
	}
	kill(child, SIGCONT);
	if (g->skel)
		bpf_map__update_elem(g->skel->maps.gpuseen, &k, sizeof(k), &gone, sizeof(gone),
				     BPF_EXIST);
}

static void on_map(struct gpu_trace *g, const struct tl_gpu_map_event *e)
{
	char path[PATH_MAX];
	struct bpf_link *links[64];
	enum lib_kind kind = LIB_NONE;
	uint64_t off[N_FNS];
	struct gpu_lib *l = NULL;
	int n = 0;

	if (mapped_path(e, path, sizeof(path)))
		kind = lib_resolve(path, off);
	if (kind != LIB_NONE) {
		n = attach_lib(g, path, kind, off, (pid_t)e->pid, links, 64);
		l = lib_add(g, path, kind, (pid_t)e->pid);
		if (l) {
			l->ms = clock_ns_to_ms(e->ts_ns);
			l->n_probes = n / 2;
		}
		if (g->note && n)
			note(g, "cuda", true, "cuda:%s", path);
		else if (g->note)
			note(g, "cuda", false, "failed to attach uprobes to %s: %s", path,
			     strerror(errno ? errno : ENOENT));
		if (n) {
			keep_late(g, links, n);
			has_probes(g, (pid_t)e->pid);
		}
	}
	let_go(g, &e->head, e->dev, e->ino);
	if (kind != LIB_NONE && l)
		l->held_ms = clock_ms() - l->ms;
}

/* ---- the calls ---- */

static struct gpu_proc *proc_of(struct gpu_trace *g, pid_t pid)
{
	for (int i = 0; i < g->n_procs; i++)
		if (g->procs[i].pid == pid)
			return &g->procs[i];
	if (g->n_procs >= GPU_MAX_PROCS)
		return NULL;
	g->procs[g->n_procs] = (struct gpu_proc){
	    .pid = pid, .device_count = -1, .device = -1, .free_first_ms = -1, .free_ready_ms = -1};
	return &g->procs[g->n_procs++];
}

/* fn is a call that initialises the device (cudaFree counted so: as an
 * outer call only its fn is known, and cudaFree(0) is the init idiom) */
static bool init_fn(__u32 fn)
{
	return fn == GPU_CUDA_GET_DEVICE_COUNT || fn == GPU_CUDA_SET_DEVICE ||
	       fn == GPU_CUDA_FREE || fn == GPU_CU_INIT || fn == GPU_CU_CTX_CREATE ||
	       fn == GPU_CU_PRIMARY_CTX_RETAIN;
}

static bool is_init(const struct tl_gpu_event *e)
{
	return init_fn(e->fn) && (e->fn != GPU_CUDA_FREE || !e->args[0]);
}

/* the allocators (a1: bytes, out: the pointer or cuMemCreate's handle) and
 * their frees (a0: the pointer or handle) */
static bool is_alloc(__u32 fn)
{
	return fn == GPU_CUDA_MALLOC || fn == GPU_CU_MEM_ALLOC || fn == GPU_CUDA_MALLOC_ASYNC ||
	       fn == GPU_CU_MEM_ALLOC_ASYNC || fn == GPU_CU_MEM_CREATE;
}

static bool is_free(__u32 fn)
{
	return fn == GPU_CUDA_FREE || fn == GPU_CU_MEM_FREE || fn == GPU_CUDA_FREE_ASYNC ||
	       fn == GPU_CU_MEM_FREE_ASYNC || fn == GPU_CU_MEM_RELEASE;
}

/* Device memory is paired by (process, pointer) for the allocators that
 * return a pointer, by (process, handle) for cuMemCreate's physical
 * memory: two spaces of values that could meet. */
static void alloc_add(struct gpu_trace *g, pid_t pid, bool handle, __u64 ptr, __u64 bytes)
{
	struct gpu_alloc *n;

	if (g->n_allocs >= GPU_MAX_ALLOCS)
		return;
	if (!(g->n_allocs & 255)) {
		n = realloc(g->allocs, (g->n_allocs + 256) * sizeof(*n));
		if (!n)
			return;
		g->allocs = n;
	}
	g->allocs[g->n_allocs++] = (struct gpu_alloc){pid, handle, ptr, bytes};
}

static __u64 alloc_take(struct gpu_trace *g, pid_t pid, bool handle, __u64 ptr)
{
	for (size_t i = g->n_allocs; i-- > 0;)
		if (g->allocs[i].pid == pid && g->allocs[i].handle == handle &&
		    g->allocs[i].ptr == ptr) {
			__u64 b = g->allocs[i].bytes;

			g->allocs[i] = g->allocs[--g->n_allocs];
			return b;
		}
	return 0;
}

/* the call's time, for the attribution: merged with the thread's last
 * span when they touch */
static void span_add(struct gpu_trace *g, const struct tl_gpu_event *e, const struct gpu_fn *f,
		     double ms, double dur)
{
	struct gpu_span *n;

	for (size_t i = g->n_spans; i-- > 0 && g->n_spans - i <= 8;) {
		struct gpu_span *s = &g->spans[i];

		if (s->tid == (int)e->tid && s->call == f->name && ms <= s->end + 1e-3 &&
		    ms + dur >= s->start) {
			s->end = ms + dur > s->end ? ms + dur : s->end;
			return;
		}
	}
	if (g->n_spans >= GPU_MAX_SPANS)
		return;
	if (!(g->n_spans & 1023)) {
		n = realloc(g->spans, (g->n_spans + 1024) * sizeof(*n));
		if (!n)
			return;
		g->spans = n;
	}
	g->spans[g->n_spans++] =
	    (struct gpu_span){(int)e->pid, (int)e->tid, ms, ms + dur, f->name, is_init(e)};
}

const struct gpu_span *gpu_spans(const struct gpu_trace *g, size_t *n)
{
	*n = g ? g->n_spans : 0;
	return *n ? g->spans : NULL;
}

size_t gpu_holds(const struct gpu_trace *g, struct gpu_hold *out, size_t max)
{
	size_t n = 0;

	for (int i = 0; g && i < g->n_libs && n < max; i++)
		if (g->libs[i].ms >= 0)
			out[n++] = (struct gpu_hold){(int)g->libs[i].pid, g->libs[i].ms,
						     g->libs[i].ms + g->libs[i].held_ms};
	return n;
}

/* a memory query's answer: free (out) and total (args[2]) */
static void on_mem_info(struct gpu_proc *p, const struct tl_gpu_event *e, double ms,
			double ready_ms)
{
	p->ok = true;
	if (e->args[2])
		p->device_total = e->args[2];
	if (p->free_first_ms < 0) {
		p->free_first = e->out;
		p->free_first_ms = ms;
	}
	if (ready_ms < 0 || ms < ready_ms) {
		p->free_ready = e->out;
		p->free_ready_ms = ms;
	}
}

/* an allocation that succeeded: bytes of device memory now held */
static void on_alloc(struct gpu_trace *g, struct gpu_proc *p, bool handle, __u64 ptr, __u64 bytes)
{
	p->ok = true;
	p->allocs++;
	p->mem += bytes;
	if (p->mem > p->peak)
		p->peak = p->mem;
	alloc_add(g, p->pid, handle, ptr, bytes);
}

static void on_release(struct gpu_trace *g, struct gpu_proc *p, bool handle, __u64 ptr)
{
	__u64 bytes = alloc_take(g, p->pid, handle, ptr);

	p->mem -= bytes < p->mem ? bytes : p->mem;
}

static bool is_h2d(const struct tl_gpu_event *e)
{
	return e->fn == GPU_CU_MEMCPY_HTOD || e->fn == GPU_CU_MEMCPY_HTOD_ASYNC ||
	       ((e->fn == GPU_CUDA_MEMCPY || e->fn == GPU_CUDA_MEMCPY_ASYNC) &&
		e->args[3] == 1 /* cudaMemcpyHostToDevice */);
}

/* the bytes a call allocates or copies to the device, 0: neither */
static __u64 call_bytes(const struct tl_gpu_event *e)
{
	return is_alloc(e->fn) ? e->args[1] : is_h2d(e) ? e->args[2] : 0;
}

/* What an outermost call says of its process's memory and copies (a
 * runtime call's own driver calls, `within` it, are the same memory or
 * copy once more). */
static void on_outer_call(struct gpu_trace *g, struct gpu_proc *p, const struct tl_gpu_event *e,
			  double dur)
{
	bool ok = !e->ret;

	if (ok && is_alloc(e->fn))
		on_alloc(g, p, e->fn == GPU_CU_MEM_CREATE, e->out, e->args[1]);
	else if (ok && is_free(e->fn) && e->args[0])
		on_release(g, p, e->fn == GPU_CU_MEM_RELEASE, e->args[0]);
	if (ok && is_h2d(e)) {
		p->h2d_bytes += call_bytes(e);
		p->h2d_copies++;
		p->h2d_ms += dur;
	}
}

static void on_call(struct gpu_trace *g, const struct tl_gpu_event *e, size_t size, double ready_ms)
{
	const struct gpu_fn *f = gpu_fn_of(e->fn);
	struct gpu_proc *p = proc_of(g, (pid_t)e->pid);
	double ms = clock_ns_to_ms(e->ts_ns), dur = (double)e->dur_ns / 1e6;
	__u64 bytes = 0;
	bool driver = f && f->kind == LIB_DRIVER, outer = !e->within;

	if (!f || !p)
		return;
	g->calls_total++;
	span_add(g, e, f, ms, dur);
	if (ready_ms >= 0 && ms >= ready_ms && !p->ready_seen) {
		p->ready_seen = true;
		p->mem_ready = p->mem;
	}
	/* init time once: an init call's own (cudaFree(0)'s cuInit is in it),
	 * or a driver's init made lazily inside another call (a first
	 * cudaMalloc's cuDevicePrimaryCtxRetain) */
	if (is_init(e) && (outer || !init_fn(e->within)))
		p->init_ms += dur;
	/* a call inside another is answered for by the outer one: what the
	 * service saw (the runtime may recover from its driver's error) */
	if (e->ret && outer) {
		p->errors++;
		if (!p->first_error) {
			p->first_error = e->ret;
			p->first_error_driver = driver;
		}
	}
	switch (e->fn) {
	case GPU_CUDA_GET_DEVICE_COUNT:
		if (!e->ret)
			p->device_count = (int)e->out;
		if (!e->ret && e->out > 0)
			p->ok = true;
		break;
	case GPU_CUDA_DRIVER_VERSION:
	case GPU_CU_DRIVER_VERSION:
		if (!e->ret)
			p->driver_version = (int)e->out;
		break;
	case GPU_CUDA_RUNTIME_VERSION:
		if (!e->ret)
			p->runtime_version = (int)e->out;
		break;
	case GPU_CU_INIT:
	case GPU_CU_CTX_CREATE:
	case GPU_CU_PRIMARY_CTX_RETAIN:
		if (!e->ret)
			p->ok = true;
		break;
	case GPU_CUDA_MEM_GET_INFO:
	case GPU_CU_MEM_GET_INFO:
		if (!e->ret)
			on_mem_info(p, e, ms, ready_ms);
		break;
	case GPU_CUDA_GET_DEVICE_PROPERTIES:
		if (!e->ret && size >= sizeof(struct tl_gpu_prop_event)) {
			const struct tl_gpu_prop_event *pe = (const void *)e;

			p->ok = true;
			p->device = (int)e->args[1];
			p->device_total = e->out;
			snprintf(p->device_name, sizeof(p->device_name), "%.*s",
				 (int)sizeof(pe->name), pe->name);
		}
		break;
	}
	if (outer)
		on_outer_call(g, p, e, dur);
	bytes = call_bytes(e);
	/* copies to the device are summed; one by one only the first few
	 * (those within them too); other copies are not followed */
	if ((e->fn == GPU_CUDA_MEMCPY || e->fn == GPU_CUDA_MEMCPY_ASYNC) && !is_h2d(e))
		return;
	if (is_h2d(e) && !e->ret && p->h2d_copies > 4)
		return;
	if (g->n_calls < GPU_MAX_CALLS)
		g->calls[g->n_calls++] =
		    (struct gpu_call_rec){p->pid, e->fn, e->ret, ms, dur, bytes, e->within};
}

void gpu_on_event(struct gpu_trace *g, const void *data, size_t size, double ready_ms)
{
	const struct tl_head *h = data;

	if (!g)
		return;
	if (h->type == EV_GPU_MAP && size >= sizeof(struct tl_gpu_map_event) &&
	    ((const struct tl_gpu_map_event *)data)->fd == GPU_MAP_FORK)
		on_fork(g, data);
	else if (h->type == EV_GPU_MAP && size >= sizeof(struct tl_gpu_map_event))
		on_map(g, data);
	else if (h->type == EV_GPU_MAP && size >= sizeof(struct tl_head))
		kill((pid_t)h->pid, SIGCONT); /* never left stopped */
	else if (h->type == EV_GPU_CALL && size >= sizeof(struct tl_gpu_event))
		on_call(g, data, size, ready_ms);
}

int gpu_trace_attached(const struct gpu_trace *g)
{
	int n = 0;

	for (int i = 0; g && i < g->n_libs; i++)
		n += g->libs[i].n_probes > 0;
	return n;
}

void gpu_trace_free(struct gpu_trace *g)
{
	if (!g)
		return;
	for (int i = 0; i < 2; i++)
		bpf_link__destroy(g->fork_links[i]);
	for (int i = 0; i < g->n_late; i++) {
		if (g->late_kept[i])
			bpf_link__disconnect(g->late[i]);
		bpf_link__destroy(g->late[i]);
	}
	free(g->allocs);
	free(g->spans);
	free(g);
}
