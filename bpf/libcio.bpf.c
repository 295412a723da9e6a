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

/* The number of the syscall the task just returned from, from the
 * instructions before it: rcx holds the address after the `syscall` (the
 * CPU put it there, and a return through iret restores it), and glibc's
 * wrappers set eax right before it, `mov $nr,%eax` (b8 imm32) or `xor
 * %eax,%eax` (31 c0): the pattern tracer_libcio.c found each site by. -1:
 * not that pattern. */
static __always_inline long site_nr(struct pt_regs *ctx)
{
	unsigned char b[7];
	__u32 nr;

#if defined(__TARGET_ARCH_x86)
	if (bpf_probe_read_user(b, sizeof(b), (void *)(ctx->cx - sizeof(b))))
		return -1;
#else
	return -1;
#endif
	if (b[5] != 0x0f || b[6] != 0x05)
		return -1;
	if (b[0] == 0xb8) {
		__builtin_memcpy(&nr, b + 1, sizeof(nr));
		return nr;
	}
	return b[3] == 0x31 && b[4] == 0xc0 ? 0 : -1;
}

static __always_inline bool io_nr(long nr)
{
	return nr == __NR_read || nr == __NR_write || nr == __NR_pread64 || nr == __NR_pwrite64 ||
	       nr == __NR_readv || nr == __NR_writev || nr == __NR_preadv || nr == __NR_pwritev ||
	       nr == __NR_preadv2 || nr == __NR_pwritev2;
}

/* On the jump that tests one of the function's syscall results: the
 * kernel's result in rax (-errno), the arguments still in rdi, rsi, rdx, r10 (a
 * syscall keeps every register but rax, rcx and r11); the syscall's number
 * from its site (every site is one tracefs event: one link, one inherited
 * follower for the tree). One trap per call. */
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
	c.in.nr = site_nr(ctx);
	if (!io_nr(c.in.nr))
		return 0;
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
