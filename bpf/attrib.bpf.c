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
 * the launcher found (targ_py_*: CPython 3.11 built as a fixed-address
 * executable, Debian's /usr/bin/python3.11), the top frame's code object,
 * read from the thread's PyThreadState at each switch-out (the caller of a
 * sleep, a recv...) and at the fault tick's samples (faults.bpf.c calls
 * attr_tick: cpu). Each code object's names go to user space once. */
#include "common.bpf.h"

const volatile __u64 targ_off_min_ns = 1000000; /* other threads: shorter intervals not sent */
const volatile __u32 targ_off_max = 400000;	/* records in all (112 bytes each) */
__u64 off_sent = 0;

/* the interpreter (launcher/pyframes.c): _PyRuntime's address, and the
 * executable's inode (only processes running that file are read); 0: off */
const volatile __u64 targ_py_runtime = 0;
const volatile __u64 targ_py_dev = 0;
const volatile __u64 targ_py_ino = 0;

/* CPython 3.11 (x86_64), from its headers: Include/internal/pycore_runtime.h
 * (_PyRuntimeState.interpreters.head), pycore_interp.h (threads.head),
 * cpython/pystate.h (PyThreadState next, cframe, native_thread_id),
 * pycore_frame.h (_PyCFrame.current_frame, _PyInterpreterFrame.f_code),
 * cpython/code.h (co_filename, co_qualname, co_firstlineno) and
 * cpython/unicodeobject.h (PyASCIIObject: state, then the data) */
#define PY311_RT_INTERP_HEAD   40
#define PY311_IS_THREADS_HEAD  16
#define PY311_TS_NEXT	       8
#define PY311_TS_CFRAME	       56
#define PY311_TS_NATIVE_TID    160
#define PY311_CFRAME_CURRENT   8
#define PY311_FRAME_CODE       32
#define PY311_CODE_FIRSTLINENO 72
#define PY311_CODE_FILENAME    112
#define PY311_CODE_QUALNAME    128
#define PY311_STR_STATE	       32
#define PY311_STR_ASCII_DATA   48
#define PY311_STR_UTF8	       56 /* PyCompactUnicodeObject.utf8 (non-ASCII) */
/* thread states walked to find a main thread's (newest first: the main
 * thread's is last, found at its first switch-out after start-up, when there
 * are few, then kept); 32 cost ~20 ms more verification before the exec */
#define PY_THREADS_MAX 8

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

/* code objects whose names were sent */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
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

static __always_inline __u64 rd_user(__u64 addr)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

/* current runs the interpreter the launcher found */
static __always_inline bool py_current(void)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct inode *i = BPF_CORE_READ(t, mm, exe_file, f_inode);

	return i && BPF_CORE_READ(i, i_ino) == targ_py_ino &&
	       BPF_CORE_READ(i, i_sb, s_dev) == targ_py_dev;
}

/* A code object's names, once per process. */
static __always_inline void py_names(__u32 tgid, __u64 code)
{
	struct pycode_key k = {code, tgid, 0};
	struct tl_pycode_event *e;
	__u64 s, data;
	__u32 state = 0;
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
	bpf_probe_read_user(&e->line, sizeof(e->line), (void *)(code + PY311_CODE_FIRSTLINENO));
	e->name[0] = e->file[0] = 0;
	/* compact ASCII strings hold their data after the header; others are
	 * read through their UTF-8 copy, when there is one */
	s = rd_user(code + PY311_CODE_QUALNAME);
	bpf_probe_read_user(&state, sizeof(state), (void *)(s + PY311_STR_STATE));
	data = (state & 0x60) == 0x60 ? s + PY311_STR_ASCII_DATA : rd_user(s + PY311_STR_UTF8);
	if (data)
		bpf_probe_read_user_str(e->name, sizeof(e->name), (void *)data);
	s = rd_user(code + PY311_CODE_FILENAME);
	state = 0;
	bpf_probe_read_user(&state, sizeof(state), (void *)(s + PY311_STR_STATE));
	data = (state & 0x60) == 0x60 ? s + PY311_STR_ASCII_DATA : rd_user(s + PY311_STR_UTF8);
	if (data)
		bpf_probe_read_user_str(e->file, sizeof(e->file), (void *)data);
	ev_submit_lazy(e);
}

/* The code object of the top Python frame of main thread tid (current),
 * or 0. Its PyThreadState is found once by walking the interpreter's
 * threads for its native id, then kept (and checked) per thread. */
static __always_inline __u64 py_top(__u32 tgid, __u32 tid)
{
	__u64 *cached = bpf_map_lookup_elem(&pyts, &tid), ts = 0, t, frame, code;

	if (!targ_py_runtime || tid != tgid || !py_current())
		return 0;
	if (cached && rd_user(*cached + PY311_TS_NATIVE_TID) == tid) {
		ts = *cached;
	} else {
		t = rd_user(rd_user(targ_py_runtime + PY311_RT_INTERP_HEAD) +
			    PY311_IS_THREADS_HEAD);
		for (int i = 0; i < PY_THREADS_MAX && t; i++) {
			if (rd_user(t + PY311_TS_NATIVE_TID) == tid) {
				ts = t;
				break;
			}
			t = rd_user(t + PY311_TS_NEXT);
		}
		if (!ts)
			return 0;
		bpf_map_update_elem(&pyts, &tid, &ts, BPF_ANY);
	}
	frame = rd_user(rd_user(ts + PY311_TS_CFRAME) + PY311_CFRAME_CURRENT);
	if (!frame)
		return 0;
	code = rd_user(frame + PY311_FRAME_CODE);
	if (code)
		py_names(tgid, code);
	return code;
}

/* The fault tick (faults.bpf.c) interrupted thread tid of tgid, of the
 * tree, in user mode: a sample of its Python function until ready. */
__attribute__((noinline)) int attr_tick(__u32 tgid, __u32 tid)
{
	struct tl_pysample_event *e;
	__u64 code, ready = ready_ns;

	if (ready || !targ_py_runtime)
		return 0;
	code = py_top(tgid, tid);
	if (!code)
		return 0;
	e = ring_reserve(sizeof(*e));
	if (!e)
		return 0;
	e->ts_ns = bpf_ktime_get_ns();
	e->dur_ns = 0;
	e->type = EV_PYSAMPLE;
	e->pid = tgid;
	e->tid = tid;
	e->pad = 0;
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
