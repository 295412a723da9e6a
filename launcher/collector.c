/* collector: ring buffer records and map reads, gathered for the
 * timeline; see collector.h. */
#include "collector.h"
#include "gpu.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "clock.h"
#include "interp.h"
#include "redact.h"
#include "trace.skel.h"
#include "util.h"

int collector_init(struct collector *c, pid_t root, int listen_port, const struct config *cfg,
		   double req_window_ms)
{
	memset(c, 0, sizeof(*c));
	c->root = root;
	c->listen_port = listen_port;
	c->cfg = cfg;
	c->exec_ms = -1;
	c->ready_ms = -1;
	c->ready_listen = -1;
	c->req_window_ms = req_window_ms;
	/* the service starts in [app] dir: its relative paths start there */
	if (cfg && cfg->app_dir) {
		__u64 dev = 0, ino = 0;

		paths_dir_add_path(&c->dirs, cfg->app_dir, &dev, &ino);
		if (ino)
			paths_cwd_set(&c->dirs, root, dev, ino);
	}
	return 0;
}

void collector_free(struct collector *c)
{
	for (size_t i = 0; i < c->n_procs; i++) {
		free(c->procs[i]->command);
		free(c->procs[i]->argv);
		free(c->procs[i]);
	}
	free(c->procs);
	free(c->by_pid);
	free(c->connects);
	free(c->listens);
	free(c->mlocks);
	free(c->imports);
	free(c->open);
	free(c->requests);
	paths_dirs_free(&c->dirs);
	free(c->path2);
	peers_free(&c->names);
	attr_store_free(&c->off);
	for (int i = 0; i < c->n_hub_blobs; i++)
		free(c->hub_blobs[i].blob);
	memset(c, 0, sizeof(*c));
}

/* ---- ring buffer records ---- */

/* Room for one more element in *arr (*n used of *cap, elements of sz);
 * false when out of memory (the record is then counted as lost). */
static bool room(struct collector *t, void **arr, size_t *n, size_t *cap, size_t sz)
{
	size_t c;
	void *a;

	if (*n < *cap)
		return true;
	c = *cap ? *cap * 2 : 64;
	if (!(a = realloc(*arr, c * sz))) {
		t->user_lost++;
		return false;
	}
	*arr = a;
	*cap = c;
	return true;
}

#define ROOM(t, arr, n, cap) room((t), (void **)&(arr), &(n), &(cap), sizeof(*(arr)))

/* The first position in by_pid whose pid is not below pid */
static size_t proc_pos(const struct collector *t, pid_t pid)
{
	size_t lo = 0, hi = t->n_procs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->by_pid[mid]->pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct coll_proc *collector_proc_find(const struct collector *t, pid_t pid)
{
	size_t i = proc_pos(t, pid);

	return i < t->n_procs && t->by_pid[i]->pid == pid ? t->by_pid[i] : NULL;
}

struct coll_proc *collector_proc(struct collector *t, pid_t pid)
{
	size_t i = proc_pos(t, pid), cap = t->cap_procs;
	struct coll_proc *p, **a, **b;

	if (i < t->n_procs && t->by_pid[i]->pid == pid)
		return t->by_pid[i];
	if (t->n_procs == cap) {
		cap = cap ? 2 * cap : 64;
		if (!(a = realloc(t->procs, cap * sizeof(*a))))
			return NULL;
		t->procs = a;
		if (!(b = realloc(t->by_pid, cap * sizeof(*b))))
			return NULL;
		t->by_pid = b;
		t->cap_procs = cap;
	}
	if (!(p = calloc(1, sizeof(*p))))
		return NULL;
	*p = (struct coll_proc){.pid = pid, .fork_ms = -1, .exec_ms = -1, .exit_ms = -1};
	memmove(&t->by_pid[i + 1], &t->by_pid[i], (t->n_procs - i) * sizeof(*t->by_pid));
	t->by_pid[i] = p;
	t->procs[t->n_procs++] = p;
	return p;
}

struct interp_proc *collector_interp_procs(const struct collector *t, size_t *n)
{
	struct interp_proc *out = t->n_procs ? calloc(t->n_procs, sizeof(*out)) : NULL;

	*n = out ? t->n_procs : 0;
	for (size_t i = 0; i < *n; i++) {
		const struct coll_proc *p = t->procs[i];

		/* null reads as 0, as interp reads the model's records */
		out[i] = (struct interp_proc){p->pid,
					      p->has_ppid ? p->ppid : 0,
					      p->command,
					      p->has_comm ? p->comm : NULL,
					      p->exec_ms < 0 ? 0 : p->exec_ms,
					      p->exit_ms < 0 ? 0 : p->exit_ms,
					      p->exited,
					      p->exited && !p->signal ? p->code : 0,
					      p->exited ? p->signal : 0};
	}
	return out;
}

static void set_comm(struct coll_proc *p, const char *comm)
{
	snprintf(p->comm, sizeof(p->comm), "%.*s", (int)strnlen(comm, TRACE_COMM_MAX), comm);
	p->has_comm = true;
}

void collector_peer_string(int family, const __u8 *addr, int port, char *out, size_t len)
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
		collector_peer_string(AF_INET, (const __u8 *)&in->sin_addr, *port, out, len);
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)&ss;

		*port = ntohs(in6->sin6_port);
		collector_peer_string(AF_INET6, (const __u8 *)&in6->sin6_addr, *port, out, len);
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

static void on_import(struct collector *t, const struct tl_import_event *e)
{
	double ms = clock_ns_to_ms(e->ts_ns);
	struct coll_import_frame *f;
	size_t top = t->n_open, depth = 0;

	if (e->type == EV_IMPORT_START) {
		if (!ROOM(t, t->open, t->n_open, t->cap_open))
			return;
		f = &t->open[t->n_open++];
		f->tid = e->tid;
		f->start_ms = ms;
		memcpy(f->name, e->name, sizeof(f->name));
		return;
	}
	/* imports nest: done closes the innermost open import of its thread */
	for (size_t i = t->n_open; i-- > 0;)
		if (t->open[i].tid == e->tid) {
			if (top == t->n_open)
				top = i;
			else
				depth++;
		}
	if (top == t->n_open)
		return;
	f = &t->open[top];
	if (ROOM(t, t->imports, t->n_imports, t->cap_imports)) {
		struct coll_import *im = &t->imports[t->n_imports++];

		memcpy(im->name, f->name, sizeof(f->name));
		im->name[sizeof(f->name)] = 0;
		im->pid = (int)e->pid;
		im->depth = (int)depth;
		im->found = e->found != 0;
		im->start_ms = coll_ms(f->start_ms);
		im->end_ms = coll_ms(ms);
		im->dur_ms = coll_ms(ms - f->start_ms);
	}
	memmove(f, f + 1, (t->n_open - top - 1) * sizeof(*f));
	t->n_open--;
}

/* ---- relative paths ---- */

static void keep_path2(struct collector *t, const struct tl_path2_event *e)
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

struct coll_connect *collector_connect(struct collector *t, __u64 cookie)
{
	for (size_t i = t->n_connects; cookie && i-- > 0;)
		if (t->connects[i].cookie == cookie)
			return &t->connects[i];
	return NULL;
}

static void set_outcome(struct coll_connect *c, int ret, bool closed, double ms_to_result)
{
	c->ret = ret;
	c->pending = false;
	c->result = connect_result(-ret, closed);
	c->errno_name = ret < 0 ? strerrorname_np(-ret) ?: "?" : NULL;
	c->has_ms_to_result = true;
	c->ms_to_result = coll_ms(ms_to_result);
}

static void on_connect_rec(struct collector *t, const struct tl_event *e, double ms, double end_ms)
{
	char peer[160];
	int family, port;
	bool follows = e->flags & CONNECT_FOLLOWS; /* the handshake's outcome comes later */
	struct coll_connect *c;

	if (!sockaddr_peer(e, peer, sizeof(peer), &family, &port) ||
	    !ROOM(t, t->connects, t->n_connects, t->cap_connects))
		return;
	c = &t->connects[t->n_connects++];
	*c = (struct coll_connect){
	    .cookie = e->arg2,
	    .family = family,
	    .port = port,
	    .pid = (int)e->pid,
	    .start_ms = coll_ms(ms),
	    .dur_ms = coll_ms(end_ms - ms),
	    .ret = e->ret,
	    .syscall_ret = e->ret,
	    .pending = follows || e->ret == -EINPROGRESS,
	    .result = "pending",
	};
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	if (!follows && e->ret != -EINPROGRESS) {
		set_outcome(c, e->ret, false, end_ms - ms);
		if (e->ret == 0) {
			c->has_established = true;
			c->established_ms = coll_ms(end_ms);
		}
	}
}

/* The handshake connect(2) did not wait for ended: complete its record. */
static void on_connect_done(struct collector *t, const struct tl_event *e, double ms, double end_ms)
{
	struct coll_connect *c = collector_connect(t, e->arg2);

	if (!c || !c->pending)
		return;
	/* from the connect(2) call (the kernel's ts is SYN_SENT) */
	(void)ms;
	set_outcome(c, e->ret, e->flags & CONN_CLOSED, end_ms - c->start_ms);
	if (e->ret == 0 && !(e->flags & CONN_CLOSED)) {
		c->has_established = true;
		c->established_ms = coll_ms(end_ms);
	}
}

/* An established connection ended: what moved over it, and for how long. */
static void on_conn_end(struct collector *t, const struct tl_conn_event *e)
{
	struct coll_connect *c = collector_connect(t, e->cookie);
	double a = clock_ns_to_ms(e->ts_ns), b = clock_ns_to_ms(e->ts_ns + e->dur_ns);
	const char *by = e->ended_by == TL_TCP_FIN_WAIT1  ? "local-close"
			 : e->ended_by == TL_TCP_LAST_ACK ? "remote-close"
							  : "reset";

	if (!c || c->has_closed)
		return;
	c->has_bytes = true;
	c->bytes_in = e->bytes_in;
	c->bytes_out = e->bytes_out;
	c->has_established = c->has_closed = c->has_open = true;
	c->established_ms = coll_ms(a);
	c->closed_ms = coll_ms(b);
	c->open_ms = coll_ms(b - a);
	c->ended_by = by;
	c->has_counts = true;
	c->reply_max = e->reply_max;
	c->writes = e->writes;
}

static void on_request(struct collector *t, const struct tl_req_event *e)
{
	double a = clock_ns_to_ms(e->ts_ns), b = clock_ns_to_ms(e->ts_ns + e->dur_ns);

	if (t->req_window_ms >= 0 && t->ready_ms >= 0 && a > t->ready_ms + t->req_window_ms) {
		t->req_after_window++;
		return;
	}
	if (!ROOM(t, t->requests, t->n_requests, t->cap_requests))
		return;
	t->requests[t->n_requests++] = (struct coll_request){
	    .start_ms = a,
	    .end_ms = b,
	    .close_ms = clock_ns_to_ms(e->close_ns),
	    .faults = e->faults,
	    .major_faults = e->major_faults,
	    .model_faults = e->model_faults,
	    .model_major_faults = e->model_major_faults,
	    .bytes_out = e->bytes_out,
	    .bytes_in = e->bytes_in,
	    .writes = e->writes,
	    .pid = (int)e->pid,
	    .tid = (int)e->tid,
	    .port = (int)e->port,
	};
}

int collector_on_event(void *ctx, void *data, size_t size)
{
	struct collector *t = ctx;
	const struct tl_event *e = data;
	const struct tl_head *h = data; /* every record starts with it (trace.h) */
	bool headed = size >= sizeof(*h);
	double ms, end_ms;
	struct coll_proc *p;

	if (headed && (h->type == EV_RENAME || h->type == EV_SYMLINK)) {
		if (size >= sizeof(struct tl_path2_event))
			keep_path2(t, data);
		return 0;
	}
	if (headed && h->type == EV_REQUEST) {
		if (size >= sizeof(struct tl_req_event))
			on_request(t, data);
		return 0;
	}
	if (headed && (h->type == EV_IMPORT_START || h->type == EV_IMPORT_DONE)) {
		if (size >= sizeof(struct tl_import_event))
			on_import(t, data);
		return 0;
	}
	if (headed && h->type == EV_NAME) {
		if (size >= sizeof(struct tl_name_event))
			peers_on_name(&t->names, data, clock_ns_to_ms(h->ts_ns));
		return 0;
	}
	if (headed && h->type == EV_PAYLOAD) {
		const struct tl_payload_event *pe = data;
		struct coll_connect *c;

		if (size < sizeof(*pe))
			return 0;
		peers_on_payload(&t->names, pe, clock_ns_to_ms(h->ts_ns));
		/* a TLS connection: its first bytes read answer the hello */
		if (pe->kind == PAYLOAD_TLS_HELLO && (c = collector_connect(t, pe->cookie)))
			c->tls = true;
		return 0;
	}
	if (headed && (h->type == EV_OFFCPU || h->type == EV_PYCODE || h->type == EV_PYSAMPLE)) {
		attr_store_add(&t->off, data, size);
		return 0;
	}
	if (headed && (h->type == EV_GPU_CALL || h->type == EV_GPU_MAP)) {
		gpu_on_event(t->gpu, data, size, t->ready_ms);
		return 0;
	}
	if (headed && h->type == EV_CONN_END) {
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
		if (!(p = collector_proc(t, e->pid))) {
			t->user_lost++;
			break;
		}
		if (p->exec_ms < 0)
			p->exec_ms = coll_ms(ms);
		free(p->command);
		p->command = strndup(e->str, sizeof(e->str));
		free(p->argv);
		p->argv_len = e->arg < sizeof(e->aux) ? e->arg : sizeof(e->aux);
		p->argv = malloc(p->argv_len + 1);
		if (p->argv) {
			memcpy(p->argv, e->aux, p->argv_len);
			p->argv[p->argv_len] = 0;
		}
		p->has_argv = true;
		set_comm(p, e->comm);
		if (!p->has_ppid) {
			p->ppid = (int)e->ppid;
			p->has_ppid = true;
		}
		p->execs++;
		if ((pid_t)e->pid == t->root && t->exec_ms < 0)
			t->exec_ms = ms;
		/* where its relative paths start (exec keeps the cwd) */
		paths_dir_add_cwd(&t->dirs, (pid_t)e->pid, 0, 0, NULL);
		break;
	case EV_CHDIR:
		paths_dir_add_cwd(&t->dirs, (pid_t)e->pid, e->arg, e->arg2, e->str);
		break;
	case EV_FORK:
		if (!(p = collector_proc(t, e->pid))) {
			t->user_lost++;
			break;
		}
		p->ppid = (int)e->ppid;
		p->has_ppid = true;
		paths_cwd_fork(&t->dirs, (pid_t)e->ppid, (pid_t)e->pid);
		p->fork_ms = coll_ms(ms);
		set_comm(p, e->comm);
		break;
	case EV_EXIT: {
		int st = e->ret;

		if (!(p = collector_proc(t, e->pid))) {
			t->user_lost++;
			break;
		}
		p->exit_ms = coll_ms(ms);
		p->exited = true;
		p->signal = st & 0x7f;
		p->code = st & 0x7f ? 0 : (st >> 8) & 0xff;
		break;
	}
	case EV_CONNECT:
		on_connect_rec(t, e, ms, end_ms);
		break;
	case EV_CONNECT_DONE:
		on_connect_done(t, e, ms, end_ms);
		break;
	case EV_LISTEN: {
		bool kept = ROOM(t, t->listens, t->n_listens, t->cap_listens);

		if (kept)
			t->listens[t->n_listens++] = (struct coll_listen){(int)e->pid, (int)e->tid,
									  (int)e->arg, coll_ms(ms)};
		if (t->ready_ms < 0 && (t->listen_port ? (int)e->arg == t->listen_port : true)) {
			t->ready_ms = ms;
			t->ready_listen = kept ? (long)t->n_listens - 1 : -1;
		}
		break;
	}
	case EV_MLOCK: {
		static const char *calls[] = {"?", "mlock", "mlock2", "mlockall"};

		if (!ROOM(t, t->mlocks, t->n_mlocks, t->cap_mlocks))
			break;
		t->mlocks[t->n_mlocks++] = (struct coll_mlock){
		    .pid = (int)e->pid,
		    .call = calls[e->arg2 < 4 ? e->arg2 : 0],
		    .len = e->arg,
		    .flags = (int)e->flags,
		    .result = e->ret < 0 ? -1 : e->ret,
		    .errno_name = e->ret < 0 ? strerrorname_np(-e->ret) : NULL,
		    .start_ms = ms,
		    .dur_ms = end_ms - ms,
		};
		break;
	}
	}
	return 0;
}

/* ---- map reads ---- */

void collector_counters(struct collector *t, __u64 out[CNT_MAX])
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

int collector_fault_series(struct collector *t, __u64 *counts)
{
	int fd = bpf_map__fd(t->skel->maps.faultrate), ncpu = libbpf_num_possible_cpus();
	struct fault_row *rows;
	__u32 keys[TRACE_BUCKET_ROWS], next = 0, n = TRACE_BUCKET_ROWS;

	if (ncpu <= 0)
		return -1;
	rows = calloc((size_t)TRACE_BUCKET_ROWS * ncpu, sizeof(*rows));
	if (!rows)
		return -1;
	/* every row of every CPU at once (ENOENT: no more after these) */
	if (bpf_map_lookup_batch(fd, NULL, &next, keys, rows, &n, NULL) && errno != ENOENT) {
		free(rows);
		return -1;
	}
	for (__u32 i = 0; i < n; i++)
		for (int c = 0; c < ncpu; c++)
			for (__u32 j = 0; j < TRACE_BUCKET_ROW; j++) {
				__u64 bucket = (__u64)keys[i] * TRACE_BUCKET_ROW + j;

				if (bucket < TRACE_BUCKETS)
					counts[bucket] += rows[(size_t)i * ncpu + c].n[j];
			}
	free(rows);
	return 0;
}
