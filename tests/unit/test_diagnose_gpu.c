/* diagnose_gpu's rules over small models (issue 18): the healthy fixture of
 * tests/fixtures/timelines-diagnose/ with a hand-made gpu section. CUDA tried
 * and failed is a warning whatever /dev/nvidia* says; a CPU-only torch that
 * never tried is info (exit 0); a usable GPU, an old timeline without the
 * section and a service that is no GPU program give nothing; a device
 * below 10 GiB is IndexTTS2's low-VRAM decision (info; a warning when
 * QwenEmotion was loaded all the same). Run from the
 * top of the tree (make unit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "diagnose.h"
#include "gpu.h"
#include "timeline.h"
#include "timeline_internal.h"

static struct timeline *model(const char *gpu)
{
	char err[512];
	struct timeline *tl =
	    timeline_load("tests/fixtures/timelines-diagnose/healthy.json", err, sizeof(err));
	json_error_t je;
	json_t *g;

	if (!tl)
		fail_msg("%s", err);
	if (gpu) {
		g = json_loads(gpu, 0, &je);
		if (!g)
			fail_msg("bad test JSON: %s", je.text);
		json_object_set_new(timeline_json(tl), "gpu", g);
	}
	return tl;
}

static const char *ids(struct timeline *tl, char *buf, size_t len)
{
	json_t *f;
	size_t i, o = 0;

	diagnose_run(tl, DIAG_MEMORY);
	buf[0] = 0;
	json_array_foreach (json_object_get(timeline_json(tl), "findings"), i, f)
		o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s:%s", i ? "," : "",
				      json_string_value(json_object_get(f, "id")),
				      json_string_value(json_object_get(f, "severity")));
	return buf;
}

static const char *first(struct timeline *tl, const char *key)
{
	return json_string_value(json_object_get(
	    json_array_get(json_object_get(timeline_json(tl), "findings"), 0), key));
}

#define GPU(tried, usable, reason, nodes, calls, torch)                                            \
	"{\"libraries\": [{\"path\": \"/v/nvidia/cuda_runtime/lib/libcudart.so.13\", \"kind\": "   \
	"\"runtime\", \"pid\": 10, \"attached\": \"mapped\", \"mapped_ms\": 50, \"probes\": 7}], " \
	"\"processes\": [], \"calls\": " calls ", \"calls_total\": 1, \"tried\": " tried           \
	", \"usable\": " usable ", \"cpu_reason\": " reason ", \"device_nodes\": " nodes           \
	", \"cuda_visible_devices\": null, \"torch\": " torch "}"
#define FAILED_CALL                                                                                \
	"[{\"pid\": 10, \"call\": \"cudaGetDeviceCount\", \"ms\": 60, \"dur_ms\": 0.1, \"ret\": "  \
	"35, \"error\": \"cudaErrorInsufficientDriver\", \"bytes\": 0}]"
#define NO_TORCH      "{\"imported\": false, \"lib\": null, \"cuda_build\": null}"
#define CPU_TORCH     "{\"imported\": true, \"lib\": \"/t/torch/lib\", \"cuda_build\": false}"
#define DRIVER_REASON "{\"code\": \"insufficient-driver\", \"message\": \"CUDA calls failed\"}"

static void test_tried_and_failed_is_a_warning(void **state)
{
	char b[256];
	/* a fake /dev/nvidia0: the runtime's answer decides */
	struct timeline *tl =
	    model(GPU("true", "false", DRIVER_REASON, "[\"/dev/nvidia0\"]", FAILED_CALL, NO_TORCH));

	(void)state;
	assert_string_equal(ids(tl, b, sizeof(b)), "gpu-cpu-fallback:warning");
	assert_non_null(strstr(first(tl, "message"), "CUDA calls failed"));
	assert_non_null(strstr(first(tl, "fix"), "--gpus all"));
	assert_int_equal(diagnose_level(tl), DIAG_WARNING);
	timeline_free(tl);
}

static void test_cpu_torch_is_info(void **state)
{
	char b[256];
	struct timeline *tl =
	    model(GPU("false", "null",
		      "{\"code\": \"cpu-torch\", \"message\": \"PyTorch is a CPU-only build\"}",
		      "[]", "[]", CPU_TORCH));

	(void)state;
	assert_string_equal(ids(tl, b, sizeof(b)), "gpu-cpu-only:info");
	assert_non_null(strstr(first(tl, "fix"), "CUDA build of PyTorch"));
	assert_int_equal(diagnose_level(tl), DIAG_CLEAN); /* info: still exit 0 */
	timeline_free(tl);
}

static void test_nothing_to_say(void **state)
{
	char b[256];
	struct timeline *tl =
	    model(GPU("true", "true", "null", "[\"/dev/nvidia0\"]", "[]", NO_TORCH));

	(void)state;
	assert_string_equal(ids(tl, b, sizeof(b)), ""); /* a usable GPU */
	timeline_free(tl);
	tl = model(GPU("false", "null", "null", "[]", "[]", NO_TORCH));
	assert_string_equal(ids(tl, b, sizeof(b)), ""); /* no GPU program */
	timeline_free(tl);
	tl = model(NULL);
	assert_string_equal(ids(tl, b, sizeof(b)), ""); /* an older timeline */
	timeline_free(tl);
}

/* a usable GPU of total bytes, as gpu_snap writes it: device, low_vram */
static struct timeline *usable(double total_gib, bool qwen)
{
	struct timeline *tl =
	    model(GPU("true", "true", "null", "[\"/dev/nvidia0\"]", "[]", NO_TORCH));
	json_t *g = json_object_get(timeline_json(tl), "gpu");
	double total = total_gib * (1 << 30);

	json_object_set_new(g, "device",
			    json_pack("{s:i, s:i, s:s, s:f}", "pid", 10, "index", 0, "name",
				      "NVIDIA GeForce RTX 3070", "total_bytes", total));
	json_object_set_new(g, "low_vram",
			    json_pack("{s:f, s:I, s:b, s:b}", "total_bytes", total,
				      "threshold_bytes", (json_int_t)10 << 30, "below",
				      total < (double)(10ULL << 30), "qwen_emotion_opened", qwen));
	return tl;
}

static void test_low_vram_decision(void **state)
{
	char b[256];
	struct timeline *tl = usable(8, false);
	json_t *ev;

	(void)state;
	/* below 10 GiB, QwenEmotion untouched: IndexTTS2's own decision, info */
	assert_string_equal(ids(tl, b, sizeof(b)), "gpu-low-vram:info");
	assert_non_null(strstr(first(tl, "message"), "NVIDIA GeForce RTX 3070 has 8.0 GiB"));
	assert_non_null(strstr(first(tl, "message"), "half precision"));
	assert_non_null(strstr(first(tl, "message"), "skips QwenEmotion"));
	assert_non_null(strstr(first(tl, "fix"), "expected"));
	assert_non_null(strstr(first(tl, "fix"), "at least 10 GiB"));
	ev = json_object_get(json_array_get(json_object_get(timeline_json(tl), "findings"), 0),
			     "evidence");
	assert_true(json_number_value(json_object_get(ev, "total_bytes")) == 8.0 * (1 << 30));
	assert_false(json_is_true(json_object_get(ev, "qwen_emotion_opened")));
	assert_int_equal(diagnose_level(tl), DIAG_CLEAN); /* info: exit 0 */
	timeline_free(tl);
	/* QwenEmotion opened all the same: it may not fit, a warning */
	tl = usable(6, true);
	assert_string_equal(ids(tl, b, sizeof(b)), "gpu-low-vram:warning");
	assert_non_null(strstr(first(tl, "message"), "out of memory"));
	assert_non_null(strstr(first(tl, "fix"), "at least 10 GiB"));
	assert_int_equal(diagnose_level(tl), DIAG_WARNING);
	timeline_free(tl);
	/* 10 GiB and more: nothing to say */
	tl = usable(24, true);
	assert_string_equal(ids(tl, b, sizeof(b)), "");
	timeline_free(tl);
}

/* a failed CUDA with reason code, and CUDA_VISIBLE_DEVICES cvd (NULL: unset) */
static struct timeline *failed(const char *code, const char *cvd)
{
	struct timeline *tl =
	    model(GPU("true", "false", DRIVER_REASON, "[]", FAILED_CALL, NO_TORCH));
	json_t *g = json_object_get(timeline_json(tl), "gpu");

	json_object_set_new(g, "cpu_reason",
			    json_pack("{s:s, s:s}", "code", code, "message", "CUDA calls failed"));
	json_object_set_new(g, "cuda_visible_devices", cvd ? json_string(cvd) : json_null());
	return tl;
}

/* each reason's fix says what to do about that reason */
static void test_fix_per_reason(void **state)
{
	static const struct {
		const char *code, *cvd, *fix, *not_in_fix;
	} cases[] = {
	    {"no-device", NULL, "the driver sees no GPU", "stub"},
	    {"stub-library", NULL, "a stub libcuda.so", "sees no GPU"},
	    {"driver-mismatch", NULL, "install the NVIDIA driver", "stub"},
	    {"insufficient-driver", NULL, "recent enough for this CUDA runtime", "stub"},
	    /* a hiding CUDA_VISIBLE_DEVICES comes before the code's own fix */
	    {"no-device", "-1", "CUDA_VISIBLE_DEVICES hides every GPU", "sees no GPU"},
	    {"no-device", "", "CUDA_VISIBLE_DEVICES hides every GPU", "sees no GPU"},
	    {"insufficient-driver", "none", "CUDA_VISIBLE_DEVICES hides every GPU", "install"},
	    /* an index hides nothing */
	    {"no-device", "0", "the driver sees no GPU", "hides every GPU"},
	};
	char b[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct timeline *tl = failed(cases[i].code, cases[i].cvd);
		const char *fix, *msg;

		assert_string_equal(ids(tl, b, sizeof(b)), "gpu-cpu-fallback:warning");
		fix = first(tl, "fix");
		msg = first(tl, "message");
		if (!strstr(fix, cases[i].fix) || strstr(fix, cases[i].not_in_fix))
			fail_msg("%s, CUDA_VISIBLE_DEVICES=%s: fix \"%s\"", cases[i].code,
				 cases[i].cvd ? cases[i].cvd : "(unset)", fix);
		/* the message names a hiding CUDA_VISIBLE_DEVICES too */
		assert_int_equal(strstr(msg, "CUDA_VISIBLE_DEVICES hides every GPU") != NULL,
				 strstr(cases[i].fix, "hides every GPU") != NULL);
		timeline_free(tl);
	}
}

static void test_error_names(void **state)
{
	(void)state;
	assert_string_equal(gpu_error_name(35, false), "cudaErrorInsufficientDriver");
	assert_string_equal(gpu_error_name(100, false), "cudaErrorNoDevice");
	assert_string_equal(gpu_error_name(100, true), "CUDA_ERROR_NO_DEVICE");
	assert_null(gpu_error_name(35, true));
	assert_null(gpu_error_name(12345, false));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tried_and_failed_is_a_warning),
	    cmocka_unit_test(test_cpu_torch_is_info),
	    cmocka_unit_test(test_nothing_to_say),
	    cmocka_unit_test(test_low_vram_decision),
	    cmocka_unit_test(test_fix_per_reason),
	    cmocka_unit_test(test_error_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
