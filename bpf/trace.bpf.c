// SPDX-License-Identifier: GPL-2.0
/* trace: kernel side of tts-launch's start-up tracing.
 *
 * Scope: the process tree rooted at the pid the launcher puts into `procs`
 * before it releases its forked child. Forks add children, exits remove them.
 * Nothing is recorded for a process until it (or the ancestor it was forked
 * from) has exec'd, so the launcher's own child set-up stays out of the trace.
 *
 * Probes: raw_tp only (sys_enter/sys_exit dispatched on the syscall number, and
 * sched, exceptions, block, sock tracepoints), USDT for Python imports. raw_tp
 * needs neither tracefs nor the kernel's BTF ids at load (tp_btf would make
 * libbpf parse all of vmlinux BTF: ~40 ms here); a tracepoint the kernel
 * lacks fails its own attach and becomes a fallback.
 *
 * Per-event work is kept small: the syscall number is checked before any map
 * lookup, then the pid-tree lookup; high-rate data goes into hash maps. */
#include "vmlinux.h"
#include <asm/unistd.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#include "trace.h"

char LICENSE[] SEC("license") = "GPL";

/* set by the launcher between open and load */
const volatile __u64 targ_t0_ns = 0;	  /* launcher start: fault-rate series origin */
const volatile __u32 targ_ready_port = 0; /* the ready listen; 0: the first inet listen */

/* set by the kernel side: when the ready listen happened (0: not yet) */
__u64 ready_ns = 0;
/* Set once a model file is mapped: until then no fault can be in one, and
 * the fault probes skip the range scan. */
__u64 model_mapped = 0;
/* Bytes written to regular files plus bytes received from peers: what a
 * download moves. The launcher reads it from the mmapped .bss (no syscall)
 * to snapshot the maps for live progress only while something moves. */
__u64 dl_activity = 0;
/* set by the launcher when [trace] requests_window ends: only mlock calls
 * are still taken from the syscall probes (docs/timeline.md, "light") */
volatile __u32 light = 0;

#define EINPROGRESS_	      115
#define MAP_ANONYMOUS_	      0x20
#define S_IFMT_		      0170000
#define S_IFREG_	      0100000
#define S_IFSOCK_	      0140000
#define AF_INET_	      2
#define AF_INET6_	      10
#define TASK_RUNNING_	      0
#define TASK_UNINTERRUPTIBLE_ 2
#define PF_EXITING_	      0x4
#define TCP_ESTABLISHED_      1
#define TCP_SYN_SENT_	      2
#define TCP_FIN_WAIT1_	      4
#define TCP_CLOSE_	      7
#define TCP_LAST_ACK_	      9
#define AT_FDCWD_	      -100
#define AT_REMOVEDIR_	      0x200
#define EAGAIN_		      11
#define EINTR_		      4
#define EEXIST_		      17
#define ENOENT_		      2
#define EACCES_		      13
#define LOCK_SH_	      1
#define LOCK_EX_	      2
#define LOCK_NB_	      4
#define F_SETLK_	      6
#define F_SETLKW_	      7
#define F_OFD_SETLK_	      37
#define F_OFD_SETLKW_	      38
#define F_UNLCK_	      2
#define MMSG_MAX	      8 /* sendmmsg/recvmmsg: messages whose lengths are added up */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);		      /* tgid */
	__type(value, __u32);		      /* PROC_* flags */
	__uint(map_flags, BPF_F_NO_PREALLOC); /* created fast, filled as the tree runs */
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32); /* tid */
	__type(value, struct inflight);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* created fast, filled as the tree runs */
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct path_key);
	__type(value, struct path_val);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* created fast, filled as the tree runs */
} paths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct path_key);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct file_key);
	__type(value, struct file_val);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* created fast, filled as the tree runs */
} files SEC(".maps");

/* Where each process mapped model files (address ranges from mmap's return):
 * the fault probes find the file of a faulting address here, a bounded scan,
 * instead of bpf_find_vma on every fault. munmap is not followed: a range
 * stays until the process exits (a later mapping at the same address would
 * be counted as the model file's). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct model_ranges);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* written at mmap only: created fast */
} mranges SEC(".maps");

struct model_ranges zero_ranges = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct peer_key);
	__type(value, struct peer_val);
} peers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32); /* tgid */
	__type(value, struct proc_stat);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* created fast, filled as the tree runs */
} procstat SEC(".maps");

struct offcpu {
	__u64 ts;
	__u32 tgid;
	__u32 reason; /* 0 runqueue, 1 io wait, 2 sleep */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	/* threads of the tree off CPU at once; an exiting thread leaves none
	 * behind (sched_switch). Not preallocated: an LRU map of this size took
	 * ~3 ms to create, before the service's exec */
	__uint(max_entries, 16384);
	__type(key, __u32); /* tid */
	__type(value, struct offcpu);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} offcpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TRACE_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} faultrate SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	/* the thread's task_struct: it keeps it across an exec, where a
	 * thread other than the leader takes the leader's id */
	__type(key, __u64);
	__type(value, __u64);		      /* its min_flt + maj_flt when last counted */
	__uint(map_flags, BPF_F_NO_PREALLOC); /* an entry per thread, made once: no 16k to set up */
} fltseen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);   /* struct request * */
	__type(value, __u64); /* issue time */
} blockstart SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TRACE_HIST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} blockhist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64); /* struct sock * */
	__type(value, struct conn_val);
} conns SEC(".maps");

/* ports the tree listens on: accepted connections there are requests */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u16);
	__type(value, __u8);
} listen_ports SEC(".maps");

struct req_state {
	__u64 start_ns;
	__u64 last_out_ns;
	__u64 bytes_in;
	__u64 bytes_out;
	__u64 writes;
	__u64 faults0, maj0;	      /* process counters at accept */
	__u64 faults1, maj1;	      /* ... at the last write */
	__u64 mf0, mmaj0, mf1, mmaj1; /* the same for faults in model-file mappings */
	__u32 tgid;
	__u32 tid;
	__u32 port;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* connections open at once */
	__type(key, __u64);	   /* struct sock * of the accepted connection */
	__type(value, struct req_state);
	/* ended at its close (inet_sock_set_state); not preallocated: an LRU
	 * map of this size took ~3 ms to create, before the service's exec */
	__uint(map_flags, BPF_F_NO_PREALLOC);
} reqs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct failop_key);
	__type(value, struct failop_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} failops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct failop_key);
} fscratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct file_key);
	__type(value, struct lock_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} locks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 2 << 20); /* 4,600 events: drained every 100 ms */
} events SEC(".maps");

/* ---- helpers ---- */

static __always_inline void count(__u32 which, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);

	if (c)
		*c += n;
}

/* After a lookup of key missed: add init under it and return the entry;
 * NULL when the map is full, counted under full (CNT_MAX: not counted). */
static __always_inline void *map_add(void *map, const void *key, const void *init, __u32 full)
{
	void *v;

	bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	v = bpf_map_lookup_elem(map, key);
	if (!v && full != CNT_MAX)
		count(full, 1);
	return v;
}

/* The tgid of current when it is in the traced tree and has exec'd. */
static __always_inline bool traced_now(__u32 *tgid)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	__u32 *flags = bpf_map_lookup_elem(&procs, &pid);

	if (!flags || !(*flags & PROC_EXECED))
		return false;
	*tgid = pid;
	return true;
}

/* The tree's process tgid, counted on: its procstat entry (made with its
 * procs entry, at fork or by the launcher for the root). An entry left by
 * an exited process is not counted on again. */
static __always_inline struct proc_stat *fault_proc(__u32 tgid)
{
	struct proc_stat *s = bpf_map_lookup_elem(&procstat, &tgid);

	return s && !s->exited ? s : NULL;
}

/* Page faults are the kernel's own per-thread counters (task->min_flt +
 * maj_flt, what /proc/PID/stat sums), not a program run per fault: what
 * thread task of process tgid faulted since it was last counted goes to the
 * process's counters and to the fault-rate bucket of now (exited: also when
 * the process is marked exited, for its threads' exits). Counted when the
 * thread leaves a CPU, exits, at a request's start and end, and on
 * fault_tick when one of its 20 ms on a CPU ends in user mode. Each of
 * these runs in the thread's own context (or interrupts it in user mode),
 * so two never race on its entry. A global function: verified once. */
__attribute__((noinline)) int flt_count(__u64 task, __u32 tgid, __u64 now, bool exited)
{
	struct task_struct *t = (struct task_struct *)task;
	__u64 cur = BPF_CORE_READ(t, min_flt) + BPF_CORE_READ(t, maj_flt), zero = 0;
	__u64 key = task, d, *last, *b;
	struct proc_stat *s;
	__u32 bucket;

	last = bpf_map_lookup_elem(&fltseen, &key);
	if (!last) {
		last = map_add(&fltseen, &key, &zero, CNT_THREADS_FULL);
		if (!last)
			return 0;
	}
	if (cur <= *last)
		return 0;
	d = cur - *last;
	*last = cur;
	/* the process's counters only when there is something to add */
	s = bpf_map_lookup_elem(&procstat, &tgid);
	if (!s || (s->exited && !exited))
		return 0;
	__sync_fetch_and_add(&s->faults, d);
	if (!now)
		now = bpf_ktime_get_ns();
	bucket = now > targ_t0_ns ? (now - targ_t0_ns) / TRACE_BUCKET_NS : 0;
	if (bucket >= TRACE_BUCKETS)
		bucket = TRACE_BUCKETS - 1;
	/* per CPU: no cache line bouncing between threads counted at once */
	b = bpf_map_lookup_elem(&faultrate, &bucket);
	if (b)
		__sync_fetch_and_add(b, d);
	return 0;
}

/* flt_count for thread t of the tree's running process tgid */
static __always_inline void flt_sync(struct task_struct *t, __u32 tgid, __u64 now)
{
	flt_count((__u64)t, tgid, now, false);
}

/* flt_sync for the current thread, in its syscall (a request's edges) */
static __always_inline void flt_sync_current(__u32 tgid, __u64 now)
{
	flt_sync((struct task_struct *)bpf_get_current_task(), tgid, now);
}

/* A ring record of size bytes (a constant); a full ring is counted. */
static __always_inline void *ring_reserve(__u64 size)
{
	void *e = bpf_ringbuf_reserve(&events, size, 0);

	if (!e)
		count(CNT_RB_DROPS, 1);
	return e;
}

/* The head tl_event and tl_import_event share: now, this thread. */
struct ev_head {
	__u64 ts_ns;
	__u64 dur_ns;
	__u32 type;
	__u32 pid;
	__u32 tid;
};

static __always_inline void *ev_head(__u64 size, __u32 type, __u32 tgid)
{
	struct ev_head *h = ring_reserve(size);

	if (!h)
		return NULL;
	h->ts_ns = bpf_ktime_get_ns();
	h->dur_ns = 0;
	h->type = type;
	h->pid = tgid;
	h->tid = (__u32)bpf_get_current_pid_tgid();
	return h;
}

static __always_inline struct tl_event *ev_reserve(__u32 type, __u32 tgid)
{
	struct tl_event *e = ev_head(sizeof(*e), type, tgid);

	if (!e)
		return NULL;
	e->ppid = 0;
	e->ret = 0;
	e->flags = 0;
	e->arg = 0;
	e->arg2 = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->str[0] = 0;
	e->aux[0] = 0;
	return e;
}

/* Frequent events (imports, forks, renames, requests) are submitted without
 * waking the launcher, which drains the ring on its 100 ms tick and whenever
 * an urgent event (exec, exit, listen, mlock) wakes it: a wakeup per import
 * cost more than the import's own probe. */
static __always_inline void ev_submit_lazy(void *e) { bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP); }

/* Forced: an adaptive wakeup is skipped while lazy events wait unread. */
static __always_inline void ev_submit_urgent(void *e)
{
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

static __always_inline struct file *fd_file(long fd)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds;
	struct file *f = NULL;

	if (!fdt || fd < 0 || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	return f;
}

static __always_inline void file_id(struct file *f, struct file_key *k, __u32 *mode)
{
	struct inode *ino = BPF_CORE_READ(f, f_inode);

	k->dev = BPF_CORE_READ(ino, i_sb, s_dev);
	k->ino = BPF_CORE_READ(ino, i_ino);
	*mode = BPF_CORE_READ(ino, i_mode);
}

/* A name ending like model weights (.pth .pt .bin .ckpt .onnx .gguf .npz
 * .h5 .safetensors): its last 8 bytes, gathered in one bounded pass. The
 * launcher's own classes (docs/timeline.md) are finer; this only decides
 * which faults count as model faults in requests. */
static __always_inline __u32 model_name(const char *name)
{
	__u64 t = 0;

	for (int i = 0; i < TRACE_NAME_MAX; i++) {
		if (!name[i])
			break;
		t = (t << 8) | (__u8)name[i];
	}
#define SUF4(a, b, c, d) (((__u64)(a) << 24) | ((__u64)(b) << 16) | ((__u64)(c) << 8) | (d))
	return (t & 0xffffffff) == SUF4('.', 'p', 't', 'h') ||
	       (t & 0xffffff) == SUF4(0, '.', 'p', 't') ||
	       (t & 0xffffffff) == SUF4('.', 'b', 'i', 'n') ||
	       (t & 0xffffffff) == SUF4('.', 'n', 'p', 'z') ||
	       (t & 0xffffff) == SUF4(0, '.', 'h', '5') ||
	       (t & 0xffffffffff) == ((__u64)'.' << 32 | SUF4('c', 'k', 'p', 't')) ||
	       (t & 0xffffffffff) == ((__u64)'.' << 32 | SUF4('o', 'n', 'n', 'x')) ||
	       (t & 0xffffffffff) == ((__u64)'.' << 32 | SUF4('g', 'g', 'u', 'f')) ||
	       t == (SUF4('e', 't', 'e', 'n') << 32 | SUF4('s', 'o', 'r', 's'));
#undef SUF4
}

static __always_inline struct file_val *file_entry(struct file *f, struct file_key *k, __u64 now)
{
	struct file_val *v = bpf_map_lookup_elem(&files, k);
	struct file_val init = {};

	if (v)
		return v;
	init.first_ns = now;
	init.size = BPF_CORE_READ(f, f_inode, i_size);
	bpf_probe_read_kernel_str(init.name, sizeof(init.name),
				  BPF_CORE_READ(f, f_path.dentry, d_name.name));
	init.model = model_name(init.name);
	return map_add(&files, k, &init, CNT_FILES_FULL);
}

static __always_inline struct sock *file_sock(struct file *f)
{
	struct socket *s = BPF_CORE_READ(f, private_data);

	return s ? BPF_CORE_READ(s, sk) : NULL;
}

/* Peer of a connected inet socket; false for anything else. */
static __always_inline bool sock_peer(struct sock *sk, struct peer_key *k)
{
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);

	__builtin_memset(k, 0, sizeof(*k));
	if (family != AF_INET_ && family != AF_INET6_)
		return false;
	k->family = family;
	k->proto = BPF_CORE_READ(sk, sk_protocol);
	k->port = __builtin_bswap16(BPF_CORE_READ(sk, __sk_common.skc_dport));
	if (family == AF_INET_) {
		__u32 a = BPF_CORE_READ(sk, __sk_common.skc_daddr);

		__builtin_memcpy(k->addr, &a, 4);
	} else {
		BPF_CORE_READ_INTO(&k->addr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
	}
	return true;
}

/* The peer of an unconnected socket (UDP sendto/recvfrom): the sockaddr
 * the caller passed, or the kernel filled in. uaddr: a struct sockaddr *,
 * or (indirect) a struct msghdr * whose msg_name is one. */
static __always_inline bool addr_peer(__u64 uaddr, bool indirect, struct peer_key *k)
{
	struct {
		__u16 family;
		__u16 port;
		__u32 v4;
	} sa = {};

	if (indirect && uaddr && bpf_probe_read_user(&uaddr, sizeof(uaddr), (void *)uaddr))
		return false;
	if (!uaddr || bpf_probe_read_user(&sa, sizeof(sa), (void *)uaddr))
		return false;
	if (sa.family != k->family || !sa.port)
		return false;
	k->port = __builtin_bswap16(sa.port);
	if (sa.family == AF_INET_)
		__builtin_memcpy(k->addr, &sa.v4, 4);
	else if (bpf_probe_read_user(k->addr, sizeof(k->addr), (void *)(uaddr + 8)))
		return false;
	return true;
}

/* n > 0: bytes moved in msgs messages; n < 0: a failed call (-errno) */
static __always_inline void peer_bytes(struct sock *sk, long n, bool out, __u64 now, __u64 msgs,
				       __u64 uaddr, bool indirect)
{
	struct peer_key k;
	struct peer_val *v, init = {};

	if (!sock_peer(sk, &k))
		return;
	if (!k.port && !addr_peer(uaddr, indirect, &k))
		return;
	v = bpf_map_lookup_elem(&peers, &k);
	if (!v) {
		init.first_ns = now;
		v = map_add(&peers, &k, &init, CNT_PEERS_FULL);
		if (!v)
			return;
	}
	v->last_ns = now;
	if (n < 0) {
		__sync_fetch_and_add(&v->errors, 1);
		v->err = -n;
	} else if (out) {
		__sync_fetch_and_add(&v->bytes_out, n);
		__sync_fetch_and_add(&v->sends, msgs);
	} else {
		__sync_fetch_and_add(&v->bytes_in, n);
		__sync_fetch_and_add(&v->recvs, msgs);
		if (n > 0)
			__sync_fetch_and_add(&dl_activity, n);
	}
}

/* An outbound TCP connection of the tree: what moved once it was established */
static __always_inline void conn_bytes(struct sock *sk, long n, bool out)
{
	__u64 key = (__u64)sk;
	struct conn_val *p = bpf_map_lookup_elem(&conns, &key);

	if (!p || !p->done || p->closed)
		return;
	if (out)
		__sync_fetch_and_add(&p->bytes_out, n);
	else
		__sync_fetch_and_add(&p->bytes_in, n);
}

/* A connection accepted on a listened port: count what moves, and sample
 * the process's fault counters at each write (the last one ends the request). */
static __always_inline void req_bytes(struct sock *sk, long n, bool out, __u64 now)
{
	__u64 key = (__u64)sk;
	struct req_state *r = bpf_map_lookup_elem(&reqs, &key);
	struct proc_stat *s;

	if (!r)
		return;
	if (!out) {
		__sync_fetch_and_add(&r->bytes_in, n);
		return;
	}
	__sync_fetch_and_add(&r->bytes_out, n);
	__sync_fetch_and_add(&r->writes, 1);
	r->last_out_ns = now;
	/* in the writer's syscall: its own faults counted up to now */
	flt_sync_current(bpf_get_current_pid_tgid() >> 32, now);
	s = bpf_map_lookup_elem(&procstat, &r->tgid);
	if (s) {
		r->faults1 = s->faults;
		r->maj1 = s->major_faults;
		r->mf1 = s->model_faults;
		r->mmaj1 = s->model_major_faults;
	}
}

/* Bytes moved through fd: regular files by inode, inet sockets by peer.
 * n < 0 (a failed call): socket errors go to the peer, write errors to the
 * file; EAGAIN and EINTR are not failures. msgs: messages moved (sockets);
 * uaddr/indirect: the address argument, for unconnected sockets. */
static __always_inline void fd_bytes_msg(long fd, long n, bool out, __u64 now, __u64 msgs,
					 __u64 uaddr, bool indirect)
{
	struct file *f;
	struct file_key k;
	struct file_val *v;
	__u32 mode;

	if (!n || n == -EAGAIN_ || n == -EINTR_)
		return;
	f = fd_file(fd);
	if (!f)
		return;
	file_id(f, &k, &mode);
	if ((mode & S_IFMT_) == S_IFSOCK_) {
		struct sock *sk = file_sock(f);

		if (sk) {
			peer_bytes(sk, n, out, now, msgs, uaddr, indirect);
			if (n > 0) {
				req_bytes(sk, n, out, now);
				conn_bytes(sk, n, out);
			}
		}
		return;
	}
	if ((mode & S_IFMT_) != S_IFREG_ || (n < 0 && !out))
		return;
	v = file_entry(f, &k, now);
	if (!v)
		return;
	if (n < 0) {
		/* ENOSPC, EDQUOT, EIO, EFBIG...: the write failed */
		__sync_fetch_and_add(&v->write_errors, 1);
		v->write_errno = -n;
		return;
	}
	v->last_ns = now;
	if (out) {
		__sync_fetch_and_add(&dl_activity, n);
		__sync_fetch_and_add(&v->bytes_written, n);
		__sync_fetch_and_add(&v->writes, 1);
		if (!v->first_write_ns)
			v->first_write_ns = now;
		v->last_write_ns = now;
	} else {
		__sync_fetch_and_add(&v->bytes_read, n);
		__sync_fetch_and_add(&v->reads, 1);
	}
}

/* sendmmsg/recvmmsg: ret messages; their lengths (msg_len, set by the
 * kernel) of the first MMSG_MAX are added up */
static __always_inline __u64 mmsg_bytes(long ret, __u64 vec)
{
	__u64 bytes = 0;

	for (int i = 0; i < MMSG_MAX; i++) {
		__u32 len = 0;

		if (i >= ret)
			break;
		/* struct mmsghdr: a struct msghdr (56 bytes), then unsigned int msg_len */
		bpf_probe_read_user(&len, sizeof(len), (void *)(vec + i * 64 + 56));
		bytes += len;
	}
	return bytes;
}

static __always_inline void fd_mmap(long fd, __u64 len, __u64 addr, __u32 tgid, __u64 now)
{
	struct file *f = fd_file(fd);
	struct file_key k;
	struct file_val *v;
	__u32 mode;

	if (!f)
		return;
	file_id(f, &k, &mode);
	if ((mode & S_IFMT_) != S_IFREG_)
		return;
	v = file_entry(f, &k, now);
	if (!v)
		return;
	v->last_ns = now;
	__sync_fetch_and_add(&v->mmaps, 1);
	__sync_fetch_and_add(&v->mmap_bytes, len);
	if (v->model) {
		struct model_ranges *r = bpf_map_lookup_elem(&mranges, &tgid);
		__u32 slot;

		if (!r) {
			/* too large for the stack: a zeroed global is the template */
			r = map_add(&mranges, &tgid, &zero_ranges, CNT_MAX);
			if (!r)
				return;
		}
		slot = r->n % MODEL_RANGES;
		r->start[slot] = addr;
		r->end[slot] = addr + len;
		r->key[slot] = k;
		r->n++;
		if (!model_mapped)
			model_mapped = 1;
	}
}

/* The directory a relative path is relative to: the dirfd's, or the cwd. */
static __always_inline void path_base(const char *path, long dirfd, __u64 *dev, __u64 *ino)
{
	struct inode *i;

	*dev = *ino = 0;
	if (path[0] == '/')
		return;
	if ((int)dirfd == AT_FDCWD_) {
		struct task_struct *task = (struct task_struct *)bpf_get_current_task();

		i = BPF_CORE_READ(task, fs, pwd.dentry, d_inode);
	} else {
		struct file *f = fd_file((int)dirfd);

		if (!f)
			return;
		i = BPF_CORE_READ(f, f_inode);
	}
	if (!i)
		return;
	*dev = BPF_CORE_READ(i, i_sb, s_dev);
	*ino = BPF_CORE_READ(i, i_ino);
}

/* One path operation (open or a stat-like probe) folded into the paths map. */
static __always_inline void path_op(const char *upath, long dirfd, long ret, bool is_open,
				    __u32 oflags, __u32 tgid, __u64 now)
{
	__u32 zero = 0;
	struct path_key *k = bpf_map_lookup_elem(&scratch, &zero);
	struct path_val *v, init = {};

	if (!k)
		return;
	/* the key is hashed over all its bytes: clear what a shorter path leaves */
	__builtin_memset(k, 0, sizeof(*k));
	if (bpf_probe_read_user_str(k->path, sizeof(k->path), upath) <= 1)
		return;
	path_base(k->path, dirfd, &k->base_dev, &k->base_ino);
	v = bpf_map_lookup_elem(&paths, k);
	if (!v) {
		init.first_ns = now;
		init.first_pid = tgid;
		v = map_add(&paths, k, &init, CNT_PATHS_FULL);
		if (!v)
			return;
	}
	v->last_ns = now;
	if (ret < 0) {
		if (!v->fail_first_ns)
			v->fail_first_ns = now;
		v->fail_last_ns = now;
		if (is_open) {
			__sync_fetch_and_add(&v->open_fails, 1);
			v->open_errno = -ret;
		} else {
			__sync_fetch_and_add(&v->probe_fails, 1);
			v->probe_errno = -ret;
		}
		return;
	}
	if (is_open) {
		struct file *f = fd_file(ret);

		__sync_fetch_and_add(&v->opens, 1);
		v->open_flags |= oflags & (03 | 0100 | 01000); /* O_ACCMODE|O_CREAT|O_TRUNC */
		if (f) {
			struct file_key fk;
			__u32 mode;

			file_id(f, &fk, &mode);
			v->dev = fk.dev;
			v->ino = fk.ino;
		}
	}
}

/* A failed mkdir/unlink/rmdir, folded per operation and path. */
static __always_inline void failop(__u32 op, const char *upath, long dirfd, long ret, __u32 tgid,
				   __u64 now)
{
	__u32 zero = 0;
	struct failop_key *k = bpf_map_lookup_elem(&fscratch, &zero);
	struct failop_val *v, init = {};

	if (!k)
		return;
	__builtin_memset(k, 0, sizeof(*k));
	k->op = op;
	if (bpf_probe_read_user_str(k->p.path, sizeof(k->p.path), upath) <= 1)
		return;
	path_base(k->p.path, dirfd, &k->p.base_dev, &k->p.base_ino);
	v = bpf_map_lookup_elem(&failops, k);
	if (!v) {
		init.first_ns = now;
		init.pid = tgid;
		v = map_add(&failops, k, &init, CNT_FAILOPS_FULL);
		if (!v)
			return;
	}
	v->last_ns = now;
	v->err = -ret;
	__sync_fetch_and_add(&v->count, 1);
}

/* flock / fcntl record lock: a0 fd, a1 op or cmd, a2 blocking */
static __always_inline void on_lock(struct inflight *in, long ret, __u32 tgid, __u64 now)
{
	struct file *f = fd_file(in->a0);
	struct lock_val *v, init = {};
	struct file_key k;
	__u32 mode;

	if (!f)
		return;
	file_id(f, &k, &mode);
	v = bpf_map_lookup_elem(&locks, &k);
	if (!v) {
		init.first_ns = in->ts;
		init.pid = tgid;
		bpf_probe_read_kernel_str(init.name, sizeof(init.name),
					  BPF_CORE_READ(f, f_path.dentry, d_name.name));
		v = map_add(&locks, &k, &init, CNT_LOCKS_FULL);
		if (!v)
			return;
	}
	__sync_fetch_and_add(&v->calls, 1);
	v->last_ns = now;
	if (in->a2) {
		__u64 d = now - in->ts;

		__sync_fetch_and_add(&v->blocking, 1);
		__sync_fetch_and_add(&v->wait_ns, d);
		if (d > v->max_wait_ns)
			v->max_wait_ns = d;
	}
	if (ret < 0) {
		__sync_fetch_and_add(&v->failures, 1);
		v->err = -ret;
		if (!v->first_fail_ns)
			v->first_fail_ns = in->ts;
	} else {
		v->acquired_ns = now;
	}
}

/* ---- syscalls ---- */

/* The syscall number of the call whose registers these are: at sys_exit the
 * kernel still holds the number and the arguments as the caller passed
 * them (only the return register changed), so most calls are handled at
 * exit alone, without an inflight entry per call. */
#if defined(__TARGET_ARCH_x86)
#define SYSCALL_NR(regs) BPF_CORE_READ((struct pt_regs *)(regs), orig_ax)
#elif defined(__TARGET_ARCH_arm64)
#define SYSCALL_NR(regs) BPF_CORE_READ((struct pt_regs *)(regs), syscallno)
#else
#error "SYSCALL_NR: add this architecture's syscall number register"
#endif

#define P1(r) PT_REGS_PARM1_CORE_SYSCALL(r)
#define P2(r) PT_REGS_PARM2_CORE_SYSCALL(r)
#define P3(r) PT_REGS_PARM3_CORE_SYSCALL(r)
#define P4(r) PT_REGS_PARM4_CORE_SYSCALL(r)
#define P5(r) PT_REGS_PARM5_CORE_SYSCALL(r)

static __always_inline bool set_args(struct inflight *in, __u64 a0, __u64 a1, __u64 a2, __u64 a3)
{
	in->a0 = a0;
	in->a1 = a1;
	in->a2 = a2;
	in->a3 = a3;
	return true;
}

static __always_inline bool is_mlock(long id)
{
	return id == __NR_mlock || id == __NR_mlock2 || id == __NR_mlockall;
}

/* Calls whose record needs the time they started (a duration: connect,
 * lock waits, mlock, rename/symlink) or their arguments as they were at
 * entry: saved in inflight at sys_enter. Everything else is read from the
 * registers at sys_exit. */
static __always_inline bool entry_args(long id, struct pt_regs *regs, struct inflight *in)
{
	switch (id) {
		/* two paths: a0 old, a1 new, a2 old dirfd, a3 new dirfd */
#ifdef __NR_rename
	case __NR_rename:
	case __NR_symlink:
		return set_args(in, P1(regs), P2(regs), (__u64)AT_FDCWD_, (__u64)AT_FDCWD_);
#endif
	case __NR_renameat:
	case __NR_renameat2:
		return set_args(in, P2(regs), P4(regs), P1(regs), P3(regs));
	case __NR_symlinkat:
		/* the target is link content, relative to the link's directory */
		return set_args(in, P1(regs), P3(regs), (__u64)AT_FDCWD_, P2(regs));
	/* locks: a0 fd, a1 op/cmd, a2 blocking */
	case __NR_flock: {
		__u64 op = P2(regs);

		if (!(op & (LOCK_SH_ | LOCK_EX_)))
			return false;
		return set_args(in, P1(regs), op, !(op & LOCK_NB_), 0);
	}
	case __NR_fcntl: {
		__u64 cmd = P2(regs);
		short type = F_UNLCK_;

		if (cmd != F_SETLK_ && cmd != F_SETLKW_ && cmd != F_OFD_SETLK_ &&
		    cmd != F_OFD_SETLKW_)
			return false;
		/* struct flock starts with l_type */
		bpf_probe_read_user(&type, sizeof(type), (void *)P3(regs));
		if (type == F_UNLCK_)
			return false;
		return set_args(in, P1(regs), cmd, cmd == F_SETLKW_ || cmd == F_OFD_SETLKW_, 0);
	}
	case __NR_connect:
		return set_args(in, P1(regs), P2(regs), P3(regs), 0);
	case __NR_mlockall:
		return set_args(in, P1(regs), 0, 0, 0);
	case __NR_mlock:
		return set_args(in, P1(regs), P2(regs), 0, 0);
	case __NR_mlock2:
		return set_args(in, P1(regs), P2(regs), P3(regs), 0);
	}
	return false;
}

/* entry_args' calls: sys_exit looks for a saved entry only for these */
static __always_inline bool entry_call(long id)
{
	switch (id) {
#ifdef __NR_rename
	case __NR_rename:
	case __NR_symlink:
#endif
	case __NR_renameat:
	case __NR_renameat2:
	case __NR_symlinkat:
	case __NR_flock:
	case __NR_fcntl:
	case __NR_connect:
	case __NR_mlockall:
	case __NR_mlock:
	case __NR_mlock2:
		return true;
	}
	return false;
}

/* The other calls followed, from the registers at exit (the same argument
 * layout in struct inflight). ret lets the cheap rejections go first: a
 * successful stat is not recorded, nor is an anonymous mapping. */
static __always_inline bool exit_args(long id, long ret, struct pt_regs *regs, struct inflight *in)
{
	switch (id) {
		/* paths: a0 path, a1 flags, a2 dirfd */
#ifdef __NR_open
	case __NR_open:
		return set_args(in, P1(regs), P2(regs), (__u64)AT_FDCWD_, 0);
#endif
	case __NR_openat:
	case __NR_openat2:
		/* openat2: a1 is struct open_how *, its flags read by the caller */
		return set_args(in, P2(regs), P3(regs), P1(regs), 0);
#ifdef __NR_stat
	case __NR_stat:
	case __NR_lstat:
	case __NR_access:
	case __NR_readlink:
		/* only failures matter: a missing path probed again and again */
		return ret < 0 && set_args(in, P1(regs), 0, (__u64)AT_FDCWD_, 0);
#endif
	case __NR_newfstatat:
	case __NR_statx:
	case __NR_faccessat:
	case __NR_faccessat2:
	case __NR_readlinkat:
		return ret < 0 && set_args(in, P2(regs), 0, P1(regs), 0);
	case __NR_chdir:
		return ret >= 0 && set_args(in, P1(regs), 0, (__u64)AT_FDCWD_, 0);
		/* failed directory operations: a0 path, a1 flags, a2 dirfd */
#ifdef __NR_mkdir
	case __NR_mkdir:
	case __NR_rmdir:
	case __NR_unlink:
		return ret < 0 && set_args(in, P1(regs), 0, (__u64)AT_FDCWD_, 0);
#endif
	case __NR_mkdirat:
	case __NR_unlinkat:
		return ret < 0 && set_args(in, P2(regs), P3(regs), P1(regs), 0);
	/* datagrams: a1 the address (sendto, recvfrom), the msghdr (sendmsg,
	 * recvmsg) or the mmsghdr vector (sendmmsg, recvmmsg) */
	case __NR_sendto:
	case __NR_recvfrom:
		return set_args(in, P1(regs), P5(regs), 0, 0);
	case __NR_sendmsg:
	case __NR_recvmsg:
	case __NR_sendmmsg:
	case __NR_recvmmsg:
		return set_args(in, P1(regs), P2(regs), 0, 0);
	case __NR_fchdir:
	case __NR_accept:
	case __NR_accept4:
	case __NR_listen:
		return ret >= 0 && set_args(in, P1(regs), 0, 0, 0);
	case __NR_read:
	case __NR_pread64:
	case __NR_readv:
	case __NR_preadv:
	case __NR_preadv2:
	case __NR_write:
	case __NR_pwrite64:
	case __NR_writev:
	case __NR_pwritev:
	case __NR_pwritev2:
		return set_args(in, P1(regs), 0, 0, 0);
	case __NR_mmap: {
		long fd = P5(regs);

		if (fd < 0 || (P4(regs) & MAP_ANONYMOUS_))
			return false;
		return set_args(in, fd, P2(regs), 0, 0);
	}
	}
	return false;
}

SEC("raw_tp/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	__u32 tgid, tid;
	struct inflight in = {};

	/* after the requests window only mlock calls are still wanted */
	if (light && !is_mlock(id))
		return 0;
	if (!entry_args(id, regs, &in) || !traced_now(&tgid))
		return 0;
	tid = (__u32)bpf_get_current_pid_tgid();
	in.ts = bpf_ktime_get_ns();
	in.nr = id;
	bpf_map_update_elem(&inflight, &tid, &in, BPF_ANY);
	return 0;
}

/* The outcome of a TCP handshake that connect(2) did not wait for. */
static __always_inline void conn_done(struct conn_val *p, const struct sock *sk)
{
	struct tl_event *e = ring_reserve(sizeof(*e));
	struct peer_key pk;

	if (!e)
		return;
	__builtin_memset(e, 0, sizeof(*e));
	e->type = EV_CONNECT_DONE;
	e->ts_ns = p->ts;
	e->dur_ns = p->done_ns - p->ts;
	e->pid = p->tgid;
	e->tid = p->tid;
	e->ret = p->ret;
	e->flags = p->closed ? CONN_CLOSED : 0;
	e->arg2 = (__u64)sk;
	if (sock_peer((struct sock *)sk, &pk)) {
		/* the peer moves to arg/aux; the family is in flags' upper half */
		e->flags |= (__u32)pk.family << 16;
		e->arg = pk.port;
		__builtin_memcpy(e->aux, pk.addr, sizeof(pk.addr));
	}
	ev_submit_urgent(e);
}

static __always_inline void on_connect(struct inflight *in, long ret, __u32 tgid, __u64 now)
{
	struct conn_val *p = NULL;
	struct sock *sk = NULL;
	struct tl_event *e;
	struct file *f;
	__u64 len = in->a2, key = 0;

	/* A TCP handshake is followed from SYN_SENT (inet_sock_set_state). It
	 * may end before connect(2) returns, even a non-blocking one (loopback:
	 * the SYN-ACK or RST is processed at release_sock) */
	f = fd_file(in->a0);
	if (f && (BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT_) == S_IFSOCK_)
		sk = file_sock(f);
	key = (__u64)sk;
	if (sk)
		p = bpf_map_lookup_elem(&conns, &key);
	e = ev_reserve(EV_CONNECT, tgid);
	if (e) {
		e->ts_ns = in->ts;
		e->dur_ns = now - in->ts;
		e->ret = ret;
		e->arg = len;
		e->arg2 = key;
		/* the outcome follows in an EV_CONNECT_DONE */
		e->flags = p && ret < 0 ? 1 : 0;
		/* the whole buffer covers sockaddr_un; near the end of a page only
		 * the inet part may be readable */
		if (bpf_probe_read_user(e->aux, sizeof(e->aux), (void *)in->a1))
			bpf_probe_read_user(e->aux, 28, (void *)in->a1);
		ev_submit_lazy(e);
	}
	if (!p)
		return;
	if (ret == 0)
		return; /* established: followed until it ends (EV_CONN_END) */
	p->async = 1;
	if (!p->done)
		return; /* inet_sock_set_state reports the outcome */
	conn_done(p, sk);
	if (p->closed)
		bpf_map_delete_elem(&conns, &key);
}

static __always_inline void on_listen(struct inflight *in, long ret, __u32 tgid)
{
	struct file *f = fd_file(in->a0);
	struct tl_event *e;
	struct sock *sk;
	__u16 family;

	if (ret < 0 || !f)
		return;
	if ((BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT_) != S_IFSOCK_)
		return;
	sk = file_sock(f);
	if (!sk)
		return;
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family != AF_INET_ && family != AF_INET6_)
		return;
	{
		__u16 port = BPF_CORE_READ(sk, __sk_common.skc_num);
		__u8 one = 1;

		bpf_map_update_elem(&listen_ports, &port, &one, BPF_ANY);
		/* the launcher's ready mark: faults after it are request-time */
		if (!ready_ns && (!targ_ready_port || port == targ_ready_port))
			ready_ns = bpf_ktime_get_ns();
	}
	e = ev_reserve(EV_LISTEN, tgid);
	if (!e)
		return;
	e->arg = BPF_CORE_READ(sk, __sk_common.skc_num);
	e->arg2 = family;
	e->ret = ret;
	ev_submit_urgent(e);
}

static __always_inline void on_mlock(struct inflight *in, long ret, __u32 tgid, __u64 now)
{
	struct tl_event *e = ev_reserve(EV_MLOCK, tgid);

	if (!e)
		return;
	e->ts_ns = in->ts;
	e->dur_ns = now - in->ts;
	e->ret = ret;
	if (in->nr == __NR_mlockall) {
		e->arg2 = MLOCK_CALL_MLOCKALL;
		e->flags = in->a0;
	} else {
		e->arg2 = in->nr == __NR_mlock ? MLOCK_CALL_MLOCK : MLOCK_CALL_MLOCK2;
		e->arg = in->a1;
		e->flags = in->a2;
	}
	ev_submit_urgent(e);
}

/* chdir/fchdir: the new cwd's inode, so relative paths can be resolved */
static __always_inline void on_chdir(struct inflight *in, long ret, __u32 tgid)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct inode *i = BPF_CORE_READ(task, fs, pwd.dentry, d_inode);
	struct tl_event *e;

	if (ret < 0 || !i)
		return;
	e = ev_reserve(EV_CHDIR, tgid);
	if (!e)
		return;
	e->arg = BPF_CORE_READ(i, i_sb, s_dev);
	e->arg2 = BPF_CORE_READ(i, i_ino);
	if (in->nr != __NR_fchdir)
		bpf_probe_read_user_str(e->str, sizeof(e->str), (void *)in->a0);
	/* the launcher reads the new cwd from /proc while it lasts */
	ev_submit_urgent(e);
}

/* rename/symlink: both paths, with the directories relative ones start from */
static __always_inline void on_path2(struct inflight *in, long ret, __u32 tgid, __u64 now)
{
	struct tl_path2_event *e = ring_reserve(sizeof(*e));
	bool link = in->nr == __NR_symlinkat;

#ifdef __NR_symlink
	link |= in->nr == __NR_symlink;
#endif
	if (!e)
		return;
	e->ts_ns = in->ts;
	e->dur_ns = now - in->ts;
	e->type = link ? EV_SYMLINK : EV_RENAME;
	e->pid = tgid;
	e->ret = ret;
	e->pad = 0;
	e->old[0] = e->new[0] = 0;
	bpf_probe_read_user_str(e->old, sizeof(e->old), (void *)in->a0);
	bpf_probe_read_user_str(e->new, sizeof(e->new), (void *)in->a1);
	if (link)
		e->old_dev = e->old_ino = 0;
	else
		path_base(e->old, in->a2, &e->old_dev, &e->old_ino);
	path_base(e->new, in->a3, &e->new_dev, &e->new_ino);
	ev_submit_lazy(e);
}

/* accept(2) returned a connection on a port the tree listens on: a request */
static __always_inline void on_accept(long fd, __u32 tgid, __u64 now)
{
	struct file *f = fd_file(fd);
	struct req_state r = {};
	struct proc_stat *s;
	struct sock *sk;
	__u16 port;
	__u64 key;

	if (!f || (BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT_) != S_IFSOCK_)
		return;
	sk = file_sock(f);
	if (!sk)
		return;
	port = BPF_CORE_READ(sk, __sk_common.skc_num);
	if (!bpf_map_lookup_elem(&listen_ports, &port))
		return;
	r.start_ns = now;
	r.tgid = tgid;
	r.tid = (__u32)bpf_get_current_pid_tgid();
	r.port = port;
	flt_sync_current(tgid, now);
	s = bpf_map_lookup_elem(&procstat, &tgid);
	if (s) {
		r.faults0 = r.faults1 = s->faults;
		r.maj0 = r.maj1 = s->major_faults;
		r.mf0 = r.mf1 = s->model_faults;
		r.mmaj0 = r.mmaj1 = s->model_major_faults;
	}
	key = (__u64)sk;
	bpf_map_update_elem(&reqs, &key, &r, BPF_ANY);
}

/* One followed syscall at its exit: what the handlers below need. */
struct sys_call {
	struct inflight in; /* nr, arguments; ts: entry time when saved at sys_enter */
	__s64 ret;
	__u64 now;
	__u32 tgid;
	__u32 pad;
};

/* The handlers are global functions: the verifier checks each once, not
 * once per call site inlined into sys_exit (that took ~30 ms of every
 * start). c is never NULL; the checks are for the verifier. */
#define SYS_HANDLER(name) __attribute__((noinline)) int name(struct sys_call *c)

SYS_HANDLER(sx_path)
{
	bool is_open;
	__u64 fl = 0;

	if (!c)
		return 0;
	/* the others are failed probes: a missing path tried again and again */
	is_open = c->in.nr == __NR_openat || c->in.nr == __NR_openat2;
#ifdef __NR_open
	is_open |= c->in.nr == __NR_open;
#endif
	if (c->in.nr == __NR_openat2)
		bpf_probe_read_user(&fl, sizeof(fl), (void *)c->in.a1); /* open_how.flags */
	else if (is_open)
		fl = c->in.a1;
	path_op((const char *)c->in.a0, c->in.a2, c->ret, is_open, fl, c->tgid, c->now);
	return 0;
}

SYS_HANDLER(sx_dirop)
{
	bool dir;

	if (!c)
		return 0;
	switch (c->in.nr) {
#ifdef __NR_mkdir
	case __NR_mkdir:
#endif
	case __NR_mkdirat:
		if (c->ret != -EEXIST_)
			failop(FOP_MKDIR, (const char *)c->in.a0, c->in.a2, c->ret, c->tgid,
			       c->now);
		return 0;
	}
	if (c->ret == -ENOENT_)
		return 0;
	dir = c->in.nr == __NR_unlinkat ? (c->in.a1 & AT_REMOVEDIR_) != 0 : false;
#ifdef __NR_rmdir
	dir |= c->in.nr == __NR_rmdir;
#endif
	failop(dir ? FOP_RMDIR : FOP_UNLINK, (const char *)c->in.a0, c->in.a2, c->ret, c->tgid,
	       c->now);
	return 0;
}

SYS_HANDLER(sx_bytes)
{
	__u64 msgs = 1, uaddr = 0;
	bool out = false, indirect = false;
	long nr, n;

	if (!c)
		return 0;
	nr = c->in.nr;
	n = c->ret;
	switch (nr) {
	case __NR_sendto:
		out = true;
		/* fallthrough */
	case __NR_recvfrom:
		uaddr = c->in.a1;
		break;
	case __NR_sendmsg:
		out = true;
		/* fallthrough */
	case __NR_recvmsg:
		uaddr = c->in.a1;
		indirect = true;
		break;
	case __NR_sendmmsg:
		out = true;
		/* fallthrough */
	case __NR_recvmmsg:
		if (n > 0) {
			msgs = n;
			n = mmsg_bytes(n, c->in.a1);
			uaddr = c->in.a1;
			indirect = true;
		} else {
			msgs = 0;
		}
		break;
	case __NR_write:
	case __NR_pwrite64:
	case __NR_writev:
	case __NR_pwritev:
	case __NR_pwritev2:
		out = true;
		break;
	}
	fd_bytes_msg(c->in.a0, n, out, c->now, msgs, uaddr, indirect);
	return 0;
}

SYS_HANDLER(sx_mmap)
{
	if (c && (c->ret >= 0 || c->ret < -4095))
		fd_mmap(c->in.a0, c->in.a1, (__u64)c->ret, c->tgid, c->now);
	return 0;
}

/* the rest: connections, the cwd, locks, mlock, rename/symlink */
SYS_HANDLER(sx_other)
{
	if (!c)
		return 0;
	switch (c->in.nr) {
	case __NR_accept:
	case __NR_accept4:
		on_accept(c->ret, c->tgid, c->now);
		break;
	case __NR_connect:
		on_connect(&c->in, c->ret, c->tgid, c->now);
		break;
	case __NR_listen:
		on_listen(&c->in, c->ret, c->tgid);
		break;
	case __NR_chdir:
	case __NR_fchdir:
		on_chdir(&c->in, c->ret, c->tgid);
		break;
	case __NR_flock:
	case __NR_fcntl:
		on_lock(&c->in, c->ret, c->tgid, c->now);
		break;
	case __NR_mlock:
	case __NR_mlock2:
	case __NR_mlockall:
		on_mlock(&c->in, c->ret, c->tgid, c->now);
		break;
	default:
		/* rename, symlink */
		on_path2(&c->in, c->ret, c->tgid, c->now);
	}
	return 0;
}

SEC("raw_tp/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	long id = SYSCALL_NR(regs);
	struct sys_call c = {};
	struct inflight *in;
	bool saved = false;

	/* After the requests window (light) only the calls saved at entry are
	 * finished: mlock, and those that began before (their entries must go). */
	if (!light && exit_args(id, ret, regs, &c.in)) {
		if (!traced_now(&c.tgid))
			return 0;
		c.in.nr = id;
	} else if (entry_call(id)) {
		/* saved at sys_enter when traced */
		in = bpf_map_lookup_elem(&inflight, &tid);
		if (!in)
			return 0;
		c.in = *in;
		c.tgid = bpf_get_current_pid_tgid() >> 32;
		saved = true;
	} else {
		return 0;
	}
	c.ret = ret;
	c.now = bpf_ktime_get_ns();
	switch (id) {
#ifdef __NR_open
	case __NR_open:
	case __NR_stat:
	case __NR_lstat:
	case __NR_access:
	case __NR_readlink:
#endif
	case __NR_openat:
	case __NR_openat2:
	case __NR_newfstatat:
	case __NR_statx:
	case __NR_faccessat:
	case __NR_faccessat2:
	case __NR_readlinkat:
		sx_path(&c);
		break;
#ifdef __NR_mkdir
	case __NR_mkdir:
	case __NR_unlink:
	case __NR_rmdir:
#endif
	case __NR_mkdirat:
	case __NR_unlinkat:
		sx_dirop(&c);
		break;
	case __NR_read:
	case __NR_pread64:
	case __NR_readv:
	case __NR_preadv:
	case __NR_preadv2:
	case __NR_write:
	case __NR_pwrite64:
	case __NR_writev:
	case __NR_pwritev:
	case __NR_pwritev2:
	case __NR_recvfrom:
	case __NR_sendto:
	case __NR_recvmsg:
	case __NR_sendmsg:
	case __NR_recvmmsg:
	case __NR_sendmmsg:
		sx_bytes(&c);
		break;
	case __NR_mmap:
		sx_mmap(&c);
		break;
	default:
		sx_other(&c);
	}
	if (saved)
		bpf_map_delete_elem(&inflight, &tid);
	return 0;
}

/* ---- process tree ---- */

SEC("raw_tp/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 pid = BPF_CORE_READ(child, pid);
	__u32 *flags = bpf_map_lookup_elem(&procs, &ptgid);
	struct tl_event *e;
	__u32 f;

	/* threads share their process's entry */
	if (!flags || pid != BPF_CORE_READ(child, tgid))
		return 0;
	f = *flags;
	if (bpf_map_update_elem(&procs, &pid, &f, BPF_ANY)) {
		count(CNT_PROCS_FULL, 1);
		return 0;
	}
	/* the fault probes count only processes with an entry here; one left
	 * by an exited process whose pid came back is started afresh */
	{
		struct proc_stat init = {}, *old = bpf_map_lookup_elem(&procstat, &pid);

		if (old && old->exited)
			bpf_map_update_elem(&procstat, &pid, &init, BPF_EXIST);
		else if (!old)
			bpf_map_update_elem(&procstat, &pid, &init, BPF_NOEXIST);
	}
	if (!(f & PROC_EXECED))
		return 0;
	e = ev_reserve(EV_FORK, pid);
	if (!e)
		return 0;
	e->tid = pid;
	e->ppid = ptgid;
	ev_submit_lazy(e);
	return 0;
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(sched_process_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	__u32 *flags = bpf_map_lookup_elem(&procs, &tgid);
	struct tl_event *e;
	__u64 start, end, len;

	if (!flags)
		return 0;
	*flags |= PROC_EXECED;
	e = ev_reserve(EV_EXEC, tgid);
	if (!e)
		return 0;
	e->ppid = BPF_CORE_READ(p, real_parent, tgid);
	bpf_probe_read_kernel_str(e->str, sizeof(e->str), BPF_CORE_READ(bprm, filename));
	/* the new image's argv, NUL-separated; current is p */
	start = BPF_CORE_READ(p, mm, arg_start);
	end = BPF_CORE_READ(p, mm, arg_end);
	len = end > start ? end - start : 0;
	if (len > sizeof(e->aux) - 1)
		len = sizeof(e->aux) - 1;
	e->arg = len;
	bpf_probe_read_user(e->aux, len & (sizeof(e->aux) - 1), (void *)start);
	e->aux[len & (sizeof(e->aux) - 1)] = 0;
	ev_submit_urgent(e);
	return 0;
}

static __always_inline void thread_exit(struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	__u32 *flags = bpf_map_lookup_elem(&procs, &tgid);
	struct proc_stat *s = bpf_map_lookup_elem(&procstat, &tgid), init = {};
	__u64 key = (__u64)p, start = BPF_CORE_READ(p, group_leader, start_time);
	struct tl_event *e;
	bool last;

	/* do_exit() drops signal->live before this tracepoint: zero means the
	 * last thread is leaving; read after the procs lookup, so a thread that
	 * found its process gone from procs reads zero. (6.x passes group_dead
	 * as a second argument, but a raw_tp reading past the arguments a
	 * kernel has fails to attach.) */
	last = BPF_CORE_READ(p, signal, live.counter) == 0;
	/* A thread of the tree; or of a process of the tree that has just
	 * gone: live is 0 for every thread that reaches here after the last
	 * decrement, so several can take themselves for the last, and the
	 * first of them has marked the process exited and dropped it from
	 * procs. Each counts its faults into its process either way; the start
	 * time tells that process from a later one given the same pid. */
	if (!flags && !(s && s->exited && last && s->start_ns == start))
		return;
	if (!s)
		s = map_add(&procstat, &tgid, &init, CNT_MAX);
	flt_count(key, tgid, 0, true);
	bpf_map_delete_elem(&fltseen, &key);
	if (s) {
		__sync_fetch_and_add(&s->exited_min_flt, BPF_CORE_READ(p, min_flt));
		__sync_fetch_and_add(&s->exited_maj_flt, BPF_CORE_READ(p, maj_flt));
		if (flags)
			s->start_ns = start;
	}
	if (!flags || !last)
		return;
	if (s)
		s->exited = 1;
	/* one exit per process, also when two threads get here at once; a
	 * reused pid must not be traced */
	if (bpf_map_delete_elem(&procs, &tgid))
		return;
	bpf_map_delete_elem(&mranges, &tgid);
	e = ev_reserve(EV_EXIT, tgid);
	if (e) {
		e->ret = BPF_CORE_READ(p, exit_code);
		e->ppid = BPF_CORE_READ(p, real_parent, tgid);
		ev_submit_urgent(e);
	}
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *p)
{
	thread_exit(p);
	return 0;
}

/* ---- memory ---- */

struct fault_ctx {
	__u32 major; /* from the major-fault perf event */
	__u32 model; /* out: the mapping is of a model-named file */
};

/* Count a fault at addr against the model file mapped there, if any. */
static __always_inline void fault_model(__u32 tgid, __u64 addr, struct fault_ctx *fc)
{
	struct model_ranges *r = bpf_map_lookup_elem(&mranges, &tgid);
	struct file_val *v = NULL;
	__u64 now;

	if (!r)
		return;
	for (int i = 0; i < MODEL_RANGES; i++) {
		if (i < r->n && addr >= r->start[i] && addr < r->end[i]) {
			v = bpf_map_lookup_elem(&files, &r->key[i]);
			break;
		}
	}
	if (!v || !v->model)
		return;
	fc->model = 1;
	if (fc->major) {
		__sync_fetch_and_add(&v->major_faults, 1);
		return;
	}
	now = bpf_ktime_get_ns();
	__sync_fetch_and_add(&v->faults, 1);
	if (!v->first_fault_ns)
		v->first_fault_ns = now;
	v->last_fault_ns = now;
	if (ready_ns && now >= ready_ns)
		__sync_fetch_and_add(&v->faults_after_ready, 1);
}

SEC("raw_tp/page_fault_user")
int BPF_PROG(page_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct fault_ctx fc = {};
	struct proc_stat *s;

	/* faults are counted from the threads' counters (flt_count): a fault
	 * matters here only when it falls in a mapping of a model file */
	if (!model_mapped)
		return 0;
	fault_model(tgid, address, &fc);
	if (fc.model && (s = fault_proc(tgid)))
		__sync_fetch_and_add(&s->model_faults, 1);
	return 0;
}

/* The fault-rate tick: a software task-clock perf event on the tree
 * (inherited; per-CPU cpu-clock where it cannot be), every 20 ms, user mode
 * only (exclude_kernel: the kernel skips samples that interrupt kernel
 * code, where a program of the thread could be half-way through its
 * entry); the traced thread it interrupts has its faults counted now, so a
 * thread that runs without leaving the CPU is in the series too. */
SEC("perf_event")
int fault_tick(struct bpf_perf_event_data *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (!bpf_map_lookup_elem(&procs, &tgid))
		return 0;
	flt_sync_current(tgid, 0);
	return 0;
}

/* Major faults: the software perf event PAGE_FAULTS_MAJ, one per CPU with
 * sample_period 1, runs this in the faulting task after the fault was
 * accounted (mm_account_fault); page_fault_user cannot tell major from minor. */
SEC("perf_event")
int major_fault(struct bpf_perf_event_data *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct proc_stat *s = fault_proc(tgid);
	struct fault_ctx fc = {.major = 1};

	if (!s)
		return 0;
	__sync_fetch_and_add(&s->major_faults, 1);
	/* the sample's address is the faulting one (perf_sw_event(..., addr)) */
	if (model_mapped)
		fault_model(tgid, ctx->addr, &fc);
	if (fc.model)
		__sync_fetch_and_add(&s->model_major_faults, 1);
	return 0;
}

/* ---- scheduling ---- */

SEC("raw_tp/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u32 ptgid = BPF_CORE_READ(prev, tgid);
	__u32 ntgid = BPF_CORE_READ(next, tgid);
	/* a thread of the tree leaving the CPU; not an exiting one: its faults
	 * were counted at its exit (thread_exit), and it will not come back on
	 * a CPU to end an off-CPU span */
	bool leaving =
	    bpf_map_lookup_elem(&procs, &ptgid) && !(BPF_CORE_READ(prev, flags) & PF_EXITING_);
	__u64 now = 0;

	/* after the requests window: the faults of a thread leaving, no off-CPU time */
	if (light) {
		if (leaving)
			flt_sync(prev, ptgid, 0);
		return 0;
	}
	if (leaving) {
		__u32 tid = BPF_CORE_READ(prev, pid);
		struct offcpu o = {};

		now = bpf_ktime_get_ns();
		o.ts = now;
		o.tgid = ptgid;
		if (preempt || prev_state == TASK_RUNNING_)
			o.reason = 0;
		else if (prev_state & TASK_UNINTERRUPTIBLE_)
			o.reason = 1;
		else
			o.reason = 2;
		bpf_map_update_elem(&offcpu, &tid, &o, BPF_ANY);
		flt_sync(prev, ptgid, now);
	}
	if (bpf_map_lookup_elem(&procs, &ntgid)) {
		__u32 tid = BPF_CORE_READ(next, pid);
		struct offcpu *o = bpf_map_lookup_elem(&offcpu, &tid);
		struct proc_stat *s, init = {};
		__u64 d;

		if (!o)
			return 0;
		if (!now)
			now = bpf_ktime_get_ns();
		d = now - o->ts;
		s = bpf_map_lookup_elem(&procstat, &ntgid);
		if (!s)
			s = map_add(&procstat, &ntgid, &init, CNT_MAX);
		if (s) {
			if (o->reason == 1)
				__sync_fetch_and_add(&s->io_wait_ns, d);
			else if (o->reason == 2)
				__sync_fetch_and_add(&s->sleep_ns, d);
			else
				__sync_fetch_and_add(&s->runq_ns, d);
			__sync_fetch_and_add(&s->switches, 1);
		}
		bpf_map_delete_elem(&offcpu, &tid);
	}
	return 0;
}

/* ---- block I/O: requests issued from the traced tree ---- */

SEC("raw_tp/block_rq_issue")
int BPF_PROG(block_rq_issue, struct request *rq)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 key = (__u64)rq, now;

	if (!bpf_map_lookup_elem(&procs, &tgid))
		return 0;
	now = bpf_ktime_get_ns();
	bpf_map_update_elem(&blockstart, &key, &now, BPF_ANY);
	return 0;
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(block_rq_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq;
	__u64 *start = bpf_map_lookup_elem(&blockstart, &key);
	__u64 us, *slot;
	__u32 i = 0;

	if (!start)
		return 0;
	us = (bpf_ktime_get_ns() - *start) / 1000;
	bpf_map_delete_elem(&blockstart, &key);
	/* log2 slot: slot i counts latencies in [2^(i-1), 2^i) us */
	for (i = 0; i < TRACE_HIST_SLOTS - 1 && us; i++)
		us >>= 1;
	slot = bpf_map_lookup_elem(&blockhist, &i);
	if (slot)
		__sync_fetch_and_add(slot, 1);
	count(CNT_BLOCK_REQS, 1);
	count(CNT_BLOCK_BYTES, nr_bytes);
	return 0;
}

/* ---- TCP connect outcome, end of served connections ---- */

static __always_inline void req_end(struct req_state *r, __u64 now)
{
	struct tl_req_event *e = ring_reserve(sizeof(*e));
	struct proc_stat *s;

	if (!e)
		return;
	if (!r->bytes_out) {
		/* nothing written: the request lasted until the close */
		s = bpf_map_lookup_elem(&procstat, &r->tgid);
		if (s) {
			r->faults1 = s->faults;
			r->maj1 = s->major_faults;
			r->mf1 = s->model_faults;
			r->mmaj1 = s->model_major_faults;
		}
	}
	e->ts_ns = r->start_ns;
	e->dur_ns = (r->bytes_out ? r->last_out_ns : now) - r->start_ns;
	e->type = EV_REQUEST;
	e->pid = r->tgid;
	e->tid = r->tid;
	e->port = r->port;
	e->close_ns = now;
	e->bytes_in = r->bytes_in;
	e->bytes_out = r->bytes_out;
	e->writes = r->writes;
	e->faults = r->faults1 - r->faults0;
	e->major_faults = r->maj1 - r->maj0;
	e->model_faults = r->mf1 - r->mf0;
	e->model_major_faults = r->mmaj1 - r->mmaj0;
	ev_submit_lazy(e);
}

SEC("raw_tp/inet_sock_set_state")
int BPF_PROG(inet_sock_set_state, const struct sock *sk, const int oldstate, const int newstate)
{
	__u64 key = (__u64)sk;
	struct conn_val *p;

	/* the server closed an accepted connection (or it was reset): the
	 * request is over */
	if (newstate == TCP_FIN_WAIT1_ || newstate == TCP_LAST_ACK_ || newstate == TCP_CLOSE_) {
		struct req_state *r = bpf_map_lookup_elem(&reqs, &key);

		if (r) {
			req_end(r, bpf_ktime_get_ns());
			bpf_map_delete_elem(&reqs, &key);
			return 0;
		}
	}
	if (newstate == TCP_SYN_SENT_) {
		/* connect(2) runs in the caller's context */
		__u32 tgid;
		struct conn_val init = {};

		if (!traced_now(&tgid))
			return 0;
		init.ts = bpf_ktime_get_ns();
		init.tgid = tgid;
		init.tid = (__u32)bpf_get_current_pid_tgid();
		bpf_map_update_elem(&conns, &key, &init, BPF_ANY);
		return 0;
	}
	/* the handshake ends in softirq context: not the caller's */
	p = bpf_map_lookup_elem(&conns, &key);
	if (!p)
		return 0;
	if (oldstate == TCP_SYN_SENT_) {
		p->done = 1;
		p->done_ns = bpf_ktime_get_ns();
		if (newstate == TCP_ESTABLISHED_) {
			p->ret = 0;
		} else {
			/* tcp_reset/tcp_write_err set sk_err before tcp_done: a
			 * refusal (RST), a timeout, ICMP unreachable; 0 when the
			 * caller closed the socket while it waited */
			p->closed = 1;
			p->ret = -BPF_CORE_READ(sk, sk_err);
		}
		/* not yet returned from connect(2): it reports the outcome */
		if (!p->async)
			return 0;
		conn_done(p, sk);
		if (p->closed)
			bpf_map_delete_elem(&conns, &key);
		return 0;
	}
	if (p->done && !p->closed &&
	    (newstate == TCP_FIN_WAIT1_ || newstate == TCP_LAST_ACK_ || newstate == TCP_CLOSE_)) {
		struct tl_conn_event *c = ring_reserve(sizeof(*c));

		if (c) {
			c->ts_ns = p->done_ns;
			c->dur_ns = bpf_ktime_get_ns() - p->done_ns;
			c->type = EV_CONN_END;
			c->pid = p->tgid;
			c->cookie = key;
			c->bytes_in = p->bytes_in;
			c->bytes_out = p->bytes_out;
			c->ended_by = newstate;
			c->pad = 0;
			ev_submit_urgent(c);
		}
		bpf_map_delete_elem(&conns, &key);
	}
	return 0;
}

/* ---- Python imports (USDT in CPython's import machinery) ---- */

static __always_inline struct tl_import_event *import_event(__u32 type)
{
	struct tl_import_event *e;
	__u32 tgid;

	if (!traced_now(&tgid))
		return NULL;
	e = ev_head(sizeof(*e), type, tgid);
	if (!e)
		return NULL;
	e->found = 0;
	return e;
}

SEC("usdt")
int BPF_USDT(py_import_start, const char *name)
{
	struct tl_import_event *e = import_event(EV_IMPORT_START);

	if (!e)
		return 0;
	if (bpf_probe_read_user_str(e->name, sizeof(e->name), name) < 0)
		e->name[0] = 0;
	ev_submit_lazy(e);
	return 0;
}

SEC("usdt")
int BPF_USDT(py_import_done, const char *name, int found)
{
	struct tl_import_event *e = import_event(EV_IMPORT_DONE);

	if (!e)
		return 0;
	e->found = found;
	e->name[0] = 0;
	ev_submit_lazy(e);
	return 0;
}
