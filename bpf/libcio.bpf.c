// SPDX-License-Identifier: GPL-2.0
/* libcio: [trace] syscalls = cheap's source of the read/write family's
 * figures (issue 17). No program runs on the host's read or write: libc's
 * read, write, pread64, pwrite64, readv, writev, preadv(2), pwritev(2) get
 * a uprobe and a uretprobe attached by the launcher (tracer_libcio.c) as
 * perf events bound to the traced tree (perf_event_open's pid: the root
 * child, inherited by its threads and children), so that only the tree's
 * memory gets the breakpoints. The entry saves the arguments per thread,
 * the return hands the call to sx_io, the accounting sys_exit uses in
 * exact mode: the cookie says which call (its syscall number, low 16 bits)
 * and where the function lies in libc (its st_value, above), so that a
 * failure's errno can be read from the thread's TLS (targ_errno_got).
 * send/recv/sendto/recvfrom/sendmsg/recvmsg are the syscall tracepoints'
 * (syscalls.bpf.c): libc's are not probed, so none is counted twice. */
#include "common.bpf.h"

/* libc's GOT slot (its vaddr in the file) holding errno's offset from the
 * thread pointer (read by the launcher from __errno_location); 0: unknown,
 * a failure's errno is then EIO */
const volatile __u64 targ_errno_got = 0;

#define EIO_ 5

struct libc_call {
	__u64 cookie;
	__u64 ip; /* the function's address in this process */
	__u64 a0, a1, a2, a3;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32); /* tid */
	__type(value, struct libc_call);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} libc_calls SEC(".maps");

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

SEC("uprobe")
int libc_io_enter(struct pt_regs *ctx)
{
	__u32 tgid, tid = (__u32)bpf_get_current_pid_tgid();
	struct libc_call in = {};

	if (light || !traced_now(&tgid))
		return 0;
	in.cookie = bpf_get_attach_cookie(ctx);
	in.ip = PT_REGS_IP(ctx);
	in.a0 = PT_REGS_PARM1(ctx);
	in.a1 = PT_REGS_PARM2(ctx);
	in.a2 = PT_REGS_PARM3(ctx);
	in.a3 = PT_REGS_PARM4(ctx);
	bpf_map_update_elem(&libc_calls, &tid, &in, BPF_ANY);
	return 0;
}

/* libc returned -1: the errno it just stored, at the thread pointer plus
 * the offset libc's GOT holds */
static __always_inline long libc_errno(const struct libc_call *in)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	__u64 base = in->ip - (in->cookie >> 16), tpoff = 0, fs;
	int err = 0;

	if (!targ_errno_got)
		return EIO_;
#if defined(__TARGET_ARCH_x86)
	fs = BPF_CORE_READ(t, thread.fsbase);
#else
	fs = 0;
#endif
	if (!fs || bpf_probe_read_user(&tpoff, sizeof(tpoff), (void *)(base + targ_errno_got)) ||
	    bpf_probe_read_user(&err, sizeof(err), (void *)(fs + tpoff)) || err <= 0)
		return EIO_;
	return err;
}

SEC("uretprobe")
int libc_io_exit(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), mm;
	__u32 tid = (__u32)id;
	struct libc_call *in = bpf_map_lookup_elem(&libc_calls, &tid);
	struct sys_call c = {};
	long ret;

	if (!in)
		return 0;
	c.tgid = id >> 32;
	mm = current_mm();
	bpf_map_update_elem(&libc_procs, &c.tgid, &mm, BPF_ANY);
	ret = (long)PT_REGS_RC(ctx);
	c.ret = ret == -1 ? -libc_errno(in) : ret;
	c.in.nr = (__u32)(in->cookie & 0xffff);
	c.in.a0 = in->a0;
	c.in.a1 = in->a1;
	c.in.a2 = in->a2;
	c.in.a3 = in->a3;
	c.now = bpf_ktime_get_ns();
	bpf_map_delete_elem(&libc_calls, &tid);
	if (!light)
		sx_io(&c);
	return 0;
}
