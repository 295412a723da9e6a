/* gpu_internal: what gpu.c (libraries, attach, the calls) and gpu_snap.c
 * (the timeline's gpu section) share; nothing else includes it. */
#ifndef TTS_GPU_INTERNAL_H
#define TTS_GPU_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "gpu.h"
#include "gpu_trace.h"

enum lib_kind { LIB_NONE = 0, LIB_RUNTIME, LIB_DRIVER };

/* a probed function: its cookie, library, symbols, name in the timeline */
struct gpu_fn {
	__u32 fn;
	enum lib_kind kind;
	const char *sym[2]; /* the first one the library exports */
	const char *name;   /* in the timeline */
};
/* The row of cookie fn, or NULL. */
const struct gpu_fn *gpu_fn_of(__u32 fn);

#define GPU_MAX_LIBS   16
#define GPU_MAX_PROCS  64
#define GPU_MAX_CALLS  256 /* calls kept one by one (the first; copies are summed) */
#define GPU_MAX_ALLOCS 8192
#define GPU_MAX_LATE   512 /* links */
#define GPU_MAX_SPANS  65536

struct gpu_lib {
	char path[PATH_MAX];
	enum lib_kind kind;
	pid_t pid;	/* attached for */
	double ms;	/* mapped (EV_GPU_MAP), or -1 */
	double held_ms; /* how long the mapping process was held (the attach) */
	int n_probes;
	bool forked; /* attached for a child forked without exec (its parent's library) */
};

struct gpu_proc {
	pid_t pid;
	double init_ms;	 /* time in the init calls */
	__u64 mem, peak; /* device memory allocated now, at most */
	__u64 mem_ready; /* at ready (the last value before ready) */
	bool ready_seen;
	__u64 h2d_bytes, h2d_copies;
	double h2d_ms;
	__u64 allocs, errors;
	int device_count;				  /* -1: never answered */
	int driver_version, runtime_version, first_error; /* versions: 0, never answered */
	bool first_error_driver, ok;			  /* a call that needs a device succeeded */
	/* what the device said: cudaGetDeviceProperties (name, total), the
	 * memory queries (total, free: the first answer, the last before ready) */
	char device_name[GPU_DEVICE_NAME_MAX];
	int device; /* the properties' device; -1: never answered */
	__u64 device_total, free_first, free_ready;
	double free_first_ms, free_ready_ms; /* <0: no answer */
};

struct gpu_call_rec {
	pid_t pid;
	__u32 fn;
	int ret;
	double ms, dur_ms;
	__u64 bytes;
	__u32 within; /* the call's outermost call in progress on its thread, 0: none */
};

struct gpu_alloc {
	pid_t pid;
	bool handle; /* ptr is cuMemCreate's handle */
	__u64 ptr, bytes;
};

struct bpf_link;
struct trace_bpf;

struct gpu_trace {
	struct trace_bpf *skel;
	pid_t root;
	struct gpu_lib libs[GPU_MAX_LIBS];
	int n_libs;
	struct gpu_proc procs[GPU_MAX_PROCS];
	int n_procs;
	struct gpu_call_rec calls[GPU_MAX_CALLS];
	int n_calls;
	__u64 calls_total;
	struct gpu_alloc *allocs;
	size_t n_allocs;
	struct gpu_span *spans; /* every call, for the attribution (gpu.h) */
	size_t n_spans;
	struct bpf_link *late[GPU_MAX_LATE];
	bool late_kept[GPU_MAX_LATE];
	int n_late;
	struct bpf_link *fork_links[2]; /* gpu_fork, gpu_fork3: once a library is attached */
	bool fork_tried;
	int keeper;
	gpu_note_fn note;
	void *ctx;
};

#endif
