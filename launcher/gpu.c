/* gpu: the CUDA side of a start-up (issue 18; gpu.h, docs/gpu.md).
 *
 * Where the probes go: a uprobe is per file (inode), so every CUDA library
 * the service may map gets the pair of bpf/gpu.bpf.c on each probed
 * function, filtered to a pid (perf_event_open's pid: only the mm of that
 * process gets the breakpoints; other GPU jobs on the host get none).
 * Before the root is released: the candidates that exist (the ld.so cache's
 * libcuda*, /usr/local/cuda* /lib64, the app's venv nvidia/ * /lib and
 * torch/lib), confirmed by their exported symbols, attached with the root's
 * pid; the kernel registers the breakpoints when the process maps the file
 * (even after its exec, from a dlopen). Any other libcuda* file a process of
 * the tree maps, or a known one mapped by another process of the tree (a
 * spawned worker), is reported by gpu_mmap with the process stopped: it is
 * attached then, with that pid, and the process continued (SIGCONT). */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <glob.h>
#include <libelf.h>
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
#include "collector.h"
#include "gpu.h"
#include "trace.h"
#include "trace.skel.h"

enum lib_kind { LIB_NONE = 0, LIB_RUNTIME, LIB_DRIVER };

static const struct gpu_fn {
	__u32 fn;
	enum lib_kind kind;
	const char *sym[2]; /* the first one the library exports */
	const char *name;   /* in the timeline */
} fns[] = {
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
};
#define N_FNS (sizeof(fns) / sizeof(fns[0]))

static const struct gpu_fn *fn_of(__u32 fn)
{
	for (size_t i = 0; i < N_FNS; i++)
		if (fns[i].fn == fn)
			return &fns[i];
	return NULL;
}

#define GPU_MAX_LIBS   16
#define GPU_MAX_PROCS  64
#define GPU_MAX_CALLS  256 /* calls kept one by one (the first; copies are summed) */
#define GPU_MAX_ALLOCS 8192
#define GPU_MAX_LATE   512 /* links attached after the start */

struct gpu_lib {
	char path[PATH_MAX];
	enum lib_kind kind;
	pid_t pid;     /* attached for */
	bool at_start; /* before the release, or when mapped */
	double ms;     /* mapped (EV_GPU_MAP), or -1 */
	int n_probes;
};

struct gpu_proc {
	pid_t pid;
	double init_ms;	 /* time in the init calls */
	__u64 mem, peak; /* device memory allocated now, at most */
	__u64 mem_ready; /* at ready (the last value before ready) */
	bool ready_seen;
	__u64 h2d_bytes, h2d_copies;
	double h2d_ms;
	__u64 allocs, errors;
	int device_count; /* -1: never answered */
	int driver_version, first_error;
	bool first_error_driver, ok; /* a call that needs a device succeeded */
};

struct gpu_call_rec {
	pid_t pid;
	__u32 fn;
	int ret;
	double ms, dur_ms;
	__u64 bytes;
};

struct gpu_alloc {
	pid_t pid;
	__u64 ptr, bytes;
};

struct gpu_trace {
	struct trace_bpf *skel;
	pid_t root;
	struct gpu_lib libs[GPU_MAX_LIBS];
	int n_libs;
	struct gpu_proc procs[GPU_MAX_PROCS];
	int n_procs;
	struct gpu_call_rec calls[GPU_MAX_CALLS];
	int n_calls;
	__u64 calls_total, maps_seen;
	struct gpu_alloc *allocs;
	size_t n_allocs;
	struct bpf_link *late[GPU_MAX_LATE];
	bool late_kept[GPU_MAX_LATE];
	int n_late;
	int keeper;
	gpu_note_fn note;
	void *ctx;
};

/* ---- the libraries ---- */

/* runtime or driver, by what the ELF file exports (its .dynsym) */
static enum lib_kind lib_kind(const char *path)
{
	enum lib_kind k = LIB_NONE;
	Elf_Scn *scn = NULL;
	Elf *e;
	int fd;

	if (elf_version(EV_CURRENT) == EV_NONE || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return LIB_NONE;
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	while (e && k == LIB_NONE && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *n;

			if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF ||
			    GELF_ST_TYPE(s.st_info) != STT_FUNC)
				continue;
			n = elf_strptr(e, sh.sh_link, s.st_name);
			if (n && !strcmp(n, "cudaGetDeviceCount"))
				k = LIB_RUNTIME;
			else if (n && !strcmp(n, "cuInit"))
				k = LIB_DRIVER;
			if (k != LIB_NONE)
				break;
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return k;
}

static bool cuda_basename(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	return !strncmp(b, "libcuda.so", 10) || !strncmp(b, "libcudart", 9);
}

/* the kernel's s_dev of a file (MKDEV: major << 20 | minor) */
static void kernel_id(const struct stat *st, __u64 *dev, __u64 *ino)
{
	*dev = ((__u64)major(st->st_dev) << 20) | minor(st->st_dev);
	*ino = st->st_ino;
}

static void note(struct gpu_trace *g, const char *probe, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void note(struct gpu_trace *g, const char *probe, bool ok, const char *fmt, ...)
{
	char buf[PATH_MAX + 128];
	va_list ap;

	if (!g->note)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	g->note(g->ctx, probe, ok, buf);
}

/* The pairs of lib's kind on path, for pid; the links in *out (start: kept
 * by the tracer's keeper via the program ids), their number returned. */
static int attach_lib(struct gpu_trace *g, const char *path, enum lib_kind kind, pid_t pid,
		      struct bpf_link **out, int max)
{
	int n = 0;

	for (size_t i = 0; i < N_FNS && n + 2 <= max; i++) {
		struct bpf_link *le = NULL, *lx = NULL;

		if (fns[i].kind != kind)
			continue;
		for (int s = 0; s < 2 && fns[i].sym[s] && !le; s++) {
			LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = fns[i].sym[s],
				    .bpf_cookie = fns[i].fn);

			le = bpf_program__attach_uprobe_opts(g->skel->progs.gpu_enter, pid, path, 0,
							     &uo);
			if (le) {
				uo.retprobe = true;
				lx = bpf_program__attach_uprobe_opts(g->skel->progs.gpu_exit, pid,
								     path, 0, &uo);
				if (!lx) {
					bpf_link__destroy(le);
					le = NULL;
				}
			}
		}
		if (!le)
			continue; /* not exported by this version */
		out[n++] = le;
		out[n++] = lx;
	}
	return n;
}

static struct gpu_lib *lib_add(struct gpu_trace *g, const char *path, enum lib_kind kind, pid_t pid,
			       bool at_start)
{
	struct gpu_lib *l;

	if (g->n_libs >= GPU_MAX_LIBS)
		return NULL;
	l = &g->libs[g->n_libs++];
	snprintf(l->path, sizeof(l->path), "%s", path);
	l->kind = kind;
	l->pid = pid;
	l->at_start = at_start;
	l->ms = -1;
	return l;
}

static bool known(struct gpu_trace *g, const char *real)
{
	for (int i = 0; i < g->n_libs; i++)
		if (g->libs[i].at_start && !strcmp(g->libs[i].path, real))
			return true;
	return false;
}

/* A candidate: resolved, confirmed, attached for the root, marked seen. */
static void candidate(struct gpu_trace *g, const char *path, struct bpf_link **links, int *n_links,
		      int max)
{
	char real[PATH_MAX];
	struct stat st;
	enum lib_kind kind;
	struct gpu_lib *l;
	int n;

	if (!cuda_basename(path) || !realpath(path, real) || known(g, real) || stat(real, &st) ||
	    !S_ISREG(st.st_mode))
		return;
	kind = lib_kind(real);
	if (kind == LIB_NONE)
		return; /* a stub or another library named alike */
	n = attach_lib(g, real, kind, g->root, links + *n_links, max - *n_links);
	l = lib_add(g, real, kind, g->root, true);
	if (!n) {
		note(g, "cuda", false, "failed to attach uprobes to %s: %s", real,
		     strerror(errno ? errno : ENOENT));
		return;
	}
	*n_links += n;
	if (l)
		l->n_probes = n / 2;
	/* not marked seen: its mmap still stops the root once, for a moment,
	 * and says when it was mapped (on_map) */
	note(g, "cuda", true, "cuda:%s", real);
}

/* The ld.so cache's libcuda* entries: its strings that are absolute paths. */
static void ldcache(struct gpu_trace *g, struct bpf_link **links, int *n, int max)
{
	FILE *f = fopen("/etc/ld.so.cache", "re");
	char *buf = NULL;
	long len;

	if (!f)
		return;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && len < (64 << 20) &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len + 1)) &&
	    fread(buf, 1, (size_t)len, f) == (size_t)len) {
		buf[len] = 0;
		for (long i = 0; i < len; i++) {
			if (buf[i] == '/' && (i == 0 || buf[i - 1] == 0) &&
			    strstr(buf + i, "/libcuda"))
				candidate(g, buf + i, links, n, max);
			i += (long)strlen(buf + i);
		}
	}
	free(buf);
	fclose(f);
}

static void globbed(struct gpu_trace *g, const char *pattern, struct bpf_link **links, int *n,
		    int max)
{
	glob_t gl;

	if (glob(pattern, 0, NULL, &gl) == 0)
		for (size_t i = 0; i < gl.gl_pathc; i++)
			candidate(g, gl.gl_pathv[i], links, n, max);
	globfree(&gl);
}

#define START_LINKS 128

struct gpu_trace *gpu_trace_new(struct trace_bpf *skel, pid_t root, const struct config *cfg,
				gpu_note_fn note_fn, void *ctx)
{
	struct gpu_trace *g = calloc(1, sizeof(*g));
	struct bpf_link *links[START_LINKS];
	char pat[PATH_MAX + 96];
	int n = 0;

	if (!g)
		return NULL;
	g->skel = skel;
	g->root = root;
	g->keeper = -1;
	g->note = note_fn;
	g->ctx = ctx;
	if (bpf_program__fd(skel->progs.gpu_enter) < 0)
		return g;
	ldcache(g, links, &n, START_LINKS);
	globbed(g, "/usr/local/cuda*/lib64/libcuda*.so*", links, &n, START_LINKS);
	if (cfg && cfg->app_dir) {
		static const char *const sub[] = {
		    "%s/%s/lib/python3*/site-packages/nvidia/*/lib/libcuda*.so*",
		    "%s/%s/lib/python3*/site-packages/torch/lib/libcuda*.so*"};

		for (size_t v = 0; v < 2; v++)
			for (size_t s = 0; s < 2; s++) {
				snprintf(pat, sizeof(pat), sub[s], cfg->app_dir,
					 v ? "venv" : ".venv");
				globbed(g, pat, links, &n, START_LINKS);
			}
	}
	/* the tracer's keeper holds these (their programs' ids): the links
	 * themselves are the tracer's to disconnect */
	for (int i = 0; i < n && g->n_late < GPU_MAX_LATE; i++)
		g->late[g->n_late++] = links[i];
	return g;
}

void gpu_trace_set_keeper(struct gpu_trace *g, int sock)
{
	if (!g)
		return;
	g->keeper = sock;
	/* the start's links are among the fds the keeper copied */
	for (int i = 0; i < g->n_late; i++)
		g->late_kept[i] = sock >= 0;
}

/* Hands the keeper a copy of each new link fd (SCM_RIGHTS). */
static bool keep_links(struct gpu_trace *g, struct bpf_link **l, int n)
{
	int fds[64];
	char cbuf[CMSG_SPACE(sizeof(fds))];
	char byte = 'l';
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf};
	struct cmsghdr *cm;

	if (g->keeper < 0 || n <= 0 || n > 64)
		return false;
	for (int i = 0; i < n; i++)
		fds[i] = bpf_link__fd(l[i]);
	memset(cbuf, 0, sizeof(cbuf));
	m.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
	cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, (size_t)n * sizeof(int));
	return sendmsg(g->keeper, &m, MSG_NOSIGNAL) == 1;
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

static void on_map(struct gpu_trace *g, const struct tl_gpu_map_event *e)
{
	char path[PATH_MAX];
	struct bpf_link *links[64];
	enum lib_kind kind = LIB_NONE;
	struct gpu_lib *l;
	int n = 0;

	g->maps_seen++;
	if (mapped_path(e, path, sizeof(path))) {
		char real[PATH_MAX];

		for (int i = 0; realpath(path, real) && i < g->n_libs; i++)
			if (g->libs[i].pid == (pid_t)e->pid && !strcmp(g->libs[i].path, real)) {
				/* attached before the start: only when it was mapped */
				if (g->libs[i].ms < 0)
					g->libs[i].ms = clock_ns_to_ms(e->ts_ns);
				kill((pid_t)e->pid, SIGCONT);
				return;
			}
		kind = lib_kind(path);
	}
	if (kind != LIB_NONE) {
		n = attach_lib(g, path, kind, (pid_t)e->pid, links, 64);
		l = lib_add(g, path, kind, (pid_t)e->pid, false);
		if (l) {
			l->ms = clock_ns_to_ms(e->ts_ns);
			l->n_probes = n / 2;
		}
		if (n) {
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
	}
	/* held at its mmap (gpu_mmap): let it go, attached or not */
	kill((pid_t)e->pid, SIGCONT);
}

/* ---- the calls ---- */

static struct gpu_proc *proc_of(struct gpu_trace *g, pid_t pid)
{
	for (int i = 0; i < g->n_procs; i++)
		if (g->procs[i].pid == pid)
			return &g->procs[i];
	if (g->n_procs >= GPU_MAX_PROCS)
		return NULL;
	g->procs[g->n_procs] = (struct gpu_proc){.pid = pid, .device_count = -1};
	return &g->procs[g->n_procs++];
}

static bool is_init(const struct tl_gpu_event *e)
{
	return e->fn == GPU_CUDA_GET_DEVICE_COUNT || e->fn == GPU_CUDA_SET_DEVICE ||
	       (e->fn == GPU_CUDA_FREE && !e->args[0]) || e->fn == GPU_CU_INIT ||
	       e->fn == GPU_CU_CTX_CREATE || e->fn == GPU_CU_PRIMARY_CTX_RETAIN;
}

static void alloc_add(struct gpu_trace *g, pid_t pid, __u64 ptr, __u64 bytes)
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
	g->allocs[g->n_allocs++] = (struct gpu_alloc){pid, ptr, bytes};
}

static __u64 alloc_take(struct gpu_trace *g, pid_t pid, __u64 ptr)
{
	for (size_t i = g->n_allocs; i-- > 0;)
		if (g->allocs[i].pid == pid && g->allocs[i].ptr == ptr) {
			__u64 b = g->allocs[i].bytes;

			g->allocs[i] = g->allocs[--g->n_allocs];
			return b;
		}
	return 0;
}

static void on_call(struct gpu_trace *g, const struct tl_gpu_event *e, double ready_ms)
{
	const struct gpu_fn *f = fn_of(e->fn);
	struct gpu_proc *p = proc_of(g, (pid_t)e->pid);
	double ms = clock_ns_to_ms(e->ts_ns), dur = (double)e->dur_ns / 1e6;
	__u64 bytes = 0;
	bool driver = f && f->kind == LIB_DRIVER;

	if (!f || !p)
		return;
	g->calls_total++;
	if (ready_ms >= 0 && ms >= ready_ms && !p->ready_seen) {
		p->ready_seen = true;
		p->mem_ready = p->mem;
	}
	if (is_init(e))
		p->init_ms += dur;
	if (e->ret) {
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
	case GPU_CUDA_MALLOC:
	case GPU_CU_MEM_ALLOC:
		bytes = e->args[1];
		if (!e->ret) {
			p->ok = true;
			p->allocs++;
			p->mem += bytes;
			if (p->mem > p->peak)
				p->peak = p->mem;
			alloc_add(g, p->pid, e->out, bytes);
		}
		break;
	case GPU_CUDA_FREE:
	case GPU_CU_MEM_FREE:
		if (!e->ret && e->args[0]) {
			bytes = alloc_take(g, p->pid, e->args[0]);
			p->mem -= bytes < p->mem ? bytes : p->mem;
		}
		break;
	case GPU_CUDA_MEMCPY:
	case GPU_CUDA_MEMCPY_ASYNC:
		if (e->args[3] != 1 /* cudaMemcpyHostToDevice */)
			return; /* other directions are not followed */
				/* fall through */
	case GPU_CU_MEMCPY_HTOD:
	case GPU_CU_MEMCPY_HTOD_ASYNC:
		bytes = e->args[2];
		if (!e->ret) {
			p->h2d_bytes += bytes;
			p->h2d_copies++;
			p->h2d_ms += dur;
		}
		/* copies are summed; one by one only the first few */
		if (p->h2d_copies > 4 && !e->ret)
			return;
		break;
	case GPU_CU_INIT:
	case GPU_CU_CTX_CREATE:
	case GPU_CU_PRIMARY_CTX_RETAIN:
		if (!e->ret)
			p->ok = true;
		break;
	}
	if (g->n_calls < GPU_MAX_CALLS)
		g->calls[g->n_calls++] =
		    (struct gpu_call_rec){p->pid, e->fn, e->ret, ms, dur, bytes};
}

void gpu_on_event(struct gpu_trace *g, const void *data, size_t size, double ready_ms)
{
	const struct tl_head *h = data;

	if (!g)
		return;
	if (h->type == EV_GPU_MAP && size >= sizeof(struct tl_gpu_map_event))
		on_map(g, data);
	else if (h->type == EV_GPU_MAP && size >= sizeof(struct tl_head))
		kill((pid_t)h->pid, SIGCONT); /* never left stopped */
	else if (h->type == EV_GPU_CALL && size >= sizeof(struct tl_gpu_event))
		on_call(g, data, ready_ms);
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
	for (int i = 0; i < g->n_late; i++) {
		if (g->late_kept[i])
			bpf_link__disconnect(g->late[i]);
		bpf_link__destroy(g->late[i]);
	}
	free(g->allocs);
	free(g);
}

/* ---- the timeline's gpu section ---- */

const char *gpu_error_name(int code, bool driver)
{
	static const struct {
		int code;
		const char *rt, *drv;
	} names[] = {
	    {0, "cudaSuccess", "CUDA_SUCCESS"},
	    {1, "cudaErrorInvalidValue", "CUDA_ERROR_INVALID_VALUE"},
	    {2, "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY"},
	    {3, "cudaErrorInitializationError", "CUDA_ERROR_NOT_INITIALIZED"},
	    {4, "cudaErrorCudartUnloading", "CUDA_ERROR_DEINITIALIZED"},
	    {34, "cudaErrorStubLibrary", "CUDA_ERROR_STUB_LIBRARY"},
	    {35, "cudaErrorInsufficientDriver", NULL},
	    {36, "cudaErrorCallRequiresNewerDriver", NULL},
	    {46, "cudaErrorDevicesUnavailable", NULL},
	    {100, "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE"},
	    {101, "cudaErrorInvalidDevice", "CUDA_ERROR_INVALID_DEVICE"},
	    {803, "cudaErrorSystemDriverMismatch", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
	    {804, "cudaErrorCompatNotSupportedOnDevice", NULL},
	    {999, "cudaErrorUnknown", "CUDA_ERROR_UNKNOWN"},
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].code == code)
			return driver ? names[i].drv : names[i].rt;
	return NULL;
}

static json_t *ms_or_null(double ms) { return ms < 0 ? json_null() : ms_json(ms); }

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

/* /dev/nvidia* now: evidence only (a fake node must not decide anything) */
static json_t *device_nodes(void)
{
	json_t *a = json_array();
	glob_t gl;

	if (glob("/dev/nvidia*", 0, NULL, &gl) == 0)
		for (size_t i = 0; i < gl.gl_pathc && i < 16; i++)
			json_array_append_new(a, json_string(gl.gl_pathv[i]));
	globfree(&gl);
	return a;
}

static bool torch_imported(const json_t *imports)
{
	const json_t *e;
	size_t i;

	json_array_foreach (imports, i, e) {
		const char *n = json_string_value(json_object_get(e, "name"));

		if (n && (!strcmp(n, "torch") || !strncmp(n, "torch.", 6)))
			return true;
	}
	return false;
}

/* torch/lib of the service: next to the torch package the tree opened
 * (the model's files), else where its root maps libtorch*, else the app's
 * venv, else Debian's python3-torch. */
static bool torch_lib(const json_t *model, pid_t root, const struct config *cfg, char *out,
		      size_t len, bool *opened)
{
	char p[64], line[PATH_MAX + 128], pat[PATH_MAX + 96];
	const json_t *e;
	glob_t gl;
	bool found = false;
	size_t i;
	FILE *f;

	json_array_foreach (json_object_get(model, "files"), i, e) {
		const char *path = json_string_value(json_object_get(e, "path"));
		const char *at = path && path[0] == '/' ? strstr(path, "/torch/") : NULL;

		if (at &&
		    (!strncmp(at, "/torch/lib/", 11) || !strncmp(at, "/torch/__init__.", 16))) {
			snprintf(out, len, "%.*s/torch/lib", (int)(at - path), path);
			*opened = true; /* the tree read the package: imported */
			return true;
		}
	}

	snprintf(p, sizeof(p), "/proc/%d/maps", (int)root);
	f = root > 0 ? fopen(p, "re") : NULL;
	while (f && !found && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/'),
		     *at = path ? strstr(path, "/torch/lib/libtorch") : NULL;

		if (at) {
			snprintf(out, len, "%.*s", (int)(at - path) + 10, path);
			found = true;
		}
	}
	if (f)
		fclose(f);
	for (int v = 0; !found && v < 3; v++) {
		if (v < 2 && (!cfg || !cfg->app_dir))
			continue;
		if (v < 2)
			snprintf(pat, sizeof(pat), "%s/%s/lib/python3*/site-packages/torch/lib",
				 cfg->app_dir, v ? "venv" : ".venv");
		else
			snprintf(pat, sizeof(pat), "/usr/lib/python3/dist-packages/torch/lib");
		if (glob(pat, 0, NULL, &gl) == 0 && gl.gl_pathc) {
			snprintf(out, len, "%s", gl.gl_pathv[0]);
			found = true;
		}
		globfree(&gl);
	}
	return found;
}

/* Why the service runs on CPU (code, message), or none: it used a GPU, or
 * nothing says it ever meant to. */
static json_t *cpu_reason(struct gpu_trace *g, bool tried, bool usable, bool torch,
			  const char *tlib, bool cuda_build, size_t n_nodes)
{
	const struct gpu_proc *p = NULL;
	char msg[PATH_MAX + 256];
	const char *code;

	if (usable)
		return json_null();
	for (int i = 0; i < g->n_procs && !p; i++)
		if (g->procs[i].first_error)
			p = &g->procs[i];
	if (tried && p) {
		const char *en = gpu_error_name(p->first_error, p->first_error_driver);

		code = p->first_error == 35    ? "insufficient-driver"
		       : p->first_error == 100 ? "no-device"
		       : p->first_error == 34  ? "stub-library"
		       : p->first_error == 803 ? "driver-mismatch"
					       : "cuda-error";
		snprintf(msg, sizeof(msg), "CUDA calls failed with %s (%d)%s", en ? en : "an error",
			 p->first_error, n_nodes ? "" : "; there is no /dev/nvidia* device node");
	} else if (tried) {
		bool none = false;

		for (int i = 0; i < g->n_procs; i++)
			none |= g->procs[i].device_count == 0;
		if (!none)
			return json_null(); /* a CUDA library loaded, no answer yet */
		code = "no-device";
		snprintf(msg, sizeof(msg), "the CUDA runtime reports no device");
	} else if (torch && tlib && !cuda_build) {
		code = "cpu-torch";
		snprintf(msg, sizeof(msg),
			 "PyTorch is a CPU-only build: no libtorch_cuda.so in %s, and no CUDA "
			 "library was loaded",
			 tlib);
	} else if (torch) {
		code = "no-cuda-library";
		snprintf(msg, sizeof(msg), "PyTorch never loaded a CUDA library");
	} else {
		return json_null();
	}
	return json_pack("{s:s, s:s}", "code", code, "message", msg);
}

json_t *gpu_snap(struct gpu_trace *g, const json_t *model, const struct config *cfg,
		 double ready_ms)
{
	const json_t *imports = json_object_get(json_object_get(model, "python"), "imports");
	json_t *o = json_object(), *libs = json_array(), *procs = json_array(),
	       *calls = json_array(), *nodes = device_nodes(), *torch;
	bool tried = false, usable = false, imported = torch_imported(imports), cuda_build = false;
	char tlib[PATH_MAX];
	const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
	bool have_tlib;

	for (int i = 0; g && i < g->n_libs; i++) {
		const struct gpu_lib *l = &g->libs[i];

		tried |= l->ms >= 0;
		json_array_append_new(
		    libs, json_pack("{s:s, s:s, s:i, s:s, s:o, s:i}", "path", l->path, "kind",
				    l->kind == LIB_DRIVER ? "driver" : "runtime", "pid",
				    (int)l->pid, "attached", l->at_start ? "start" : "mapped",
				    "mapped_ms", ms_or_null(l->ms), "probes", l->n_probes));
	}
	for (int i = 0; g && i < g->n_procs; i++) {
		const struct gpu_proc *p = &g->procs[i];
		__u64 at_ready = p->ready_seen ? p->mem_ready : p->mem;

		tried = true;
		usable |= p->ok;
		json_array_append_new(
		    procs,
		    json_pack("{s:i, s:o, s:I, s:I, s:o, s:I, s:o, s:I, s:I, s:I, s:o, s:o}", "pid",
			      (int)p->pid, "init_ms", ms_json(p->init_ms), "memory_bytes",
			      (json_int_t)p->mem, "memory_peak_bytes", (json_int_t)p->peak,
			      "memory_at_ready_bytes",
			      ready_ms >= 0 ? json_integer((json_int_t)at_ready) : json_null(),
			      "h2d_bytes", (json_int_t)p->h2d_bytes, "h2d_ms", ms_json(p->h2d_ms),
			      "h2d_copies", (json_int_t)p->h2d_copies, "allocations",
			      (json_int_t)p->allocs, "errors", (json_int_t)p->errors,
			      "device_count",
			      p->device_count >= 0 ? json_integer(p->device_count) : json_null(),
			      "driver_version",
			      p->driver_version ? json_integer(p->driver_version) : json_null()));
	}
	for (int i = 0; g && i < g->n_calls; i++) {
		const struct gpu_call_rec *c = &g->calls[i];
		const struct gpu_fn *f = fn_of(c->fn);

		json_array_append_new(
		    calls,
		    json_pack("{s:i, s:s, s:o, s:o, s:i, s:o, s:I}", "pid", (int)c->pid, "call",
			      f ? f->name : "?", "ms", ms_json(c->ms), "dur_ms", ms_json(c->dur_ms),
			      "ret", c->ret, "error",
			      str_or_null(gpu_error_name(c->ret, f && f->kind == LIB_DRIVER)),
			      "bytes", (json_int_t)c->bytes));
	}
	have_tlib = torch_lib(model, g ? g->root : 0, cfg, tlib, sizeof(tlib), &imported);
	if (have_tlib) {
		char p[PATH_MAX + 32];

		snprintf(p, sizeof(p), "%s/libtorch_cuda.so", tlib);
		cuda_build = access(p, F_OK) == 0;
	}
	torch = json_pack("{s:b, s:o, s:o}", "imported", imported, "lib",
			  have_tlib ? json_string(tlib) : json_null(), "cuda_build",
			  have_tlib ? json_boolean(cuda_build) : json_null());
	json_object_set_new(o, "libraries", libs);
	json_object_set_new(o, "processes", procs);
	json_object_set_new(o, "calls", calls);
	json_object_set_new(o, "calls_total", json_integer(g ? (json_int_t)g->calls_total : 0));
	json_object_set_new(o, "tried", json_boolean(tried));
	json_object_set_new(o, "usable", tried ? json_boolean(usable) : json_null());
	json_object_set_new(o, "cpu_reason",
			    g ? cpu_reason(g, tried, usable, imported, have_tlib ? tlib : NULL,
					   cuda_build, json_array_size(nodes))
			      : json_null());
	json_object_set_new(o, "device_nodes", nodes);
	json_object_set_new(o, "cuda_visible_devices", str_or_null(cvd));
	json_object_set_new(o, "torch", torch);
	return o;
}
