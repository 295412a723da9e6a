/* gpu: what a GPU machine's answers become in the timeline's `gpu` section,
 * without a GPU: EV_GPU_CALL records as bpf/gpu.bpf.c writes them, fed to
 * gpu_on_event, then gpu_snap. The device's name and memory come only from
 * a call that succeeded; IndexTTS2's decision below 10 GB shows from the
 * total it read and the files it opened; the spans are the attribution's. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "gpu.h"
#include "gpu_trace.h"

#define GIB (1ULL << 30)

/* clock_ns_to_ms is ns / 1e6 here: the clock was never started */
static void call(struct gpu_trace *g, int tid, __u32 fn, int ret, double ms, double dur_ms,
		 __u64 a0, __u64 a1, __u64 a2, __u64 out, double ready_ms)
{
	struct tl_gpu_event e = {.ts_ns = (__u64)(ms * 1e6),
				 .dur_ns = (__u64)(dur_ms * 1e6),
				 .type = EV_GPU_CALL,
				 .pid = 4242,
				 .tid = (__u32)tid,
				 .fn = fn,
				 .ret = ret,
				 .args = {a0, a1, a2, 0},
				 .out = out};

	gpu_on_event(g, &e, sizeof(e), ready_ms);
}

static void props(struct gpu_trace *g, int ret, const char *name, __u64 total, double ms,
		  size_t size)
{
	struct tl_gpu_prop_event p = {.call = {.ts_ns = (__u64)(ms * 1e6),
					       .dur_ns = 1000,
					       .type = EV_GPU_CALL,
					       .pid = 4242,
					       .tid = 4242,
					       .fn = GPU_CUDA_GET_DEVICE_PROPERTIES,
					       .ret = ret,
					       .args = {0x7000, 0, 0, 0},
					       .out = ret ? 0 : total}};

	snprintf(p.name, sizeof(p.name), "%s", ret ? "" : name);
	gpu_on_event(g, &p, size, -1);
}

static json_t *model_with(const char *file)
{
	json_t *m = json_pack("{s:[]}", "files");

	if (file)
		json_array_append_new(json_object_get(m, "files"),
				      json_pack("{s:s}", "path", file));
	return m;
}

static void test_device_answers_recorded(void **state)
{
	struct gpu_trace *g = gpu_trace_new(NULL, 0, NULL, NULL, NULL);
	json_t *m = model_with(NULL), *o, *d, *lv;

	(void)state;
	assert_non_null(g);
	call(g, 4242, GPU_CUDA_GET_DEVICE_COUNT, 0, 1, 0.5, 0x10, 0, 0, 1, -1);
	props(g, 0, "NVIDIA H200", 141 * GIB, 2, sizeof(struct tl_gpu_prop_event));
	/* free memory: the first answer, and the last before ready (40 ms) */
	call(g, 4242, GPU_CUDA_MEM_GET_INFO, 0, 10, 0.1, 0x20, 0x28, 141 * GIB, 100 * GIB, 40);
	call(g, 4242, GPU_CUDA_MEM_GET_INFO, 0, 30, 0.1, 0x20, 0x28, 141 * GIB, 95 * GIB, 40);
	call(g, 4242, GPU_CUDA_MEM_GET_INFO, 0, 50, 0.1, 0x20, 0x28, 141 * GIB, 90 * GIB, 40);
	o = gpu_snap(g, m, NULL, 40);
	d = json_object_get(o, "device");
	assert_true(json_is_object(d));
	assert_string_equal(json_string_value(json_object_get(d, "name")), "NVIDIA H200");
	assert_int_equal(json_integer_value(json_object_get(d, "index")), 0);
	assert_int_equal(json_integer_value(json_object_get(d, "pid")), 4242);
	assert_int_equal(json_integer_value(json_object_get(d, "total_bytes")), 141 * GIB);
	assert_int_equal(json_integer_value(json_object_get(d, "free_first_bytes")), 100 * GIB);
	assert_int_equal(json_integer_value(json_object_get(d, "free_before_ready_bytes")),
			 95 * GIB);
	assert_true(json_is_true(json_object_get(o, "usable")));
	assert_true(json_is_null(json_object_get(o, "cpu_reason")));
	lv = json_object_get(o, "low_vram");
	assert_true(json_is_false(json_object_get(lv, "below")));
	assert_int_equal(json_integer_value(json_object_get(lv, "threshold_bytes")), 10 * GIB);
	/* each call in the list, with its name */
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(o, "calls"), 1), "call")),
			    "cudaGetDeviceProperties");
	json_decref(o);
	json_decref(m);
	gpu_trace_free(g);
}

static void test_low_vram_decision(void **state)
{
	const char *qwen = "/srv/app/checkpoints/qwen0.6bemo4-merge/model.safetensors";

	(void)state;
	for (int with_qwen = 0; with_qwen < 2; with_qwen++) {
		struct gpu_trace *g = gpu_trace_new(NULL, 0, NULL, NULL, NULL);
		json_t *m = model_with(with_qwen ? qwen : "/srv/app/checkpoints/gpt.pth"), *o, *lv;

		props(g, 0, "NVIDIA GeForce RTX 3060", 8 * GIB, 2,
		      sizeof(struct tl_gpu_prop_event));
		o = gpu_snap(g, m, NULL, -1);
		lv = json_object_get(o, "low_vram");
		assert_true(json_is_object(lv));
		assert_int_equal(json_integer_value(json_object_get(lv, "total_bytes")), 8 * GIB);
		assert_true(json_is_true(json_object_get(lv, "below")));
		assert_int_equal(json_is_true(json_object_get(lv, "qwen_emotion_opened")),
				 with_qwen);
		json_decref(o);
		json_decref(m);
		gpu_trace_free(g);
	}
}

/* no driver: every answer is an error; nothing about a device is made up */
static void test_failed_answers_record_only_the_code(void **state)
{
	struct gpu_trace *g = gpu_trace_new(NULL, 0, NULL, NULL, NULL);
	json_t *m = model_with(NULL), *o, *c;

	(void)state;
	props(g, 35, NULL, 0, 1, sizeof(struct tl_gpu_prop_event));
	call(g, 4242, GPU_CUDA_MEM_GET_INFO, 35, 2, 0.1, 0x20, 0x28, 0, 0, -1);
	call(g, 4242, GPU_CU_MEM_GET_INFO, 3, 3, 0.1, 0x20, 0x28, 0, 0, -1);
	/* a properties record cut short (an older kernel side): no name read */
	props(g, 0, "never read", 16 * GIB, 4, sizeof(struct tl_gpu_event));
	o = gpu_snap(g, m, NULL, -1);
	assert_true(json_is_null(json_object_get(o, "device")));
	assert_true(json_is_null(json_object_get(o, "low_vram")));
	assert_true(json_is_false(json_object_get(o, "usable")));
	c = json_object_get(o, "calls");
	assert_int_equal(json_array_size(c), 4);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(c, 0), "ret")), 35);
	assert_string_equal(json_string_value(json_object_get(json_array_get(c, 0), "error")),
			    "cudaErrorInsufficientDriver");
	assert_string_equal(json_string_value(json_object_get(json_array_get(c, 2), "call")),
			    "cuMemGetInfo");
	assert_string_equal(json_string_value(json_object_get(json_array_get(c, 2), "error")),
			    "CUDA_ERROR_NOT_INITIALIZED");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(o, "cpu_reason"), "code")),
	    "insufficient-driver");
	json_decref(o);
	json_decref(m);
	gpu_trace_free(g);
}

/* the attribution's spans: every call, per thread; touching calls of a
 * thread to the same function merged */
static void test_spans_for_the_attribution(void **state)
{
	struct gpu_trace *g = gpu_trace_new(NULL, 0, NULL, NULL, NULL);
	const struct gpu_span *s;
	size_t n = 1;

	(void)state;
	assert_null(gpu_spans(NULL, &n));
	assert_int_equal(n, 0);
	assert_null(gpu_spans(g, &n));
	call(g, 4242, GPU_CUDA_FREE, 35, 10, 5, 0, 0, 0, 0, -1);       /* init: cudaFree(0) */
	call(g, 4243, GPU_CUDA_MEMCPY, 0, 12, 1, 0x1, 0x2, 64, 0, -1); /* another thread */
	call(g, 4243, GPU_CUDA_MEMCPY, 0, 13, 2, 0x1, 0x2, 64, 0, -1); /* touches: merged */
	call(g, 4242, GPU_CUDA_MALLOC, 0, 20, 1, 0x30, 1 << 20, 0, 0xd000, -1); /* a gap */
	s = gpu_spans(g, &n);
	assert_int_equal(n, 3);
	assert_int_equal(s[0].tid, 4242);
	assert_true(s[0].init);
	assert_string_equal(s[0].call, "cudaFree");
	assert_true(s[0].start == 10 && s[0].end == 15);
	assert_int_equal(s[1].tid, 4243);
	assert_false(s[1].init);
	assert_true(s[1].start == 12 && s[1].end == 15);
	assert_string_equal(s[2].call, "cudaMalloc");
	assert_true(s[2].start == 20 && s[2].end == 21);
	gpu_trace_free(g);
}

/* a call with all four arguments (cudaMemcpy's kind is a3) */
/* one EV_GPU_CALL of thread 4242; within: the outer call's fn (a call
 * made inside another probed call of its thread, as bpf/gpu.bpf.c marks it) */
static void event(struct gpu_trace *g, __u32 fn, __u32 within, int ret, double ms, double dur_ms,
		  const __u64 a[4], __u64 out, double ready_ms)
{
	struct tl_gpu_event e = {.ts_ns = (__u64)(ms * 1e6),
				 .dur_ns = (__u64)(dur_ms * 1e6),
				 .type = EV_GPU_CALL,
				 .pid = 4242,
				 .tid = 4242,
				 .fn = fn,
				 .ret = ret,
				 .within = within,
				 .args = {a[0], a[1], a[2], a[3]},
				 .out = out};

	gpu_on_event(g, &e, sizeof(e), ready_ms);
}

static void call4(struct gpu_trace *g, __u32 fn, int ret, double ms, double dur_ms, __u64 a0,
		  __u64 a1, __u64 a2, __u64 a3, __u64 out, double ready_ms)
{
	event(g, fn, 0, ret, ms, dur_ms, (const __u64[4]){a0, a1, a2, a3}, out, ready_ms);
}

static const json_t *proc0(const json_t *o)
{
	return json_array_get(json_object_get(o, "processes"), 0);
}

#define MIB (1ULL << 20)

/* the runtime API on a working GPU: init time (cudaGetDeviceCount,
 * cudaSetDevice, cudaFree(0)), the driver's version, cudaMalloc/cudaFree
 * paired by pointer (peak, at ready), host-to-device copies summed (other
 * directions not followed) */
static void test_runtime_success_path(void **state)
{
	struct gpu_trace *g = gpu_trace_new(NULL, 0, NULL, NULL, NULL);
	json_t *m = model_with(NULL), *o;
	const json_t *p;
	const double ready = 100;

	(void)state;
	call4(g, GPU_CUDA_GET_DEVICE_COUNT, 0, 1, 2, 0x10, 0, 0, 0, 1, ready);
	call4(g, GPU_CUDA_SET_DEVICE, 0, 4, 3, 0, 0, 0, 0, 0, ready);
	call4(g, GPU_CUDA_FREE, 0, 8, 5, 0, 0, 0, 0, 0, ready); /* cudaFree(0): init */
	call4(g, GPU_CUDA_DRIVER_VERSION, 0, 14, 0.5, 0x18, 0, 0, 0, 13000, ready);
	call4(g, GPU_CUDA_RUNTIME_VERSION, 0, 15, 0.1, 0x18, 0, 0, 0, 12080, ready);
	call4(g, GPU_CUDA_MALLOC, 0, 20, 1, 0x30, 64 * MIB, 0, 0, 0xa000, ready);
	call4(g, GPU_CUDA_MALLOC, 0, 22, 1, 0x30, 32 * MIB, 0, 0, 0xb000, ready);
	call4(g, GPU_CUDA_MALLOC, 2, 23, 1, 0x30, 1024 * MIB, 0, 0, 0, ready); /* failed */
	call4(g, GPU_CUDA_FREE, 0, 30, 1, 0xa000, 0, 0, 0, 0, ready);	       /* the 64 MiB */
	call4(g, GPU_CUDA_FREE, 0, 31, 1, 0xdead, 0, 0, 0, 0, ready);	       /* unknown: 0 */
	call4(g, GPU_CUDA_MEMCPY, 0, 40, 4, 0xb000, 0x1, 8 * MIB, 1, 0, ready);
	call4(g, GPU_CUDA_MEMCPY_ASYNC, 0, 50, 2, 0xb000, 0x1, 4 * MIB, 1, 0, ready);
	call4(g, GPU_CUDA_MEMCPY, 0, 55, 7, 0x1, 0xb000, 2 * MIB, 2, 0, ready); /* D2H */
	/* after ready: counted in memory and peak, not at ready */
	call4(g, GPU_CUDA_MALLOC, 0, 120, 1, 0x30, 100 * MIB, 0, 0, 0xc000, ready);
	o = gpu_snap(g, m, NULL, ready);
	p = proc0(o);
	assert_non_null(p);
	assert_true(json_is_true(json_object_get(o, "usable")));
	assert_true(json_is_null(json_object_get(o, "cpu_reason")));
	assert_true(json_number_value(json_object_get(p, "init_ms")) == 10); /* 2 + 3 + 5 */
	assert_int_equal(json_integer_value(json_object_get(p, "driver_version")), 13000);
	assert_int_equal(json_integer_value(json_object_get(p, "runtime_version")), 12080);
	assert_int_equal(json_integer_value(json_object_get(p, "device_count")), 1);
	assert_int_equal(json_integer_value(json_object_get(p, "allocations")), 3);
	assert_int_equal(json_integer_value(json_object_get(p, "errors")), 1);
	assert_int_equal(json_integer_value(json_object_get(p, "memory_peak_bytes")),
			 32 * MIB + 100 * MIB);
	assert_int_equal(json_integer_value(json_object_get(p, "memory_at_ready_bytes")), 32 * MIB);
	assert_int_equal(json_integer_value(json_object_get(p, "memory_bytes")), 132 * MIB);
	assert_int_equal(json_integer_value(json_object_get(p, "h2d_bytes")), 12 * MIB);
	assert_int_equal(json_integer_value(json_object_get(p, "h2d_copies")), 2);
	assert_true(json_number_value(json_object_get(p, "h2d_ms")) == 6);
	/* every call listed but the device-to-host copy */
	assert_int_equal(json_array_size(json_object_get(o, "calls")), 13);
	assert_int_equal(json_integer_value(json_object_get(o, "calls_total")), 14);
	json_decref(o);
	json_decref(m);
	gpu_trace_free(g);
}

/* the peak is the high-water mark, not the sum of allocations */
static void test_peak_is_a_high_water_mark(void **state)
{
	struct gpu_trace *g = gpu_trace_new(NULL, 0, NULL, NULL, NULL);
	json_t *m = model_with(NULL), *o;

	(void)state;
	call4(g, GPU_CUDA_MALLOC, 0, 1, 1, 0x30, 10 * MIB, 0, 0, 0xa000, -1);
	call4(g, GPU_CUDA_FREE, 0, 2, 1, 0xa000, 0, 0, 0, 0, -1);
	call4(g, GPU_CUDA_MALLOC, 0, 3, 1, 0x30, 6 * MIB, 0, 0, 0xa000, -1);
	o = gpu_snap(g, m, NULL, -1);
	assert_int_equal(json_integer_value(json_object_get(proc0(o), "memory_peak_bytes")),
			 10 * MIB);
	assert_int_equal(json_integer_value(json_object_get(proc0(o), "memory_bytes")), 6 * MIB);
	assert_true(json_is_null(json_object_get(proc0(o), "memory_at_ready_bytes")));
	json_decref(o);
	json_decref(m);
	gpu_trace_free(g);
}

/* the driver API as gpu.c records it: cuInit and cuCtxCreate are init,
 * cuMemAlloc_v2/cuMemFree_v2 pair, cuMemcpyHtoD_v2 is a host-to-device copy
 * (bytes in a2), cuDriverGetVersion the version; names and CUresult names */
static void test_driver_api_success_path(void **state)
{
	struct gpu_trace *g = gpu_trace_new(NULL, 0, NULL, NULL, NULL);
	json_t *m = model_with(NULL), *o;
	const json_t *p, *c;
	const char *names[] = {"cuInit",     "cuDriverGetVersion", "cuCtxCreate", "cuMemAlloc",
			       "cuMemAlloc", "cuMemcpyHtoD",	   "cuMemFree"};

	(void)state;
	call4(g, GPU_CU_INIT, 0, 1, 20, 0, 0, 0, 0, 0, 500);
	call4(g, GPU_CU_DRIVER_VERSION, 0, 22, 0.1, 0x18, 0, 0, 0, 12080, 500);
	call4(g, GPU_CU_CTX_CREATE, 0, 25, 30, 0x20, 0, 0, 0, 0, 500);
	call4(g, GPU_CU_MEM_ALLOC, 0, 60, 1, 0x28, 256 * MIB, 0, 0, 0x7f000000, 500);
	call4(g, GPU_CU_MEM_ALLOC, 0, 61, 1, 0x28, 128 * MIB, 0, 0, 0x7f100000, 500);
	call4(g, GPU_CU_MEMCPY_HTOD, 0, 70, 9, 0x7f000000, 0x1000, 200 * MIB, 0, 0, 500);
	call4(g, GPU_CU_MEM_FREE, 0, 80, 1, 0x7f100000, 0, 0, 0, 0, 500);
	o = gpu_snap(g, m, NULL, 500);
	p = proc0(o);
	assert_true(json_is_true(json_object_get(o, "usable")));
	assert_true(json_number_value(json_object_get(p, "init_ms")) == 50);
	assert_int_equal(json_integer_value(json_object_get(p, "driver_version")), 12080);
	assert_true(json_is_null(json_object_get(p, "runtime_version"))); /* never asked */
	assert_int_equal(json_integer_value(json_object_get(p, "memory_peak_bytes")), 384 * MIB);
	assert_int_equal(json_integer_value(json_object_get(p, "memory_at_ready_bytes")),
			 256 * MIB);
	assert_int_equal(json_integer_value(json_object_get(p, "h2d_bytes")), 200 * MIB);
	assert_int_equal(json_integer_value(json_object_get(p, "h2d_copies")), 1);
	assert_true(json_number_value(json_object_get(p, "h2d_ms")) == 9);
	c = json_object_get(o, "calls");
	assert_int_equal(json_array_size(c), 7);
	for (size_t i = 0; i < 7; i++) {
		assert_string_equal(
		    json_string_value(json_object_get(json_array_get(c, i), "call")), names[i]);
		assert_string_equal(
		    json_string_value(json_object_get(json_array_get(c, i), "error")),
		    "CUDA_SUCCESS");
	}
	assert_int_equal(json_integer_value(json_object_get(json_array_get(c, 5), "bytes")),
			 200 * MIB);
	json_decref(o);
	json_decref(m);
	gpu_trace_free(g);
}

static void nested(struct gpu_trace *g, __u32 fn, __u32 within, int ret, double ms, double dur_ms,
		   __u64 a0, __u64 a1, __u64 a2, __u64 out)
{
	event(g, fn, within, ret, ms, dur_ms, (const __u64[4]){a0, a1, a2, 0}, out, -1);
}

/* A runtime call's own driver calls (their records come first: they
 * return first) are listed with `within`, and count neither in memory,
 * copies, init time nor errors: the outer call answers for them. */
static void test_calls_within_calls_count_once(void **state)
{
	struct gpu_trace *g = gpu_trace_new(NULL, 0, NULL, NULL, NULL);
	json_t *m = model_with(NULL), *o;
	const json_t *p, *c;

	(void)state;
	/* cudaFree(0): cuInit and the primary context inside it */
	nested(g, GPU_CU_INIT, GPU_CUDA_FREE, 0, 1, 20, 0, 0, 0, 0);
	nested(g, GPU_CU_PRIMARY_CTX_RETAIN, GPU_CUDA_FREE, 0, 21, 30, 0x10, 0, 0, 0);
	call4(g, GPU_CUDA_FREE, 0, 1, 51, 0, 0, 0, 0, 0, -1);
	/* cudaMalloc(64 MiB) on cuMemAlloc_v2 */
	nested(g, GPU_CU_MEM_ALLOC, GPU_CUDA_MALLOC, 0, 60, 1, 0x28, 64 * MIB, 0, 0xa000);
	call4(g, GPU_CUDA_MALLOC, 0, 60, 2, 0x30, 64 * MIB, 0, 0, 0xa000, -1);
	/* a host-to-device copy on the driver's */
	nested(g, GPU_CU_MEMCPY_HTOD, GPU_CUDA_MEMCPY, 0, 70, 3, 0xa000, 0x1, 8 * MIB, 0);
	call4(g, GPU_CUDA_MEMCPY, 0, 70, 4, 0xa000, 0x1, 8 * MIB, 1, 0, -1);
	/* a driver's init made lazily inside a non-init call: init time */
	nested(g, GPU_CU_PRIMARY_CTX_RETAIN, GPU_CUDA_MALLOC, 0, 75, 7, 0x10, 0, 0, 0);
	call4(g, GPU_CUDA_MALLOC, 2, 75, 8, 0x30, 1 * MIB, 0, 0, 0, -1); /* failed */
	/* the driver's error the runtime recovered from */
	nested(g, GPU_CU_DRIVER_VERSION, GPU_CUDA_DRIVER_VERSION, 34, 80, 0.1, 0x18, 0, 0, 0);
	call4(g, GPU_CUDA_DRIVER_VERSION, 0, 80, 0.2, 0x18, 0, 0, 0, 0, -1);
	/* cudaFree of the block on cuMemFree_v2 */
	nested(g, GPU_CU_MEM_FREE, GPU_CUDA_FREE, 0, 90, 1, 0xa000, 0, 0, 0);
	call4(g, GPU_CUDA_FREE, 0, 90, 2, 0xa000, 0, 0, 0, 0, -1);
	o = gpu_snap(g, m, NULL, -1);
	p = proc0(o);
	/* cudaFree(0)'s 51 (not with its own 50 inside again), the lazy 7 */
	assert_true(json_number_value(json_object_get(p, "init_ms")) == 58);
	assert_int_equal(json_integer_value(json_object_get(p, "allocations")), 1);
	assert_int_equal(json_integer_value(json_object_get(p, "memory_peak_bytes")), 64 * MIB);
	assert_int_equal(json_integer_value(json_object_get(p, "memory_bytes")), 0);
	assert_int_equal(json_integer_value(json_object_get(p, "h2d_bytes")), 8 * MIB);
	assert_int_equal(json_integer_value(json_object_get(p, "h2d_copies")), 1);
	assert_true(json_number_value(json_object_get(p, "h2d_ms")) == 4);
	assert_int_equal(json_integer_value(json_object_get(p, "errors")), 1); /* the cudaMalloc */
	c = json_object_get(o, "calls");
	assert_int_equal(json_array_size(c), 13);
	assert_string_equal(json_string_value(json_object_get(json_array_get(c, 0), "within")),
			    "cudaFree");
	assert_string_equal(json_string_value(json_object_get(json_array_get(c, 3), "call")),
			    "cuMemAlloc");
	assert_string_equal(json_string_value(json_object_get(json_array_get(c, 3), "within")),
			    "cudaMalloc");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(c, 3), "bytes")),
			 64 * MIB);
	assert_true(json_is_null(json_object_get(json_array_get(c, 4), "within")));
	json_decref(o);
	json_decref(m);
	gpu_trace_free(g);
}

/* The allocators of PyTorch's other backends: cudaMallocAsync/
 * cudaFreeAsync (backend:cudaMallocAsync), cuMemAllocAsync/cuMemFreeAsync,
 * and cuMemCreate/cuMemRelease (expandable_segments: physical memory by
 * handle, paired apart from the pointers: a handle equal to a pointer
 * frees nothing of the other). */
static void test_async_and_virtual_allocators(void **state)
{
	struct gpu_trace *g = gpu_trace_new(NULL, 0, NULL, NULL, NULL);
	json_t *m = model_with(NULL), *o;
	const json_t *p, *c;
	const char *names[] = {"cudaMallocAsync", "cuMemAllocAsync", "cuMemCreate",
			       "cuMemCreate",	  "cuMemRelease",    "cudaFreeAsync",
			       "cuMemFreeAsync",  "cuMemRelease"};

	(void)state;
	call4(g, GPU_CUDA_MALLOC_ASYNC, 0, 10, 1, 0x30, 16 * MIB, 0x5, 0, 0xa000, 100);
	call4(g, GPU_CU_MEM_ALLOC_ASYNC, 0, 11, 1, 0x38, 8 * MIB, 0x5, 0, 0xb000, 100);
	call4(g, GPU_CU_MEM_CREATE, 0, 12, 1, 0x40, 20 * MIB, 0x48, 0, 0xa000, 100);
	call4(g, GPU_CU_MEM_CREATE, 0, 13, 1, 0x40, 2 * MIB, 0x48, 0, 0x77, 100);
	call4(g, GPU_CU_MEM_RELEASE, 0, 14, 1, 0x77, 0, 0, 0, 0, 100);
	/* peak 46 MiB; 44 at ready */
	call4(g, GPU_CUDA_FREE_ASYNC, 0, 150, 1, 0xa000, 0x5, 0, 0, 0, 100);
	call4(g, GPU_CU_MEM_FREE_ASYNC, 0, 151, 1, 0xb000, 0x5, 0, 0, 0, 100);
	call4(g, GPU_CU_MEM_RELEASE, 0, 152, 1, 0xb000, 0, 0, 0, 0, 100); /* no such handle */
	o = gpu_snap(g, m, NULL, 100);
	p = proc0(o);
	assert_true(json_is_true(json_object_get(o, "usable")));
	assert_int_equal(json_integer_value(json_object_get(p, "allocations")), 4);
	assert_int_equal(json_integer_value(json_object_get(p, "memory_peak_bytes")), 46 * MIB);
	assert_int_equal(json_integer_value(json_object_get(p, "memory_at_ready_bytes")), 44 * MIB);
	/* the handle 0xa000 is cuMemCreate's 20 MiB: cudaFreeAsync(0xa000) freed
	 * the 16 MiB pointer only */
	assert_int_equal(json_integer_value(json_object_get(p, "memory_bytes")), 20 * MIB);
	c = json_object_get(o, "calls");
	assert_int_equal(json_array_size(c), 8);
	for (size_t i = 0; i < 8; i++)
		assert_string_equal(
		    json_string_value(json_object_get(json_array_get(c, i), "call")), names[i]);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(c, 2), "bytes")),
			 20 * MIB);
	json_decref(o);
	json_decref(m);
	gpu_trace_free(g);
}

/* gpu.cuda_visible_devices is the service's: [env] first, else what it
 * inherits from tts-launch's environment */
static void test_cuda_visible_devices_is_the_services(void **state)
{
	struct env_var v = {.name = "CUDA_VISIBLE_DEVICES", .value = "-1"};
	struct config cfg = {.env = &v, .n_env = 1};
	json_t *m = model_with(NULL), *o;

	(void)state;
	setenv("CUDA_VISIBLE_DEVICES", "0", 1);
	o = gpu_snap(NULL, m, &cfg, -1);
	assert_string_equal(json_string_value(json_object_get(o, "cuda_visible_devices")), "-1");
	json_decref(o);
	o = gpu_snap(NULL, m, NULL, -1); /* nothing in [env]: inherited */
	assert_string_equal(json_string_value(json_object_get(o, "cuda_visible_devices")), "0");
	json_decref(o);
	unsetenv("CUDA_VISIBLE_DEVICES");
	o = gpu_snap(NULL, m, &cfg, -1);
	assert_string_equal(json_string_value(json_object_get(o, "cuda_visible_devices")), "-1");
	json_decref(o);
	json_decref(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_device_answers_recorded),
	    cmocka_unit_test(test_low_vram_decision),
	    cmocka_unit_test(test_failed_answers_record_only_the_code),
	    cmocka_unit_test(test_spans_for_the_attribution),
	    cmocka_unit_test(test_runtime_success_path),
	    cmocka_unit_test(test_peak_is_a_high_water_mark),
	    cmocka_unit_test(test_driver_api_success_path),
	    cmocka_unit_test(test_calls_within_calls_count_once),
	    cmocka_unit_test(test_async_and_virtual_allocators),
	    cmocka_unit_test(test_cuda_visible_devices_is_the_services),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
