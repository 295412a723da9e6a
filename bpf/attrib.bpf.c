// SPDX-License-Identifier: GPL-2.0
/* attrib: what each thread of the tree was blocked in while off CPU, for
 * the exclusive breakdown of the start-up (issue 15; launcher/attribution.c).
 *
 * sched_switch (sched.bpf.c) calls attr_leave when a thread of the tree
 * leaves the CPU and attr_arrive when it comes back. attr_leave runs in the
 * leaving thread (current), so it reads what it is blocked in from the
 * thread itself: the syscall number and arguments from its saved user
 * registers (nothing is added to sys_enter, which runs for every syscall of
 * the host), the object of the call's fd, or the page fault in progress.
 * sched_waking notes who woke it and when (offwaketime's one hop).
 * attr_arrive sends the interval as one EV_OFFCPU record: every interval
 * of a main thread, those of other threads from targ_off_min_ns, none after
 * the ready listen, at most targ_off_max in all (then counted as lost). */
#include "common.bpf.h"

const volatile __u64 targ_off_min_ns = 1000000; /* other threads: shorter intervals not sent */
const volatile __u32 targ_off_max = 400000;	/* records in all (112 bytes each) */
__u64 off_sent = 0;

#include <bpf/bpf_endian.h>

#define S_IFIFO_ 0010000

/* the record's reasons are sched.bpf.c's */
_Static_assert(OFF_RUNQ == OFFCPU_RUNQ && OFF_IO == OFFCPU_IO && OFF_SLEEP == OFFCPU_SLEEP,
	       "trace_off_reason is not offcpu_reason");

/* the thread of the tree off CPU now, as it left (key: tid) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct tl_off_event);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} attroff SEC(".maps");

/* The last user page fault on this CPU: a thread that blocks inside it
 * blocks on this CPU before anything else faults here, so attr_leave finds
 * its fault here (same thread, same user ip). A per-CPU slot, written
 * without a lookup of the tree: cheaper than the tree check itself. */
struct fault_slot {
	__u64 ip;
	__u64 addr;
	__u32 tid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fault_slot);
} attrflt SEC(".maps");

SEC("raw_tp/page_fault_user")
int BPF_PROG(attr_fault, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	__u32 zero = 0;
	struct fault_slot *s = bpf_map_lookup_elem(&attrflt, &zero);

	if (!s)
		return 0;
	s->tid = (__u32)bpf_get_current_pid_tgid();
	s->ip = BPF_CORE_READ(regs, ip);
	s->addr = address;
	return 0;
}

/* the syscalls whose first argument is the fd they block on */
static __always_inline bool fd_call(long nr)
{
	switch (nr) {
	case __NR_read:
	case __NR_write:
	case __NR_pread64:
	case __NR_pwrite64:
	case __NR_readv:
	case __NR_writev:
	case __NR_preadv:
	case __NR_pwritev:
	case __NR_preadv2:
	case __NR_pwritev2:
	case __NR_recvfrom:
	case __NR_sendto:
	case __NR_recvmsg:
	case __NR_sendmsg:
	case __NR_recvmmsg:
	case __NR_sendmmsg:
	case __NR_connect:
	case __NR_accept:
	case __NR_accept4:
	case __NR_fsync:
	case __NR_fdatasync:
	case __NR_flock:
	case __NR_fcntl:
	case __NR_ioctl:
	case __NR_splice:
	case __NR_ftruncate:
	case __NR_fallocate:
	case __NR_getdents64:
	case __NR_sync_file_range:
	case __NR_copy_file_range:
	case __NR_epoll_wait:
	case __NR_epoll_pwait:
	case __NR_epoll_pwait2:
		return true;
	}
	return false;
}

static __always_inline void fd_object(long fd, struct tl_off_event *o)
{
	struct file *f = fd_file(fd);
	struct sock *sk;
	__u32 mode;

	if (!f)
		return;
	mode = BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT_;
	if (mode == S_IFREG_) {
		o->obj = OFFOBJ_FILE;
		o->dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
		o->ino = BPF_CORE_READ(f, f_inode, i_ino);
	} else if (mode == S_IFIFO_) {
		o->obj = OFFOBJ_PIPE;
	} else if (mode == S_IFSOCK_) {
		o->obj = OFFOBJ_SOCKET;
		sk = file_sock(f);
		if (!sk)
			return;
		o->family = BPF_CORE_READ(sk, __sk_common.skc_family);
		o->port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
		if (o->family == AF_INET_)
			bpf_core_read(o->addr, 4, &sk->__sk_common.skc_daddr);
		else if (o->family == AF_INET6_)
			bpf_core_read(o->addr, 16, &sk->__sk_common.skc_v6_daddr);
	} else {
		o->obj = OFFOBJ_OTHER;
	}
}

/* A fault in progress at a model file's mapping (mranges): its file. */
static __always_inline void fault_file(__u32 tgid, __u64 addr, struct tl_off_event *o)
{
	struct model_ranges *r = bpf_map_lookup_elem(&mranges, &tgid);

	if (!r)
		return;
	for (int i = 0; i < MODEL_RANGES; i++) {
		if (i < r->n && addr >= r->start[i] && addr < r->end[i]) {
			o->obj = OFFOBJ_FILE;
			o->dev = r->key[i].dev;
			o->ino = r->key[i].ino;
			return;
		}
	}
}

/* Thread tid of tgid (current) leaves the CPU for reason. */
__attribute__((noinline)) int attr_leave(__u32 tgid, __u32 tid, __u32 reason, __u64 now)
{
	/* the leaving thread is current: its saved user registers */
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	struct tl_off_event o = {};
	__u32 zero = 0;
	struct fault_slot *fs;
	long nr;

	o.ts_ns = now;
	o.type = EV_OFFCPU;
	o.pid = tgid;
	o.tid = tid;
	o.reason = reason;
	o.nr = TRACE_SYSNR_NONE;
	if (!regs)
		goto save;
	/* preempted: it did not block in anything (in a syscall or not) */
	if (reason == OFF_RUNQ) {
		if (BPF_CORE_READ(regs, cs) & 3)
			o.flags |= OFFF_USER;
		goto save;
	}
	/* blocked in a fault: the same thread faulted last on this CPU, at
	 * the user ip it will resume at */
	fs = bpf_map_lookup_elem(&attrflt, &zero);
	if (fs && fs->tid == tid && fs->ip == BPF_CORE_READ(regs, ip)) {
		o.flags |= OFFF_FAULT;
		fault_file(tgid, fs->addr, &o);
		goto save;
	}
	nr = BPF_CORE_READ(regs, orig_ax);
	o.nr = (__s32)nr;
	if (fd_call(nr)) {
		fd_object((long)BPF_CORE_READ(regs, di), &o);
	} else if (nr == __NR_poll || nr == __NR_ppoll) {
		/* the first polled fd says what a poll with a timeout waits for
		 * (a socket with a timeout: Python's connect and recv) */
		int fd = -1;

		if (BPF_CORE_READ(regs, si) == 0)
			o.flags |= OFFF_NOFDS;
		else if (!bpf_probe_read_user(&fd, sizeof(fd), (void *)BPF_CORE_READ(regs, di)))
			fd_object(fd, &o);
	} else if (nr == __NR_select || nr == __NR_pselect6) {
		if (BPF_CORE_READ(regs, di) == 0)
			o.flags |= OFFF_NOFDS;
	}
save:
	bpf_map_update_elem(&attroff, &tid, &o, BPF_ANY);
	return 0;
}

SEC("raw_tp/sched_waking")
int BPF_PROG(attr_waking, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid);
	struct tl_off_event *o = bpf_map_lookup_elem(&attroff, &tid);
	__u64 id;

	if (!o || o->wake_ns)
		return 0;
	id = bpf_get_current_pid_tgid();
	o->wake_ns = bpf_ktime_get_ns();
	o->flags |= OFFF_WOKEN;
	o->waker_pid = id >> 32;
	o->waker_tid = (__u32)id;
	bpf_get_current_comm(o->waker_comm, sizeof(o->waker_comm));
	return 0;
}

/* Thread tid of tgid is back on a CPU: its interval, if it is to be sent. */
__attribute__((noinline)) int attr_arrive(__u32 tid, __u32 tgid, __u64 now)
{
	struct tl_off_event *o = bpf_map_lookup_elem(&attroff, &tid), *e;
	__u64 d, ready = ready_ns;

	if (!o)
		return 0;
	d = now - o->ts_ns;
	if ((ready && o->ts_ns > ready) || (tid != tgid && d < targ_off_min_ns))
		goto done;
	if (off_sent >= targ_off_max) {
		count(CNT_OFF_DROPS, 1);
		goto done;
	}
	e = ring_reserve(sizeof(*e));
	if (!e) {
		count(CNT_OFF_DROPS, 1);
		goto done;
	}
	__builtin_memcpy(e, o, sizeof(*e));
	e->dur_ns = d;
	__sync_fetch_and_add(&off_sent, 1);
	ev_submit_lazy(e);
done:
	bpf_map_delete_elem(&attroff, &tid);
	return 0;
}
