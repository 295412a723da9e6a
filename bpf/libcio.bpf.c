// SPDX-License-Identifier: GPL-2.0
/* libcio: [trace] syscalls = cheap's source of the read/write family's
 * figures (issue 17). No program runs on the host's read or write: libc's
 * read, write, pread64, pwrite64, readv, writev, preadv(2), pwritev(2) get
 * a uprobe on the jump that tests each of their syscalls' results,
 * attached by the launcher (tracer_libcio.c) as perf events bound to the
 * traced tree (perf_event_open's pid: the root child, inherited by its
 * threads and children), so that only the tree's memory gets the
 * breakpoints. The program hands the call to sx_io, the accounting
 * sys_exit uses in exact mode, with the syscall's own result.
 * send/recv/sendto/recvfrom/sendmsg/recvmsg are the syscall tracepoints'
 * (syscalls.bpf.c): libc's are not probed, so none is counted twice. */
#include "common.bpf.h"

#define ENOSYS_ 38

/* tgid -> the mm its probes fired in (an exec'd image starts unseen) */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u64);
} libc_procs SEC(".maps");

/* tgid -> closes estimated (sx_close) while its libc calls were not seen */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} libc_est SEC(".maps");

static __always_inline __u64 current_mm(void)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();

	return (__u64)BPF_CORE_READ(t, mm);
}

__attribute__((noinline)) int libcio_seen(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 *mm = bpf_map_lookup_elem(&libc_procs, &tgid);

	return mm && *mm == current_mm();
}

__attribute__((noinline)) int libcio_estimate(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 one = 1, *n = bpf_map_lookup_elem(&libc_est, &tgid);

	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&libc_est, &tgid, &one, BPF_NOEXIST);
	return 0;
}

/* On the jump that tests one of the function's syscall results: the
 * kernel's result in rax (-errno), the arguments still in rdi, rsi, rdx, r10 (a
 * syscall keeps every register but rax, rcx and r11); the cookie is the
 * syscall number. One trap per call. */
SEC("uprobe")
int libc_io(struct pt_regs *ctx)
{
	__u64 mm;
	struct sys_call c = {};
	long ret;

	if (light || !traced_now(&c.tgid))
		return 0;
	mm = current_mm();
	bpf_map_update_elem(&libc_procs, &c.tgid, &mm, BPF_ANY);
	ret = (long)PT_REGS_RC(ctx);
	if (ret == -ENOSYS_) /* preadv2/pwritev2 fall back to preadv/pwritev */
		return 0;
	c.ret = ret;
	c.in.nr = (__u32)bpf_get_attach_cookie(ctx);
#if defined(__TARGET_ARCH_x86)
	c.in.a0 = ctx->di;
	c.in.a1 = ctx->si;
	c.in.a2 = ctx->dx;
	c.in.a3 = ctx->r10;
#endif
	c.now = bpf_ktime_get_ns();
	sx_io(&c);
	return 0;
}
