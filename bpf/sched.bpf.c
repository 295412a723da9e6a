// SPDX-License-Identifier: GPL-2.0
/* sched: off-CPU time of the tree's threads (run queue, I/O wait, sleep),
 * summed per process; each interval also goes to attrib.bpf.c (attr_leave,
 * attr_arrive), which says what the thread was blocked in. */
#include "common.bpf.h"

SEC("raw_tp/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u32 ptgid, ntgid;
	__u64 now = 0;
	bool leaving, prev_in = tree_tid((__u32)bpf_get_current_pid_tgid()); /* current: prev */

	/* every context switch of the host: neither thread of the tree (next
	 * is read only when it may be one coming back) */
	if (prev_in)
		task_seen_set(prev);
	else if (!task_seen(next) || !tree_tid(BPF_CORE_READ(next, pid)))
		return 0;
	ptgid = BPF_CORE_READ(prev, tgid);
	ntgid = BPF_CORE_READ(next, tgid);
	/* a thread of the tree leaving the CPU; not an exiting one: its faults
	 * were counted at its exit (thread_exit), and it will not come back on
	 * a CPU to end an off-CPU span */
	leaving =
	    bpf_map_lookup_elem(&procs, &ptgid) && !(BPF_CORE_READ(prev, flags) & PF_EXITING_);

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
			o.reason = OFFCPU_RUNQ;
		else if (prev_state & TASK_UNINTERRUPTIBLE_)
			o.reason = OFFCPU_IO;
		else
			o.reason = OFFCPU_SLEEP;
		/* refused (no memory): its time is not summed, and an older
		 * start of this thread must not stand for it */
		if (bpf_map_update_elem(&offcpu, &tid, &o, BPF_ANY)) {
			bpf_map_delete_elem(&offcpu, &tid);
			count(CNT_OFFCPU_LOST, 1);
		}
		attr_leave(ptgid, tid, o.reason, now);
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
		attr_arrive(tid, ntgid, now);
		d = now - o->ts;
		s = bpf_map_lookup_elem(&procstat, &ntgid);
		if (!s)
			s = map_add(&procstat, &ntgid, &init, CNT_MAX);
		if (s) {
			if (o->reason == OFFCPU_IO)
				__sync_fetch_and_add(&s->io_wait_ns, d);
			else if (o->reason == OFFCPU_SLEEP)
				__sync_fetch_and_add(&s->sleep_ns, d);
			else
				__sync_fetch_and_add(&s->runq_ns, d);
			__sync_fetch_and_add(&s->switches, 1);
		}
		bpf_map_delete_elem(&offcpu, &tid);
	}
	return 0;
}
