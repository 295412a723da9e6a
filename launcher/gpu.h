/* gpu: the CUDA side of a start-up (issue 18, docs/gpu.md). Finds the CUDA
 * runtime (libcudart*) and driver (libcuda.so*) libraries the service can
 * map, attaches bpf/gpu.bpf.c's uprobe pair to their calls with the tree's
 * pids, attaches again when the tree maps one later (EV_GPU_MAP: the mapping
 * process is held stopped until then), gathers the calls per process (init
 * time, device memory, host-to-device copies, error codes) and writes the
 * timeline's `gpu` section, with why the service runs on CPU when it does. */
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

/* The candidates that exist, attached with pid root (still blocked before
 * its exec); NULL when out of memory. note may be called for each. */
struct gpu_trace *gpu_trace_new(struct trace_bpf *skel, pid_t root, const struct config *cfg,
				gpu_note_fn note, void *ctx);
/* The uprobe keeper's socket (tracer.c): later links' fds go there, so the
 * keeper drops their last references. -1: none. */
void gpu_trace_set_keeper(struct gpu_trace *g, int sock);
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

/* The name of a cudaError_t (runtime: driver false) or CUresult, or NULL. */
const char *gpu_error_name(int code, bool driver);

#endif
