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
const volatile __u64 targ_t0_ns = 0;	    /* launcher start: fault-rate series origin */

#define EINPROGRESS_ 115
#define MAP_ANONYMOUS_ 0x20
#define S_IFMT_ 0170000
#define S_IFREG_ 0100000
#define S_IFSOCK_ 0140000
#define AF_INET_ 2
#define AF_INET6_ 10
#define TASK_RUNNING_ 0
#define TASK_UNINTERRUPTIBLE_ 2
#define TCP_ESTABLISHED_ 1
#define TCP_SYN_SENT_ 2
#define TCP_FIN_WAIT1_ 4
#define TCP_CLOSE_ 7
#define TCP_LAST_ACK_ 9
#define AT_FDCWD_ -100

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32); /* tgid */
	__type(value, __u32); /* PROC_* flags */
	__uint(map_flags, BPF_F_NO_PREALLOC); /* created fast, filled as the tree runs */
} procs SEC(".maps");

struct inflight {
	__u64 ts;
	__u64 a0, a1, a2, a3;
	__u32 nr;
	__u32 pad;
};

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
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32); /* tid */
	__type(value, struct offcpu);
} offcpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TRACE_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} faultrate SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* struct request * */
	__type(value, __u64); /* issue time */
} blockstart SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TRACE_HIST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} blockhist SEC(".maps");

struct pending_conn {
	__u64 ts;
	__u32 tgid;
	__u32 tid;
	__u32 async; /* connect(2) returned EINPROGRESS: report the outcome */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64); /* struct sock * */
	__type(value, struct pending_conn);
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
	__u64 faults0, maj0; /* process counters at accept */
	__u64 faults1, maj1; /* ... at the last write */
	__u32 tgid;
	__u32 tid;
	__u32 port;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* struct sock * of the accepted connection */
	__type(value, struct req_state);
} reqs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

/* ---- helpers ---- */

static __always_inline void count(__u32 which, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);

	if (c)
		*c += n;
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

static __always_inline struct tl_event *ev_reserve(__u32 type, __u32 tgid)
{
	struct tl_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(CNT_RB_DROPS, 1);
		return NULL;
	}
	e->ts_ns = bpf_ktime_get_ns();
	e->dur_ns = 0;
	e->type = type;
	e->pid = tgid;
	e->tid = (__u32)bpf_get_current_pid_tgid();
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
	bpf_map_update_elem(&files, k, &init, BPF_NOEXIST);
	v = bpf_map_lookup_elem(&files, k);
	if (!v)
		count(CNT_FILES_FULL, 1);
	return v;
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

static __always_inline void peer_bytes(struct sock *sk, long n, bool out, __u64 now)
{
	struct peer_key k;
	struct peer_val *v, init = {};

	if (!sock_peer(sk, &k))
		return;
	v = bpf_map_lookup_elem(&peers, &k);
	if (!v) {
		init.first_ns = now;
		bpf_map_update_elem(&peers, &k, &init, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&peers, &k);
		if (!v) {
			count(CNT_PEERS_FULL, 1);
			return;
		}
	}
	v->last_ns = now;
	if (out) {
		__sync_fetch_and_add(&v->bytes_out, n);
		__sync_fetch_and_add(&v->sends, 1);
	} else {
		__sync_fetch_and_add(&v->bytes_in, n);
		__sync_fetch_and_add(&v->recvs, 1);
	}
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
	s = bpf_map_lookup_elem(&procstat, &r->tgid);
	if (s) {
		r->faults1 = s->faults;
		r->maj1 = s->major_faults;
	}
}

/* Bytes moved through fd: regular files by inode, inet sockets by peer. */
static __always_inline void fd_bytes(long fd, long n, bool out, __u64 now)
{
	struct file *f = fd_file(fd);
	struct file_key k;
	struct file_val *v;
	__u32 mode;

	if (!f || n <= 0)
		return;
	file_id(f, &k, &mode);
	if ((mode & S_IFMT_) == S_IFSOCK_) {
		struct sock *sk = file_sock(f);

		if (sk) {
			peer_bytes(sk, n, out, now);
			req_bytes(sk, n, out, now);
		}
		return;
	}
	if ((mode & S_IFMT_) != S_IFREG_)
		return;
	v = file_entry(f, &k, now);
	if (!v)
		return;
	v->last_ns = now;
	if (out) {
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

static __always_inline void fd_mmap(long fd, __u64 len, __u64 now)
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
		bpf_map_update_elem(&paths, k, &init, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&paths, k);
		if (!v) {
			count(CNT_PATHS_FULL, 1);
			return;
		}
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

/* ---- syscalls ---- */

static __always_inline int save4(long nr, __u64 a0, __u64 a1, __u64 a2, __u64 a3)
{
	__u32 tgid, tid = (__u32)bpf_get_current_pid_tgid();
	struct inflight in = {};

	if (!traced_now(&tgid))
		return 0;
	in.ts = bpf_ktime_get_ns();
	in.nr = nr;
	in.a0 = a0;
	in.a1 = a1;
	in.a2 = a2;
	in.a3 = a3;
	bpf_map_update_elem(&inflight, &tid, &in, BPF_ANY);
	return 0;
}

static __always_inline int save(long nr, __u64 a0, __u64 a1, __u64 a2)
{
	return save4(nr, a0, a1, a2, 0);
}

SEC("raw_tp/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	switch (id) {
	/* paths: a0 path, a1 flags, a2 dirfd */
#ifdef __NR_open
	case __NR_open:
		return save(id, PT_REGS_PARM1_CORE_SYSCALL(regs), PT_REGS_PARM2_CORE_SYSCALL(regs),
			    (__u64)AT_FDCWD_);
#endif
	case __NR_openat:
		return save(id, PT_REGS_PARM2_CORE_SYSCALL(regs), PT_REGS_PARM3_CORE_SYSCALL(regs),
			    PT_REGS_PARM1_CORE_SYSCALL(regs));
	case __NR_openat2:
		/* flags are read from struct open_how at exit */
		return save(id, PT_REGS_PARM2_CORE_SYSCALL(regs), PT_REGS_PARM3_CORE_SYSCALL(regs),
			    PT_REGS_PARM1_CORE_SYSCALL(regs));
#ifdef __NR_stat
	case __NR_stat:
	case __NR_lstat:
	case __NR_access:
	case __NR_readlink:
		return save(id, PT_REGS_PARM1_CORE_SYSCALL(regs), 0, (__u64)AT_FDCWD_);
#endif
	case __NR_chdir:
		return save(id, PT_REGS_PARM1_CORE_SYSCALL(regs), 0, (__u64)AT_FDCWD_);
	case __NR_newfstatat:
	case __NR_statx:
	case __NR_faccessat:
	case __NR_faccessat2:
	case __NR_readlinkat:
		return save(id, PT_REGS_PARM2_CORE_SYSCALL(regs), 0, PT_REGS_PARM1_CORE_SYSCALL(regs));
	/* two paths: a0 old, a1 new, a2 old dirfd, a3 new dirfd */
#ifdef __NR_rename
	case __NR_rename:
		return save4(id, PT_REGS_PARM1_CORE_SYSCALL(regs), PT_REGS_PARM2_CORE_SYSCALL(regs),
			     (__u64)AT_FDCWD_, (__u64)AT_FDCWD_);
	case __NR_symlink:
		return save4(id, PT_REGS_PARM1_CORE_SYSCALL(regs), PT_REGS_PARM2_CORE_SYSCALL(regs),
			     (__u64)AT_FDCWD_, (__u64)AT_FDCWD_);
#endif
	case __NR_renameat:
	case __NR_renameat2:
		return save4(id, PT_REGS_PARM2_CORE_SYSCALL(regs), PT_REGS_PARM4_CORE_SYSCALL(regs),
			     PT_REGS_PARM1_CORE_SYSCALL(regs), PT_REGS_PARM3_CORE_SYSCALL(regs));
	case __NR_symlinkat:
		/* the target is link content, relative to the link's directory */
		return save4(id, PT_REGS_PARM1_CORE_SYSCALL(regs), PT_REGS_PARM3_CORE_SYSCALL(regs),
			     (__u64)AT_FDCWD_, PT_REGS_PARM2_CORE_SYSCALL(regs));
	case __NR_fchdir:
	case __NR_accept:
	case __NR_accept4:
		return save(id, PT_REGS_PARM1_CORE_SYSCALL(regs), 0, 0);
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
	case __NR_sendto:
	case __NR_sendmsg:
	case __NR_recvfrom:
	case __NR_recvmsg:
	case __NR_listen:
	case __NR_mlockall:
		return save(id, PT_REGS_PARM1_CORE_SYSCALL(regs), 0, 0);
	case __NR_mmap: {
		long fd = PT_REGS_PARM5_CORE_SYSCALL(regs);
		__u64 fl = PT_REGS_PARM4_CORE_SYSCALL(regs);

		if (fd < 0 || (fl & MAP_ANONYMOUS_))
			return 0;
		return save(id, fd, PT_REGS_PARM2_CORE_SYSCALL(regs), 0);
	}
	case __NR_connect:
		return save(id, PT_REGS_PARM1_CORE_SYSCALL(regs), PT_REGS_PARM2_CORE_SYSCALL(regs),
			    PT_REGS_PARM3_CORE_SYSCALL(regs));
	case __NR_mlock:
		return save(id, PT_REGS_PARM1_CORE_SYSCALL(regs), PT_REGS_PARM2_CORE_SYSCALL(regs), 0);
	case __NR_mlock2:
		return save(id, PT_REGS_PARM1_CORE_SYSCALL(regs), PT_REGS_PARM2_CORE_SYSCALL(regs),
			    PT_REGS_PARM3_CORE_SYSCALL(regs));
	}
	return 0;
}

static __always_inline void on_connect(struct inflight *in, long ret, __u32 tgid, __u64 now)
{
	struct tl_event *e;
	struct file *f;
	__u64 len = in->a2;

	/* a blocking connect's handshake ended inside the syscall; a pending
	 * one is reported by inet_sock_set_state when it ends */
	f = fd_file(in->a0);
	if (f) {
		__u32 mode = BPF_CORE_READ(f, f_inode, i_mode);
		struct sock *sk = (mode & S_IFMT_) == S_IFSOCK_ ? file_sock(f) : NULL;
		__u64 key = (__u64)sk;
		struct pending_conn *p = sk ? bpf_map_lookup_elem(&conns, &key) : NULL;

		if (p) {
			if (ret == -EINPROGRESS_ && BPF_CORE_READ(sk, __sk_common.skc_state) ==
							    TCP_SYN_SENT_)
				p->async = 1;
			else
				bpf_map_delete_elem(&conns, &key);
		}
	}
	e = ev_reserve(EV_CONNECT, tgid);
	if (!e)
		return;
	e->ts_ns = in->ts;
	e->dur_ns = now - in->ts;
	e->ret = ret;
	e->arg = len;
	/* the whole buffer covers sockaddr_un; near the end of a page only the
	 * inet part may be readable */
	if (bpf_probe_read_user(e->aux, sizeof(e->aux), (void *)in->a1))
		bpf_probe_read_user(e->aux, 28, (void *)in->a1);
	bpf_ringbuf_submit(e, 0);
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
	}
	e = ev_reserve(EV_LISTEN, tgid);
	if (!e)
		return;
	e->arg = BPF_CORE_READ(sk, __sk_common.skc_num);
	e->arg2 = family;
	e->ret = ret;
	bpf_ringbuf_submit(e, 0);
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
	bpf_ringbuf_submit(e, 0);
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
	bpf_ringbuf_submit(e, 0);
}

/* rename/symlink: both paths, with the directories relative ones start from */
static __always_inline void on_path2(struct inflight *in, long ret, __u32 tgid, __u64 now)
{
	struct tl_path2_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	bool link = in->nr == __NR_symlinkat;

#ifdef __NR_symlink
	link |= in->nr == __NR_symlink;
#endif
	if (!e) {
		count(CNT_RB_DROPS, 1);
		return;
	}
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
	bpf_ringbuf_submit(e, 0);
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
	s = bpf_map_lookup_elem(&procstat, &tgid);
	if (s) {
		r.faults0 = r.faults1 = s->faults;
		r.maj0 = r.maj1 = s->major_faults;
	}
	key = (__u64)sk;
	bpf_map_update_elem(&reqs, &key, &r, BPF_ANY);
}

SEC("raw_tp/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct inflight *in = bpf_map_lookup_elem(&inflight, &tid);
	__u64 now;

	if (!in)
		return 0;
	now = bpf_ktime_get_ns();
	switch (in->nr) {
#ifdef __NR_open
	case __NR_open:
#endif
	case __NR_openat:
		path_op((const char *)in->a0, in->a2, ret, true, in->a1, tgid, now);
		break;
	case __NR_openat2: {
		__u64 fl = 0;

		bpf_probe_read_user(&fl, sizeof(fl), (void *)in->a1);
		path_op((const char *)in->a0, in->a2, ret, true, fl, tgid, now);
		break;
	}
#ifdef __NR_stat
	case __NR_stat:
	case __NR_lstat:
	case __NR_access:
	case __NR_readlink:
#endif
	case __NR_newfstatat:
	case __NR_statx:
	case __NR_faccessat:
	case __NR_faccessat2:
	case __NR_readlinkat:
		/* only failures matter: a missing path probed again and again */
		if (ret < 0)
			path_op((const char *)in->a0, in->a2, ret, false, 0, tgid, now);
		break;
	case __NR_chdir:
	case __NR_fchdir:
		on_chdir(in, ret, tgid);
		break;
#ifdef __NR_rename
	case __NR_rename:
	case __NR_symlink:
#endif
	case __NR_renameat:
	case __NR_renameat2:
	case __NR_symlinkat:
		on_path2(in, ret, tgid, now);
		break;
	case __NR_accept:
	case __NR_accept4:
		if (ret >= 0)
			on_accept(ret, tgid, now);
		break;
	case __NR_read:
	case __NR_pread64:
	case __NR_readv:
	case __NR_preadv:
	case __NR_preadv2:
	case __NR_recvfrom:
	case __NR_recvmsg:
		fd_bytes(in->a0, ret, false, now);
		break;
	case __NR_write:
	case __NR_pwrite64:
	case __NR_writev:
	case __NR_pwritev:
	case __NR_pwritev2:
	case __NR_sendto:
	case __NR_sendmsg:
		fd_bytes(in->a0, ret, true, now);
		break;
	case __NR_mmap:
		if (ret >= 0 || ret < -4095)
			fd_mmap(in->a0, in->a1, now);
		break;
	case __NR_connect:
		on_connect(in, ret, tgid, now);
		break;
	case __NR_listen:
		on_listen(in, ret, tgid);
		break;
	case __NR_mlock:
	case __NR_mlock2:
	case __NR_mlockall:
		on_mlock(in, ret, tgid, now);
		break;
	}
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
	if (!(f & PROC_EXECED))
		return 0;
	e = ev_reserve(EV_FORK, pid);
	if (!e)
		return 0;
	e->tid = pid;
	e->ppid = ptgid;
	bpf_ringbuf_submit(e, 0);
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
	bpf_ringbuf_submit(e, 0);
	return 0;
}

static __always_inline void thread_exit(struct task_struct *p, bool group_dead)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	__u32 *flags = bpf_map_lookup_elem(&procs, &tgid);
	struct proc_stat *s, init = {};
	struct tl_event *e;

	if (!flags)
		return;
	s = bpf_map_lookup_elem(&procstat, &tgid);
	if (!s) {
		bpf_map_update_elem(&procstat, &tgid, &init, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&procstat, &tgid);
	}
	if (s) {
		__sync_fetch_and_add(&s->exited_min_flt, BPF_CORE_READ(p, min_flt));
		__sync_fetch_and_add(&s->exited_maj_flt, BPF_CORE_READ(p, maj_flt));
		if (group_dead)
			s->exited = 1;
	}
	if (!group_dead)
		return;
	e = ev_reserve(EV_EXIT, tgid);
	if (e) {
		e->ret = BPF_CORE_READ(p, exit_code);
		e->ppid = BPF_CORE_READ(p, real_parent, tgid);
		bpf_ringbuf_submit(e, 0);
	}
	/* a reused pid must not be traced */
	bpf_map_delete_elem(&procs, &tgid);
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *p)
{
	/* do_exit() drops signal->live before this tracepoint: zero means the
	 * last thread is leaving. (6.x passes group_dead as a second argument,
	 * but a raw_tp reading past the arguments a kernel has fails to attach.) */
	thread_exit(p, BPF_CORE_READ(p, signal, live.counter) == 0);
	return 0;
}

/* ---- memory ---- */

static long fault_vma(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct file *f = BPF_CORE_READ(vma, vm_file);
	struct file_key k;
	struct file_val *v;

	if (!f)
		return 0;
	k.dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
	k.ino = BPF_CORE_READ(f, f_inode, i_ino);
	v = bpf_map_lookup_elem(&files, &k);
	if (v)
		__sync_fetch_and_add(&v->faults, 1);
	return 0;
}

SEC("raw_tp/page_fault_user")
int BPF_PROG(page_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct proc_stat *s, init = {};
	__u64 now = bpf_ktime_get_ns();
	__u32 bucket;
	__u64 *b;

	if (!bpf_map_lookup_elem(&procs, &tgid))
		return 0;
	s = bpf_map_lookup_elem(&procstat, &tgid);
	if (!s) {
		bpf_map_update_elem(&procstat, &tgid, &init, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&procstat, &tgid);
		if (!s)
			return 0;
	}
	__sync_fetch_and_add(&s->faults, 1);
	bucket = now > targ_t0_ns ? (now - targ_t0_ns) / TRACE_BUCKET_NS : 0;
	if (bucket >= TRACE_BUCKETS)
		bucket = TRACE_BUCKETS - 1;
	b = bpf_map_lookup_elem(&faultrate, &bucket);
	if (b)
		__sync_fetch_and_add(b, 1);
	/* which file's mapping took the fault (model files mapped with mmap) */
	bpf_find_vma(bpf_get_current_task_btf(), address, fault_vma, NULL, 0);
	return 0;
}

/* Major faults: the software perf event PAGE_FAULTS_MAJ, one per CPU with
 * sample_period 1, runs this in the faulting task after the fault was
 * accounted (mm_account_fault); page_fault_user cannot tell major from minor. */
SEC("perf_event")
int major_fault(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct proc_stat *s, init = {};

	if (!bpf_map_lookup_elem(&procs, &tgid))
		return 0;
	s = bpf_map_lookup_elem(&procstat, &tgid);
	if (!s) {
		bpf_map_update_elem(&procstat, &tgid, &init, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&procstat, &tgid);
		if (!s)
			return 0;
	}
	__sync_fetch_and_add(&s->major_faults, 1);
	return 0;
}

/* ---- scheduling ---- */

SEC("raw_tp/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u32 ptgid = BPF_CORE_READ(prev, tgid);
	__u32 ntgid = BPF_CORE_READ(next, tgid);
	__u64 now = 0;

	if (bpf_map_lookup_elem(&procs, &ptgid)) {
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
		if (!s) {
			bpf_map_update_elem(&procstat, &ntgid, &init, BPF_NOEXIST);
			s = bpf_map_lookup_elem(&procstat, &ntgid);
		}
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
	struct tl_req_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	struct proc_stat *s;

	if (!e) {
		count(CNT_RB_DROPS, 1);
		return;
	}
	if (!r->bytes_out) {
		/* nothing written: the request lasted until the close */
		s = bpf_map_lookup_elem(&procstat, &r->tgid);
		if (s) {
			r->faults1 = s->faults;
			r->maj1 = s->major_faults;
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
	bpf_ringbuf_submit(e, 0);
}


SEC("raw_tp/inet_sock_set_state")
int BPF_PROG(inet_sock_set_state, const struct sock *sk, const int oldstate, const int newstate)
{
	__u64 key = (__u64)sk;
	struct pending_conn *p;
	struct tl_event *e;

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
		struct pending_conn init = {};

		if (!traced_now(&tgid))
			return 0;
		init.ts = bpf_ktime_get_ns();
		init.tgid = tgid;
		init.tid = (__u32)bpf_get_current_pid_tgid();
		bpf_map_update_elem(&conns, &key, &init, BPF_ANY);
		return 0;
	}
	if (oldstate != TCP_SYN_SENT_)
		return 0;
	/* the handshake ends in softirq context: not the caller's */
	p = bpf_map_lookup_elem(&conns, &key);
	if (!p)
		return 0;
	if (p->async) {
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (e) {
			struct peer_key pk;

			__builtin_memset(e, 0, sizeof(*e));
			e->type = EV_CONNECT_DONE;
			e->ts_ns = p->ts;
			e->dur_ns = bpf_ktime_get_ns() - p->ts;
			e->pid = p->tgid;
			e->tid = p->tid;
			e->ret = newstate == TCP_ESTABLISHED_ ? 0 : -BPF_CORE_READ(sk, sk_err);
			if (sock_peer((struct sock *)sk, &pk)) {
				e->arg2 = pk.family;
				e->arg = pk.port;
				__builtin_memcpy(e->aux, pk.addr, sizeof(pk.addr));
			}
			bpf_ringbuf_submit(e, 0);
		} else {
			count(CNT_RB_DROPS, 1);
		}
	}
	bpf_map_delete_elem(&conns, &key);
	return 0;
}

/* ---- Python imports (USDT in CPython's import machinery) ---- */

SEC("usdt")
int BPF_USDT(py_import_start, const char *name)
{
	__u32 tgid;
	struct tl_event *e;

	if (!traced_now(&tgid))
		return 0;
	e = ev_reserve(EV_IMPORT_START, tgid);
	if (!e)
		return 0;
	bpf_probe_read_user_str(e->str, sizeof(e->str), name);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(py_import_done, const char *name, int found)
{
	__u32 tgid;
	struct tl_event *e;

	if (!traced_now(&tgid))
		return 0;
	e = ev_reserve(EV_IMPORT_DONE, tgid);
	if (!e)
		return 0;
	e->flags = found;
	bpf_probe_read_user_str(e->str, sizeof(e->str), name);
	bpf_ringbuf_submit(e, 0);
	return 0;
}
