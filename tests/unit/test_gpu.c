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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_device_answers_recorded),
	    cmocka_unit_test(test_low_vram_decision),
	    cmocka_unit_test(test_failed_answers_record_only_the_code),
	    cmocka_unit_test(test_spans_for_the_attribution),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
