/* gpu: the CUDA side of a start-up (issue 18, docs/gpu.md). When a process
 * of the tree maps a CUDA runtime (libcudart*) or driver (libcuda.so*)
 * library (EV_GPU_MAP: the mapping process is held stopped until then),
 * attaches bpf/gpu.bpf.c's uprobe pair to its calls with that pid, gathers
 * the calls per process (init time, device memory, host-to-device copies,
 * error codes, the device's name and memory) and writes the timeline's
 * `gpu` section, with why the service runs on CPU when it does. */
#ifndef TTS_GPU_H
#define TTS_GPU_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "config.h"

struct trace_bpf;
struct gpu_trace;

/* What the tracer is told of each attach: a probe (ok) or a fallback. */
typedef void (*gpu_note_fn)(void *ctx, const char *probe, bool ok, const char *reason);

/* The state for the tree of root; nothing is attached until a process of
 * the tree maps a CUDA library (EV_GPU_MAP). note is told of each attach
 * then ("cuda:PATH", or a fallback). NULL when out of memory. cfg: unused. */
struct gpu_trace *gpu_trace_new(struct trace_bpf *skel, pid_t root, const struct config *cfg,
				gpu_note_fn note, void *ctx);
/* The uprobe keeper's socket (tracer.c): links' fds go there, so the
 * keeper drops their last references, and the gpuseen map's (right away),
 * so it continues a process still held at its mapping of a CUDA library
 * when tts-launch dies (gpu_continue_held). -1: none. */
void gpu_trace_set_keeper(struct gpu_trace *g, int sock);
/* In the keeper, once tts-launch is gone: SIGCONT to each process gpuseen
 * (map fd seen_fd) says is still held; how many were. */
int gpu_continue_held(int seen_fd);
/* An EV_GPU_CALL or EV_GPU_MAP record; ready_ms < 0: not ready yet. */
void gpu_on_event(struct gpu_trace *g, const void *data, size_t size, double ready_ms);
/* The timeline's `gpu` section (a new object), from what was gathered and
 * the model's other sections (python.imports: was torch imported; files:
 * where its package is). g NULL: nothing probed. */
json_t *gpu_snap(struct gpu_trace *g, const json_t *model, const struct config *cfg,
		 double ready_ms);
void gpu_trace_free(struct gpu_trace *g);
/* Libraries with probes attached (0 for NULL). */
int gpu_trace_attached(const struct gpu_trace *g);

/* The time threads of the tree spent inside probed CUDA calls, for the
 * attribution's kind `gpu`: one span per call (consecutive calls of a thread
 * that touch merged), in the order the calls returned; call: its name in
 * the timeline ("cudaMalloc"), init: a device init call. At most 65536. */
struct gpu_span {
	int pid, tid;
	double start, end; /* ms, clock_ns_to_ms */
	const char *call;  /* static */
	bool init;
};
/* The spans gathered so far (NULL and 0 for NULL or none); valid until the
 * next gpu_on_event or gpu_trace_free. */
const struct gpu_span *gpu_spans(const struct gpu_trace *g, size_t *n);

/* The times a process of the tree was held stopped while tts-launch
 * attached CUDA probes for it (at its mapping of a library, or its fork):
 * from the event to the SIGCONT, in ms. Up to max into out; how many. */
struct gpu_hold {
	int pid;
	double start, end;
};
size_t gpu_holds(const struct gpu_trace *g, struct gpu_hold *out, size_t max);

/* The name of a cudaError_t (runtime: driver false) or CUresult, or NULL. */
const char *gpu_error_name(int code, bool driver);

#endif
