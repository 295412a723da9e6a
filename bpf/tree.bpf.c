// SPDX-License-Identifier: GPL-2.0
/* tree: the traced process tree.
 *
 * Scope: the process tree rooted at the pid the launcher puts into `procs`
 * before it releases its forked child. Forks add children, exits remove them.
 * Nothing is recorded for a process until it (or the ancestor it was forked
 * from) has exec'd, so the launcher's own child set-up stays out of the trace. */
#include "common.bpf.h"

SEC("raw_tp/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 pid = BPF_CORE_READ(child, pid);
	__u32 *flags = bpf_map_lookup_elem(&procs, &ptgid);
	struct tl_event *e;
	__u32 f;

	if (!flags)
		return 0;
	tree_tid_set(pid, true);
	/* threads share their process's entry */
	if (pid != BPF_CORE_READ(child, tgid))
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
	tree_tid_set(BPF_CORE_READ(p, pid), false);
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
