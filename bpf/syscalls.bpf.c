// SPDX-License-Identifier: GPL-2.0
/* syscalls: sys_enter and sys_exit, dispatched on the syscall number.
 *
 * The syscall number is checked before any map lookup, then the pid-tree
 * lookup. sys_enter saves the arguments of the calls whose record needs their
 * start (inflight); sys_exit takes the others from the registers and hands
 * each call to its domain's handler (files.bpf.c, net.bpf.c, faults.bpf.c).
 * Two probe sets share that work (call_enter, call_exit), one loaded per
 * run: raw_tp sys_enter/sys_exit, on every syscall of the host ([trace]
 * syscalls = exact), or the per-syscall tracepoints syscall_enter and
 * syscall_exit, attached to the calls the timeline needs only (cheap). */
#include "common.bpf.h"

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

/* Which calls an exit program handles (a constant: the others' code is
 * left out of it). The raw_tp sys_exit ([trace] syscalls = exact) handles
 * every call; in cheap, syscall_exit_paths the path lookups (open, stat,
 * access, readlink, failed directory operations) and syscall_exit the
 * other calls it is attached to; read and write there come from libc's
 * functions (libc_io). Verified apart, the two cost less than one: the
 * verifier's time grows faster than a program's size (BENCHMARKS.md). */
#define EXIT_PATHS  1
#define EXIT_OTHERS 2
#define EXIT_RW	    4 /* the read/write family: sys_exit only */
#define EXIT_ALL    (EXIT_PATHS | EXIT_OTHERS | EXIT_RW)

/* The other calls followed, from the registers at exit (the same argument
 * layout in struct inflight). ret lets the cheap rejections go first: a
 * successful stat is not recorded, nor is an anonymous mapping. */
static __always_inline bool exit_args(long id, long ret, struct pt_regs *regs, struct inflight *in,
				      int fam)
{
	bool paths = fam & EXIT_PATHS, others = fam & EXIT_OTHERS, rw = fam & EXIT_RW;

	switch (id) {
		/* paths: a0 path, a1 flags, a2 dirfd */
#ifdef __NR_open
	case __NR_open:
		return paths && set_args(in, P1(regs), P2(regs), (__u64)AT_FDCWD_, 0);
#endif
	case __NR_openat:
	case __NR_openat2:
		/* openat2: a1 is struct open_how *, its flags read by the caller */
		return paths && set_args(in, P2(regs), P3(regs), P1(regs), 0);
#ifdef __NR_stat
	case __NR_stat:
	case __NR_lstat:
	case __NR_access:
	case __NR_readlink:
		/* only failures matter: a missing path probed again and again */
		return paths && ret < 0 && set_args(in, P1(regs), 0, (__u64)AT_FDCWD_, 0);
#endif
	case __NR_newfstatat:
	case __NR_statx:
	case __NR_faccessat:
	case __NR_faccessat2:
	case __NR_readlinkat:
		return paths && ret < 0 && set_args(in, P2(regs), 0, P1(regs), 0);
	case __NR_chdir:
		return others && ret >= 0 && set_args(in, P1(regs), 0, (__u64)AT_FDCWD_, 0);
		/* failed directory operations: a0 path, a1 flags, a2 dirfd */
#ifdef __NR_mkdir
	case __NR_mkdir:
	case __NR_rmdir:
	case __NR_unlink:
		return paths && ret < 0 && set_args(in, P1(regs), 0, (__u64)AT_FDCWD_, 0);
#endif
	case __NR_mkdirat:
	case __NR_unlinkat:
		return paths && ret < 0 && set_args(in, P2(regs), P3(regs), P1(regs), 0);
	/* datagrams: a1 the address (sendto, recvfrom), the msghdr (sendmsg,
	 * recvmsg) or the mmsghdr vector (sendmmsg, recvmmsg) */
	case __NR_sendto:
	case __NR_recvfrom:
		/* a2: the buffer (names.bpf.c reads a DNS answer from it) */
		return others && set_args(in, P1(regs), P5(regs), P2(regs), 0);
	case __NR_sendmsg:
	case __NR_recvmsg:
	case __NR_sendmmsg:
	case __NR_recvmmsg:
		return others && set_args(in, P1(regs), P2(regs), 0, 0);
	case __NR_fchdir:
	case __NR_accept:
	case __NR_accept4:
	case __NR_listen:
		return others && ret >= 0 && set_args(in, P1(regs), 0, 0, 0);
	case __NR_read:
	case __NR_pread64:
	case __NR_readv:
	case __NR_preadv:
	case __NR_preadv2:
	case __NR_write:
	case __NR_writev:
		/* a1: the buffer or iovec (names.bpf.c: a TLS hello) */
		return rw && set_args(in, P1(regs), P2(regs), 0, 0);
	/* a3: the offset (pwritev2: -1 is the file position) */
	case __NR_pwrite64:
	case __NR_pwritev:
	case __NR_pwritev2:
		return rw && set_args(in, P1(regs), P2(regs), 0, P4(regs));
	/* copies: a0 the destination fd, a1 the source fd */
	case __NR_sendfile:
		return others && ret > 0 && set_args(in, P1(regs), P2(regs), 0, 0);
	case __NR_copy_file_range:
		return others && ret > 0 && set_args(in, P3(regs), P1(regs), 0, 0);
	case __NR_mmap: {
		long fd = P5(regs);

		if (!others || fd < 0 || (P4(regs) & MAP_ANONYMOUS_))
			return false;
		return set_args(in, fd, P2(regs), 0, 0);
	}
	}
	return false;
}

/* A read or write of the read/write family (nr: its syscall number; a0
 * the fd, a1 the buffer or iovec, a3 the offset of the p- calls; ret the
 * syscall's result, -errno): from sys_exit (exact) and from libc's
 * functions' return (libcio.bpf.c, [trace] syscalls = cheap), the same
 * accounting. */
SYS_HANDLER(sx_io)
{
	long nr;

	if (!c)
		return 0;
	nr = c->in.nr;
	sx_bytes(c);
	if (nr == __NR_write || nr == __NR_pwrite64 || nr == __NR_writev || nr == __NR_pwritev ||
	    nr == __NR_pwritev2)
		sx_fwrite(c); /* the ranges written, for downloads */
	return 0;
}

/* The work of both probe sets (raw_tp here, the per-syscall tracepoints of
 * [trace] syscalls = cheap below): regs are the caller's registers, id the
 * syscall number. */
static __always_inline int call_enter(struct pt_regs *regs, long id)
{
	__u32 tgid, tid;
	struct inflight in = {};

	/* after the requests window nothing new is saved (sys_enter goes then,
	 * but the flag stops it at once: the links' release is not) */
	if (light)
		return 0;
	if (!entry_args(id, regs, &in) || !traced_now(&tgid))
		return 0;
	tid = (__u32)bpf_get_current_pid_tgid();
	in.ts = bpf_ktime_get_ns();
	in.nr = id;
	bpf_map_update_elem(&inflight, &tid, &in, BPF_ANY);
	return 0;
}

static __always_inline int call_exit(struct pt_regs *regs, long id, long ret, int fam)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct sys_call c = {};
	struct inflight *in;
	bool saved = false;

	/* After the requests window (light) only the calls saved at entry are
	 * finished: mlock, and those that began before (their entries must go). */
	if (!light && exit_args(id, ret, regs, &c.in, fam)) {
		if (!traced_now(&c.tgid))
			return 0;
		c.in.nr = id;
	} else if ((fam & EXIT_OTHERS) && entry_call(id)) {
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
		if (fam & EXIT_PATHS)
			sx_path(&c);
		break;
#ifdef __NR_mkdir
	case __NR_mkdir:
	case __NR_unlink:
	case __NR_rmdir:
#endif
	case __NR_mkdirat:
	case __NR_unlinkat:
		if (fam & EXIT_PATHS)
			sx_dirop(&c);
		break;
	case __NR_write:
	case __NR_pwrite64:
	case __NR_writev:
	case __NR_pwritev:
	case __NR_pwritev2:
	case __NR_read:
	case __NR_pread64:
	case __NR_readv:
	case __NR_preadv:
	case __NR_preadv2:
		if (fam & EXIT_RW)
			sx_io(&c);
		break;
	case __NR_sendfile:
	case __NR_copy_file_range:
		if (fam & EXIT_OTHERS)
			sx_copy(&c);
		break;
	case __NR_recvfrom:
	case __NR_sendto:
	case __NR_recvmsg:
	case __NR_sendmsg:
	case __NR_recvmmsg:
	case __NR_sendmmsg:
		if (fam & EXIT_OTHERS)
			sx_bytes(&c);
		break;
	case __NR_mmap:
		if (fam & EXIT_OTHERS)
			sx_mmap(&c);
		break;
	case __NR_accept:
	case __NR_accept4:
	case __NR_connect:
	case __NR_listen:
		if (fam & EXIT_OTHERS)
			sx_net(&c);
		break;
	case __NR_mlock:
	case __NR_mlock2:
	case __NR_mlockall:
		if (fam & EXIT_OTHERS)
			sx_mlock(&c);
		break;
	default:
		if (fam & EXIT_OTHERS)
			sx_other(&c);
	}
	if (saved)
		bpf_map_delete_elem(&inflight, &tid);
	return 0;
}

SEC("raw_tp/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id) { return call_enter(regs, id); }

SEC("raw_tp/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	return call_exit(regs, SYSCALL_NR(regs), ret, EXIT_ALL);
}

/* [trace] syscalls = cheap: the same work from per-syscall tracepoints
 * (syscalls/sys_enter_NAME, sys_exit_NAME), each program attached by the
 * launcher to the rare calls the timeline needs only (tracer_syscalls.c), so
 * that the host's other syscalls run no program. The registers are the
 * task's (bpf_task_pt_regs: what raw_tp hands over). close, at its entry
 * (the file still open), gives the sizes that read/write would have
 * counted (sx_close). */
/* libbpf 1.1 declares bpf_task_pt_regs as returning a long */
static __always_inline struct pt_regs *task_regs(void)
{
	return (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
}

/* Every call that reaches these is one the timeline follows: the tree
 * lookup goes first, so the host's other processes pay that only (no
 * register read). */
SEC("tp")
int syscall_enter(struct syscall_trace_enter *ctx)
{
	long id = ctx->nr;
	__u32 tgid;

	if (!traced_now(&tgid))
		return 0;

	if (id == __NR_close) {
		struct sys_call c = {};

		if (light)
			return 0;
		c.tgid = tgid;
		c.in.nr = id;
		c.in.a0 = ctx->args[0];
		c.now = bpf_ktime_get_ns();
		sx_close(&c);
		return 0;
	}
	return call_enter(task_regs(), id);
}

static __always_inline int tp_exit(struct syscall_trace_exit *ctx, int fam)
{
	__u32 tgid;

	/* a call saved at entry is a traced thread's too */
	if (!traced_now(&tgid))
		return 0;
	return call_exit(task_regs(), ctx->nr, ctx->ret, fam);
}

SEC("tp")
int syscall_exit(struct syscall_trace_exit *ctx) { return tp_exit(ctx, EXIT_OTHERS); }

/* the path lookups' exits (tracer_syscalls.c's AT_PATHS), on their own:
 * see EXIT_PATHS */
SEC("tp")
int syscall_exit_paths(struct syscall_trace_exit *ctx) { return tp_exit(ctx, EXIT_PATHS); }
