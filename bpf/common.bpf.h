// SPDX-License-Identifier: GPL-2.0
/* common.bpf.h: what every domain file of the kernel side shares: includes,
 * constants, the maps (maps.bpf.h) and the small inline helpers.
 *
 * The kernel side of tts-launch's start-up tracing, in one object linked from
 * one file per domain (tree, syscalls, files, net, faults, sched, block,
 * python; maps.bpf.c defines the shared state; the Makefile links them with
 * `bpftool gen object` into build/trace.bpf.o, one skeleton). The helpers
 * here are static inline, compiled into each file that calls them; a helper
 * meant to be verified once is a global function defined in one domain file
 * and declared here (flt_count, the sx_* handlers).
 *
 * Scope: see tree.bpf.c.
 *
 * Probes: raw_tp only (sys_enter/sys_exit dispatched on the syscall number,
 * and sched, exceptions, block, sock tracepoints), USDT for Python imports.
 * raw_tp needs neither tracefs nor the kernel's BTF ids at load (tp_btf would
 * make libbpf parse all of vmlinux BTF: ~40 ms here); a tracepoint the kernel
 * lacks fails its own attach and becomes a fallback.
 *
 * Per-event work is kept small: the syscall number is checked before any map
 * lookup, then the pid-tree lookup; high-rate data goes into hash maps. */
#ifndef TTS_COMMON_BPF_H
#define TTS_COMMON_BPF_H

#include "vmlinux.h"
#include <asm/unistd.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "trace.h"

/* after trace.h: the maps hold its records */
#include "maps.bpf.h"

#define MAP_ANONYMOUS_	      0x20
#define S_IFMT_		      0170000
#define S_IFREG_	      0100000
#define S_IFSOCK_	      0140000
#define AF_INET_	      2
#define AF_INET6_	      10
#define TASK_RUNNING_	      0
#define TASK_UNINTERRUPTIBLE_ 2
#define PF_EXITING_	      0x4
#define AT_FDCWD_	      -100
#define AT_REMOVEDIR_	      0x200
#define EAGAIN_		      11
#define EINTR_		      4
#define EEXIST_		      17
#define ENOENT_		      2
#define LOCK_SH_	      1
#define LOCK_EX_	      2
#define LOCK_NB_	      4
#define F_SETLK_	      6
#define F_SETLKW_	      7
#define F_OFD_SETLK_	      37
#define F_OFD_SETLKW_	      38
#define F_UNLCK_	      2
#define MMSG_MAX	      8 /* sendmmsg/recvmmsg: messages whose lengths are added up */
#define FMODE_READ_	      0x1
#define FMODE_WRITE_	      0x2

/* ---- helpers ---- */

static __always_inline void count(__u32 which, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);

	if (c)
		*c += n;
}

/* After a lookup of key missed: add init under it and return the entry;
 * NULL when the map is full, counted under full (CNT_MAX: not counted). */
static __always_inline void *map_add(void *map, const void *key, const void *init, __u32 full)
{
	void *v;

	bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	v = bpf_map_lookup_elem(map, key);
	if (!v && full != CNT_MAX)
		count(full, 1);
	return v;
}

/* One load or store of a u64 another CPU may be touching, as written */
#define READ_ONCE_U64(x)     (*(volatile __u64 *)&(x))
#define WRITE_ONCE_U64(x, v) (*(volatile __u64 *)&(x) = (v))

/* The file of the model-file mapping of r that holds addr, or NULL. The
 * slot count bounded once, one unsigned compare per slot (start <= addr <
 * start + len): the verifier walks a short body per slot. A slot being
 * rewritten has len 0 (fd_mmap) and holds nothing. */
static __always_inline const struct file_key *mrange_key(const struct model_ranges *r, __u64 addr)
{
	__u32 n = r->n < MODEL_RANGES ? r->n : MODEL_RANGES;

	for (__u32 i = 0; i < MODEL_RANGES; i++) {
		if (i >= n)
			break;
		if (addr - r->start[i] < READ_ONCE_U64(r->len[i]))
			return &r->key[i];
	}
	return NULL;
}

/* The tgid of current when it is in the traced tree and has exec'd. */
static __always_inline bool traced_now(__u32 *tgid)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	__u32 *flags = bpf_map_lookup_elem(&procs, &pid);

	if (!flags || !(*flags & PROC_EXECED))
		return false;
	*tgid = pid;
	return true;
}

/* The tree's process tgid, counted on: its procstat entry (made with its
 * procs entry, at fork or by the launcher for the root). An entry left by
 * an exited process is not counted on again. */
static __always_inline struct proc_stat *fault_proc(__u32 tgid)
{
	struct proc_stat *s = bpf_map_lookup_elem(&procstat, &tgid);

	return s && !s->exited ? s : NULL;
}

/* The thread's faults since they were last counted, added to its process
 * (faults.bpf.c: a global function, verified once). */
int flt_count(__u64 task, __u32 tgid, __u64 now, bool exited);

/* flt_count for thread t of the tree's running process tgid */
static __always_inline void flt_sync(struct task_struct *t, __u32 tgid, __u64 now)
{
	flt_count((__u64)t, tgid, now, false);
}

/* flt_sync for the current thread, in its syscall (a request's edges) */
static __always_inline void flt_sync_current(__u32 tgid, __u64 now)
{
	flt_sync((struct task_struct *)bpf_get_current_task(), tgid, now);
}

/* Is thread tid one of the tree's (treebits)? */
static __always_inline bool tree_tid(__u32 tid)
{
	__u32 k = tid / 64;
	__u64 *w = bpf_map_lookup_elem(&treebits, &k);

	return w && ((*w >> (tid % 64)) & 1);
}

/* taskbits: the bit of a task_struct's address (its low bits are the
 * slab's alignment; 2^18 bits) */
static __always_inline __u32 task_bit(__u64 task)
{
	return (__u32)((task >> 6) ^ (task >> 24)) & (TASK_BITS_WORDS * 64 - 1);
}

/* May task (a pointer, not read) be a thread of the tree that left a CPU? */
static __always_inline bool task_seen(const void *task)
{
	__u32 b = task_bit((__u64)task), k = b / 64;
	__u64 *w = bpf_map_lookup_elem(&taskbits, &k);

	return w && ((*w >> (b % 64)) & 1);
}

static __always_inline void task_seen_set(const void *task)
{
	__u32 b = task_bit((__u64)task), k = b / 64;
	__u64 *w = bpf_map_lookup_elem(&taskbits, &k), bit = 1ull << (b % 64);

	if (w && !(*w & bit))
		__sync_fetch_and_or(w, bit);
}

static __always_inline void tree_tid_set(__u32 tid, bool on)
{
	__u32 k = tid / 64;
	__u64 *w = bpf_map_lookup_elem(&treebits, &k), bit = 1ull << (tid % 64);

	if (!w)
		return;
	if (on)
		__sync_fetch_and_or(w, bit);
	else
		__sync_fetch_and_and(w, ~bit);
}

/* A ring record of size bytes (a constant); a full ring is counted. */
static __always_inline void *ring_reserve(__u64 size)
{
	void *e = bpf_ringbuf_reserve(&events, size, 0);

	if (!e)
		count(CNT_RB_DROPS, 1);
	return e;
}

/* What tl_event and tl_import_event begin with: the record head, then the
 * thread; ev_head fills it in (now, this thread). */
struct ev_head {
	struct tl_head h;
	__u32 tid;
};
_Static_assert(__builtin_offsetof(struct tl_event, tid) == __builtin_offsetof(struct ev_head, tid),
	       "tl_event's thread is not after its head");
_Static_assert(__builtin_offsetof(struct tl_import_event, tid) ==
		   __builtin_offsetof(struct ev_head, tid),
	       "tl_import_event's thread is not after its head");

static __always_inline void *ev_head(__u64 size, __u32 type, __u32 tgid)
{
	struct ev_head *h = ring_reserve(size);

	if (!h)
		return NULL;
	h->h.ts_ns = bpf_ktime_get_ns();
	h->h.dur_ns = 0;
	h->h.type = type;
	h->h.pid = tgid;
	h->tid = (__u32)bpf_get_current_pid_tgid();
	return h;
}

static __always_inline struct tl_event *ev_reserve(__u32 type, __u32 tgid)
{
	struct tl_event *e = ev_head(sizeof(*e), type, tgid);

	if (!e)
		return NULL;
	e->ppid = 0;
	e->ret = 0;
	e->flags = 0;
	e->arg = 0;
	e->arg2 = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->str[0] = 0;
	e->aux[0] = 0;
	return e;
}

/* Frequent events (imports, forks, renames, requests) are submitted without
 * waking the launcher, which drains the ring on its 100 ms tick and whenever
 * an urgent event (exec, exit, listen, mlock) wakes it: a wakeup per import
 * cost more than the import's own probe. */
static __always_inline void ev_submit_lazy(void *e)
{
	/* but a ring half full wakes it at once: a burst (an import storm, a
	 * fork loop) is drained before the ring can overflow between ticks */
	__u64 flags = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > EVENTS_RING_BYTES / 2
			  ? BPF_RB_FORCE_WAKEUP
			  : BPF_RB_NO_WAKEUP;

	bpf_ringbuf_submit(e, flags);
}

/* Forced: an adaptive wakeup is skipped while lazy events wait unread. */
static __always_inline void ev_submit_urgent(void *e)
{
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

static __always_inline struct file *fd_file(long fd)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds;
	struct file *f = NULL;

	if (!fdt || fd < 0 || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	return f;
}

static __always_inline void file_id(struct file *f, struct file_key *k, __u32 *mode)
{
	struct inode *ino = BPF_CORE_READ(f, f_inode);

	k->dev = BPF_CORE_READ(ino, i_sb, s_dev);
	k->ino = BPF_CORE_READ(ino, i_ino);
	*mode = BPF_CORE_READ(ino, i_mode);
}

/* A name ending like model weights (the launcher's one table,
 * launcher/classify.c, given as targ_model_suf/mask): its last 8 bytes,
 * gathered in one bounded pass. This only decides which faults count as
 * model faults in requests; the launcher's file classes are finer. */
static __always_inline __u32 model_tail(__u64 t)
{
	for (int i = 0; i < TRACE_MODEL_SUFFIXES; i++)
		if (targ_model_mask[i] && (t & targ_model_mask[i]) == targ_model_suf[i])
			return 1;
	return 0;
}

/* The same for a dentry name as bpf_probe_read_kernel_str gave it (len: its
 * result, the NUL counted) in a zeroed buffer of TRACE_NAME_MAX: its last 8
 * bytes read at once, a shorter name's right-aligned as if zeros came before
 * it. No loop: this is inlined wherever a file is first seen, and a loop
 * over the name's bytes was most of what the verifier did for sys_exit. */
static __always_inline __u32 model_name(const char *name, long len)
{
	long n = len - 1; /* the name's length */
	__u64 t = 0;

	if (n <= 0 || n >= TRACE_NAME_MAX)
		return 0;
	if (bpf_probe_read_kernel(&t, sizeof(t), name + (n >= 8 ? n - 8 : 0)))
		return 0;
	t = __builtin_bswap64(t);
	if (n < 8)
		t >>= 8 * (8 - n);
	return model_tail(t);
}

/* The same for a path of len bytes (its NUL included, len at most
 * TRACE_PATH_MAX: the read stays inside the buffer): its last 8 bytes read
 * at once. A Hugging Face
 * cache opens a model through its snapshot name (snapshots/REV/gpt.pth)
 * but maps the blob it links to (blobs/<hash>, the dentry model_name sees):
 * the opened path decides. */
static __always_inline __u32 model_path(const char *path, long len)
{
	__u64 t = 0;

	if (len < 10 || len > TRACE_PATH_MAX)
		return 0;
	if (bpf_probe_read_kernel(&t, sizeof(t), path + ((len - 9) & (TRACE_PATH_MAX - 1))))
		return 0;
	return model_tail(__builtin_bswap64(t));
}

/* A file first seen: its entry added under k (files.bpf.c), as a global
 * function, so that the verifier checks the name's reads once, not at every
 * place a file is first seen; the entry is built in place, not on the
 * stack (192 bytes). f: the struct file *, as a number. */
int file_add(__u64 f, struct file_key *k, __u64 now);

/* The entry of file f (k: its key), added when missing; NULL when the map
 * is full. */
static __always_inline struct file_val *file_entry(struct file *f, struct file_key *k, __u64 now)
{
	struct file_val *v = bpf_map_lookup_elem(&files, k);

	if (v)
		return v;
	file_add((__u64)f, k, now);
	return bpf_map_lookup_elem(&files, k);
}

static __always_inline struct sock *file_sock(struct file *f)
{
	struct socket *s = BPF_CORE_READ(f, private_data);

	return s ? BPF_CORE_READ(s, sk) : NULL;
}

/* One followed syscall at its exit: what the handlers below need. */
struct sys_call {
	struct inflight in; /* nr, arguments; ts: entry time when saved at sys_enter */
	__s64 ret;
	__u64 now;
	__u32 tgid;
	__u32 pad;
};

/* The handlers are global functions: the verifier checks each once, not
 * once per call site inlined into sys_exit (that took ~30 ms of every
 * start). c is never NULL; the checks are for the verifier. */
#define SYS_HANDLER(name) __attribute__((noinline)) int name(struct sys_call *c)

/* The handlers sys_exit dispatches to, each in its domain's file. */
int sx_path(struct sys_call *c);
int sx_dirop(struct sys_call *c);
int sx_mmap(struct sys_call *c);
int sx_other(struct sys_call *c);
int sx_bytes(struct sys_call *c);
int sx_net(struct sys_call *c);
int sx_mlock(struct sys_call *c);
int sx_fwrite(struct sys_call *c);
int sx_copy(struct sys_call *c);
/* a call of the read/write family (syscalls.bpf.c): sx_bytes, and
 * sx_fwrite for the writes; from sys_exit and from libc's (libcio.bpf.c) */
int sx_io(struct sys_call *c);
/* [trace] syscalls = cheap: libc's read/write family of the current
 * process (its present image) is seen call by call (libcio.bpf.c): its
 * closes and connection ends add no estimate */
int libcio_seen(void);
/* ... and a close of the current process was estimated all the same
 * (libc_est: the launcher tells the processes never reached, tracer.c) */
int libcio_estimate(void);
/* [trace] syscalls = cheap: close, at its entry (a0 the fd): what read and
 * write of a regular file would have counted, approximately (files.bpf.c;
 * TCP sockets: net.bpf.c's cheap_end, when the connection ends) */
int sx_close(struct sys_call *c);

/* A message that may carry the peer's name (names.bpf.c): a bounded copy to
 * user space (kind: enum trace_payload_kind). */
int names_payload(const struct peer_key *k, __u64 sk, __u64 buf, __u64 len, __u32 kind);

/* attribution (attrib.bpf.c), called from sched_switch: a thread of the
 * tree leaves the CPU (current is that thread) / comes back */
int attr_leave(__u32 tgid, __u32 tid, __u32 reason, __u64 now);
int attr_arrive(__u32 tid, __u32 tgid, __u64 now);
/* the fault tick interrupted a thread of the tree in user mode (attrib.bpf.c) */
int attr_tick(__u32 tgid, __u32 tid);
/* a thread of the tree faulted at user ip, at addr (attrib.bpf.c) */
int attr_fault(__u32 tid, __u64 ip, __u64 addr);

#endif
