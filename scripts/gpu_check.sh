#!/bin/bash
# gpu_check.sh: the prepared GPU-machine check of issue 18 (docs/gpu.md), for
# a session that has a GPU machine (the `device` tool). Never run by CI.
#
#   scripts/gpu_check.sh [OUTDIR]      (default: $OUT, else /tmp/gpu_check)
#
# Records, each step on its own so that one failing leaves the rest:
#   1. the machine: nvidia-smi, /dev/nvidia*, the kernel, BTF, gVisor or not;
#   2. which CUDA libraries `import torch` and `torch.cuda.init()` map, in
#      load order (LD_DEBUG=files), and the maps after each step;
#   3. how long cudaFree(0), cudaMalloc (1 GiB) and a 256 MiB host-to-device
#      cudaMemcpy take, through ctypes on the libcudart torch loaded;
#   4. where BPF works (BTF present, not gVisor, build/tts-launch built):
#      tts-launch's view of the same (the timeline's gpu section: the
#      libraries in mapping order and how long each mapping was held for its
#      attach, the device's name and memory, the low-VRAM decision; the
#      report's GPU line, diagnose), and launch -> exec of a run that maps no
#      CUDA (nothing is attached for it before the start).
# Everything goes to OUTDIR (summary.txt first); the script exits 0 whatever
# it found. Bounded: every step has a timeout.
set -u
OUTDIR=${1:-${OUT:-/tmp/gpu_check}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.." || exit 0
PY=${PYTHON:-python3}
S="$OUTDIR/summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
step() { say "== $1"; }

step "machine"
say "kernel: $(uname -r)"
if dmesg 2>/dev/null | grep -qi gvisor || grep -qi gvisor /proc/version 2>/dev/null; then
	say "gVisor: yes (no BPF)"
	GVISOR=1
else
	say "gVisor: no"
	GVISOR=0
fi
say "btf: $([ -e /sys/kernel/btf/vmlinux ] && echo yes || echo no)"
say "device nodes: $(find /dev -maxdepth 1 -name 'nvidia*' 2>/dev/null | tr '\n' ' ')"
if timeout 30 nvidia-smi >"$OUTDIR/nvidia-smi.txt" 2>&1; then
	say "nvidia-smi: ok"
else
	say "nvidia-smi: failed"
fi
timeout 30 nvidia-smi --query-gpu=name,memory.total,memory.free,driver_version --format=csv \
	2>/dev/null | tee -a "$S"
say "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-<unset>}"

step "torch: libraries mapped by import torch, then torch.cuda.init()"
cat >"$OUTDIR/maps.py" <<'EOF'
import json, sys, time
def cuda_maps():
    seen = []
    for line in open("/proc/self/maps"):
        p = line.split()[-1] if "/" in line else ""
        if ("cuda" in p or "nvidia" in p or "libtorch" in p) and p not in seen:
            seen.append(p)
    return seen
out = {"before": cuda_maps()}
t = time.monotonic(); import torch; out["import_s"] = time.monotonic() - t
out["after_import"] = cuda_maps()
out["torch"] = torch.__version__; out["torch_cuda"] = torch.version.cuda
out["is_available"] = torch.cuda.is_available()
try:
    t = time.monotonic(); torch.cuda.init(); out["init_s"] = time.monotonic() - t
    out["device"] = torch.cuda.get_device_name(0)
    out["total_memory"] = torch.cuda.get_device_properties(0).total_memory
    out["mem_get_info"] = torch.cuda.mem_get_info()
except Exception as e:
    out["init_error"] = repr(e)
out["after_init"] = cuda_maps()
json.dump(out, sys.stdout, indent=1)
EOF
LD_DEBUG=files timeout 300 "$PY" "$OUTDIR/maps.py" >"$OUTDIR/maps.json" 2>"$OUTDIR/ld_debug.txt"
say "maps.py exit: $?"
grep -o 'file=[^ ]*cuda[^ ]*' "$OUTDIR/ld_debug.txt" | awk '!seen[$0]++' >"$OUTDIR/load_order.txt"
say "CUDA libraries in load order (LD_DEBUG=files):"
tee -a "$S" <"$OUTDIR/load_order.txt"
head -c 4000 "$OUTDIR/maps.json" >>"$S"
echo >>"$S"

step "timings: cudaFree(0), cudaMalloc(1 GiB), cudaMemcpy H2D 256 MiB (ctypes)"
cat >"$OUTDIR/timing.py" <<'EOF'
import ctypes, glob, os, sys, time
import torch  # loads the libcudart it brings
lib = None
for line in open("/proc/self/maps"):
    if "libcudart" in line:
        lib = line.split()[-1]; break
if not lib:
    cands = glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "*", "lib", "libcudart.so*"))
    lib = cands[0] if cands else "libcudart.so"
rt = ctypes.CDLL(lib)
print("libcudart:", lib)
def timed(name, f):
    t = time.monotonic(); r = f(); d = time.monotonic() - t
    print("%s: ret %d in %.3f ms" % (name, r, d * 1e3)); return r
timed("cudaFree(0)", lambda: rt.cudaFree(None))
timed("cudaFree(0) again", lambda: rt.cudaFree(None))
p = ctypes.c_void_p()
if timed("cudaMalloc(1 GiB)", lambda: rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 30))) == 0:
    host = ctypes.create_string_buffer(256 << 20)
    timed("cudaMemcpy H2D 256 MiB", lambda: rt.cudaMemcpy(p, host, ctypes.c_size_t(256 << 20), 1))
    timed("cudaFree(1 GiB)", lambda: rt.cudaFree(p))
EOF
timeout 300 "$PY" "$OUTDIR/timing.py" 2>&1 | tee -a "$S"

step "tts-launch's view"
if [ "$GVISOR" = 1 ] || [ ! -e /sys/kernel/btf/vmlinux ]; then
	say "skipped: no BPF here (gVisor or no BTF)"
elif [ ! -x build/tts-launch ]; then
	say "skipped: build/tts-launch is not built (make)"
else
	timeout 300 build/tts-launch run --timeline "$OUTDIR/timeline.json" -- \
		"$PY" -c 'import torch; torch.cuda.init(); x = torch.empty(1 << 28, dtype=torch.uint8, device="cuda"); x.copy_(torch.ones(1 << 28, dtype=torch.uint8)); torch.cuda.synchronize()' \
		>"$OUTDIR/run.txt" 2>&1
	say "run exit: $?"
	"$PY" -c 'import json,sys; t=json.load(open(sys.argv[1])); json.dump(t.get("gpu"), sys.stdout, indent=1)' \
		"$OUTDIR/timeline.json" >"$OUTDIR/gpu_section.json" 2>&1
	head -c 6000 "$OUTDIR/gpu_section.json" >>"$S"
	echo >>"$S"
	"$PY" - "$OUTDIR/timeline.json" <<'EOF' 2>&1 | tee -a "$S"
import json, sys
g = json.load(open(sys.argv[1])).get("gpu") or {}
for l in g.get("libraries", []):
    print("mapped %s by %d at %s ms, held %s ms for %d probes" % (
        l["path"], l["pid"], l["mapped_ms"], l.get("held_ms"), l["probes"]))
print("device:", json.dumps(g.get("device")))
print("low_vram:", json.dumps(g.get("low_vram")))
print("usable:", g.get("usable"), "cpu_reason:", json.dumps(g.get("cpu_reason")))
EOF
	# the allocators: the default (cudaMalloc), then expandable segments
	# (cuMemCreate) and cudaMallocAsync; calls by name, and those made within
	# another probed call (a runtime call's own driver calls: counted once)
	for conf in "" expandable_segments:True backend:cudaMallocAsync; do
		PYTORCH_CUDA_ALLOC_CONF=$conf timeout 300 build/tts-launch run \
			--timeline "$OUTDIR/alloc.json" -- "$PY" -c 'import torch; x = torch.empty(1 << 28, dtype=torch.uint8, device="cuda"); x.copy_(torch.ones(1 << 28, dtype=torch.uint8)); torch.cuda.synchronize()' \
			>/dev/null 2>&1
		"$PY" - "$OUTDIR/alloc.json" "$conf" <<'EOF' 2>&1 | tee -a "$S"
import collections, json, sys
g = json.load(open(sys.argv[1])).get("gpu") or {}
n = collections.Counter((c["call"], c.get("within")) for c in g.get("calls", []))
p = (g.get("processes") or [{}])[0]
print("PYTORCH_CUDA_ALLOC_CONF=%r: peak %s, h2d %s bytes, init %s ms; calls %s" % (
    sys.argv[2], p.get("memory_peak_bytes"), p.get("h2d_bytes"), p.get("init_ms"),
    sorted(n.items(), key=lambda kv: -kv[1])[:24]))
EOF
	done
	for i in 1 2 3; do
		timeout 120 build/tts-launch run -v --timeline "$OUTDIR/true.json" -- /bin/true 2>&1 |
			grep -E 'tracer:|exec at' | tee -a "$S"
	done
	build/tts-launch report "$OUTDIR/timeline.json" 2>&1 | grep -i gpu | tee -a "$S"
	build/tts-launch diagnose "$OUTDIR/timeline.json" 2>&1 | tee -a "$S"
fi
say "== done: $OUTDIR"
exit 0
