/* trace: structs and constants shared by bpf/trace.bpf.c (kernel) and
 * launcher/tracer.c (user). Fixed-width fields only, no pointers; each
 * shared struct's size is pinned with a _Static_assert so both sides agree.
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

#define TRACE_STR_MAX	  256 /* path, exec filename, module name */
#define TRACE_AUX_MAX	  128 /* exec arguments (NUL-separated), sockaddr */
#define TRACE_PATH_MAX	  256 /* path key of the paths map */
#define TRACE_NAME_MAX	  48  /* dentry name of a file seen only through an fd */
#define TRACE_COMM_MAX	  16
#define TRACE_BUCKET_NS	  100000000ull /* fault-rate series: 100 ms buckets */
#define TRACE_BUCKETS	  6000	       /* 10 minutes of series; later faults land in the last */
#define TRACE_HIST_SLOTS  32	       /* block latency: log2(us) slots */

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
	EV_CHDIR,   /* chdir/fchdir succeeded: arg/arg2 = the new cwd's dev/ino, str = path */
	EV_RENAME,  /* struct tl_path2_event */
	EV_SYMLINK, /* struct tl_path2_event: old = link target (as written), new = link path */
	EV_REQUEST, /* struct tl_req_event: a connection accepted on a listened port ended */
};

enum trace_mlock_call {
	MLOCK_CALL_MLOCK = 1,
	MLOCK_CALL_MLOCK2,
	MLOCK_CALL_MLOCKALL,
};

/* pid-tree map value */
#define PROC_EXECED 1u /* the process (or an ancestor it forked from) has exec'd:
			* events before the first exec are the launcher's own
			* set-up of the child and are not recorded */

struct tl_event {
	__u64 ts_ns;  /* CLOCK_MONOTONIC */
	__u64 dur_ns; /* connect, mlock */
	__u32 type;
	__u32 pid; /* tgid */
	__u32 tid;
	__u32 ppid;	/* EV_FORK, EV_EXEC */
	__s32 ret;	/* syscall result, exit code (wait status) */
	__u32 flags;	/* mlock flags, open flags, import "found" */
	__u64 arg;	/* mlock length, listen port, sockaddr length */
	__u64 arg2;	/* mlock call kind, socket family */
	char comm[TRACE_COMM_MAX];
	char str[TRACE_STR_MAX]; /* exec filename, module name */
	char aux[TRACE_AUX_MAX]; /* exec args, raw sockaddr */
};
_Static_assert(sizeof(struct tl_event) == 456, "tl_event layout changed");

/* Two paths of one syscall (rename, symlink). A relative path comes with the
 * directory it is relative to (the cwd, or the dirfd of a *at call) as
 * dev/ino, which the launcher maps back to a path. Same head as tl_event. */
struct tl_path2_event {
	__u64 ts_ns;
	__u64 dur_ns;
	__u32 type;
	__u32 pid;
	__s32 ret;
	__u32 pad;
	__u64 old_dev, old_ino; /* base of a relative old path; 0 if absolute */
	__u64 new_dev, new_ino;
	char old[TRACE_PATH_MAX];
	char new[TRACE_PATH_MAX];
};
_Static_assert(sizeof(struct tl_path2_event) == 576, "tl_path2_event layout changed");

/* One connection the tree accepted on a port it listens on: accept(2)
 * returned -> the server closed it. Faults are the process's user faults
 * (all threads) between accept and the last byte written. */
struct tl_req_event {
	__u64 ts_ns;  /* accept returned */
	__u64 dur_ns; /* to the last byte written (to the close if none was) */
	__u32 type;
	__u32 pid;
	__u32 tid;  /* the accepting thread */
	__u32 port; /* local (listening) port */
	__u64 close_ns;
	__u64 bytes_in;
	__u64 bytes_out;
	__u64 writes;
	__u64 faults;	    /* exceptions:page_fault_user of the process */
	__u64 major_faults; /* software perf event PAGE_FAULTS_MAJ of the process */
};
_Static_assert(sizeof(struct tl_req_event) == 80, "tl_req_event layout changed");

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
	__u32 opens;	   /* successful open/openat/openat2 */
	__u32 open_fails;
	__u32 probe_fails; /* failed stat/lstat/newfstatat/statx/access/faccessat/readlink */
	__s32 open_errno;  /* last failure */
	__s32 probe_errno;
	__u32 first_pid;
	__u32 open_flags; /* union of O_ACCMODE|O_CREAT|O_TRUNC seen */
	__u32 pad;
};
_Static_assert(sizeof(struct path_val) == 80, "path_val layout changed");

/* fileio map: bytes per regular file, keyed by inode */
struct file_key {
	__u64 dev;
	__u64 ino;
};
_Static_assert(sizeof(struct file_key) == 16, "file_key layout changed");

struct file_val {
	__u64 first_ns;
	__u64 last_ns;
	__u64 bytes_read;
	__u64 bytes_written;
	__u64 reads;
	__u64 writes;
	__u64 mmaps;
	__u64 mmap_bytes;
	__u64 faults; /* user page faults at addresses inside a mapping of this file */
	__u64 size;   /* i_size when first seen */
	char name[TRACE_NAME_MAX]; /* dentry name, for files never opened by path */
	__u64 first_write_ns; /* a download's span: its writes, not later reads of the same inode */
	__u64 last_write_ns;
};
_Static_assert(sizeof(struct file_val) == 144, "file_val layout changed");

/* netio map: bytes per peer */
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
	__u64 recvs;
	__u64 sends;
};
_Static_assert(sizeof(struct peer_val) == 48, "peer_val layout changed");

/* procstat map: per process (tgid) counters */
struct proc_stat {
	__u64 faults;	    /* exceptions:page_fault_user */
	__u64 exited_min_flt; /* summed task->min_flt of exited threads */
	__u64 exited_maj_flt; /* summed task->maj_flt of exited threads */
	__u64 io_wait_ns;   /* off CPU in D state (uninterruptible: mostly I/O) */
	__u64 sleep_ns;	    /* off CPU in S state (sleeping, waiting for events) */
	__u64 runq_ns;	    /* preempted: runnable, waiting for a CPU */
	__u64 switches;
	__u32 exited;
	__u32 pad;
	__u64 major_faults; /* software perf event PAGE_FAULTS_MAJ (0 if it could not attach) */
};
_Static_assert(sizeof(struct proc_stat) == 72, "proc_stat layout changed");

/* counters map (per-CPU array) */
enum trace_counter {
	CNT_RB_DROPS = 0, /* bpf_ringbuf_reserve failed: events lost */
	CNT_PATHS_FULL,	  /* paths map full: a path's counts lost */
	CNT_FILES_FULL,
	CNT_PEERS_FULL,
	CNT_PROCS_FULL,
	CNT_BLOCK_REQS,
	CNT_BLOCK_BYTES,
	CNT_MAX,
};

#endif
