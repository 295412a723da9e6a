/* tracer: loads bpf/trace.bpf.c for the process tree rooted at the forked,
 * still blocked child, consumes its ring buffer, and turns events plus map
 * aggregates into the timeline model.
 *
 * Order (STYLE.md 3): open -> probe what the kernel has (autoload off for the
 * rest, listed as fallbacks) -> set targ_ rodata -> load -> insert the root
 * pid -> attach each program on its own -> ring buffer. Any failure before a
 * usable set is attached gives NULL and a reason; the service then runs
 * untraced. */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "hfcache.h"
#include "procfs.h"
#include "redact.h"
#include "timeline_internal.h"
#include "trace.h"
#include "trace.minbtf.h"
#include "trace.skel.h"
#include "tracer.h"
#include "util.h"

struct tracer {
	struct trace_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link **links;
	size_t n_links;
	struct bpf_link **ulinks; /* uprobes (USDT): slow to remove */
	size_t n_ulinks;
	pid_t root;
	int listen_port;
	const struct config *cfg;

	json_t *probes;	   /* names attached */
	json_t *fallbacks; /* [{probe, reason}] */
	bool usdt;	   /* python import probes attached */
	char tracefs[160]; /* "present", "mounted" or "unavailable: why" */

	/* collected from ring buffer events */
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
	struct dir_ent *dirs;
	size_t n_dirs, cap_dirs;
	struct tl_path2_event *path2; /* renames and symlinks, as received */
	size_t n_path2, cap_path2;
	json_t *requests;
	json_t *light;	      /* {ms, detached, kept} once the requests window ended */
	double req_window_ms; /* requests accepted after ready + this are not kept; <0: no limit */
	unsigned long long req_after_window;
};

struct dir_ent {
	__u64 dev, ino; /* dev as the kernel encodes it (MKDEV: major << 20 | minor) */
	char *path;
};

static int verbose_level;

static int print_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (!verbose_level || (level == LIBBPF_DEBUG && verbose_level < 2))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static void fallback(struct tracer *t, const char *probe, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	json_array_append_new(t->fallbacks, json_pack("{s:s, s:s}", "probe", probe, "reason", buf));
}

/* ---- probing the kernel ---- */

/* The build-time kernel's minimal BTF is exact for that kernel only: same
 * release, version and BTF size (see the Makefile's BTFGen rule). */
static bool min_btf_matches(void)
{
	struct utsname u;
	struct stat st;
	char id[512];

	if (uname(&u) || stat("/sys/kernel/btf/vmlinux", &st))
		return false;
	snprintf(id, sizeof(id), "%s|%s|%lld", u.release, u.version, (long long)st.st_size);
	return !strcmp(id, trace_min_btf_kernel);
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

static const char *lockdown_mode(char *buf, size_t len)
{
	FILE *f = fopen("/sys/kernel/security/lockdown", "r");
	char *l, *r;

	if (!f)
		return NULL;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		return NULL;
	}
	fclose(f);
	l = strchr(buf, '[');
	r = l ? strchr(l, ']') : NULL;
	if (!r)
		return NULL;
	*r = 0;
	return strcmp(l + 1, "none") ? l + 1 : NULL;
}

static void load_failure(char *why, size_t whylen, int err)
{
	char lb[128];
	const char *ld = lockdown_mode(lb, sizeof(lb));

	if (ld)
		snprintf(why, whylen, "kernel lockdown (%s) forbids BPF tracing", ld);
	else if (err == EPERM || err == EACCES)
		snprintf(why, whylen,
			 "not permitted to load BPF programs (run as root, or with CAP_BPF and "
			 "CAP_PERFMON): %s",
			 strerror(err));
	else
		snprintf(why, whylen, "failed to load BPF programs: %s", strerror(err));
}

/* Python binaries to put the import probes on: the system interpreter and
 * the configured one, resolved to real files (a uprobe is per inode, so every
 * process running that file is covered; the pid tree filters in-kernel). */
static int python_candidates(const struct config *cfg, char out[][PATH_MAX], int max)
{
	const char *cands[3] = {"/usr/bin/python3", NULL, NULL};
	char first[PATH_MAX], rp[PATH_MAX];
	int n = 0;

	if (cfg && cfg->n_command > 0 && cfg->command[0])
		cands[1] = cfg->command[0];
	if (cfg && cfg->python && *cfg->python) {
		snprintf(first, sizeof(first), "%s", cfg->python);
		first[strcspn(first, " ")] = 0;
		cands[2] = first;
	}
	for (int i = 0; i < 3 && n < max; i++) {
		bool dup = false;

		if (!cands[i] || !strstr(cands[i], "python") || !realpath(cands[i], rp))
			continue;
		for (int j = 0; j < n; j++)
			dup |= !strcmp(out[j], rp);
		if (!dup)
			snprintf(out[n++], PATH_MAX, "%s", rp);
	}
	return n;
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

static int int_cmp(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Removing a uprobe waits for an RCU grace period per probe (~80 ms each on
 * the test machines, measured with strace -tt), and the last close of its
 * perf event fd is where that happens. A short-lived grandchild takes the
 * last references, so tts-launch exits (and its caller continues) without
 * waiting; the probes still only count the exited tree. */
static void release_uprobes(struct tracer *t)
{
	int fds[16], n = 0;
	pid_t p;

	for (size_t i = 0; i < t->n_ulinks && n < 16; i++)
		if (bpf_link__fd(t->ulinks[i]) >= 0)
			fds[n++] = bpf_link__fd(t->ulinks[i]);
	if (!n)
		return;
	qsort(fds, (size_t)n, sizeof(fds[0]), int_cmp);
	p = fork();
	if (p == 0) {
		if (fork() == 0) {
			unsigned int from = 0;

			/* keep only the uprobe fds, then drop them */
			for (int i = 0; i < n; i++) {
				if ((unsigned int)fds[i] > from)
					syscall(SYS_close_range, from, (unsigned int)fds[i] - 1, 0);
				from = (unsigned int)fds[i] + 1;
			}
			syscall(SYS_close_range, from, ~0u, 0);
			for (int i = 0; i < n; i++)
				close(fds[i]);
		}
		_exit(0);
	}
	if (p > 0)
		waitpid(p, NULL, 0);
}

/* ---- events ---- */

static json_t *proc_obj(struct tracer *t, pid_t pid)
{
	char k[16];
	json_t *p;

	snprintf(k, sizeof(k), "%d", pid);
	p = json_object_get(t->procs, k);
	if (!p) {
		p = json_pack("{s:i, s:n, s:n, s:n, s:n, s:n, s:n, s:n}", "pid", pid, "ppid",
			      "command", "argv", "fork_ms", "exec_ms", "exit_ms", "exit");
		json_object_set_new(t->procs, k, p);
	}
	return p;
}

static json_t *ms_json(double ms)
{
	return json_real(ms < 0 ? 0 : (double)(long long)(ms * 1000 + 0.5) / 1000);
}

static json_t *argv_json(const char *buf, size_t len)
{
	json_t *a = json_array();
	size_t i = 0;

	while (i < len && buf[i]) {
		size_t n = strnlen(buf + i, len - i);

		if (i + n == len) {
			/* cut at the BPF side's limit: a URL's userinfo may lack its '@' */
			char *part = strndup(buf + i, n), *r = part ? redact_text_cut(part) : NULL;

			json_array_append_new(a, r ? json_text(r) : json_string(REDACTED));
			free(part);
			free(r);
		} else {
			json_array_append_new(a, json_bytes(buf + i, n));
		}
		i += n + 1;
	}
	redact_json(a); /* an exec'd --token abc is no more readable than ours */
	return a;
}

static void peer_string(int family, const __u8 *addr, int port, char *out, size_t len)
{
	char a[64] = "?";

	if (family == AF_INET)
		inet_ntop(AF_INET, addr, a, sizeof(a));
	else if (family == AF_INET6)
		inet_ntop(AF_INET6, addr, a, sizeof(a));
	if (family == AF_INET6)
		snprintf(out, len, "[%s]:%d", a, port);
	else
		snprintf(out, len, "%s:%d", a, port);
}

/* Decode the raw sockaddr a connect(2) was given. */
static bool sockaddr_peer(const struct tl_event *e, char *out, size_t len, int *family, int *port)
{
	struct sockaddr_storage ss;
	size_t n = e->arg < sizeof(e->aux) ? e->arg : sizeof(e->aux);

	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, e->aux, n < sizeof(ss) ? n : sizeof(ss));
	*family = ss.ss_family;
	*port = 0;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)&ss;

		*port = ntohs(in->sin_port);
		peer_string(AF_INET, (const __u8 *)&in->sin_addr, *port, out, len);
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)&ss;

		*port = ntohs(in6->sin6_port);
		peer_string(AF_INET6, (const __u8 *)&in6->sin6_addr, *port, out, len);
	} else if (ss.ss_family == AF_UNIX) {
		const struct sockaddr_un *un = (const void *)&ss;
		size_t pl = n > offsetof(struct sockaddr_un, sun_path)
				? n - offsetof(struct sockaddr_un, sun_path)
				: 0;

		if (pl && !un->sun_path[0])
			snprintf(out, len, "unix:@%.*s", (int)strnlen(un->sun_path + 1, pl - 1),
				 un->sun_path + 1);
		else
			snprintf(out, len, "unix:%.*s", (int)strnlen(un->sun_path, pl),
				 un->sun_path);
	} else {
		return false;
	}
	return true;
}

static void on_import(struct tracer *t, const struct tl_import_event *e)
{
	double ms = clock_ns_to_ms(e->ts_ns);
	char k[16];
	json_t *stack, *frame;
	size_t n;

	snprintf(k, sizeof(k), "%u", e->tid);
	stack = json_object_get(t->import_stack, k);
	if (e->type == EV_IMPORT_START) {
		if (!stack) {
			stack = json_array();
			json_object_set_new(t->import_stack, k, stack);
		}
		json_array_append_new(stack,
				      json_pack("{s:o, s:f}", "name",
						json_bytes(e->name, sizeof(e->name)), "start", ms));
		return;
	}
	n = stack ? json_array_size(stack) : 0;
	if (!n)
		return;
	/* imports nest: done closes the innermost open import */
	frame = json_array_get(stack, n - 1);
	json_array_append_new(
	    t->imports, json_pack("{s:O, s:i, s:o, s:o, s:o, s:i, s:b}", "name",
				  json_object_get(frame, "name"), "pid", (int)e->pid, "start_ms",
				  ms_json(json_real_value(json_object_get(frame, "start"))),
				  "end_ms", ms_json(ms), "dur_ms",
				  ms_json(ms - json_real_value(json_object_get(frame, "start"))),
				  "depth", (int)(n - 1), "found", e->found != 0));
	json_array_remove(stack, n - 1);
}

/* ---- relative paths ---- */

static void dir_add(struct tracer *t, __u64 dev, __u64 ino, const char *path)
{
	if (!path || path[0] != '/')
		return;
	for (size_t i = 0; i < t->n_dirs; i++)
		if (t->dirs[i].dev == dev && t->dirs[i].ino == ino)
			return;
	if (t->n_dirs == t->cap_dirs) {
		size_t cap = t->cap_dirs ? t->cap_dirs * 2 : 16;
		struct dir_ent *n = realloc(t->dirs, cap * sizeof(*n));

		if (!n)
			return;
		t->dirs = n;
		t->cap_dirs = cap;
	}
	t->dirs[t->n_dirs].dev = dev;
	t->dirs[t->n_dirs].ino = ino;
	t->dirs[t->n_dirs++].path = strdup(path);
}

static __u64 kernel_dev(dev_t d) { return ((__u64)major(d) << 20) | minor(d); }

/* A directory by its path; dev and ino get its identity when given. */
static void dir_add_path(struct tracer *t, const char *path, __u64 *dev, __u64 *ino)
{
	struct stat st;

	if (!path || stat(path, &st) || !S_ISDIR(st.st_mode))
		return;
	dir_add(t, kernel_dev(st.st_dev), st.st_ino, path);
	if (dev)
		*dev = kernel_dev(st.st_dev);
	if (ino)
		*ino = st.st_ino;
}

/* The cwd of a live process (when it is still the one the kernel reported:
 * want_dev/want_ino, or any when 0), else the chdir argument if absolute. */
static void dir_add_cwd(struct tracer *t, pid_t pid, __u64 want_dev, __u64 want_ino,
			const char *arg)
{
	char link[64], path[PATH_MAX];
	__u64 dev = 0, ino = 0;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/cwd", (int)pid);
	n = readlink(link, path, sizeof(path) - 1);
	if (n > 0) {
		path[n] = 0;
		dir_add_path(t, path, &dev, &ino);
	}
	if (want_ino && (dev != want_dev || ino != want_ino) && arg && arg[0] == '/')
		dir_add(t, want_dev, want_ino, arg);
}

static const char *dir_find(const struct dir_ent *d, size_t n, __u64 dev, __u64 ino)
{
	for (size_t i = 0; i < n; i++)
		if (d[i].dev == dev && d[i].ino == ino)
			return d[i].path;
	return NULL;
}

/* base + "/" + rel, with "." and "x/.." folded lexically. */
/* The absolute form of a traced path; unchanged when it is absolute or when
 * the directory it was relative to is unknown. */
static void path_abs(const struct dir_ent *d, size_t n, const char *path, __u64 dev, __u64 ino,
		     char *out, size_t len)
{
	const char *base = path[0] == '/' || (!dev && !ino) ? NULL : dir_find(d, n, dev, ino);

	if (path[0] == '/' || base)
		path_resolve(base ? base : "", path, out, len);
	else
		snprintf(out, len, "%s", path);
}

static void keep_path2(struct tracer *t, const struct tl_path2_event *e)
{
	if (t->n_path2 == t->cap_path2) {
		size_t cap = t->cap_path2 ? t->cap_path2 * 2 : 64;
		struct tl_path2_event *n = realloc(t->path2, cap * sizeof(*n));

		if (!n) {
			t->user_lost++;
			return;
		}
		t->path2 = n;
		t->cap_path2 = cap;
	}
	t->path2[t->n_path2] = *e;
	t->path2[t->n_path2].old[TRACE_PATH_MAX - 1] = 0;
	t->path2[t->n_path2++].new[TRACE_PATH_MAX - 1] = 0;
}

/* How a connect ended, from its errno (0: connected). */
static const char *connect_result(int err, bool closed)
{
	switch (err) {
	case 0:
		return closed ? "closed-by-caller" : "connected";
	case ECONNREFUSED:
		return "refused";
	case ETIMEDOUT:
		return "timeout";
	case EHOSTUNREACH:
	case ENETUNREACH:
		return "unreachable";
	case EINPROGRESS:
		return "pending";
	default:
		return "error";
	}
}

/* The newest connect record of a socket (cookie), or NULL. */
static json_t *connect_by_cookie(struct tracer *t, __u64 cookie)
{
	for (size_t i = json_array_size(t->connects); cookie && i-- > 0;)
		if (i < t->cap_cookie && t->conn_cookie[i] == cookie)
			return json_array_get(t->connects, i);
	return NULL;
}

static void set_outcome(json_t *c, int ret, bool closed, double ms_to_result)
{
	json_object_set_new(c, "ret", json_integer(ret));
	json_object_set_new(c, "pending", json_false());
	json_object_set_new(c, "result", json_string(connect_result(-ret, closed)));
	json_object_set_new(c, "errno",
			    ret < 0 ? json_string(strerrorname_np(-ret) ?: "?") : json_null());
	json_object_set_new(c, "ms_to_result", ms_json(ms_to_result));
}

static void on_connect_rec(struct tracer *t, const struct tl_event *e, double ms, double end_ms)
{
	char peer[160];
	int family, port;
	bool follows = e->flags & 1; /* the handshake's outcome comes later */
	size_t n;
	json_t *c;

	if (!sockaddr_peer(e, peer, sizeof(peer), &family, &port))
		return;
	c = json_pack("{s:o, s:i, s:i, s:i, s:o, s:o, s:i, s:i, s:b, s:s, s:n, s:n, s:n, s:n, s:n, "
		      "s:n, s:n}",
		      "peer", json_text(peer), "family", family, "port", port, "pid", (int)e->pid,
		      "start_ms", ms_json(ms), "dur_ms", ms_json(end_ms - ms), "ret", e->ret,
		      "syscall_ret", e->ret, "pending", follows || e->ret == -EINPROGRESS, "result",
		      "pending", "errno", "ms_to_result", "bytes_in", "bytes_out", "established_ms",
		      "closed_ms", "open_ms");
	if (!follows && e->ret != -EINPROGRESS) {
		set_outcome(c, e->ret, false, end_ms - ms);
		if (e->ret == 0)
			json_object_set_new(c, "established_ms", ms_json(end_ms));
	}
	json_array_append_new(t->connects, c);
	n = json_array_size(t->connects);
	if (n > t->cap_cookie) {
		size_t cap = t->cap_cookie ? t->cap_cookie * 2 : 64;
		__u64 *nc = realloc(t->conn_cookie, cap * sizeof(*nc));

		if (!nc)
			return;
		memset(nc + t->cap_cookie, 0, (cap - t->cap_cookie) * sizeof(*nc));
		t->conn_cookie = nc;
		t->cap_cookie = cap;
	}
	t->conn_cookie[n - 1] = e->arg2;
}

/* The handshake connect(2) did not wait for ended: complete its record. */
static void on_connect_done(struct tracer *t, const struct tl_event *e, double ms, double end_ms)
{
	json_t *c = connect_by_cookie(t, e->arg2);

	if (!c || !json_is_true(json_object_get(c, "pending")))
		return;
	/* from the connect(2) call (the kernel's ts is SYN_SENT) */
	(void)ms;
	set_outcome(c, e->ret, e->flags & CONN_CLOSED,
		    end_ms - json_real_value(json_object_get(c, "start_ms")));
	if (e->ret == 0 && !(e->flags & CONN_CLOSED))
		json_object_set_new(c, "established_ms", ms_json(end_ms));
}

/* An established connection ended: what moved over it, and for how long. */
static void on_conn_end(struct tracer *t, const struct tl_conn_event *e)
{
	json_t *c = connect_by_cookie(t, e->cookie);
	double a = clock_ns_to_ms(e->ts_ns), b = clock_ns_to_ms(e->ts_ns + e->dur_ns);
	const char *by = e->ended_by == 4   ? "local-close"
			 : e->ended_by == 9 ? "remote-close"
					    : "reset";

	if (!c || !json_is_null(json_object_get(c, "closed_ms")))
		return;
	json_object_set_new(c, "bytes_in", json_integer((json_int_t)e->bytes_in));
	json_object_set_new(c, "bytes_out", json_integer((json_int_t)e->bytes_out));
	json_object_set_new(c, "established_ms", ms_json(a));
	json_object_set_new(c, "closed_ms", ms_json(b));
	json_object_set_new(c, "open_ms", ms_json(b - a));
	json_object_set_new(c, "ended_by", json_string(by));
}

static void on_request(struct tracer *t, const struct tl_req_event *e)
{
	double a = clock_ns_to_ms(e->ts_ns), b = clock_ns_to_ms(e->ts_ns + e->dur_ns);
	json_t *r;

	if (t->req_window_ms >= 0 && t->ready_ms >= 0 && a > t->ready_ms + t->req_window_ms) {
		t->req_after_window++;
		return;
	}
	json_array_append_new(
	    t->requests,
	    json_pack("{s:o, s:o, s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:i, s:i, s:i}", "start_ms",
		      ms_json(a), "end_ms", ms_json(b), "latency_ms", ms_json(b - a), "close_ms",
		      ms_json(clock_ns_to_ms(e->close_ns)), "faults", (json_int_t)e->faults,
		      "major_faults", (json_int_t)e->major_faults, "bytes_out",
		      (json_int_t)e->bytes_out, "bytes_in", (json_int_t)e->bytes_in, "writes",
		      (json_int_t)e->writes, "pid", (int)e->pid, "tid", (int)e->tid, "port",
		      (int)e->port));
	json_object_set_new(json_array_get(t->requests, json_array_size(t->requests) - 1),
			    "model_faults", json_integer((json_int_t)e->model_faults));
	json_object_set_new(json_array_get(t->requests, json_array_size(t->requests) - 1),
			    "model_major_faults", json_integer((json_int_t)e->model_major_faults));
	/* the names the renderers and diagnose rules read too */
	r = json_array_get(t->requests, json_array_size(t->requests) - 1);
	json_object_set(r, "dur_ms", json_object_get(r, "latency_ms"));
	json_object_set(r, "page_faults", json_object_get(r, "faults"));
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct tracer *t = ctx;
	const struct tl_event *e = data;
	double ms, end_ms;
	json_t *p;

	/* every record starts like tl_event: ts, dur, type */
	if (size >= offsetof(struct tl_event, pid) &&
	    (e->type == EV_RENAME || e->type == EV_SYMLINK)) {
		if (size >= sizeof(struct tl_path2_event))
			keep_path2(t, data);
		return 0;
	}
	if (size >= offsetof(struct tl_event, pid) && e->type == EV_REQUEST) {
		if (size >= sizeof(struct tl_req_event))
			on_request(t, data);
		return 0;
	}
	if (size >= offsetof(struct tl_event, pid) &&
	    (e->type == EV_IMPORT_START || e->type == EV_IMPORT_DONE)) {
		if (size >= sizeof(struct tl_import_event))
			on_import(t, data);
		return 0;
	}
	if (size >= offsetof(struct tl_event, pid) && e->type == EV_CONN_END) {
		if (size >= sizeof(struct tl_conn_event))
			on_conn_end(t, data);
		return 0;
	}
	if (size < sizeof(*e))
		return 0;
	ms = clock_ns_to_ms(e->ts_ns);
	end_ms = clock_ns_to_ms(e->ts_ns + e->dur_ns);
	switch (e->type) {
	case EV_EXEC:
		p = proc_obj(t, e->pid);
		if (json_is_null(json_object_get(p, "exec_ms")))
			json_object_set_new(p, "exec_ms", ms_json(ms));
		json_object_set_new(p, "command", json_bytes(e->str, sizeof(e->str)));
		json_object_set_new(p, "argv", argv_json(e->aux, e->arg));
		json_object_set_new(p, "comm", json_bytes(e->comm, 16));
		if (json_is_null(json_object_get(p, "ppid")))
			json_object_set_new(p, "ppid", json_integer(e->ppid));
		json_object_set_new(
		    p, "execs", json_integer(json_integer_value(json_object_get(p, "execs")) + 1));
		if ((pid_t)e->pid == t->root && t->exec_ms < 0)
			t->exec_ms = ms;
		/* where its relative paths start (exec keeps the cwd) */
		dir_add_cwd(t, (pid_t)e->pid, 0, 0, NULL);
		break;
	case EV_CHDIR:
		dir_add_cwd(t, (pid_t)e->pid, e->arg, e->arg2, e->str);
		break;
	case EV_FORK:
		p = proc_obj(t, e->pid);
		json_object_set_new(p, "ppid", json_integer(e->ppid));
		json_object_set_new(p, "fork_ms", ms_json(ms));
		json_object_set_new(p, "comm", json_bytes(e->comm, 16));
		break;
	case EV_EXIT: {
		int st = e->ret;

		p = proc_obj(t, e->pid);
		json_object_set_new(p, "exit_ms", ms_json(ms));
		if (st & 0x7f)
			json_object_set_new(p, "exit",
					    json_pack("{s:n, s:i}", "code", "signal", st & 0x7f));
		else
			json_object_set_new(
			    p, "exit", json_pack("{s:i, s:n}", "code", (st >> 8) & 0xff, "signal"));
		break;
	}
	case EV_CONNECT:
		on_connect_rec(t, e, ms, end_ms);
		break;
	case EV_CONNECT_DONE:
		on_connect_done(t, e, ms, end_ms);
		break;
	case EV_LISTEN:
		json_array_append_new(t->listens,
				      json_pack("{s:i, s:i, s:o}", "pid", (int)e->pid, "port",
						(int)e->arg, "ms", ms_json(ms)));
		if (t->ready_ms < 0 && (t->listen_port ? (int)e->arg == t->listen_port : true))
			t->ready_ms = ms;
		break;
	case EV_MLOCK: {
		static const char *calls[] = {"?", "mlock", "mlock2", "mlockall"};

		json_array_append_new(
		    t->mlocks,
		    json_pack("{s:i, s:s, s:I, s:i, s:i, s:s?, s:o, s:o}", "pid", (int)e->pid,
			      "call", calls[e->arg2 < 4 ? e->arg2 : 0], "len", (json_int_t)e->arg,
			      "flags", (int)e->flags, "result", e->ret < 0 ? -1 : e->ret, "errno",
			      e->ret < 0 ? strerrorname_np(-e->ret) : NULL, "start_ms", ms_json(ms),
			      "dur_ms", ms_json(end_ms - ms)));
		break;
	}
	}
	return 0;
}

/* ---- start ---- */

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
		json_array_append_new(t->probes, json_string(name));
	else
		fallback(t, name, "software perf event %s: %s", event,
			 strerror(err ? err : ENODEV));
}

#define FAULT_TICK_NS (20 * 1000 * 1000)

/* fault_tick: every 20 ms of the tree's own user-mode run time (task-clock
 * counts ns; inherited by every thread and process the root starts, so an
 * idle machine is never woken for it): the fault-rate series of threads
 * that do not leave the CPU. A kernel that cannot inherit the event gets
 * the per-CPU cpu-clock instead, which ticks whether the tree runs or not. */
static void attach_fault_tick(struct tracer *t, pid_t root)
{
	struct perf_event_attr attr = sw_event(PERF_COUNT_SW_TASK_CLOCK, FAULT_TICK_NS, true);

	attr.inherit = 1;
	if (perf_link(t, t->skel->progs.fault_tick, &attr, root, -1)) {
		json_array_append_new(t->probes, json_string("fault_tick"));
		return;
	}
	fallback(t, "fault_tick", "task-clock on the tree: %s; a per-CPU cpu-clock event instead",
		 strerror(errno));
	attach_per_cpu(t, t->skel->progs.fault_tick, PERF_COUNT_SW_CPU_CLOCK, FAULT_TICK_NS, true,
		       "fault_tick", "cpu-clock");
}

#define TRACEFS_DIR    "/sys/kernel/tracing"
#define TRACEFS_MAGIC_ 0x74726163

/* The raw tracepoints need no tracefs, but libbpf falls back to tracefs
 * (uprobe_events) for the Python USDT probes on a kernel without the
 * uprobe PMU, and perf and bpftrace want it: mount it when it is missing,
 * as a fresh boot leaves it. Never fatal. */
static void ensure_tracefs(char *out, size_t len)
{
	struct statfs sf;

	if (statfs(TRACEFS_DIR, &sf) == 0 && sf.f_type == TRACEFS_MAGIC_) {
		snprintf(out, len, "present");
		return;
	}
	if (mount("tracefs", TRACEFS_DIR, "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0) {
		snprintf(out, len, "mounted");
		return;
	}
	snprintf(out, len, "unavailable: mounting tracefs on " TRACEFS_DIR " failed: %s",
		 strerror(errno));
}

struct tracer *tracer_start(const struct tracer_opts *o, char *why, size_t whylen)
{
	struct tracer *t = NULL;
	struct bpf_program *prog;
	char pys[3][PATH_MAX];
	int err, n_py;
	__u32 root, flags = 0;
	struct proc_stat root_stat = {0};
	double t_open, t_load, t_attach;

	snprintf(why, whylen, "unknown error");
	verbose_level = o->verbose;
	libbpf_set_print(print_libbpf);

	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		snprintf(why, whylen, "kernel has no BTF (/sys/kernel/btf/vmlinux: %s)",
			 strerror(errno));
		goto fail;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(why, whylen, "failed to allocate tracer: %s", strerror(errno));
		goto fail;
	}
	t->root = o->root_pid;
	ensure_tracefs(t->tracefs, sizeof(t->tracefs));
	t->listen_port = o->listen_port;
	t->cfg = o->cfg;
	t->exec_ms = -1;
	t->ready_ms = -1;
	t->probes = json_array();
	t->fallbacks = json_array();
	t->procs = json_object();
	t->connects = json_array();
	t->listens = json_array();
	t->mlocks = json_array();
	t->imports = json_array();
	t->import_stack = json_object();
	t->requests = json_array();
	/* requests: a window after ready for the service; as long as it runs for
	 * a command given after -- */
	t->req_window_ms = !o->cfg || o->cfg->n_command > 0 ? -1 : o->cfg->requests_window * 1000;
	/* the service starts in [app] dir: its relative paths start there */
	if (o->cfg && o->cfg->app_dir)
		dir_add_path(t, o->cfg->app_dir, NULL, NULL);

	t_open = clock_ms();
	n_py = o->cfg && !o->cfg->python_usdt ? 0 : python_candidates(o->cfg, pys, 3);
	if (!n_py)
		fallback(t, "python_imports",
			 o->cfg && !o->cfg->python_usdt
			     ? "switched off in the configuration ([trace] python_usdt)"
			     : "no python interpreter found to attach to");

	/* open -> configure -> load; first with the build kernel's minimal BTF
	 * when this is that kernel, else (or when that fails) with the full one */
	for (int attempt = min_btf_matches() ? 0 : 1; attempt < 2; attempt++) {
		LIBBPF_OPTS(bpf_object_open_opts, oo);
		char btfpath[64];
		int bfd = attempt == 0 ? min_btf_fd() : -1;

		if (bfd >= 0) {
			snprintf(btfpath, sizeof(btfpath), "/proc/self/fd/%d", bfd);
			oo.btf_custom_path = btfpath;
		}
		trace_bpf__destroy(t->skel);
		t->skel = trace_bpf__open_opts(&oo);
		if (!t->skel) {
			err = errno;
			if (bfd >= 0)
				close(bfd);
			snprintf(why, whylen, "failed to open BPF object: %s", strerror(err));
			goto fail;
		}
		if (!n_py) {
			bpf_program__set_autoload(t->skel->progs.py_import_start, false);
			bpf_program__set_autoload(t->skel->progs.py_import_done, false);
		}
		t->skel->rodata->targ_t0_ns = clock_t0_ns();
		t->skel->rodata->targ_ready_port = (__u32)o->listen_port;
		err = trace_bpf__load(t->skel);
		if (bfd >= 0)
			close(bfd);
		if (!err)
			break;
		if (attempt == 1 || -err == EPERM || -err == EACCES) {
			load_failure(why, whylen, -err);
			goto fail;
		}
	}

	/* the root, before any program can see it fork or exec */
	root = (__u32)o->root_pid;
	if (bpf_map__update_elem(t->skel->maps.procs, &root, sizeof(root), &flags, sizeof(flags),
				 0) ||
	    bpf_map__update_elem(t->skel->maps.procstat, &root, sizeof(root), &root_stat,
				 sizeof(root_stat), 0)) {
		snprintf(why, whylen, "failed to add pid %d to the traced tree: %s",
			 (int)o->root_pid, strerror(errno));
		goto fail;
	}

	t_load = clock_ms();
	/* attach, each program on its own */
	bpf_object__for_each_program (prog, t->skel->obj) {
		const char *name = bpf_program__name(prog);
		struct bpf_link *l;

		/* USDT and perf-event programs are attached below */
		if (!bpf_program__autoload(prog) ||
		    !strncmp(bpf_program__section_name(prog), "usdt", 4) ||
		    !strcmp(bpf_program__section_name(prog), "perf_event"))
			continue;
		l = bpf_program__attach(prog);
		if (!l) {
			err = errno;
			/* without exec and fork tracking there is no tree to follow */
			if (!strcmp(name, "sched_process_exec") || !strcmp(name, "sys_enter") ||
			    !strcmp(name, "sys_exit")) {
				snprintf(why, whylen, "failed to attach %s: %s", name,
					 strerror(err));
				goto fail;
			}
			fallback(t, name, "failed to attach (tracepoint missing?): %s",
				 strerror(err));
			continue;
		}
		add_link(&t->links, &t->n_links, l);
		json_array_append_new(t->probes, json_string(name));
	}
	/* major faults: sample period 1, the program runs in the faulting task */
	attach_per_cpu(t, t->skel->progs.major_fault, PERF_COUNT_SW_PAGE_FAULTS_MAJ, 1, false,
		       "major_fault", "page-faults-maj");
	attach_fault_tick(t, (pid_t)o->root_pid);
	t_attach = clock_ms();
	for (int i = 0; i < n_py; i++) {
		struct bpf_link *ls, *ld;

		ls = bpf_program__attach_usdt(t->skel->progs.py_import_start, -1, pys[i], "python",
					      "import__find__load__start", NULL);
		err = ls ? 0 : errno;
		ld = ls ? bpf_program__attach_usdt(t->skel->progs.py_import_done, -1, pys[i],
						   "python", "import__find__load__done", NULL)
			: NULL;
		if (!ls || !ld) {
			err = err ? err : errno;
			bpf_link__destroy(ls);
			fallback(t, "python_imports", "failed to attach USDT to %s: %s", pys[i],
				 strerror(err));
			continue;
		}
		add_link(&t->ulinks, &t->n_ulinks, ls);
		add_link(&t->ulinks, &t->n_ulinks, ld);
		t->usdt = true;
		json_array_append_new(t->probes, json_sprintf("python_imports:%s", pys[i]));
	}

	/* ring buffer */
	t->rb = ring_buffer__new(bpf_map__fd(t->skel->maps.events), on_event, t, NULL);
	if (!t->rb) {
		snprintf(why, whylen, "failed to create ring buffer: %s", strerror(errno));
		goto fail;
	}
	if (o->verbose)
		fprintf(stderr,
			"tts-launch: tracer: open+load %.1f ms, attach %.1f ms, USDT %.1f ms\n",
			t_load - t_open, t_attach - t_load, clock_ms() - t_attach);
	return t;

fail:
	tracer_free(t);
	return NULL;
}

int tracer_fd(const struct tracer *t) { return t && t->rb ? ring_buffer__epoll_fd(t->rb) : -1; }

int tracer_poll(struct tracer *t)
{
	int n;

	if (!t || !t->rb)
		return 0;
	n = ring_buffer__consume(t->rb);
	return n < 0 ? n : 0;
}

bool tracer_ready(const struct tracer *t, double *ms)
{
	if (!t || t->ready_ms < 0)
		return false;
	if (ms)
		*ms = t->ready_ms;
	return true;
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
	release_uprobes(t);
	for (size_t i = 0; i < t->n_ulinks; i++)
		bpf_link__destroy(t->ulinks[i]);
	free(t->ulinks);
	for (size_t i = 0; i < t->n_links; i++)
		bpf_link__destroy(t->links[i]);
	free(t->links);
	trace_bpf__destroy(t->skel);
	json_decref(t->probes);
	json_decref(t->fallbacks);
	json_decref(t->procs);
	json_decref(t->connects);
	free(t->conn_cookie);
	json_decref(t->light);
	json_decref(t->listens);
	json_decref(t->mlocks);
	json_decref(t->imports);
	json_decref(t->import_stack);
	json_decref(t->requests);
	for (size_t i = 0; i < t->n_dirs; i++)
		free(t->dirs[i].path);
	free(t->dirs);
	free(t->path2);
	free(t);
}

/* ---- snapshot: maps and events into the model ---- */

static void read_counters(struct tracer *t, __u64 out[CNT_MAX])
{
	int ncpu = libbpf_num_possible_cpus();
	__u64 *vals;

	memset(out, 0, CNT_MAX * sizeof(out[0]));
	if (ncpu <= 0)
		return;
	vals = calloc((size_t)ncpu, sizeof(*vals));
	if (!vals)
		return;
	for (__u32 k = 0; k < CNT_MAX; k++) {
		if (bpf_map__lookup_elem(t->skel->maps.counters, &k, sizeof(k), vals,
					 (size_t)ncpu * sizeof(*vals), 0))
			continue;
		for (int c = 0; c < ncpu; c++)
			out[k] += vals[c];
	}
	free(vals);
}

static const char *config_env(const void *cfg, const char *name)
{
	const struct config *c = cfg;

	for (size_t i = 0; c && i < c->n_env; i++)
		if (!strcmp(c->env[i].name, name))
			return c->env[i].value;
	return NULL;
}

/* Where the service's Hugging Face client caches (hfcache.h), and its
 * HF_HOME as a whole (token, xet...): the "cache" file class. */
static int cache_dirs(const struct config *cfg, char dirs[][PATH_MAX])
{
	struct hf_cache_dir d[HF_MAX_CACHE_DIRS];
	const char *app = cfg && cfg->app_dir ? cfg->app_dir : "/";
	int n = hf_cache_dirs(app, cfg ? cfg->model_dir : NULL, config_env, cfg, false, d,
			      HF_MAX_CACHE_DIRS);

	for (int i = 0; i < n; i++)
		snprintf(dirs[i], PATH_MAX, "%.*s", PATH_MAX - 1, d[i].path);
	hf_home(app, config_env, cfg, dirs[n], PATH_MAX);
	return n + 1;
}

static void set_ms_range(json_t *o, __u64 first, __u64 last)
{
	json_object_set_new(o, "first_ms", ms_json(clock_ns_to_ms(first)));
	json_object_set_new(o, "last_ms", ms_json(clock_ns_to_ms(last)));
}

static json_t *errno_json(int e)
{
	const char *n = e > 0 ? strerrorname_np(e) : NULL;

	return n ? json_string(n) : json_null();
}

struct io_ent {
	struct file_key k;
	struct file_val v;
	bool claimed;  /* reads, maps, faults (and writes unless wclaimed) given to a path */
	bool wclaimed; /* writes given to a download (*.incomplete) path */
};

static int io_cmp(const void *a, const void *b)
{
	const struct file_key *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static json_t *file_json(const char *path, const char *cls, const struct path_val *pv,
			 const struct file_val *fv, __u64 first, __u64 last)
{
	json_t *f =
	    json_pack("{s:o, s:s, s:i, s:i, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "path",
		      json_text(path), "class", cls, "opens", pv ? (int)pv->opens : 0,
		      "failed_opens", pv ? (int)pv->open_fails : 0, "errno",
		      errno_json(pv && pv->open_fails ? pv->open_errno : 0), "bytes_read",
		      (json_int_t)fv->bytes_read, "bytes_written", (json_int_t)fv->bytes_written,
		      "reads", (json_int_t)fv->reads, "writes", (json_int_t)fv->writes, "mmaps",
		      (json_int_t)fv->mmaps, "mmap_bytes", (json_int_t)fv->mmap_bytes, "faults",
		      (json_int_t)fv->faults, "size", (json_int_t)fv->size);

	json_object_set_new(f, "pid", pv ? json_integer(pv->first_pid) : json_null());
	set_ms_range(f, first, last);
	/* when its mapped pages were faulted in: load time or request time */
	json_object_set_new(f, "faults_after_ready",
			    json_integer((json_int_t)fv->faults_after_ready));
	json_object_set_new(f, "major_faults", json_integer((json_int_t)fv->major_faults));
	json_object_set_new(f, "first_fault_ms",
			    fv->first_fault_ns ? ms_json(clock_ns_to_ms(fv->first_fault_ns))
					       : json_null());
	json_object_set_new(f, "last_fault_ms",
			    fv->last_fault_ns ? ms_json(clock_ns_to_ms(fv->last_fault_ns))
					      : json_null());
	json_object_set_new(f, "write_errors", json_integer((json_int_t)fv->write_errors));
	json_object_set_new(f, "write_errno", errno_json(fv->write_errors ? fv->write_errno : 0));
	return f;
}

/* One path of the paths map, made absolute; relative and absolute spellings
 * of one file are merged. */
struct pent {
	char path[PATH_MAX];
	struct path_val pv;
	__u64 base_dev, base_ino; /* a relative path's directory */
	bool rel;
	const char *cls;
	struct io_ent *ie;  /* the inode it opened, if its I/O was seen */
	struct file_val fv; /* the I/O given to this path */
};

static int pent_first_cmp(const void *a, const void *b)
{
	const struct pent *x = a, *y = b;

	return x->pv.first_ns < y->pv.first_ns ? -1 : x->pv.first_ns > y->pv.first_ns;
}

/* Several paths can name one inode: a download's *.incomplete is renamed to
 * its blob, which is opened again through a snapshot link. The writes go to
 * the download path, the reads and maps to the first other path that opened
 * it; what no one claimed goes to the download path. */
static void give_io(struct pent *pe, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct io_ent *ie = pe[i].ie;

		if (!ie || strcmp(pe[i].cls, "download") || ie->wclaimed)
			continue;
		ie->wclaimed = true;
		pe[i].fv.bytes_written = ie->v.bytes_written;
		pe[i].fv.writes = ie->v.writes;
		pe[i].fv.first_write_ns = ie->v.first_write_ns;
		pe[i].fv.last_write_ns = ie->v.last_write_ns;
		pe[i].fv.write_errors = ie->v.write_errors;
		pe[i].fv.write_errno = ie->v.write_errno;
		pe[i].fv.size = ie->v.size;
		memcpy(pe[i].fv.name, ie->v.name, sizeof(pe[i].fv.name));
	}
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < n; i++) {
			struct io_ent *ie = pe[i].ie;
			bool dl = !strcmp(pe[i].cls, "download");

			if (!ie || ie->claimed || dl != (pass == 1))
				continue;
			ie->claimed = true;
			pe[i].fv.first_ns = ie->v.first_ns;
			pe[i].fv.last_ns = ie->v.last_ns;
			pe[i].fv.bytes_read = ie->v.bytes_read;
			pe[i].fv.reads = ie->v.reads;
			pe[i].fv.mmaps = ie->v.mmaps;
			pe[i].fv.mmap_bytes = ie->v.mmap_bytes;
			pe[i].fv.faults = ie->v.faults;
			pe[i].fv.first_fault_ns = ie->v.first_fault_ns;
			pe[i].fv.last_fault_ns = ie->v.last_fault_ns;
			pe[i].fv.faults_after_ready = ie->v.faults_after_ready;
			pe[i].fv.major_faults = ie->v.major_faults;
			pe[i].fv.size = ie->v.size;
			if (!ie->wclaimed) {
				pe[i].fv.bytes_written = ie->v.bytes_written;
				pe[i].fv.writes = ie->v.writes;
				pe[i].fv.write_errors = ie->v.write_errors;
				pe[i].fv.write_errno = ie->v.write_errno;
				pe[i].fv.first_write_ns = ie->v.first_write_ns;
				pe[i].fv.last_write_ns = ie->v.last_write_ns;
			}
		}
	}
}

static int pent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct pent *)a)->path, ((const struct pent *)b)->path);
}

static __u64 min_nz(__u64 a, __u64 b) { return !a ? b : !b ? a : a < b ? a : b; }

static void pv_merge(struct path_val *a, const struct path_val *b)
{
	if (b->fail_last_ns > a->fail_last_ns) {
		a->open_errno = b->open_fails ? b->open_errno : a->open_errno;
		a->probe_errno = b->probe_fails ? b->probe_errno : a->probe_errno;
	}
	if (b->first_ns < a->first_ns)
		a->first_pid = b->first_pid;
	if (b->opens && (!a->opens || b->last_ns > a->last_ns)) {
		a->dev = b->dev;
		a->ino = b->ino;
	}
	a->first_ns = min_nz(a->first_ns, b->first_ns);
	a->last_ns = a->last_ns > b->last_ns ? a->last_ns : b->last_ns;
	a->fail_first_ns = min_nz(a->fail_first_ns, b->fail_first_ns);
	a->fail_last_ns = a->fail_last_ns > b->fail_last_ns ? a->fail_last_ns : b->fail_last_ns;
	a->opens += b->opens;
	a->open_fails += b->open_fails;
	a->probe_fails += b->probe_fails;
	a->open_flags |= b->open_flags;
}

static void dt_push(struct dir_ent **d, size_t *n, size_t *cap, __u64 dev, __u64 ino,
		    const char *path)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 256;
		struct dir_ent *nd = realloc(*d, c * sizeof(*nd));

		if (!nd)
			return;
		*d = nd;
		*cap = c;
	}
	(*d)[*n].dev = dev;
	(*d)[*n].ino = ino;
	(*d)[(*n)++].path = strdup(path);
}

/* Make relative paths absolute. Their bases: the cwds seen, and every
 * directory the tree opened (the dirfds of *at calls), itself perhaps by a
 * relative path resolved in an earlier round. Returns the table (owned
 * strings) for the renames and symlinks. */
static struct dir_ent *resolve_paths(struct tracer *t, struct pent *pe, size_t n, size_t *nd)
{
	struct dir_ent *d = NULL;
	size_t k = 0, cap = 0;
	bool progress = true;

	for (size_t i = 0; i < t->n_dirs; i++)
		dt_push(&d, &k, &cap, t->dirs[i].dev, t->dirs[i].ino, t->dirs[i].path);
	for (size_t i = 0; i < n; i++)
		if (!pe[i].rel && pe[i].pv.opens)
			dt_push(&d, &k, &cap, pe[i].pv.dev, pe[i].pv.ino, pe[i].path);
	for (int round = 0; round < 4 && progress; round++) {
		progress = false;
		for (size_t i = 0; i < n; i++) {
			const char *base;
			char abs[PATH_MAX];

			if (!pe[i].rel || !(base = dir_find(d, k, pe[i].base_dev, pe[i].base_ino)))
				continue;
			path_resolve(base, pe[i].path, abs, sizeof(abs));
			snprintf(pe[i].path, sizeof(pe[i].path), "%s", abs);
			pe[i].rel = false;
			progress = true;
			if (pe[i].pv.opens)
				dt_push(&d, &k, &cap, pe[i].pv.dev, pe[i].pv.ino, pe[i].path);
		}
	}
	*nd = k;
	return d;
}

static json_t *path2_json(const struct tl_path2_event *e, const char *oldp, const char *newp)
{
	return json_pack("{s:o, s:o, s:o, s:i, s:i, s:o}", e->type == EV_SYMLINK ? "target" : "old",
			 json_text(oldp), e->type == EV_SYMLINK ? "path" : "new", json_text(newp),
			 "ms", ms_json(clock_ns_to_ms(e->ts_ns)), "pid", (int)e->pid, "result",
			 e->ret < 0 ? -1 : 0, "errno", errno_json(e->ret < 0 ? -e->ret : 0));
}

/* Failed mkdir/unlink/rmdir (the failops map), failed writes (per file)
 * and failed renames, as one list: what refused to be written. */
static void snap_failops(struct tracer *t, const struct dir_ent *dt, size_t n_dt, json_t *files,
			 json_t *renames, json_t *root)
{
	static const char *ops[] = {"?", "mkdir", "unlink", "rmdir"};
	struct bpf_map *m = t->skel->maps.failops;
	json_t *list = json_array(), *f;
	struct failop_key k, next;
	struct failop_val v;
	size_t i;
	int more;

	for (more = bpf_map__get_next_key(m, NULL, &next, sizeof(next)); !more;
	     more = bpf_map__get_next_key(m, &k, &next, sizeof(next))) {
		char abs[PATH_MAX];

		k = next;
		if (bpf_map__lookup_elem(m, &k, sizeof(k), &v, sizeof(v), 0))
			continue;
		k.p.path[sizeof(k.p.path) - 1] = 0;
		path_abs(dt, n_dt, k.p.path, k.p.base_dev, k.p.base_ino, abs, sizeof(abs));
		json_array_append_new(
		    list,
		    json_pack("{s:s, s:o, s:i, s:o, s:o, s:o, s:i}", "op", ops[k.op < 4 ? k.op : 0],
			      "path", json_text(abs), "count", (int)v.count, "errno",
			      errno_json(v.err), "first_ms", ms_json(clock_ns_to_ms(v.first_ns)),
			      "last_ms", ms_json(clock_ns_to_ms(v.last_ns)), "pid", (int)v.pid));
	}
	/* writes: the kernel keeps no time for them, the file's span stands in */
	json_array_foreach (files, i, f) {
		if (json_integer_value(json_object_get(f, "write_errors")) <= 0)
			continue;
		json_array_append_new(list, json_pack("{s:s, s:O, s:O, s:O, s:O, s:O, s:O}", "op",
						      "write", "path", json_object_get(f, "path"),
						      "count", json_object_get(f, "write_errors"),
						      "errno", json_object_get(f, "write_errno"),
						      "first_ms", json_object_get(f, "first_ms"),
						      "last_ms", json_object_get(f, "last_ms"),
						      "pid", json_object_get(f, "pid")));
	}
	json_array_foreach (renames, i, f) {
		if (json_integer_value(json_object_get(f, "result")) == 0)
			continue;
		json_array_append_new(
		    list,
		    json_pack("{s:s, s:O, s:O, s:i, s:O, s:O, s:O, s:O}", "op", "rename", "path",
			      json_object_get(f, "new"), "old", json_object_get(f, "old"), "count",
			      1, "errno", json_object_get(f, "errno"), "first_ms",
			      json_object_get(f, "ms"), "last_ms", json_object_get(f, "ms"), "pid",
			      json_object_get(f, "pid")));
	}
	timeline_sort_by(list, "first_ms");
	json_object_set_new(root, "failed_ops", list);
}

static json_t *lock_json(const char *path)
{
	return json_pack(
	    "{s:o, s:i, s:i, s:i, s:n, s:f, s:f, s:n, s:n, s:n, s:n, s:n, s:b, s:n, s:n}", "path",
	    json_text(path), "calls", 0, "blocking_calls", 0, "failures", 0, "errno", "wait_ms",
	    0.0, "max_wait_ms", 0.0, "contended_ms", "first_ms", "last_ms", "acquired_ms", "pid",
	    "waiting", false, "waiting_ms", "waiting_pid");
}

/* flock/fcntl locks per file, and the blocking lock calls in progress now */
static void snap_locks(struct tracer *t, const struct pent *pe, size_t n_pe, json_t *root)
{
	struct bpf_map *m = t->skel->maps.locks, *im = t->skel->maps.inflight;
	json_t *list = json_array(), *l;
	struct file_key k, next;
	struct lock_val v;
	__u32 tid, tnext;
	struct inflight in;
	double now = clock_ms();
	__u32 walked;
	int more;

	for (more = bpf_map__get_next_key(m, NULL, &next, sizeof(next)); !more;
	     more = bpf_map__get_next_key(m, &k, &next, sizeof(next))) {
		char name[TRACE_NAME_MAX + 16];
		const char *path = NULL;
		double ff, end;

		k = next;
		if (bpf_map__lookup_elem(m, &k, sizeof(k), &v, sizeof(v), 0))
			continue;
		for (size_t i = 0; i < n_pe && !path; i++)
			if (pe[i].pv.opens && pe[i].pv.dev == k.dev && pe[i].pv.ino == k.ino)
				path = pe[i].path;
		v.name[TRACE_NAME_MAX - 1] = 0;
		snprintf(name, sizeof(name), "[fd] %s", v.name);
		l = lock_json(path ? path : name);
		json_object_set_new(l, "calls", json_integer(v.calls));
		json_object_set_new(l, "blocking_calls", json_integer(v.blocking));
		json_object_set_new(l, "failures", json_integer(v.failures));
		json_object_set_new(l, "errno", errno_json(v.failures ? v.err : 0));
		json_object_set_new(l, "wait_ms", ms_json(v.wait_ns / 1e6));
		json_object_set_new(l, "max_wait_ms", ms_json(v.max_wait_ns / 1e6));
		set_ms_range(l, v.first_ns, v.last_ns);
		json_object_set_new(l, "acquired_ms",
				    v.acquired_ns ? ms_json(clock_ns_to_ms(v.acquired_ns))
						  : json_null());
		/* non-blocking polling (filelock: LOCK_EX|LOCK_NB, sleep, again):
		 * from the first refusal to the success, or to the last try */
		if (v.first_fail_ns) {
			ff = clock_ns_to_ms(v.first_fail_ns);
			end = clock_ns_to_ms(v.acquired_ns > v.first_fail_ns ? v.acquired_ns
									     : v.last_ns);
			json_object_set_new(l, "contended_ms", ms_json(end - ff));
		}
		json_object_set_new(l, "pid", json_integer(v.pid));
		json_array_append_new(list, l);
	}
	/* blocking lock calls not returned yet: the file by /proc/TID/fd/FD.
	 * The kernel deletes entries meanwhile, and a deleted key makes
	 * get_next_key start over: the walk is capped at the map's size. */
	for (more = bpf_map__get_next_key(im, NULL, &tnext, sizeof(tnext)), walked = 0;
	     !more && walked++ < bpf_map__max_entries(im);
	     more = bpf_map__get_next_key(im, &tid, &tnext, sizeof(tnext))) {
		char link[64], path[PATH_MAX];
		json_t *hit = NULL, *pj;
		ssize_t n;
		size_t i;

		tid = tnext;
		if (bpf_map__lookup_elem(im, &tid, sizeof(tid), &in, sizeof(in), 0) ||
		    (in.nr != SYS_flock && in.nr != SYS_fcntl) || !in.a2)
			continue;
		snprintf(link, sizeof(link), "/proc/%u/fd/%llu", tid, (unsigned long long)in.a0);
		n = readlink(link, path, sizeof(path) - 1);
		if (n <= 0)
			continue;
		path[n] = 0;
		/* the list holds paths as the timeline writes them (json_text) */
		pj = json_text(path);
		json_array_foreach (list, i, l)
			if (pj && json_equal(json_object_get(l, "path"), pj))
				hit = l;
		json_decref(pj);
		if (!hit) {
			hit = lock_json(path);
			set_ms_range(hit, in.ts, in.ts);
			json_array_append_new(list, hit);
		}
		json_object_set_new(hit, "waiting", json_true());
		json_object_set_new(hit, "waiting_ms", ms_json(now - clock_ns_to_ms(in.ts)));
		json_object_set_new(hit, "waiting_pid", json_integer(tid));
	}
	timeline_sort_by(list, "first_ms");
	json_object_set_new(root, "locks", list);
}

static void snap_files(struct tracer *t, json_t *root)
{
	struct bpf_map *pm = t->skel->maps.paths, *fm = t->skel->maps.files;
	json_t *files = json_array(), *missing = json_array(), *downloads = json_array();
	json_t *renames = json_array(), *links = json_array();
	struct io_ent *io = NULL;
	struct pent *pe = NULL;
	struct dir_ent *dt = NULL;
	size_t n_io = 0, cap = 0, n_pe = 0, cap_pe = 0, n_dt = 0, m;
	struct path_key pk, pnext;
	struct file_key fk, fnext;
	struct path_val pv;
	struct file_val fv;
	char dirs[HF_MAX_CACHE_DIRS + 1][PATH_MAX];
	char(*r2)[2][PATH_MAX] = NULL; /* renames and symlinks, absolute */
	const char *dp[HF_MAX_CACHE_DIRS + 2];
	int nd, more;

	nd = cache_dirs(t->cfg, dirs);
	for (int i = 0; i < nd; i++)
		dp[i] = dirs[i];
	dp[nd] = NULL;

	/* bytes per inode, sorted for lookup by the paths that opened them */
	for (more = bpf_map__get_next_key(fm, NULL, &fnext, sizeof(fnext)); !more;
	     more = bpf_map__get_next_key(fm, &fk, &fnext, sizeof(fnext))) {
		fk = fnext;
		if (bpf_map__lookup_elem(fm, &fk, sizeof(fk), &fv, sizeof(fv), 0))
			continue;
		if (n_io == cap) {
			struct io_ent *n = realloc(io, (cap = cap ? cap * 2 : 256) * sizeof(*io));

			if (!n)
				break;
			io = n;
		}
		io[n_io].k = fk;
		io[n_io].v = fv;
		io[n_io].v.name[TRACE_NAME_MAX - 1] = 0;
		io[n_io].wclaimed = false;
		io[n_io++].claimed = false;
	}
	if (n_io)
		qsort(io, n_io, sizeof(*io), io_cmp);

	/* the paths map, relative paths last: they resolve against the table
	 * the absolute ones build */
	for (more = bpf_map__get_next_key(pm, NULL, &pnext, sizeof(pnext)); !more;
	     more = bpf_map__get_next_key(pm, &pk, &pnext, sizeof(pnext))) {
		pk = pnext;
		if (bpf_map__lookup_elem(pm, &pk, sizeof(pk), &pv, sizeof(pv), 0))
			continue;
		if (n_pe == cap_pe) {
			struct pent *n =
			    realloc(pe, (cap_pe = cap_pe ? cap_pe * 2 : 512) * sizeof(*pe));

			if (!n)
				break;
			pe = n;
		}
		pk.path[sizeof(pk.path) - 1] = 0;
		snprintf(pe[n_pe].path, sizeof(pe[n_pe].path), "%s", pk.path);
		pe[n_pe].pv = pv;
		pe[n_pe].rel = pk.path[0] != '/';
		pe[n_pe].base_dev = pk.base_dev;
		pe[n_pe].base_ino = pk.base_ino;
		n_pe++;
	}
	dt = resolve_paths(t, pe, n_pe, &n_dt);
	if (n_pe)
		qsort(pe, n_pe, sizeof(*pe), pent_cmp);
	m = 0;
	for (size_t i = 0; i < n_pe; i++) {
		if (m && !strcmp(pe[m - 1].path, pe[i].path))
			pv_merge(&pe[m - 1].pv, &pe[i].pv);
		else
			pe[m++] = pe[i];
	}
	n_pe = m;
	/* the inode each path opened; earliest opener first */
	for (size_t i = 0; i < n_pe; i++) {
		struct file_key key = {.dev = pe[i].pv.dev, .ino = pe[i].pv.ino};

		pe[i].cls = timeline_file_class(pe[i].path, dp);
		memset(&pe[i].fv, 0, sizeof(pe[i].fv));
		pe[i].ie =
		    pe[i].pv.opens && n_io ? bsearch(&key, io, n_io, sizeof(*io), io_cmp) : NULL;
	}
	if (n_pe)
		qsort(pe, n_pe, sizeof(*pe), pent_first_cmp);
	give_io(pe, n_pe);

	/* renames and symlinks, absolute */
	if (t->n_path2)
		r2 = calloc(t->n_path2, sizeof(*r2));
	for (size_t i = 0; r2 && i < t->n_path2; i++) {
		const struct tl_path2_event *e = &t->path2[i];

		path_abs(dt, n_dt, e->new, e->new_dev, e->new_ino, r2[i][1], PATH_MAX);
		if (e->type == EV_SYMLINK) {
			/* a link's target is relative to the link's directory */
			char dir[PATH_MAX], *sl;

			snprintf(dir, sizeof(dir), "%s", r2[i][1]);
			sl = strrchr(dir, '/');
			if (sl)
				*sl = 0;
			path_resolve(dir, e->old, r2[i][0], PATH_MAX);
			json_array_append_new(links, path2_json(e, e->old, r2[i][1]));
			json_object_set_new(json_array_get(links, json_array_size(links) - 1),
					    "resolved", json_text(r2[i][0]));
		} else {
			path_abs(dt, n_dt, e->old, e->old_dev, e->old_ino, r2[i][0], PATH_MAX);
			json_array_append_new(renames, path2_json(e, r2[i][0], r2[i][1]));
		}
	}

	/* one entry per path */
	for (size_t j = 0; j < n_pe; j++) {
		const char *cls = pe[j].cls, *path = pe[j].path;
		bool dl = !strcmp(cls, "download");
		__u64 first, last;

		pv = pe[j].pv;
		if (pv.open_fails || pv.probe_fails) {
			json_array_append_new(
			    missing,
			    json_pack("{s:o, s:i, s:o, s:o, s:o, s:i, s:s}", "path",
				      json_text(path), "attempts",
				      (int)(pv.open_fails + pv.probe_fails), "errno",
				      errno_json(pv.probe_fails ? pv.probe_errno : pv.open_errno),
				      "first_ms", ms_json(clock_ns_to_ms(pv.fail_first_ns)),
				      "last_ms", ms_json(clock_ns_to_ms(pv.fail_last_ns)), "pid",
				      (int)pv.first_pid, "class", cls));
		}
		if (!pv.opens && !pv.open_fails)
			continue;
		first = pv.first_ns;
		last = pv.last_ns;
		fv = pe[j].fv;
		/* a download lasts from its open to its last write */
		if (fv.first_ns && fv.first_ns < first)
			first = fv.first_ns;
		if (dl && fv.first_write_ns && fv.first_write_ns < first)
			first = fv.first_write_ns;
		if (dl ? fv.last_write_ns > last : fv.last_ns > last)
			last = dl ? fv.last_write_ns : fv.last_ns;
		json_array_append_new(files, file_json(path, cls, &pv, &fv, first, last));
		if (dl && fv.bytes_written) {
			char final[PATH_MAX];
			size_t l = strlen(path) - strlen(".incomplete");
			double a = clock_ns_to_ms(first), b = clock_ns_to_ms(last);
			const char *renamed = NULL, *link = NULL;
			double rename_ms = -1;
			struct stat st;

			snprintf(final, sizeof(final), "%.*s", (int)l, path);
			/* complete when the trace saw it renamed to its final name */
			for (size_t i = 0; r2 && i < t->n_path2; i++) {
				if (t->path2[i].type == EV_RENAME && t->path2[i].ret == 0 &&
				    !strcmp(r2[i][0], path)) {
					renamed = r2[i][1];
					rename_ms = clock_ns_to_ms(t->path2[i].ts_ns);
				}
			}
			for (size_t i = 0; renamed && r2 && i < t->n_path2; i++)
				if (t->path2[i].type == EV_SYMLINK && t->path2[i].ret == 0 &&
				    !strcmp(r2[i][0], renamed))
					link = r2[i][1];
			json_array_append_new(
			    downloads,
			    json_pack(
				"{s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:b, s:b, s:o, s:o, s:o}",
				"path", json_text(path), "bytes", (json_int_t)fv.bytes_written,
				"size",
				!stat(renamed ? renamed : final, &st) ? json_integer(st.st_size)
								      : json_null(),
				"first_ms", ms_json(a), "last_ms", ms_json(b), "dur_ms",
				ms_json(b - a), "rate_mb_s",
				b > a ? json_real(fv.bytes_written / 1e3 / (b - a)) : json_null(),
				"complete", renamed != NULL, "completed",
				renamed != NULL || access(final, F_OK) == 0, "final_path",
				json_text(renamed), "rename_ms",
				renamed ? ms_json(rename_ms) : json_null(), "link",
				json_text(link)));
		}
	}

	/* inodes read or written but never opened by path in the tree (inherited
	 * fds such as the log file): named by their dentry */
	for (size_t i = 0; i < n_io; i++) {
		char name[TRACE_NAME_MAX + 16];

		if (io[i].claimed)
			continue;
		snprintf(name, sizeof(name), "[fd] %s", io[i].v.name);
		json_array_append_new(files,
				      file_json(name, timeline_file_class(io[i].v.name, dp), NULL,
						&io[i].v, io[i].v.first_ns, io[i].v.last_ns));
	}
	snap_locks(t, pe, n_pe, root);
	snap_failops(t, dt, n_dt, files, renames, root);
	for (size_t i = 0; i < n_dt; i++)
		free(dt[i].path);
	free(dt);
	free(r2);
	free(pe);
	free(io);
	timeline_sort_by(files, "first_ms");
	timeline_sort_by(missing, "first_ms");
	timeline_sort_by(downloads, "first_ms");
	json_object_set_new(root, "files", files);
	json_object_set_new(root, "missing_paths", missing);
	json_object_set_new(root, "downloads", downloads);
	json_object_set_new(root, "renames", renames);
	json_object_set_new(root, "symlinks", links);
}

static void snap_network(struct tracer *t, json_t *root)
{
	struct bpf_map *m = t->skel->maps.peers;
	json_t *net = json_object(), *list = json_array(), *c, *e;
	struct peer_key k, next;
	struct peer_val v;
	const char *key;
	size_t i;
	int more;

	/* connections still open: what moved so far */
	{
		struct bpf_map *cm = t->skel->maps.conns;
		__u64 ck, cnext;
		struct conn_val pc;
		double nowms = clock_ms();
		__u32 walked;

		/* capped: closed connections are deleted meanwhile (see snap_locks) */
		for (more = bpf_map__get_next_key(cm, NULL, &cnext, sizeof(cnext)), walked = 0;
		     !more && walked++ < bpf_map__max_entries(cm);
		     more = bpf_map__get_next_key(cm, &ck, &cnext, sizeof(cnext))) {
			ck = cnext;
			if (bpf_map__lookup_elem(cm, &ck, sizeof(ck), &pc, sizeof(pc), 0) ||
			    !pc.done || pc.closed || pc.ret)
				continue;
			c = connect_by_cookie(t, ck);
			if (!c || !json_is_null(json_object_get(c, "closed_ms")))
				continue;
			json_object_set_new(c, "bytes_in", json_integer((json_int_t)pc.bytes_in));
			json_object_set_new(c, "bytes_out", json_integer((json_int_t)pc.bytes_out));
			json_object_set_new(c, "open_ms",
					    ms_json(nowms - clock_ns_to_ms(pc.done_ns)));
		}
	}
	/* connect attempts, by peer */
	json_array_foreach (t->connects, i, c) {
		const char *peer = json_string_value(json_object_get(c, "peer"));
		int ret = (int)json_integer_value(json_object_get(c, "ret"));
		bool pending = json_is_true(json_object_get(c, "pending"));
		e = json_object_get(net, peer);
		if (!e) {
			e = json_pack(
			    "{s:s, s:i, s:i, s:i, s:n, s:I, s:I, s:f, s:f, s:O, s:f}", "peer", peer,
			    "port", (int)json_integer_value(json_object_get(c, "port")), "connects",
			    0, "failures", 0, "errno", "bytes_in", (json_int_t)0, "bytes_out",
			    (json_int_t)0, "connect_ms", 0.0, "connect_max_ms", 0.0, "first_ms",
			    json_object_get(c, "start_ms"), "last_ms", 0.0);
			json_object_set_new(net, peer, e);
		}
		json_object_set_new(
		    e, "connects",
		    json_integer(json_integer_value(json_object_get(e, "connects")) + 1));
		if (ret < 0 && !pending) {
			json_object_set_new(
			    e, "failures",
			    json_integer(json_integer_value(json_object_get(e, "failures")) + 1));
			json_object_set_new(e, "errno", errno_json(-ret));
		}
		{
			json_t *r = json_object_get(c, "ms_to_result");
			double d =
			    json_real_value(json_is_real(r) ? r : json_object_get(c, "dur_ms"));
			double end = json_real_value(json_object_get(c, "start_ms")) + d;

			json_object_set_new(
			    e, "connect_ms",
			    ms_json(json_real_value(json_object_get(e, "connect_ms")) + d));
			if (d > json_real_value(json_object_get(e, "connect_max_ms")))
				json_object_set_new(e, "connect_max_ms", ms_json(d));
			if (end > json_real_value(json_object_get(e, "last_ms")))
				json_object_set_new(e, "last_ms", ms_json(end));
		}
	}
	/* bytes, by peer */
	for (more = bpf_map__get_next_key(m, NULL, &next, sizeof(next)); !more;
	     more = bpf_map__get_next_key(m, &k, &next, sizeof(next))) {
		char peer[160];
		double f, l;

		k = next;
		if (bpf_map__lookup_elem(m, &k, sizeof(k), &v, sizeof(v), 0))
			continue;
		peer_string(k.family, k.addr, k.port, peer, sizeof(peer));
		f = clock_ns_to_ms(v.first_ns);
		l = clock_ns_to_ms(v.last_ns);
		e = json_object_get(net, peer);
		if (!e) {
			e = json_pack("{s:s, s:i, s:i, s:i, s:n, s:f, s:f, s:o, s:o}", "peer", peer,
				      "port", k.port, "connects", 0, "failures", 0, "errno",
				      "connect_ms", 0.0, "connect_max_ms", 0.0, "first_ms",
				      ms_json(f), "last_ms", ms_json(l));
			json_object_set_new(net, peer, e);
		}
		json_object_set_new(e, "bytes_in", json_integer((json_int_t)v.bytes_in));
		json_object_set_new(e, "bytes_out", json_integer((json_int_t)v.bytes_out));
		json_object_set_new(e, "proto",
				    json_string(k.proto == IPPROTO_UDP ? "udp" : "tcp"));
		json_object_set_new(e, "sends", json_integer((json_int_t)v.sends));
		json_object_set_new(e, "recvs", json_integer((json_int_t)v.recvs));
		json_object_set_new(e, "io_errors", json_integer((json_int_t)v.errors));
		json_object_set_new(e, "io_errno", errno_json(v.errors ? v.err : 0));
		if (k.port == 53) {
			/* a query per datagram sent, an answer per one received;
			 * failures: failed sends/receives (ECONNREFUSED: nothing
			 * listens there) */
			json_object_set_new(e, "dns_queries", json_integer((json_int_t)v.sends));
			json_object_set_new(e, "dns_answers", json_integer((json_int_t)v.recvs));
			json_object_set_new(e, "dns_failures", json_integer((json_int_t)v.errors));
			json_object_set_new(
			    e, "dns_unanswered",
			    json_integer(v.sends > v.recvs ? (json_int_t)(v.sends - v.recvs) : 0));
		}
		if (f < json_real_value(json_object_get(e, "first_ms")))
			json_object_set_new(e, "first_ms", ms_json(f));
		if (l > json_real_value(json_object_get(e, "last_ms")))
			json_object_set_new(e, "last_ms", ms_json(l));
	}
	json_object_foreach (net, key, e) {
		if (!json_object_get(e, "bytes_in")) {
			/* connected, but nothing moved (or not over an inet socket) */
			json_object_set_new(e, "bytes_in", json_integer(0));
			json_object_set_new(e, "bytes_out", json_integer(0));
			json_object_set_new(e, "proto", json_null());
		}
		json_object_set_new(
		    e, "dns", json_boolean(json_integer_value(json_object_get(e, "port")) == 53));
		json_array_append(list, e);
	}
	json_decref(net);
	timeline_sort_by(list, "first_ms");
	json_object_set_new(root, "network", list);
	json_object_set_new(root, "connects", json_deep_copy(t->connects));
	json_object_set_new(root, "listens", json_deep_copy(t->listens));
}

static void snap_procs(struct tracer *t, json_t *root)
{
	struct bpf_map *m = t->skel->maps.procstat;
	json_t *mem = json_object_get(root, "memory"), *per = json_array(), *sched = json_array();
	json_t *procs = json_array(), *p;
	__u64 faults = 0, maj = 0, minr = 0, io = 0, sl = 0, rq = 0;
	__u32 k, next;
	struct proc_stat s;
	const char *key;
	int more;

	for (more = bpf_map__get_next_key(m, NULL, &next, sizeof(next)); !more;
	     more = bpf_map__get_next_key(m, &k, &next, sizeof(next))) {
		unsigned long long mi = 0, ma = 0;
		json_t *cmd;

		k = next;
		if (bpf_map__lookup_elem(m, &k, sizeof(k), &s, sizeof(s), 0))
			continue;
		p = proc_obj(t, (pid_t)k);
		cmd = json_object_get(p, "command");
		if (s.exited || !proc_faults((pid_t)k, &mi, &ma)) {
			/* exited: the sum over its threads, taken at each thread's exit */
			mi = s.exited_min_flt;
			ma = s.exited_maj_flt;
		}
		faults += s.faults;
		maj += ma;
		minr += mi;
		io += s.io_wait_ns;
		sl += s.sleep_ns;
		rq += s.runq_ns;
		json_array_append_new(
		    per, json_pack("{s:i, s:O, s:I, s:I, s:I}", "pid", (int)k, "command", cmd,
				   "page_faults", (json_int_t)s.faults, "minor_faults",
				   (json_int_t)mi, "major_faults", (json_int_t)ma));
		json_array_append_new(
		    sched, json_pack("{s:i, s:O, s:o, s:o, s:o, s:I}", "pid", (int)k, "command",
				     cmd, "io_wait_ms", ms_json(s.io_wait_ns / 1e6), "sleep_ms",
				     ms_json(s.sleep_ns / 1e6), "runqueue_ms",
				     ms_json(s.runq_ns / 1e6), "switches", (json_int_t)s.switches));
	}
	json_object_set_new(mem, "page_faults", json_integer((json_int_t)faults));
	json_object_set_new(mem, "major_faults", json_integer((json_int_t)maj));
	json_object_set_new(mem, "minor_faults", json_integer((json_int_t)minr));
	json_object_set_new(mem, "per_process", per);
	json_object_set_new(root, "sched",
			    json_pack("{s:o, s:o, s:o, s:o}", "io_wait_ms", ms_json(io / 1e6),
				      "sleep_ms", ms_json(sl / 1e6), "runqueue_ms",
				      ms_json(rq / 1e6), "processes", sched));
	json_object_foreach (t->procs, key, p)
		json_array_append(procs, p);
	timeline_sort_by(procs, "pid");
	json_object_set_new(root, "processes", procs);
}

#define FAULT_CHUNK 512

/* counts[b]: faults in bucket b, summed over the CPUs. 0, or -1 (errno). */
static int fault_series(struct tracer *t, __u64 *counts)
{
	int fd = bpf_map__fd(t->skel->maps.faultrate), ncpu = libbpf_num_possible_cpus();
	__u32 keys[FAULT_CHUNK], next = 0, n;
	__u64 *vals;
	bool more = true;
	int err = 0;

	if (ncpu <= 0)
		return -1;
	vals = calloc((size_t)FAULT_CHUNK * ncpu, sizeof(*vals));
	if (!vals)
		return -1;
	for (__u32 first = 0; more; first = next) {
		n = FAULT_CHUNK;
		/* the batch token: what the kernel returned, passed back as is */
		if (bpf_map_lookup_batch(fd, first ? &first : NULL, &next, keys, vals, &n, NULL)) {
			if (errno != ENOENT) {
				err = -1;
				break;
			}
			more = false;
		}
		for (__u32 i = 0; i < n; i++)
			for (int c = 0; c < ncpu; c++)
				if (keys[i] < TRACE_BUCKETS)
					counts[keys[i]] += vals[(size_t)i * ncpu + c];
		if (!n)
			break;
	}
	free(vals);
	return err;
}

static void snap_memory(struct tracer *t, json_t *root)
{
	json_t *mem = json_object_get(root, "memory"), *series = json_array(), *files, *f;
	__u64 model_faults = 0, *counts;
	__u32 last = 0;
	size_t i;

	/* the series up to its last non-empty bucket, each the sum over CPUs
	 * (a per-CPU array: the fault probe adds without an atomic); batch
	 * reads of FAULT_CHUNK buckets, not thousands of lookups */
	counts = calloc(TRACE_BUCKETS, sizeof(*counts));
	if (counts && fault_series(t, counts) == 0) {
		for (__u32 b = 0; b < TRACE_BUCKETS; b++)
			if (counts[b])
				last = b + 1;
		for (__u32 b = 0; b < last; b++)
			json_array_append_new(series, json_integer((json_int_t)counts[b]));
	}
	free(counts);
	json_object_set_new(mem, "fault_rate",
			    json_pack("{s:i, s:o}", "bucket_ms", (int)(TRACE_BUCKET_NS / 1000000),
				      "counts", series));
	files = json_object_get(root, "files");
	json_array_foreach (files, i, f) {
		if (!strcmp(json_string_value(json_object_get(f, "class")), "model"))
			model_faults += json_integer_value(json_object_get(f, "faults"));
	}
	json_object_set_new(mem, "model_file_faults", json_integer((json_int_t)model_faults));
	json_object_set_new(mem, "mlock_calls", json_deep_copy(t->mlocks));
}

static void snap_block(struct tracer *t, json_t *root, const __u64 *cnt)
{
	json_t *hist = json_array();

	for (__u32 i = 0; i < TRACE_HIST_SLOTS; i++) {
		__u64 v = 0;

		if (bpf_map__lookup_elem(t->skel->maps.blockhist, &i, sizeof(i), &v, sizeof(v),
					 0) ||
		    !v)
			continue;
		/* slot i holds latencies below 2^i us */
		json_array_append_new(hist, json_pack("{s:I, s:I}", "lt_us", (json_int_t)1 << i,
						      "count", (json_int_t)v));
	}
	json_object_set_new(root, "block",
			    json_pack("{s:I, s:I, s:o}", "requests",
				      (json_int_t)cnt[CNT_BLOCK_REQS], "bytes",
				      (json_int_t)cnt[CNT_BLOCK_BYTES], "latency_hist", hist));
}

/* [trace] requests_window is over: requests are no longer kept, so the
 * heavy probes go (block, TCP states), the syscall probes take only mlock
 * calls and sched_switch only counts faults (the kernel side's `light`);
 * page faults (rate, model files), the process tree, major faults and
 * imports stay. */
static void lighten(struct tracer *t)
{
	static const char *heavy[] = {"block_rq_issue", "block_rq_complete", "inet_sock_set_state"};
	static const char *narrowed[][2] = {{"sys_enter", "sys_enter (mlock calls only)"},
					    {"sys_exit", "sys_exit (mlock calls only)"},
					    {"sched_switch", "sched_switch (fault counts only)"}};
	json_t *det = json_array(), *kept = json_array();
	struct bpf_program *prog;

	t->skel->bss->light = 1;
	bpf_object__for_each_program (prog, t->skel->obj) {
		struct bpf_prog_info pi;
		__u32 len = sizeof(pi);
		bool drop = false, linked = false, usdt;

		for (size_t h = 0; h < sizeof(heavy) / sizeof(heavy[0]); h++)
			drop |= !strcmp(bpf_program__name(prog), heavy[h]);
		memset(&pi, 0, sizeof(pi));
		if (!bpf_program__autoload(prog) || bpf_program__fd(prog) < 0 ||
		    bpf_obj_get_info_by_fd(bpf_program__fd(prog), &pi, &len))
			continue;
		for (size_t i = 0; i < t->n_links; i++) {
			struct bpf_link_info li;
			__u32 ll = sizeof(li);

			memset(&li, 0, sizeof(li));
			if (!t->links[i] ||
			    bpf_obj_get_info_by_fd(bpf_link__fd(t->links[i]), &li, &ll) ||
			    li.prog_id != pi.id)
				continue;
			linked = true;
			if (drop) {
				bpf_link__destroy(t->links[i]);
				t->links[i] = NULL;
			}
		}
		/* only what is attached: not a probe that fell back */
		usdt = !strncmp(bpf_program__section_name(prog), "usdt", 4);
		if (drop && linked)
			json_array_append_new(det, json_string(bpf_program__name(prog)));
		else if (!drop && (linked || (usdt && t->usdt))) {
			const char *name = bpf_program__name(prog);

			for (size_t n = 0; n < sizeof(narrowed) / sizeof(narrowed[0]); n++)
				if (!strcmp(name, narrowed[n][0]))
					name = narrowed[n][1];
			json_array_append_new(kept, json_string(name));
		}
	}
	t->light =
	    json_pack("{s:o, s:o, s:o}", "ms", ms_json(clock_ms()), "detached", det, "kept", kept);
}

void tracer_snapshot(struct tracer *t, struct timeline *tl)
{
	json_t *root, *tr;
	__u64 cnt[CNT_MAX];
	__u64 lost;

	if (!t || !tl)
		return;
	/* what is still waiting in the ring buffer belongs to this snapshot */
	tracer_poll(t);
	root = timeline_json(tl);
	if (!t->light && t->req_window_ms >= 0 && t->ready_ms >= 0 &&
	    clock_ms() >= t->ready_ms + t->req_window_ms)
		lighten(t);
	read_counters(t, cnt);
	lost = cnt[CNT_RB_DROPS] + cnt[CNT_PATHS_FULL] + cnt[CNT_FILES_FULL] + cnt[CNT_PEERS_FULL] +
	       cnt[CNT_PROCS_FULL] + cnt[CNT_FAILOPS_FULL] + cnt[CNT_LOCKS_FULL] +
	       cnt[CNT_THREADS_FULL] + t->user_lost;

	tr = json_object_get(root, "tracing");
	json_object_set_new(tr, "enabled", json_true());
	json_object_set_new(tr, "probes", json_deep_copy(t->probes));
	json_object_set_new(tr, "fallbacks", json_deep_copy(t->fallbacks));
	json_object_set_new(tr, "tracefs", json_string(t->tracefs));
	json_object_set_new(tr, "events_lost", json_integer((json_int_t)lost));
	json_object_set_new(
	    tr, "lost",
	    json_pack("{s:I, s:I, s:I, s:I, s:I}", "ring_buffer", (json_int_t)cnt[CNT_RB_DROPS],
		      "paths", (json_int_t)cnt[CNT_PATHS_FULL], "files",
		      (json_int_t)cnt[CNT_FILES_FULL], "peers", (json_int_t)cnt[CNT_PEERS_FULL],
		      "processes", (json_int_t)cnt[CNT_PROCS_FULL]));
	json_object_set_new(json_object_get(tr, "lost"), "failed_ops",
			    json_integer((json_int_t)cnt[CNT_FAILOPS_FULL]));
	json_object_set_new(json_object_get(tr, "lost"), "locks",
			    json_integer((json_int_t)cnt[CNT_LOCKS_FULL]));
	json_object_set_new(json_object_get(tr, "lost"), "threads",
			    json_integer((json_int_t)cnt[CNT_THREADS_FULL]));

	if (t->exec_ms >= 0)
		timeline_mark(tl, "exec", t->exec_ms);
	if (t->ready_ms >= 0)
		timeline_mark(tl, "ready", t->ready_ms);

	snap_files(t, root);
	snap_network(t, root);
	snap_procs(t, root);
	snap_memory(t, root);
	snap_block(t, root, cnt);
	json_object_set_new(root, "python",
			    json_pack("{s:b, s:O}", "usdt", t->usdt, "imports", t->imports));
	json_object_set_new(root, "requests", json_deep_copy(t->requests));
	json_object_set_new(tr, "requests_window_s",
			    t->req_window_ms < 0 ? json_null()
						 : json_real(t->req_window_ms / 1000));
	json_object_set_new(tr, "requests_after_window",
			    json_integer((json_int_t)t->req_after_window));
	json_object_set_new(tr, "light", t->light ? json_deep_copy(t->light) : json_null());
	timeline_infer_phases(tl);
}
