/* diagnose_gpu: the GPU rules (issue 18, docs/diagnose.md, docs/gpu.md), in
 * the --check-memory group: the service runs on CPU. A warning when CUDA
 * was tried and failed (the runtime's error codes decide, not the device
 * nodes: a fake /dev/nvidia0 changes nothing), info when it was never tried
 * (a CPU-only PyTorch, as Debian's on the demo), so a healthy CPU start still
 * exits 0. Reads the model through its typed views (c->view). */
#include <stdio.h>
#include <string.h>

#include "diagnose_rules.h"
#include "util.h"

/* The loader's failed opens of the driver library (missing_paths): how
 * many places it looked in. */
static int libcuda_misses(const struct tl_view *v)
{
	int n = 0;

	for (size_t i = 0; i < v->n_missing; i++) {
		const char *p = v->missing[i].path, *b = p ? strrchr(p, '/') : NULL;

		n += b && !strcmp(b + 1, "libcuda.so.1");
	}
	return n;
}

/* CUDA_VISIBLE_DEVICES that hides every GPU */
static bool hides_all(const char *cvd)
{
	return cvd && (!cvd[0] || !strcmp(cvd, "-1") || !strcmp(cvd, "none"));
}

static const char *fix_of(const struct tl_gpu *g)
{
	const char *code = g->reason_code ? g->reason_code : "";

	if (hides_all(g->cuda_visible_devices))
		return "CUDA_VISIBLE_DEVICES hides every GPU: unset it, or set it to the GPU's "
		       "index "
		       "(0) in the service's environment ([app] env)";
	if (!strcmp(code, "insufficient-driver") || !strcmp(code, "driver-mismatch"))
		return "install the NVIDIA driver (it brings libcuda.so.1 and /dev/nvidia*), "
		       "recent "
		       "enough for this CUDA runtime (nvidia-smi shows the CUDA version it "
		       "supports); "
		       "in a container, pass the GPU in (docker run --gpus all, with the NVIDIA "
		       "Container Toolkit)";
	if (!strcmp(code, "no-device"))
		return "the driver sees no GPU: check CUDA_VISIBLE_DEVICES (a wrong index hides "
		       "it), "
		       "that the container gets the GPU (--gpus all) and that nvidia-smi lists it";
	if (!strcmp(code, "stub-library"))
		return "a stub libcuda.so (the toolkit's lib64/stubs) is found before the "
		       "driver's: "
		       "take it out of LD_LIBRARY_PATH, and install the NVIDIA driver";
	if (!strcmp(code, "cpu-torch") || !strcmp(code, "no-cuda-library"))
		return "for GPU speed install a CUDA build of PyTorch in the app's environment "
		       "(pip "
		       "install torch --index-url https://download.pytorch.org/whl/cu130, matching "
		       "the driver) on a machine with an NVIDIA GPU and driver; CPU mode works, "
		       "slowly";
	return "check the NVIDIA driver (nvidia-smi), CUDA_VISIBLE_DEVICES and, in a container, "
	       "--gpus all";
}

static json_t *evidence(const struct tl_gpu *g, int misses)
{
	return json_pack(
	    "{s:s?, s:s?, s:s?, s:s?, s:o, s:o, s:i, s:i, s:s?, s:b, s:s?, s:o}", "code",
	    g->reason_code, "library", g->library, "error", g->error, "call", g->error_call, "ret",
	    tl_has(g->error_ret) ? json_real(g->error_ret) : json_null(), "calls",
	    json_real(tl_or0(g->calls_total)), "libcuda_misses", misses, "device_nodes",
	    (int)g->n_device_nodes, "cuda_visible_devices", g->cuda_visible_devices,
	    "torch_imported", g->torch_imported, "torch_lib", g->torch_lib, "torch_cuda_build",
	    g->torch_cuda_build < 0 ? json_null() : json_boolean(g->torch_cuda_build));
}

static void rule_cpu_fallback(struct diag_ctx *c)
{
	const struct tl_gpu *g = &c->view->gpu;
	int misses = libcuda_misses(c->view);
	char more[160] = "";

	if (!g->present || !g->tried || g->usable != 0 || !g->reason)
		return;
	if (misses)
		snprintf(more, sizeof(more), "; the loader looked for libcuda.so.1 in %d place%s",
			 misses, misses == 1 ? "" : "s");
	diag_add(c, DIAG_WARNING, "the service runs on CPU: CUDA was tried and failed",
		 evidence(g, misses), -1, fix_of(g), "%s%s%s (%s)", g->reason, more,
		 hides_all(g->cuda_visible_devices) ? "; CUDA_VISIBLE_DEVICES hides every GPU" : "",
		 g->library ? g->library : "a CUDA library");
}

static void rule_cpu_only(struct diag_ctx *c)
{
	const struct tl_gpu *g = &c->view->gpu;

	if (!g->present || g->tried || !g->reason)
		return;
	diag_add(c, DIAG_INFO, "the service runs on CPU: it never tried CUDA",
		 evidence(g, libcuda_misses(c->view)), -1, fix_of(g), "%s", g->reason);
}

/* gpu.low_vram: IndexTTS2's decision below 10 GiB of VRAM (half precision,
 * QwenEmotion skipped). Info: what it does is by design, the service works;
 * a warning when QwenEmotion's files were opened all the same (an IndexTTS2
 * without the check, or one overriding it: the models may not fit). */
static void rule_low_vram(struct diag_ctx *c)
{
	const struct tl_gpu *g = &c->view->gpu;
	const char *name = g->device_name;
	bool qwen = g->low_vram_qwen_opened;
	double gib = 1024.0 * 1024 * 1024, t, th;
	const char *on = name ? name : "the GPU";

	if (!g->low_vram_below || !tl_has(g->low_vram_total_bytes))
		return;
	t = g->low_vram_total_bytes;
	th = tl_has(g->low_vram_threshold_bytes) ? g->low_vram_threshold_bytes : 10 * gib;
	if (qwen)
		diag_add(
		    c, DIAG_WARNING,
		    "QwenEmotion was loaded on a GPU below IndexTTS2's 10 GiB threshold",
		    json_pack("{s:f, s:f, s:s?, s:b}", "total_bytes", t, "threshold_bytes", th,
			      "device", name, "qwen_emotion_opened", qwen),
		    -1,
		    "use a GPU with at least 10 GiB of memory (its total, not what is free), or "
		    "an IndexTTS2 whose start-up checks the VRAM (half precision, QwenEmotion "
		    "skipped below 10 GiB)",
		    "%s has %.1f GiB in all, under the %.0f GiB below which IndexTTS2 runs in "
		    "half precision and skips QwenEmotion, yet files under qwen0.6bemo4-merge/ "
		    "were opened: the models may not fit (CUDA out of memory)",
		    on, t / gib, th / gib);
	else
		diag_add(
		    c, DIAG_INFO, "IndexTTS2 runs in half precision without QwenEmotion",
		    json_pack("{s:f, s:f, s:s?, s:b}", "total_bytes", t, "threshold_bytes", th,
			      "device", name, "qwen_emotion_opened", qwen),
		    -1,
		    "expected on a GPU with less than 10 GiB; for full precision and emotion "
		    "from text (QwenEmotion), a GPU with at least 10 GiB of memory (its total, "
		    "not what is free)",
		    "%s has %.1f GiB in all, under %.0f GiB: IndexTTS2 loads its models in half "
		    "precision (fp16) and skips QwenEmotion (no file under qwen0.6bemo4-merge/ "
		    "was opened), so emotion from a text description is unavailable",
		    on, t / gib, th / gib);
}

const struct diag_rule diag_gpu_rules[] = {
    {"gpu-cpu-fallback", rule_cpu_fallback},
    {"gpu-cpu-only", rule_cpu_only},
    {"gpu-low-vram", rule_low_vram},
    {NULL, NULL},
};
