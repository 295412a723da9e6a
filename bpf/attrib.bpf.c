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
 * the ready listen, at most targ_off_max in all (then counted as lost).
 *
 * Python frames: for the main thread of a process running the interpreter
 * the launcher found (targ_py_*: CPython 3.10, 3.11 or 3.12, its layout,
 * and its _PyRuntime: fixed in Debian's /usr/bin/python3.11, per process in
 * pyrt for a libpython or position-independent build), the top frame's
 * code object,
 * read from the thread's PyThreadState at each switch-out (the caller of a
 * sleep, a recv...) and at the fault tick's samples (faults.bpf.c calls
 * attr_tick: cpu). Each code object's names go to user space once. */
#include "common.bpf.h"

const volatile __u64 targ_off_min_ns = 1000000; /* other threads: shorter intervals not sent */
const volatile __u32 targ_off_max = 400000;	/* records in all (112 bytes each) */
__u64 off_sent = 0;

/* the interpreter (launcher/pyframes.c): _PyRuntime's address when it is
 * fixed (0: per process, in pyrt), and the executable's inode (only
 * processes running that file are read); targ_py_ino 0: off */
const volatile __u64 targ_py_runtime = 0;
const volatile __u64 targ_py_dev = 0;
const volatile __u64 targ_py_ino = 0;

/* The interpreter's layout (x86_64), from its version's headers (the
 * values and where they come from: launcher/pyframes.c). ts_tid: the
 * thread state's native_thread_id (3.11+), or with targ_py_tid_pthread its
 * thread_id, pthread_self(): the thread's fs base (3.10). cframe_current:
 * tstate -> cframe -> current_frame (3.11, 3.12), or with targ_py_no_cframe
 * tstate -> frame itself (3.10). frame_owner: a 3.12 frame owned by the C
 * stack (FRAME_OWNED_BY_CSTACK, a shim) is skipped for its previous one. */
const volatile __u32 targ_py_rt_interp_head = 40;
const volatile __u32 targ_py_is_threads_head = 16;
const volatile __u32 targ_py_ts_next = 8;
const volatile __u32 targ_py_ts_tid = 160;
const volatile __u32 targ_py_tid_pthread = 0;
const volatile __u32 targ_py_ts_frame = 56;
const volatile __u32 targ_py_no_cframe = 0;
const volatile __u32 targ_py_cframe_current = 8;
const volatile __u32 targ_py_frame_code = 32;
const volatile __u32 targ_py_frame_previous = 8;
const volatile __u32 targ_py_frame_owner = 0; /* 0: no owner byte to check */
const volatile __u32 targ_py_owner_cstack = 3;
const volatile __u32 targ_py_code_firstlineno = 72;
const volatile __u32 targ_py_code_filename = 112;
const volatile __u32 targ_py_code_name = 128;
const volatile __u32 targ_py_str_state = 32;
const volatile __u32 targ_py_str_ascii_data = 48;
const volatile __u32 targ_py_str_utf8 = 56;

/* thread states walked to find a main thread's (newest first: the main
 * thread's is last, found at its first switch-out after start-up, when there
 * are few, then kept); 32 cost ~20 ms more verification before the exec */
#define PY_THREADS_MAX 8

/* _PyRuntime per process when it moves (a libpython3.x.so, a
 * position-independent executable): written by the launcher from
 * /proc/PID/maps (pyframes_note), with the address space's start_code
 * (from /proc/PID/stat) that it holds for */
struct pyrt_val {
	__u64 runtime;
	__u64 start_code;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct pyrt_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} pyrt SEC(".maps");

/* main thread -> its PyThreadState */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} pyts SEC(".maps");

struct pycode_key {
	__u64 code;
	__u32 tgid;
	__u32 pad;
};

/* code objects whose names were sent. An LRU map: nothing deletes a
 * process's codes when it exits, and a full plain hash would send a name
 * again at every sample of a new code. 8192: a start-up's samples name a
 * few thousand codes at most, and creating one of 16384 took ~2 ms of the
 * side thread's part before the exec (scripts/bench/map_create.py). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct pycode_key);
	__type(value, __u8);
} pyseen SEC(".maps");
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
 * without a lookup of the tree: cheaper than the tree check itself (which
 * page_fault_user, the one program on the fault tracepoint, makes). */
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

/* A user page fault of thread tid of the tree at user ip, at addr
 * (page_fault_user, faults.bpf.c, once the tree check passed): noted in
 * this CPU's slot. */
__attribute__((noinline)) int attr_fault(__u32 tid, __u64 ip, __u64 addr)
{
	__u32 zero = 0;
	struct fault_slot *s = bpf_map_lookup_elem(&attrflt, &zero);

	if (!s)
		return 0;
	s->tid = tid;
	s->ip = ip;
	s->addr = addr;
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
	const struct file_key *k = r ? mrange_key(r, addr) : NULL;

	if (!k)
		return;
	o->obj = OFFOBJ_FILE;
	o->dev = k->dev;
	o->ino = k->ino;
}

static __always_inline __u64 rd_user(__u64 addr)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

/* current runs the interpreter the launcher found: its _PyRuntime, or 0 */
static __always_inline __u64 py_current(__u32 tgid)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct inode *i = BPF_CORE_READ(t, mm, exe_file, f_inode);
	struct pyrt_val *v;

	if (!i || BPF_CORE_READ(i, i_ino) != targ_py_ino ||
	    BPF_CORE_READ(i, i_sb, s_dev) != targ_py_dev)
		return 0;
	if (targ_py_runtime)
		return targ_py_runtime;
	v = bpf_map_lookup_elem(&pyrt, &tgid);
	return v && v->start_code == BPF_CORE_READ(t, mm, start_code) ? v->runtime : 0;
}

/* A str object's characters: compact ASCII ones hold their data after the
 * header; others are read through their UTF-8 copy, when there is one */
static __always_inline void py_str(__u64 s, char *out, __u32 len)
{
	__u32 state = 0;
	__u64 data;

	bpf_probe_read_user(&state, sizeof(state), (void *)(s + targ_py_str_state));
	data = (state & 0x60) == 0x60 ? s + targ_py_str_ascii_data : rd_user(s + targ_py_str_utf8);
	if (data)
		bpf_probe_read_user_str(out, len, (void *)data);
}

/* A code object's names, once per process. */
static __always_inline void py_names(__u32 tgid, __u64 code)
{
	struct pycode_key k = {code, tgid, 0};
	struct tl_pycode_event *e;
	__u8 one = 1;

	if (bpf_map_lookup_elem(&pyseen, &k))
		return;
	bpf_map_update_elem(&pyseen, &k, &one, BPF_ANY);
	e = ring_reserve(sizeof(*e));
	if (!e)
		return;
	e->ts_ns = bpf_ktime_get_ns();
	e->dur_ns = 0;
	e->type = EV_PYCODE;
	e->pid = tgid;
	e->code = code;
	e->line = 0;
	e->pad = 0;
	bpf_probe_read_user(&e->line, sizeof(e->line), (void *)(code + targ_py_code_firstlineno));
	e->name[0] = e->file[0] = 0;
	py_str(rd_user(code + targ_py_code_name), e->name, sizeof(e->name));
	py_str(rd_user(code + targ_py_code_filename), e->file, sizeof(e->file));
	ev_submit_lazy(e);
}

/* The thread identity a thread state holds for current (tid): its native
 * id, or (3.10) pthread_self(), the fs base */
static __always_inline __u64 py_self(__u32 tid)
{
	if (!targ_py_tid_pthread)
		return tid;
	return BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), thread.fsbase);
}

/* The code object of the top Python frame of main thread tid (current),
 * or 0. Its PyThreadState is found once by walking the interpreter's
 * threads for its id, then kept (and checked) per thread. */
static __always_inline __u64 py_top(__u32 tgid, __u32 tid)
{
	__u64 *cached, ts = 0, t, frame, code, rt, self;
	__u8 owner = 0;

	if (!targ_py_ino || tid != tgid)
		return 0;
	rt = py_current(tgid);
	if (!rt)
		return 0;
	self = py_self(tid);
	cached = bpf_map_lookup_elem(&pyts, &tid);
	if (cached && rd_user(*cached + targ_py_ts_tid) == self) {
		ts = *cached;
	} else {
		t = rd_user(rd_user(rt + targ_py_rt_interp_head) + targ_py_is_threads_head);
		for (int i = 0; i < PY_THREADS_MAX && t; i++) {
			if (rd_user(t + targ_py_ts_tid) == self) {
				ts = t;
				break;
			}
			t = rd_user(t + targ_py_ts_next);
		}
		if (!ts)
			return 0;
		bpf_map_update_elem(&pyts, &tid, &ts, BPF_ANY);
	}
	frame = rd_user(ts + targ_py_ts_frame);
	if (!targ_py_no_cframe && frame)
		frame = rd_user(frame + targ_py_cframe_current);
	if (frame && targ_py_frame_owner) {
		bpf_probe_read_user(&owner, 1, (void *)(frame + targ_py_frame_owner));
		if (owner == targ_py_owner_cstack)
			frame = rd_user(frame + targ_py_frame_previous);
	}
	if (!frame)
		return 0;
	code = rd_user(frame + targ_py_frame_code);
	if (code)
		py_names(tgid, code);
	return code;
}

/* The fault tick (faults.bpf.c) interrupted thread tid of tgid, of the
 * tree, in user mode: a sample of its Python function until ready; with no
 * Python frame (another thread, a program that is not the interpreter),
 * the user ip it interrupted (the thread's saved user registers: the tick
 * skips samples in kernel mode), named in user space by its mapping. */
__attribute__((noinline)) int attr_tick(__u32 tgid, __u32 tid)
{
	struct tl_pysample_event *e;
	__u64 code = 0, ready = ready_ns;
	__u32 flags = 0;

	if (ready)
		return 0;
	if (targ_py_ino)
		code = py_top(tgid, tid);
	if (!code) {
		struct pt_regs *regs =
		    (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());

		if (!regs)
			return 0;
		code = BPF_CORE_READ(regs, ip);
		flags = PYSAMPLE_NATIVE;
		if (!code)
			return 0;
	}
	e = ring_reserve(sizeof(*e));
	if (!e)
		return 0;
	e->ts_ns = bpf_ktime_get_ns();
	e->dur_ns = 0;
	e->type = EV_PYSAMPLE;
	e->pid = tgid;
	e->tid = tid;
	e->pad = flags;
	e->code = code;
	ev_submit_lazy(e);
	return 0;
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

	/* after the ready listen nothing is sent: nothing to note either */
	if (ready_ns)
		return 0;
	o.ts_ns = now;
	o.type = EV_OFFCPU;
	o.pid = tgid;
	o.tid = tid;
	o.reason = reason;
	o.nr = TRACE_SYSNR_NONE;
	/* the Python function it leaves the CPU in: the caller of what it
	 * blocks in, or what ran when it was preempted */
	o.pycode = py_top(tgid, tid);
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
	/* refused (no memory): the interval is not sent, and an older one of
	 * this thread must not stand for it */
	if (bpf_map_update_elem(&attroff, &tid, &o, BPF_ANY)) {
		bpf_map_delete_elem(&attroff, &tid);
		count(CNT_OFF_DROPS, 1);
	}
	return 0;
}

SEC("raw_tp/sched_waking")
int BPF_PROG(attr_waking, struct task_struct *p)
{
	struct tl_off_event *o;
	__u64 id;
	__u32 tid;

	/* every wake-up of the host: not a thread of the tree that left a CPU
	 * (p is read only when it may be one) */
	if (!task_seen(p))
		return 0;
	tid = BPF_CORE_READ(p, pid);
	if (!tree_tid(tid))
		return 0;
	o = bpf_map_lookup_elem(&attroff, &tid);
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
