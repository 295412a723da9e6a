/* trace.h: the contract between the kernel side (bpf/) and user space
 * (launcher/): the ring records, the map keys and values user space
 * reads, and the flags and states in them. Nothing else belongs here (the
 * kernel side's private state is in bpf/maps.bpf.h). Fixed-width fields only,
 * no pointers; each shared struct's size is pinned with a _Static_assert, and
 * every ring record starts with struct tl_head (offsetof asserts), so both
 * sides agree.
 *
 * What crosses the ring buffer: rare, significant events (exec, fork, exit,
 * connect, listen, mlock, python imports, chdir, rename, symlink, one record
 * per served connection). Everything high-rate (opens,
 * failed stats, reads, writes, mmaps, faults, off-CPU time, block I/O) is
 * aggregated in maps and read by the launcher at snapshot time. */
#ifndef TTS_TRACE_H
#define TTS_TRACE_H

#ifdef __BPF__
/* vmlinux.h already defines the __u* types */
#else
#include <linux/types.h>
#endif

#define TRACE_STR_MAX	     256 /* path, exec filename */
#define TRACE_AUX_MAX	     128 /* exec arguments (NUL-separated), sockaddr */
#define TRACE_PATH_MAX	     256 /* path key of the paths map */
#define TRACE_NAME_MAX	     48	 /* dentry name of a file seen only through an fd */
#define TRACE_MODEL_SUFFIXES 16	 /* model-weight suffixes the launcher gives (classify.c) */
#define TRACE_COMM_MAX	     16
#define TRACE_BUCKET_NS	     100000000ull /* fault-rate series: 100 ms buckets */
#define TRACE_BUCKETS	     6000	  /* 10 minutes of series; later faults land in the last */
/* faultrate (per CPU) holds the series in rows of TRACE_BUCKET_ROW buckets:
 * 47 per-CPU values of 1 KiB are made in a few microseconds where 6000 of
 * 8 bytes took 1-3.5 ms of the start (one per-CPU allocation each) */
#define TRACE_BUCKET_ROW  128
#define TRACE_BUCKET_ROWS ((TRACE_BUCKETS + TRACE_BUCKET_ROW - 1) / TRACE_BUCKET_ROW)
struct fault_row {
	__u64 n[TRACE_BUCKET_ROW];
};
#define TRACE_HIST_SLOTS 32 /* block latency: log2(us) slots */

enum trace_event_type {
	EV_EXEC = 1,
	EV_FORK,
	EV_EXIT,
	EV_CONNECT,	 /* connect(2) returned (ret: 0, -errno, -EINPROGRESS) */
	EV_CONNECT_DONE, /* a non-blocking TCP connect finished (ret: 0 or -errno) */
	EV_LISTEN,
	EV_MLOCK,
	EV_IMPORT_START,
	EV_IMPORT_DONE,
	EV_CHDIR,    /* chdir/fchdir succeeded: arg/arg2 = the new cwd's dev/ino, str = path */
	EV_RENAME,   /* struct tl_path2_event */
	EV_SYMLINK,  /* struct tl_path2_event: old = link target (as written), new = link path */
	EV_REQUEST,  /* struct tl_req_event: a connection accepted on a listened port ended */
	EV_CONN_END, /* struct tl_conn_event: an established outbound TCP connection ended */
	EV_NAME,     /* struct tl_name_event: a getaddrinfo call of the tree returned */
	EV_PAYLOAD,  /* struct tl_payload_event: the first bytes of a TLS hello or DNS answer */
	EV_OFFCPU,   /* struct tl_off_event: a thread of the tree was off CPU (attribution) */
	EV_PYCODE,   /* struct tl_pycode_event: a Python code object, first seen */
	EV_PYSAMPLE, /* struct tl_pysample_event: the Python function on CPU at a tick */
	EV_GPU_CALL, /* struct tl_gpu_event: a probed CUDA runtime/driver call returned */
	EV_GPU_MAP,  /* struct tl_gpu_map_event: the tree mapped a CUDA library (held stopped) */
};

/* EV_CONNECT / EV_CONNECT_DONE: arg2 = the socket's cookie (struct sock *),
 * so user space joins a connect's outcome to its attempt.
 * EV_CONNECT: arg = the sockaddr's length, aux = the raw sockaddr; flags =
 * CONNECT_FOLLOWS when an EV_CONNECT_DONE will report the outcome (a TCP
 * handshake still under way when connect(2) returned an error, EINPROGRESS).
 * EV_CONNECT_DONE: ret = 0 (established) or -sk_err at the SYN_SENT -> CLOSE
 * transition (0 there: the caller closed the socket first); flags =
 * CONN_CLOSED when the handshake ended in CLOSE, and in the upper half
 * (CONN_FAMILY_SHIFT) the peer's family, whose port is in arg and address in
 * aux (as struct peer_key's addr). */
enum trace_connect_flag {
	CONNECT_FOLLOWS = 1u, /* EV_CONNECT */
	CONN_CLOSED = 1u,     /* EV_CONNECT_DONE */
};
#define CONN_FAMILY_SHIFT 16

/* TCP states (the kernel's enum, include/net/tcp_states.h) that the kernel
 * side follows in inet_sock_set_state; tl_conn_event.ended_by is one of the
 * last three. */
enum trace_tcp_state {
	TL_TCP_ESTABLISHED = 1,
	TL_TCP_SYN_SENT = 2,
	TL_TCP_FIN_WAIT1 = 4, /* this side closed first */
	TL_TCP_CLOSE = 7,     /* reset, or both closed */
	TL_TCP_LAST_ACK = 9,  /* the peer closed first */
};

/* EV_GPU_CALL: which CUDA call (the uprobe's attach cookie; launcher/gpu.c's
 * table names them). The runtime's calls first, then the driver's. */
enum trace_gpu_fn {
	GPU_FN_NONE = 0,
	GPU_CUDA_GET_DEVICE_COUNT, /* a0: int *count (out: *count) */
	GPU_CUDA_SET_DEVICE,	   /* a0: device */
	GPU_CUDA_MALLOC,	   /* a0: void **ptr (out: *ptr), a1: bytes */
	GPU_CUDA_FREE,		   /* a0: ptr (0: the runtime's init idiom) */
	GPU_CUDA_MEMCPY,	   /* a0: dst, a1: src, a2: bytes, a3: kind (1: host to device) */
	GPU_CUDA_MEMCPY_ASYNC,	   /* as cudaMemcpy */
	GPU_CUDA_DRIVER_VERSION,   /* a0: int * (out) */
	GPU_CU_INIT,		   /* a0: flags */
	GPU_CU_CTX_CREATE,	   /* cuCtxCreate_v2 */
	GPU_CU_PRIMARY_CTX_RETAIN, /* cuDevicePrimaryCtxRetain: what the runtime uses */
	GPU_CU_MEM_ALLOC,	   /* cuMemAlloc_v2: a0: CUdeviceptr * (out), a1: bytes */
	GPU_CU_MEM_FREE,	   /* cuMemFree_v2: a0: dptr */
	GPU_CU_MEMCPY_HTOD,	   /* cuMemcpyHtoD_v2: a0: dst, a1: src, a2: bytes */
	GPU_CU_MEMCPY_HTOD_ASYNC,  /* cuMemcpyHtoDAsync_v2 */
	GPU_CU_DRIVER_VERSION,	   /* cuDriverGetVersion: a0: int * (out) */
	GPU_FN_MAX,
};

/* failed path operations (failops map) */
enum trace_failop {
	FOP_MKDIR = 1, /* mkdir, mkdirat (EEXIST is not a failure worth keeping) */
	FOP_UNLINK,    /* unlink, unlinkat without AT_REMOVEDIR (ENOENT skipped) */
	FOP_RMDIR,     /* rmdir, unlinkat with AT_REMOVEDIR (ENOENT skipped) */
};

enum trace_mlock_call {
	MLOCK_CALL_MLOCK = 1,
	MLOCK_CALL_MLOCK2,
	MLOCK_CALL_MLOCKALL,
};

/* procs map (the traced tree, key: tgid): the value's flags */
enum trace_proc_flag {
	/* the process (or an ancestor it forked from) has exec'd: events
	 * before the first exec are the launcher's own set-up of the child and
	 * are not recorded */
	PROC_EXECED = 1u,
};

/* The head of every ring record: user space reads type (and the size it
 * needs) through it before it picks the record's struct. */
#define TL_HEAD_FIELDS                                                                             \
	__u64 ts_ns;  /* CLOCK_MONOTONIC */                                                        \
	__u64 dur_ns; /* connect, mlock, rename, a request, a connection; else 0 */                \
	__u32 type;   /* enum trace_event_type */                                                  \
	__u32 pid     /* tgid */
struct tl_head {
	TL_HEAD_FIELDS;
};
_Static_assert(sizeof(struct tl_head) == 24, "tl_head layout changed");

/* A record embeds the head twice over: as head (for code that takes a
 * struct tl_head) and as its fields (e->ts_ns), one memory. */
#define TL_HEAD                                                                                    \
	union {                                                                                    \
		struct tl_head head;                                                               \
		struct {                                                                           \
			TL_HEAD_FIELDS;                                                            \
		};                                                                                 \
	}

/* rec starts with the head: where user space reads it through struct tl_head */
#define TL_OFF(t, m) __builtin_offsetof(struct t, m)
#define TL_HEAD_ASSERT(rec)                                                                        \
	_Static_assert(TL_OFF(rec, head) == 0 && TL_OFF(rec, ts_ns) == TL_OFF(tl_head, ts_ns) &&   \
			   TL_OFF(rec, dur_ns) == TL_OFF(tl_head, dur_ns) &&                       \
			   TL_OFF(rec, type) == TL_OFF(tl_head, type) &&                           \
			   TL_OFF(rec, pid) == TL_OFF(tl_head, pid),                               \
		       #rec " does not start with struct tl_head")

struct tl_event {
	TL_HEAD;
	__u32 tid;
	__u32 ppid;  /* EV_FORK, EV_EXEC */
	__s32 ret;   /* syscall result, exit code (wait status) */
	__u32 flags; /* mlock flags; EV_CONNECT*: enum trace_connect_flag */
	__u64 arg;   /* mlock length, listen port, sockaddr length, peer port, cwd dev */
	__u64 arg2;  /* mlock call kind, socket family, socket cookie, cwd inode */
	char comm[TRACE_COMM_MAX];
	char str[TRACE_STR_MAX]; /* exec filename, chdir path */
	char aux[TRACE_AUX_MAX]; /* exec args, raw sockaddr */
};
_Static_assert(sizeof(struct tl_event) == 456, "tl_event layout changed");
TL_HEAD_ASSERT(tl_event);

/* Two paths of one syscall (rename, symlink). A relative path comes with the
 * directory it is relative to (the cwd, or the dirfd of a *at call) as
 * dev/ino, which the launcher maps back to a path. */
struct tl_path2_event {
	TL_HEAD;
	__s32 ret;
	__u32 pad;
	__u64 old_dev, old_ino; /* base of a relative old path; 0 if absolute */
	__u64 new_dev, new_ino;
	char old[TRACE_PATH_MAX];
	char new[TRACE_PATH_MAX];
};
_Static_assert(sizeof(struct tl_path2_event) == 576, "tl_path2_event layout changed");
TL_HEAD_ASSERT(tl_path2_event);

/* One connection the tree accepted on a port it listens on: accept(2)
 * returned -> the server closed it. Faults are the process's (all threads,
 * as far as flt_count has counted them: the accepting and writing thread up
 * to its syscall) between accept and the last byte written. */
struct tl_req_event {
	TL_HEAD;    /* ts_ns: accept returned; dur_ns: to the last byte written (to the
		     * close if none was) */
	__u32 tid;  /* the accepting thread */
	__u32 port; /* local (listening) port */
	__u64 close_ns;
	__u64 bytes_in;
	__u64 bytes_out;
	__u64 writes;
	__u64 faults;	    /* exceptions:page_fault_user of the process */
	__u64 major_faults; /* software perf event PAGE_FAULTS_MAJ of the process */
	__u64 model_faults; /* ... of those, inside mappings of model-named files */
	__u64 model_major_faults;
};
_Static_assert(sizeof(struct tl_req_event) == 96, "tl_req_event layout changed");
TL_HEAD_ASSERT(tl_req_event);

/* An outbound TCP connection of the tree, established, then ended (either
 * side closed it, or it was reset): what moved over it. */
struct tl_conn_event {
	TL_HEAD;      /* ts_ns: established; dur_ns: to its end (FIN_WAIT1, LAST_ACK or CLOSE) */
	__u64 cookie; /* struct sock *, as in EV_CONNECT */
	__u64 bytes_in;
	__u64 bytes_out;
	__u32 ended_by; /* the new TCP state: TL_TCP_FIN_WAIT1, TL_TCP_LAST_ACK, TL_TCP_CLOSE */
	__u32 pad;
	/* the most bytes read after one write of the tree and before its next
	 * (or the end), from its second write on: the largest answer to one
	 * request (a TLS handshake's flight, read before the second write, is
	 * not one; TLS 1.3 session tickets are read with the first answer) */
	__u64 reply_max;
	__u64 writes; /* the tree's writes on it */
};
_Static_assert(sizeof(struct tl_conn_event) == 72, "tl_conn_event layout changed");
TL_HEAD_ASSERT(tl_conn_event);

/* Where a USDT probe's argument lies, as the launcher read it from the
 * probe's note ("8@%rax", "-4@-20(%rbp)"; launcher/usdtarg.c): 32 bits of
 * the uprobe link's cookie per argument (the first in the low half), read
 * by python.bpf.c. */
#define USDT_LOC_OFF_MASK   0xffffu /* a dereference's offset, signed 16 bits */
#define USDT_LOC_REG_SHIFT  16	    /* bits 16-23: the register's offset in struct pt_regs */
#define USDT_LOC_SIZE_SHIFT 24	    /* bits 24-25: log2 of the size in bytes */
#define USDT_LOC_SIGNED	    (1u << 26)
#define USDT_LOC_DEREF	    (1u << 27) /* the value is at register + offset */
#define USDT_LOC_VALID	    (1u << 28)

/* EV_IMPORT_START / EV_IMPORT_DONE: a Python module import began or ended
 * in thread tid. Imports nest per thread, so the launcher pairs a done with
 * the innermost open start: only the start carries the name (each probe hit
 * is a trap, and reading user memory is the costly part of the program). */
#define TRACE_MODULE_MAX 128
struct tl_import_event {
	TL_HEAD; /* dur_ns: 0 */
	__u32 tid;
	__u32 found;		     /* done: the module was found */
	char name[TRACE_MODULE_MAX]; /* start only */
};
_Static_assert(sizeof(struct tl_import_event) == 160, "tl_import_event layout changed");
TL_HEAD_ASSERT(tl_import_event);

/* EV_NAME: getaddrinfo(node, ...) in thread tid returned ret (0, or an
 * EAI_* code); the first TRACE_NAME_ADDRS addresses of its result list (in
 * list order, repeats included: one per socket type asked for). */
#define TRACE_HOST_MAX	 128
#define TRACE_NAME_ADDRS 8
struct tl_name_addr {
	__u16 family; /* AF_INET / AF_INET6; 0: unused */
	__u16 pad;
	__u8 addr[16]; /* v4 in the first 4 bytes */
};
struct tl_name_event {
	TL_HEAD; /* dur_ns: the call's */
	__u32 tid;
	__s32 ret;
	__u32 n_addrs; /* addresses in the result list (may exceed TRACE_NAME_ADDRS) */
	__u32 pad;
	struct tl_name_addr addrs[TRACE_NAME_ADDRS];
	char name[TRACE_HOST_MAX];
};
_Static_assert(sizeof(struct tl_name_event) == 328, "tl_name_event layout changed");
TL_HEAD_ASSERT(tl_name_event);

/* EV_GPU_CALL: a CUDA call of thread tid returned ret (cudaError_t or
 * CUresult); dur_ns: the call's. args: its first four arguments as passed;
 * out: what its out-pointer held at the return (a0 of the GPU_* that say
 * "out"), when ret is 0. */
struct tl_gpu_event {
	TL_HEAD;
	__u32 tid;
	__u32 fn; /* enum trace_gpu_fn */
	__s32 ret;
	__u32 within; /* the fn of the thread's outermost call it was made in, 0: none */
	__u64 args[4];
	__u64 out;
};
_Static_assert(sizeof(struct tl_gpu_event) == 80, "tl_gpu_event layout changed");
TL_HEAD_ASSERT(tl_gpu_event);

/* EV_GPU_MAP: process pid mmapped file dev/ino (fd) named name, a
 * libcuda*: the kernel side stopped it (SIGSTOP) so the launcher attaches
 * the CUDA probes before its first call, then sends SIGCONT. */
struct tl_gpu_map_event {
	TL_HEAD;
	__u32 tid;
	__s32 fd;
	__u64 dev;
	__u64 ino;
	char name[TRACE_NAME_MAX];
};
_Static_assert(sizeof(struct tl_gpu_map_event) == 96, "tl_gpu_map_event layout changed");
TL_HEAD_ASSERT(tl_gpu_map_event);

/* gpuseen map: (process, library file) pairs whose CUDA probes are attached
 * or under way (the launcher adds the ones it attached before the start) */
struct gpu_seen_key {
	__u32 tgid;
	__u32 pad;
	__u64 dev;
	__u64 ino;
};

/* EV_PAYLOAD: a bounded copy of the first bytes of a message that names a
 * peer: the first write on an outbound TCP connection when it starts like a
 * TLS handshake record (the ClientHello, whose server_name is plaintext), or
 * a datagram received from port 53 (a DNS answer). Parsed in user space
 * (launcher/peers.c). */
#define TRACE_PAYLOAD_MAX 512
enum trace_payload_kind {
	PAYLOAD_TLS_HELLO = 1,
	PAYLOAD_DNS_ANSWER,
};
struct tl_payload_event {
	TL_HEAD;
	__u32 tid;
	__u32 kind;    /* enum trace_payload_kind */
	__u32 len;     /* bytes moved by the call (data holds min(len, TRACE_PAYLOAD_MAX)) */
	__u16 family;  /* the peer: the server written to, the name server answering */
	__u16 port;    /* host order */
	__u8 addr[16]; /* v4 in the first 4 bytes */
	__u64 cookie;  /* struct sock *, as in EV_CONNECT */
	char data[TRACE_PAYLOAD_MAX];
};
_Static_assert(sizeof(struct tl_payload_event) == 576, "tl_payload_event layout changed");
TL_HEAD_ASSERT(tl_payload_event);
/* EV_OFFCPU: one off-CPU interval of a thread of the tree (attrib.bpf.c),
 * from its switch-out to its switch-in: why it left (reason), what it was
 * blocked in (the syscall and the object of its fd, or the fault), and who
 * woke it. User space (launcher/attribution.c) turns the critical thread's
 * intervals, and the on-CPU gaps between them, into the exclusive breakdown
 * of the start-up. Main threads send every interval, other threads those of
 * at least targ_off_min_ns; none after the ready listen. */
enum trace_off_reason {
	OFF_RUNQ = 0, /* preempted, or yielded runnable: waiting for a CPU */
	OFF_IO,	      /* D state: uninterruptible, mostly I/O */
	OFF_SLEEP,    /* S state: sleeping, waiting for an event */
};

enum trace_off_obj {
	OFFOBJ_NONE = 0, /* no fd, or not a call on an fd */
	OFFOBJ_FILE,	 /* a regular file (dev/ino) */
	OFFOBJ_SOCKET,	 /* a socket: family, port, addr (the peer; port 0: not connected) */
	OFFOBJ_PIPE,	 /* a pipe or FIFO */
	OFFOBJ_OTHER,	 /* another kind of fd (tty, eventfd, epoll, device...) */
};

enum trace_off_flag {
	OFFF_FAULT = 1u, /* in a page fault (no syscall); dev/ino: the model file, if any */
	OFFF_NOFDS = 2u, /* poll/select with no fds: a sleep */
	OFFF_WOKEN = 4u, /* wake_ns and the waker are set */
	OFFF_USER = 8u,	 /* preempted in user mode (not in a syscall) */
};

#define TRACE_SYSNR_NONE (-1) /* nr: not in a syscall */

struct tl_off_event {
	TL_HEAD; /* ts_ns: switched out; dur_ns: until it was back on a CPU */
	__u32 tid;
	__u32 reason;		    /* enum trace_off_reason */
	__s32 nr;		    /* the syscall in progress (TRACE_SYSNR_NONE: none) */
	__u32 flags;		    /* enum trace_off_flag */
	__u64 wake_ns;		    /* woken (runnable) at; 0: not seen */
	__u32 waker_pid, waker_tid; /* the task that woke it (0: an interrupt, or not seen) */
	__u32 obj;		    /* enum trace_off_obj of the call's fd */
	__u16 port, family;	    /* OFFOBJ_SOCKET: the peer (host order) */
	__u64 dev, ino;		    /* OFFOBJ_FILE, or the model file of a fault */
	__u8 addr[16];		    /* OFFOBJ_SOCKET: the peer's address (v4 in the first 4) */
	char waker_comm[TRACE_COMM_MAX];
	__u64 pycode; /* main threads of Python: the top frame's code object (0: none) */
};
_Static_assert(sizeof(struct tl_off_event) == 120, "tl_off_event layout changed");
TL_HEAD_ASSERT(tl_off_event);

/* Python frames (attrib.bpf.c; CPython 3.11's layout): a code object's
 * names, sent once per process and code object; the code objects are
 * referred to by address (a code object lives as long as its function). */
#define TRACE_PYNAME_MAX 64
#define TRACE_PYFILE_MAX 128
struct tl_pycode_event {
	TL_HEAD;    /* pid: the process */
	__u64 code; /* PyCodeObject * */
	__u32 line; /* co_firstlineno: the def line */
	__u32 pad;
	char name[TRACE_PYNAME_MAX]; /* co_qualname ("Class.method") */
	char file[TRACE_PYFILE_MAX]; /* co_filename */
};
_Static_assert(sizeof(struct tl_pycode_event) == 232, "tl_pycode_event layout changed");
TL_HEAD_ASSERT(tl_pycode_event);

/* a sample of the main thread of a Python process on CPU (the fault tick) */
struct tl_pysample_event {
	TL_HEAD;
	__u32 tid;
	__u32 pad;  /* PYSAMPLE_NATIVE, or 0 */
	__u64 code; /* the top frame's code object; PYSAMPLE_NATIVE: the user ip */
};
/* pad of a sample with no Python frame (another thread, another program,
 * an unknown interpreter): code is the interrupted user ip, named in user
 * space by the mapping it falls in (attribution.c) */
#define PYSAMPLE_NATIVE 1u
_Static_assert(sizeof(struct tl_pysample_event) == 40, "tl_pysample_event layout changed");
TL_HEAD_ASSERT(tl_pysample_event);

/* inflight map (key: tid): a syscall of the tree between enter and exit */
struct inflight {
	__u64 ts;
	__u64 a0, a1, a2, a3;
	__u32 nr;
	__u32 pad;
};
_Static_assert(sizeof(struct inflight) == 48, "inflight layout changed");

/* conns map (key: struct sock *): an outbound TCP connect of the tree, from
 * SYN_SENT to the end of the connection (or of the failed handshake) */
struct conn_val {
	__u64 ts; /* SYN_SENT */
	__u32 tgid;
	__u32 tid;
	__u32 async;  /* connect(2) returned before the outcome was reported */
	__u32 done;   /* the handshake ended (on loopback: before connect(2) returned) */
	__s32 ret;    /* its outcome: 0 established, -sk_err */
	__u32 closed; /* it ended in CLOSE */
	__u64 done_ns;
	__u64 bytes_in, bytes_out; /* once established */
	__u64 in_at_out;	   /* bytes_in when the tree last wrote to it */
	__u64 writes;		   /* writes (send calls) once established */
	__u64 reply_max;	   /* see tl_conn_event */
};
_Static_assert(sizeof(struct conn_val) == 80, "conn_val layout changed");

/* paths map: one entry per path string as the process passed it; a relative
 * path also by the directory it was relative to (cwd or dirfd) */
struct path_key {
	__u64 base_dev; /* 0 for absolute paths */
	__u64 base_ino;
	char path[TRACE_PATH_MAX];
};
_Static_assert(sizeof(struct path_key) == 272, "path_key layout changed");

struct path_val {
	__u64 first_ns; /* first open or failed probe */
	__u64 last_ns;
	__u64 fail_first_ns;
	__u64 fail_last_ns;
	__u64 dev; /* inode of the last successful open (kernel dev_t) */
	__u64 ino;
	__u32 opens; /* successful open/openat/openat2 */
	__u32 open_fails;
	__u32 probe_fails; /* failed stat/lstat/newfstatat/statx/access/faccessat/readlink */
	__s32 open_errno;  /* last failure */
	__s32 probe_errno;
	__u32 first_pid;
	__u32 open_flags; /* union of O_ACCMODE|O_CREAT|O_TRUNC seen */
	__u32 pad;
};
_Static_assert(sizeof(struct path_val) == 80, "path_val layout changed");

/* files map: bytes, mappings and faults per regular file, keyed by inode
 * (also the key of the locks map and of a model mapping) */
struct file_key {
	__u64 dev;
	__u64 ino;
};
_Static_assert(sizeof(struct file_key) == 16, "file_key layout changed");

/* Model-file mappings of one process (kernel side: mranges): [start, start + len)
 * and the file, up to MODEL_RANGES, the oldest overwritten. Shared because a
 * zeroed instance lives in the skeleton's .bss. */
#define MODEL_RANGES 16
struct model_ranges {
	__u64 start[MODEL_RANGES];
	__u64 len[MODEL_RANGES]; /* 0 while the slot is rewritten: it holds nothing */
	struct file_key key[MODEL_RANGES];
	__u32 n; /* ranges recorded; the slot is n % MODEL_RANGES */
	__u32 pad;
};
_Static_assert(sizeof(struct model_ranges) == 520, "model_ranges layout changed");

struct file_val {
	__u64 first_ns;
	__u64 last_ns;
	__u64 bytes_read;
	__u64 bytes_written;
	__u64 reads;
	__u64 writes;
	__u64 mmaps;
	__u64 mmap_bytes;
	__u64 faults;		   /* user page faults at addresses inside a mapping of this file */
	__u64 size;		   /* i_size when first seen */
	char name[TRACE_NAME_MAX]; /* dentry name, for files never opened by path */
	__u64 first_write_ns; /* a download's span: its writes, not later reads of the same inode */
	__u64 last_write_ns;
	__u64 first_fault_ns; /* faults inside mappings of this file */
	__u64 last_fault_ns;
	__u64 faults_after_ready; /* ... after the ready listen (targ_ready_port) */
	__u64 major_faults;	  /* major faults there (software perf event; its address) */
	__u64 write_errors;	  /* write/pwrite/writev... that failed (not EAGAIN/EINTR) */
	__s32 write_errno;	  /* the last one */
	__u32 model;		  /* the name looks like model weights (.pth .pt .bin ...) */
};
_Static_assert(sizeof(struct file_val) == 192, "file_val layout changed");

/* wranges map: the ranges one thread wrote into one regular file (write,
 * pwrite, writev, pwritev: the offset from the call or the file position),
 * merged as they come: what a download wrote is the union over its
 * threads, exact while each thread's writes fold into WR_SLOTS ranges (a
 * sequential writer: one; Xet's workers: one per term run); a write that
 * finds no slot is added to extra (exact unless it overlaps another). Per
 * thread, so no two CPUs update one entry at once. */
#define WR_SLOTS 8
struct wr_key {
	__u64 dev;
	__u64 ino;
	__u32 tid;
	__u32 pad;
};
_Static_assert(sizeof(struct wr_key) == 24, "wr_key layout changed");

struct wr_val {
	__u64 lo[WR_SLOTS]; /* [lo, hi): bytes written */
	__u64 hi[WR_SLOTS];
	__u64 extra;	/* bytes of writes no slot took */
	__u64 isize;	/* the inode's i_size after this thread's last write */
	__u64 first_ns; /* its first write */
	__u64 last_ns;	/* its last write */
	__u64 max_end;	/* the highest end offset it wrote */
	__u32 n;	/* slots used */
	__u32 pid;	/* tgid */
};
_Static_assert(sizeof(struct wr_val) == 176, "wr_val layout changed");

/* copies map: a file written by sendfile/copy_file_range from another file
 * (shutil.copy2/copytree on Linux), keyed by the destination's inode */
struct copy_val {
	struct file_key src;
	__u64 bytes; /* moved into the destination */
	__u64 calls;
	__u64 first_ns;
	__u64 last_ns;
	__u64 isize; /* the destination's i_size after the last call */
	__u32 pid;
	__u32 pad;
	char src_name[TRACE_NAME_MAX]; /* the source's dentry name */
	char dst_name[TRACE_NAME_MAX];
};
_Static_assert(sizeof(struct copy_val) == 160, "copy_val layout changed");

/* failops map: failed mkdir/unlink/rmdir, one entry per operation and path */
struct failop_key {
	__u32 op; /* enum trace_failop */
	__u32 pad;
	struct path_key p;
};
_Static_assert(sizeof(struct failop_key) == 280, "failop_key layout changed");

struct failop_val {
	__u64 first_ns;
	__u64 last_ns;
	__u32 count;
	__s32 err; /* the last errno */
	__u32 pid; /* first process */
	__u32 pad;
};
_Static_assert(sizeof(struct failop_val) == 32, "failop_val layout changed");

/* locks map: flock / fcntl record locks, per locked file (inode) */
struct lock_val {
	__u64 first_ns;	     /* first lock call */
	__u64 last_ns;	     /* last call returned */
	__u64 first_fail_ns; /* first failed (contended) attempt */
	__u64 acquired_ns;   /* last successful call */
	__u64 wait_ns; /* total time inside blocking calls (LOCK_EX without LOCK_NB, F_SETLKW) */
	__u64 max_wait_ns;
	__u32 calls;
	__u32 blocking; /* blocking calls */
	__u32 failures; /* calls that failed (EWOULDBLOCK/EAGAIN/EACCES: held by another) */
	__s32 err;	/* the last failure's errno */
	__u32 pid;	/* first process */
	__u32 pad;
	char name[TRACE_NAME_MAX];
};
_Static_assert(sizeof(struct lock_val) == 120, "lock_val layout changed");

/* peers map: bytes per peer */
struct peer_key {
	__u16 family; /* AF_INET / AF_INET6 */
	__u16 port;   /* host order */
	__u8 proto;   /* IPPROTO_TCP / IPPROTO_UDP */
	__u8 pad[3];
	__u8 addr[16]; /* v4 in the first 4 bytes */
};
_Static_assert(sizeof(struct peer_key) == 24, "peer_key layout changed");

struct peer_val {
	__u64 first_ns;
	__u64 last_ns;
	__u64 bytes_in;
	__u64 bytes_out;
	__u64 recvs;  /* messages (recvmmsg counts each) */
	__u64 sends;  /* messages (sendmmsg counts each) */
	__u64 errors; /* failed send/recv (not EAGAIN/EINTR): ECONNREFUSED on UDP... */
	__s32 err;    /* the last one */
	__u32 flags;  /* enum trace_peer_flag */
};

/* peers map: the value's flags */
enum trace_peer_flag {
	/* the socket was accepted on a port the tree listens on: the peer is a
	 * client of the service, not a peer it contacted */
	PEER_INBOUND = 1u,
};
_Static_assert(sizeof(struct peer_val) == 64, "peer_val layout changed");

/* procstat map: per process (tgid) counters */
struct proc_stat {
	__u64 faults;	      /* min_flt + maj_flt of its threads, as flt_sync counts them */
	__u64 exited_min_flt; /* summed task->min_flt of exited threads */
	__u64 exited_maj_flt; /* summed task->maj_flt of exited threads */
	__u64 io_wait_ns;     /* off CPU in D state (uninterruptible: mostly I/O) */
	__u64 sleep_ns;	      /* off CPU in S state (sleeping, waiting for events) */
	__u64 runq_ns;	      /* preempted: runnable, waiting for a CPU */
	__u64 switches;
	__u32 exited;
	__u32 pad;
	__u64 major_faults; /* software perf event PAGE_FAULTS_MAJ (0 if it could not attach) */
	__u64 model_faults; /* user faults inside mappings of model-named files */
	__u64 model_major_faults;
	__u64 start_ns; /* its start (group_leader->start_time), set by its exiting threads */
};
_Static_assert(sizeof(struct proc_stat) == 96, "proc_stat layout changed");

/* counters map (per-CPU array) */
enum trace_counter {
	CNT_RB_DROPS = 0, /* bpf_ringbuf_reserve failed: events lost */
	CNT_PATHS_FULL,	  /* paths map full: a path's counts lost */
	CNT_FILES_FULL,
	CNT_PEERS_FULL,
	CNT_PROCS_FULL,
	CNT_BLOCK_REQS,
	CNT_BLOCK_BYTES,
	CNT_FAILOPS_FULL,
	CNT_LOCKS_FULL,
	CNT_THREADS_FULL, /* fltseen full: a thread's faults not counted */
	CNT_WRANGES_FULL, /* wranges full: a file's write ranges not kept */
	CNT_COPIES_FULL,
	/* off-CPU records not sent: budget spent, ring full, or attroff refused
	 * the entry (attrib.bpf.c) */
	CNT_OFF_DROPS,
	CNT_OFFCPU_LOST, /* off-CPU spans not summed: offcpu refused the entry (sched.bpf.c) */
	CNT_MAX,
};

#endif
