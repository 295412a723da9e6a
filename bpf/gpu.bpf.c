// SPDX-License-Identifier: GPL-2.0
/* gpu: the CUDA side of a start-up (issue 18; launcher/gpu.c is the user
 * side, docs/gpu.md the design).
 *
 * - gpu_enter / gpu_exit: one uprobe/uretprobe pair per probed function of a
 *   CUDA runtime (libcudart*) or driver (libcuda.so*) library, attached by
 *   the launcher with the tree's pids only (other GPU jobs on the host get
 *   no breakpoint); the attach cookie says which function (enum
 *   trace_gpu_fn). Entry saves the arguments per thread and function, the
 *   return sends one EV_GPU_CALL with the result and the out-pointer's value.
 *   gpu_depth counts each thread's probed calls in progress (per thread
 *   start time: an id reused is another thread): a call made
 *   inside another (the runtime's cudaMalloc calling the driver's
 *   cuMemAlloc_v2) carries the outermost one's function in `within`, so the
 *   launcher counts the memory, copies and init time once.
 * - gpu_mmap: syscalls/sys_enter_mmap, the tree only: a file named libcuda*
 *   mapped by a process with no probes on it yet (a dlopen, as PyTorch does
 *   after it starts) stops that process (SIGSTOP, delivered when the mmap
 *   returns) and tells the launcher (EV_GPU_MAP, urgent), which attaches and
 *   sends SIGCONT: the library's first call is always seen. ld.so maps a
 *   library several times (the whole file, then each segment): the gpuseen
 *   map makes it one stop per process and file; its value says whether the
 *   process is held (GPU_SEEN_HELD) until the launcher has let it go, so
 *   the uprobe keeper can continue it if tts-launch dies meanwhile.
 * - gpu_fork / gpu_fork3: syscalls/sys_exit_clone(3) in the new process (its
 *   return 0, tgid == tid, its own mm): one forked without exec from a
 *   process with CUDA probes (gpuprocs, written by the launcher) inherits
 *   the mapped library and its breakpoints, but not the probes (they are
 *   per pid): it stops itself and says so (EV_GPU_MAP, fd GPU_MAP_FORK), the
 *   launcher attaches its parent's libraries for it and continues it. Not
 *   loaded unless the tracer asks ("?": attached by gpu.c once a library
 *   is attached, so a service without CUDA pays nothing). */
#include "common.bpf.h"
#include "gpu_trace.h"

#define SIGSTOP_ 19

struct gpu_call_key {
	__u32 tid;
	__u32 fn;
};

struct gpu_call {
	__u64 ts;
	__u64 args[4];
	__u32 within; /* the thread's outermost probed call in progress, 0: none */
	__u32 pad;
};

/* a thread's probed calls in progress: how many, the outermost one, and
 * the thread's start time (a thread that died inside a call left its
 * entry: its id reused by a new thread is another start time). LRU: such
 * entries never fill the map. */
struct gpu_nest {
	__u32 depth;
	__u32 outer;
	__u64 start;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct gpu_nest);
} gpu_depth SEC(".maps");

static __always_inline __u64 thread_start(void)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();

	return BPF_CORE_READ(t, start_time);
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct gpu_call_key);
	__type(value, struct gpu_call);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} gpu_calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct gpu_seen_key);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} gpuseen SEC(".maps");

/* processes with CUDA probes attached: tgid -> 1 (the launcher writes it) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} gpuprocs SEC(".maps");

SEC("uprobe")
int BPF_KPROBE(gpu_enter, __u64 a0, __u64 a1, __u64 a2, __u64 a3)
{
	struct gpu_call_key k = {.tid = (__u32)bpf_get_current_pid_tgid()};
	struct gpu_nest *n, first = {.depth = 1};
	struct gpu_call c;
	__u32 tgid;

	if (!traced_now(&tgid))
		return 0;
	k.fn = (__u32)bpf_get_attach_cookie(ctx);
	n = bpf_map_lookup_elem(&gpu_depth, &k.tid);
	first.start = thread_start();
	if (n && n->depth && n->start == first.start) {
		c.within = n->outer;
		n->depth++;
	} else {
		c.within = 0;
		first.outer = k.fn;
		bpf_map_update_elem(&gpu_depth, &k.tid, &first, BPF_ANY);
	}
	c.pad = 0;
	c.ts = bpf_ktime_get_ns();
	c.args[0] = a0;
	c.args[1] = a1;
	c.args[2] = a2;
	c.args[3] = a3;
	bpf_map_update_elem(&gpu_calls, &k, &c, BPF_ANY);
	return 0;
}

/* the functions whose first argument points to what they return */
static __always_inline bool gpu_out_u64(__u32 fn)
{
	return fn == GPU_CUDA_MALLOC || fn == GPU_CU_MEM_ALLOC || fn == GPU_CUDA_MEM_GET_INFO ||
	       fn == GPU_CU_MEM_GET_INFO || fn == GPU_CUDA_MALLOC_ASYNC ||
	       fn == GPU_CU_MEM_ALLOC_ASYNC || fn == GPU_CU_MEM_CREATE;
}

static __always_inline bool gpu_out_int(__u32 fn)
{
	return fn == GPU_CUDA_GET_DEVICE_COUNT || fn == GPU_CUDA_DRIVER_VERSION ||
	       fn == GPU_CU_DRIVER_VERSION || fn == GPU_CUDA_RUNTIME_VERSION;
}

static __always_inline void gpu_fill(struct tl_gpu_event *e, const struct gpu_call *c, __u32 fn,
				     long ret)
{
	e->ts_ns = c->ts;
	e->dur_ns = bpf_ktime_get_ns() - c->ts;
	e->fn = fn;
	e->ret = (__s32)ret;
	e->within = c->within;
	e->args[0] = c->args[0];
	e->args[1] = c->args[1];
	e->args[2] = c->args[2];
	e->args[3] = c->args[3];
	e->out = 0;
	if ((__s32)ret != 0 || !c->args[0])
		return;
	if (gpu_out_u64(fn))
		bpf_probe_read_user(&e->out, sizeof(e->out), (void *)c->args[0]);
	else if (gpu_out_int(fn))
		bpf_probe_read_user(&e->out, sizeof(int), (void *)c->args[0]);
	/* the total of a memory query: its second out pointer */
	if ((fn == GPU_CUDA_MEM_GET_INFO || fn == GPU_CU_MEM_GET_INFO) && c->args[1])
		bpf_probe_read_user(&e->args[2], sizeof(e->args[2]), (void *)c->args[1]);
}

SEC("uretprobe")
int BPF_KRETPROBE(gpu_exit, long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct gpu_call_key k = {.tid = (__u32)id, .fn = (__u32)bpf_get_attach_cookie(ctx)};
	struct gpu_nest *n = bpf_map_lookup_elem(&gpu_depth, &k.tid);
	struct gpu_call *c;

	/* the thread leaves a call: the depth it entered with (an entry not
	 * seen, because the map was full, leaves it as it was) */
	if (n && n->depth > 1 && n->start == thread_start())
		n->depth--;
	else if (n)
		bpf_map_delete_elem(&gpu_depth, &k.tid);
	c = bpf_map_lookup_elem(&gpu_calls, &k);
	if (!c)
		return 0;
	if (k.fn == GPU_CUDA_GET_DEVICE_PROPERTIES) {
		/* the device's name and memory, read from the struct it filled */
		struct tl_gpu_prop_event *p = ev_head(sizeof(*p), EV_GPU_CALL, (__u32)(id >> 32));

		if (p) {
			gpu_fill(&p->call, c, k.fn, ret);
			p->name[0] = 0;
			if ((__s32)ret == 0 && c->args[0]) {
				bpf_probe_read_user_str(p->name, sizeof(p->name),
							(void *)(c->args[0] + GPU_PROP_NAME_OFF));
				bpf_probe_read_user(&p->call.out, sizeof(p->call.out),
						    (void *)(c->args[0] + GPU_PROP_TOTAL_MEM_OFF));
			}
			ev_submit_lazy(p);
		}
	} else {
		struct tl_gpu_event *e = ev_head(sizeof(*e), EV_GPU_CALL, (__u32)(id >> 32));

		if (e) {
			gpu_fill(e, c, k.fn, ret);
			ev_submit_lazy(e);
		}
	}
	bpf_map_delete_elem(&gpu_calls, &k);
	return 0;
}

/* "libcuda": libcuda.so* and libcudart* (not libcudnn, libcublas) */
static __always_inline bool cuda_name(const char *n)
{
	return n[0] == 'l' && n[1] == 'i' && n[2] == 'b' && n[3] == 'c' && n[4] == 'u' &&
	       n[5] == 'd' && n[6] == 'a';
}

SEC("tp/syscalls/sys_enter_mmap")
int gpu_mmap(struct trace_event_raw_sys_enter *ctx)
{
	struct gpu_seen_key k = {};
	struct tl_gpu_map_event *e;
	long fd = (long)ctx->args[4];
	struct file *f;
	__u32 tgid, held = GPU_SEEN_HELD;
	char name[8] = {};

	if (fd < 0 || !traced_now(&tgid))
		return 0;
	f = fd_file(fd);
	if (!f)
		return 0;
	bpf_probe_read_kernel_str(name, sizeof(name), BPF_CORE_READ(f, f_path.dentry, d_name.name));
	if (!cuda_name(name))
		return 0;
	k.tgid = tgid;
	k.dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
	k.ino = BPF_CORE_READ(f, f_inode, i_ino);
	if (bpf_map_update_elem(&gpuseen, &k, &held, BPF_NOEXIST))
		return 0; /* attached already (or under way), or the map is full */
	e = ev_head(sizeof(*e), EV_GPU_MAP, tgid);
	if (!e) {
		/* not held: nothing would let it go; its next mapping tries again */
		bpf_map_delete_elem(&gpuseen, &k);
		return 0;
	}
	e->fd = (__s32)fd;
	e->dev = k.dev;
	e->ino = k.ino;
	bpf_probe_read_kernel_str(e->name, sizeof(e->name),
				  BPF_CORE_READ(f, f_path.dentry, d_name.name));
	bpf_send_signal_thread(SIGSTOP_);
	ev_submit_urgent(e);
	return 0;
}

/* In a task returning from clone: a new process forked from one with CUDA
 * probes, not sharing its memory (a vfork or posix_spawn child execs) */
static __always_inline int gpu_forked(long ret)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	__u64 id = bpf_get_current_pid_tgid();
	struct gpu_seen_key k = {};
	struct tl_gpu_map_event *e;
	__u32 tgid, ptgid, held = GPU_SEEN_HELD;

	if (ret != 0 || (__u32)id != (__u32)(id >> 32) || !traced_now(&tgid))
		return 0;
	ptgid = BPF_CORE_READ(t, real_parent, tgid);
	if (!bpf_map_lookup_elem(&gpuprocs, &ptgid) ||
	    BPF_CORE_READ(t, mm) == BPF_CORE_READ(t, real_parent, mm))
		return 0;
	k.tgid = tgid;
	if (bpf_map_update_elem(&gpuseen, &k, &held, BPF_NOEXIST))
		return 0;
	e = ev_head(sizeof(*e), EV_GPU_MAP, tgid);
	if (!e) {
		bpf_map_delete_elem(&gpuseen, &k);
		return 0;
	}
	e->fd = GPU_MAP_FORK;
	e->dev = 0;
	e->ino = ptgid;
	e->name[0] = 0;
	bpf_send_signal_thread(SIGSTOP_);
	ev_submit_urgent(e);
	return 0;
}

SEC("?tp/syscalls/sys_exit_clone")
int gpu_fork(struct trace_event_raw_sys_exit *ctx) { return gpu_forked(ctx->ret); }

SEC("?tp/syscalls/sys_exit_clone3")
int gpu_fork3(struct trace_event_raw_sys_exit *ctx) { return gpu_forked(ctx->ret); }
