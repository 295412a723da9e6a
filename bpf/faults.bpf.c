// SPDX-License-Identifier: GPL-2.0
/* faults: memory: page faults per process and against mapped model
 * files, the fault-rate series, and mlock calls (sx_mlock, from sys_exit). */
#include "common.bpf.h"

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
	__u64 key = task, d, *last;
	struct fault_row *b;
	struct proc_stat *s;
	__u32 bucket, row;

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
	bucket = now > t0_ns ? (now - t0_ns) / TRACE_BUCKET_NS : 0;
	if (bucket >= TRACE_BUCKETS)
		bucket = TRACE_BUCKETS - 1;
	/* per CPU: no cache line bouncing between threads counted at once */
	row = bucket / TRACE_BUCKET_ROW;
	b = bpf_map_lookup_elem(&faultrate, &row);
	if (b)
		__sync_fetch_and_add(&b->n[bucket % TRACE_BUCKET_ROW], d);
	return 0;
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

SYS_HANDLER(sx_mlock)
{
	if (c)
		on_mlock(&c->in, c->ret, c->tgid, c->now);
	return 0;
}

struct fault_ctx {
	__u32 major; /* from the major-fault perf event */
	__u32 model; /* out: the mapping is of a model-named file */
};

/* Count a fault at addr against the model file mapped there, if any. */
static __always_inline void fault_model(__u32 tgid, __u64 addr, struct fault_ctx *fc)
{
	struct model_ranges *r = bpf_map_lookup_elem(&mranges, &tgid);
	const struct file_key *k = r ? mrange_key(r, addr) : NULL;
	struct file_val *v;
	__u64 now;

	if (!k)
		return;
	v = bpf_map_lookup_elem(&files, k);
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

/* Every user page fault of the host: the one program on this tracepoint
 * (a second one cost every fault of the import of torch a second run,
 * ~80k, BENCHMARKS.md) */
SEC("raw_tp/page_fault_user")
int BPF_PROG(page_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct fault_ctx fc = {};
	struct proc_stat *s;

	if (!tree_tid(tid))
		return 0;
	/* the attribution's note of the fault in progress */
	attr_fault(tid, BPF_CORE_READ(regs, ip), address);
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
	/* a sample of the Python function on CPU, for the attribution */
	attr_tick(tgid, (__u32)bpf_get_current_pid_tgid());
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
