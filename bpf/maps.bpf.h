// SPDX-License-Identifier: GPL-2.0
/* maps.bpf.h: the state the BPF programs share, one declaration each.

 * Every domain file (bpf/X.bpf.c) includes this header and sees the maps as
 * extern; maps.bpf.c defines TL_MAPS_HERE first and so defines them, once.
 * `bpftool gen object` resolves the externs when it links the domain objects
 * into the one trace.bpf.o, whose skeleton the launcher loads. The globals
 * (.rodata settings, .bss flags) are declared here and defined in maps.bpf.c. */
#ifndef TTS_MAPS_BPF_H
#define TTS_MAPS_BPF_H

#ifdef TL_MAPS_HERE
#define TL_MAP
#else
#define TL_MAP extern
#endif

/* set by the launcher between open and load */
extern const volatile __u32 targ_ready_port; /* the ready listen; 0: the first inet listen */
/* model-weight suffixes (launcher/classify.c): a name's last 8 bytes t end
 * like suffix i when (t & targ_model_mask[i]) == targ_model_suf[i]; mask 0:
 * unused */
extern const volatile __u64 targ_model_suf[TRACE_MODEL_SUFFIXES];
extern const volatile __u64 targ_model_mask[TRACE_MODEL_SUFFIXES];
/* [trace] syscalls = cheap: no read/write is seen; regular files' bytes
 * come from their positions and sizes at close, TCP bytes from the
 * socket's counters at close (docs/timeline.md, "tracing.syscalls") */
extern const volatile __u32 targ_cheap;
/* cheap: libc's read/write family probed for the tree (libcio.bpf.c), */
extern volatile __u32 libcio_on; /* set by the launcher once attached */

/* set by the launcher after the load, before any attach: its start, the
 * fault-rate series' origin (not read-only data: a load kept between runs,
 * progcache.h, serves runs that start at other times) */
extern __u64 t0_ns;
/* set by the kernel side: when the ready listen happened (0: not yet) */
extern __u64 ready_ns;
/* Set once a model file is mapped: until then no fault can be in one, and
 * the fault probes skip the range scan. */
extern __u64 model_mapped;
/* Bytes written to regular files plus bytes received from peers (what a
 * download moves), plus one per refused lock poll (a download waiting). The launcher reads it from
 * the mmapped .bss (no syscall) to snapshot the maps for live progress only while something moves.
 */
extern __u64 dl_activity;
/* set by the launcher when [trace] requests_window ends: no call is saved
 * at entry from then on, only those saved before are finished
 * (docs/timeline.md, "light") */
extern volatile __u32 light;

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);		      /* tgid */
	__type(value, __u32);		      /* PROC_* flags */
	__uint(map_flags, BPF_F_NO_PREALLOC); /* created fast, filled as the tree runs */
} procs SEC(".maps");

/* One bit per thread id of the tree (tree_tid in common.bpf.h): set for the
 * root by the launcher and at every fork and clone from the tree, cleared at
 * a thread's exit. The first test of the host-wide programs that run for
 * every context switch, wake-up or page fault of the host: an array lookup,
 * which the verifier inlines, where procs is a hash (its lookup cost a
 * neighbour's context switch ~100 ns more, BENCHMARKS.md). 4,194,304 bits:
 * the kernel's PID_MAX_LIMIT; 512 KiB of kernel memory, none mapped here. */
#define TREE_BITS_WORDS (4194304 / 64)
TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TREE_BITS_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} treebits SEC(".maps");

/* One bit per task_struct address a thread of the tree has left a CPU with
 * (task_seen in common.bpf.h), hashed: a context switch to, or a wake-up of,
 * a task whose bit is clear cannot be the return of a thread of the tree, and
 * the task is not even read (no bpf_probe_read_kernel of its pid: the cost
 * of a neighbour's switch, BENCHMARKS.md). A set bit may be another task's
 * (a collision, a freed task's reused memory): then its pid decides, as
 * before. 2^18 bits, 32 KiB. */
#define TASK_BITS_WORDS 4096
TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TASK_BITS_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} taskbits SEC(".maps");

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32); /* tid */
	__type(value, struct inflight);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* created fast, filled as the tree runs */
} inflight SEC(".maps");

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct path_key);
	__type(value, struct path_val);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* created fast, filled as the tree runs */
} paths SEC(".maps");

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct path_key);
} scratch SEC(".maps");

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct file_key);
	__type(value, struct file_val);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* created fast, filled as the tree runs */
} files SEC(".maps");

/* Where each process mapped model files (address ranges from mmap's return):
 * the fault probes find the file of a faulting address here, a bounded scan,
 * instead of bpf_find_vma on every fault. munmap is not followed: a range
 * stays until the process exits (a later mapping at the same address would
 * be counted as the model file's). */
TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct model_ranges);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* written at mmap only: created fast */
} mranges SEC(".maps");

extern struct model_ranges zero_ranges; /* an empty value to insert */

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct peer_key);
	__type(value, struct peer_val);
} peers SEC(".maps");

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32); /* tgid */
	__type(value, struct proc_stat);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* created fast, filled as the tree runs */
} procstat SEC(".maps");

/* why a thread of the tree is off CPU (sched.bpf.c) */
enum offcpu_reason {
	OFFCPU_RUNQ = 0, /* preempted, or yielded runnable: waiting for a CPU */
	OFFCPU_IO,	 /* D state: uninterruptible, mostly I/O */
	OFFCPU_SLEEP,	 /* S state: sleeping, waiting for an event */
};

struct offcpu {
	__u64 ts;
	__u32 tgid;
	__u32 reason; /* enum offcpu_reason */
};

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	/* threads of the tree off CPU at once; an exiting thread leaves none
	 * behind (sched_switch). Not preallocated: an LRU map of this size took
	 * ~3 ms to create, before the service's exec */
	__uint(max_entries, 16384);
	__type(key, __u32); /* tid */
	__type(value, struct offcpu);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} offcpu SEC(".maps");

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TRACE_BUCKET_ROWS);
	__type(key, __u32); /* bucket / TRACE_BUCKET_ROW */
	__type(value, struct fault_row);
} faultrate SEC(".maps");

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	/* the thread's task_struct: it keeps it across an exec, where a
	 * thread other than the leader takes the leader's id */
	__type(key, __u64);
	__type(value, __u64);		      /* its min_flt + maj_flt when last counted */
	__uint(map_flags, BPF_F_NO_PREALLOC); /* an entry per thread, made once: no 16k to set up */
} fltseen SEC(".maps");

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);   /* struct request * */
	__type(value, __u64); /* issue time */
} blockstart SEC(".maps");

/* bios the tree submitted (block.bpf.c), until their request's issue */
TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);  /* struct bio * */
	__type(value, __u8); /* 1 */
} blockbios SEC(".maps");

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TRACE_HIST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} blockhist SEC(".maps");

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64); /* struct sock * */
	__type(value, struct conn_val);
} conns SEC(".maps");

/* ports the tree listens on: accepted connections there are requests */
TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u16);
	__type(value, __u8);
} listen_ports SEC(".maps");

/* A process's fault counters at one moment (req_faults_now, net.bpf.c): a
 * request's faults are the difference of two. */
struct req_faults {
	__u64 faults;
	__u64 major;
	__u64 model;
	__u64 model_major;
};

struct req_state {
	__u64 start_ns;
	__u64 last_out_ns;
	__u64 bytes_in;
	__u64 bytes_out;
	__u64 writes;
	struct req_faults at_accept; /* the process's fault counters at accept */
	struct req_faults at_write;  /* ... at the last write (at the close if none) */
	__u32 tgid;
	__u32 tid;
	__u32 port;
	__u32 pad;
};

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* connections open at once */
	__type(key, __u64);	   /* struct sock * of the accepted connection */
	__type(value, struct req_state);
	/* ended at its close (inet_sock_set_state); not preallocated: an LRU
	 * map of this size took ~3 ms to create, before the service's exec */
	__uint(map_flags, BPF_F_NO_PREALLOC);
} reqs SEC(".maps");

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct failop_key);
	__type(value, struct failop_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} failops SEC(".maps");

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct failop_key);
} fscratch SEC(".maps");

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct file_key);
	__type(value, struct lock_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} locks SEC(".maps");

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* (file, thread) pairs that wrote */
	__type(key, struct wr_key);
	__type(value, struct wr_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} wranges SEC(".maps");

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct file_key); /* the destination */
	__type(value, struct copy_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} copies SEC(".maps");

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

#define EVENTS_RING_BYTES (1 << 20)

TL_MAP struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	/* ~2,300 events: drained every 100 ms, and at once when half full
	 * (ev_submit_lazy). Its pages are mapped twice into tts-launch (the
	 * ring's wrap-around view), so its RSS is twice this (BENCHMARKS.md) */
	__uint(max_entries, EVENTS_RING_BYTES);
} events SEC(".maps");

#endif
