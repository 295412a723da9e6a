/* gpu_trace.h: the gpu domain's additions to trace.h's records, shared by
 * bpf/gpu.bpf.c and launcher/gpu.c (kept out of trace.h, which another
 * owner edits; they can move there as they are).
 *
 * - More probed calls (the attach cookie, after enum trace_gpu_fn's): what
 *   a GPU machine answers about its device, recorded when the call
 *   succeeds; the return code always.
 * - The record of a cudaGetDeviceProperties call: a tl_gpu_event followed
 *   by the device's name.
 * - gpuseen's values: a process held at its mapping of a CUDA library, or
 *   let go. The uprobe keeper (launcher/ukeeper.c) continues the held ones
 *   when tts-launch dies before it could. */
#ifndef TTS_GPU_TRACE_H
#define TTS_GPU_TRACE_H

#include "trace.h"

enum trace_gpu_fn_info {
	/* a0: size_t *free, a1: size_t *total. out: *a0, args[2]: *a1 */
	GPU_CUDA_MEM_GET_INFO = GPU_FN_MAX,
	/* cudaGetDeviceProperties(_v2): a0: struct cudaDeviceProp *, a1: the
	 * device. out: its totalGlobalMem; the record is a tl_gpu_prop_event */
	GPU_CUDA_GET_DEVICE_PROPERTIES,
	/* cuMemGetInfo_v2: as GPU_CUDA_MEM_GET_INFO */
	GPU_CU_MEM_GET_INFO,
	/* cudaRuntimeGetVersion: a0: int * (out); answers without a driver */
	GPU_CUDA_RUNTIME_VERSION,
	/* The other allocators (PyTorch's PYTORCH_CUDA_ALLOC_CONF backends):
	 * cudaMallocAsync: a0: void ** (out), a1: bytes, a2: the stream
	 * (backend:cudaMallocAsync); cudaFreeAsync: a0: the pointer */
	GPU_CUDA_MALLOC_ASYNC,
	GPU_CUDA_FREE_ASYNC,
	/* cuMemAllocAsync: a0: CUdeviceptr * (out), a1: bytes; cuMemFreeAsync:
	 * a0: the pointer (what cudaMallocAsync/cudaFreeAsync call) */
	GPU_CU_MEM_ALLOC_ASYNC,
	GPU_CU_MEM_FREE_ASYNC,
	/* cuMemCreate: a0: CUmemGenericAllocationHandle * (out), a1: bytes of
	 * device memory (expandable_segments:True maps them with cuMemMap);
	 * cuMemRelease: a0: the handle */
	GPU_CU_MEM_CREATE,
	GPU_CU_MEM_RELEASE,
	GPU_FN_INFO_MAX,
};

/* struct cudaDeviceProp: char name[256] at 0; totalGlobalMem after the
 * uuid (16), luid (8) and luidDeviceNodeMask (4), aligned: the same from
 * CUDA 10 to 13 (offsetof over cuda_runtime_api.h 13.0) */
#define GPU_PROP_NAME_OFF      0
#define GPU_PROP_TOTAL_MEM_OFF 288
#define GPU_DEVICE_NAME_MAX    64

struct tl_gpu_prop_event {
	struct tl_gpu_event call;	/* type EV_GPU_CALL, fn GPU_CUDA_GET_DEVICE_PROPERTIES */
	char name[GPU_DEVICE_NAME_MAX]; /* when call.ret is 0 */
};
_Static_assert(sizeof(struct tl_gpu_prop_event) == 144, "tl_gpu_prop_event layout changed");

/* gpuseen's value for (process, library file) */
enum gpu_seen_state {
	GPU_SEEN_HELD = 1, /* stopped at its mmap (SIGSTOP sent), not yet continued */
	GPU_SEEN_GONE = 2, /* attached (or given up) and continued */
};

/* EV_GPU_MAP sent by gpu_fork: a process of the tree forked (no exec) from
 * one with CUDA probes, held stopped before it runs user code; fd is
 * GPU_MAP_FORK, ino the parent's tgid, dev 0. Its gpuseen key is (tgid, 0, 0). */
#define GPU_MAP_FORK (-2)

#endif
