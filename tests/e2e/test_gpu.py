"""The GPU side of a start-up (issue 18, docs/gpu.md) on machines with the CUDA
toolkit and no driver: tests/helpers/cudaprobe makes the calls PyTorch makes
when it probes a GPU (cudaDriverGetVersion, cudaRuntimeGetVersion, cudaGetDeviceCount, cudaSetDevice,
cudaFree(0), cudaGetDeviceProperties, cudaMemGetInfo, cudaMalloc, a
host-to-device cudaMemcpy, cudaFree) on a copy of
the toolkit's libcudart.so.13 that it dlopens from a site-packages-like folder
after it starts (as PyTorch does); cudaprobe-linked links it (mapped before
main). The timeline must record the library, each call with the result the
program itself printed, and, without a driver, the finding that the service
runs on CPU. The toolkit is part of the machine image: a missing one fails
when CI is set and skips elsewhere; so does missing BPF (tracing_ok)."""
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import jsonschema
import pytest

from conftest import PY, ROOT, TTS, alive, keepers_of, wait_for
from simfix import need

CUDA = Path("/usr/local/cuda")
LIBCUDART = CUDA / "lib64" / "libcudart.so.13"
HELPERS = ROOT / "build" / "tests" / "helpers"
PROBE = HELPERS / "cudaprobe"
LINKED = HELPERS / "cudaprobe-linked"
CALLS = ["cudaDriverGetVersion", "cudaRuntimeGetVersion", "cudaGetDeviceCount", "cudaSetDevice", "cudaFree",
         "cudaGetDeviceProperties", "cudaMemGetInfo", "cudaMalloc", "cudaMemcpy", "cudaFree"]
PROBES = 12  # the runtime's functions probed (docs/gpu.md's table)
DRIVER_PROBES = 13  # the driver's
STUB = CUDA / "lib64" / "stubs" / "libcuda.so"  # the toolkit's stub driver library
SCHEMA = json.loads((ROOT / "tests" / "schema" / "timeline.schema.json").read_text())


@pytest.fixture(autouse=True)
def toolkit():
    need(LIBCUDART.exists(), "the CUDA 13 toolkit is missing (%s)" % LIBCUDART)
    need(PROBE.exists() and LINKED.exists(),
          "cudaprobe not built: make build/tests/helpers/cudaprobe "
          "build/tests/helpers/cudaprobe-linked")


def site_copy(tmp, venv=False):
    """libcudart.so.13 copied where a wheel puts it: site-packages/nvidia/cuda_runtime/lib,
    in the app's venv (a candidate found before the start) or elsewhere (found at its mmap)."""
    d = (tmp / ("venv" if venv else "elsewhere") / "lib" / "python3.13" / "site-packages" /
         "nvidia" / "cuda_runtime" / "lib")
    d.mkdir(parents=True)
    shutil.copy(LIBCUDART, d / "libcudart.so.13")
    return d / "libcudart.so.13"


def run(tmp, *cmd, prefix=(), env=None):
    tl = tmp / "timeline.json"
    p = subprocess.run([*prefix, str(TTS), "run", "--timeline", str(tl), "--", *map(str, cmd)],
                       cwd=tmp, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(tl.read_text()), p.stdout


def printed(stdout):
    """The results cudaprobe printed, in call order: [(call, code)]."""
    out = []
    for line in stdout.splitlines():
        name, _, rest = line.partition("=")
        out.append(("cudaFree" if name == "cudaFree0" else name, int(rest.split()[0])))
    return out


def check_calls(g, stdout, procs=1):
    want = printed(stdout)
    assert [c for c, _ in want] == CALLS * procs, stdout
    got = [(c["call"], c["ret"]) for c in g["calls"]]
    assert got == want, (got, want)
    by = {c["call"]: c for c in g["calls"]}
    assert by["cudaMalloc"]["bytes"] == 1 << 20
    assert by["cudaMemcpy"]["bytes"] == 64 << 10
    assert g["calls_total"] == len(CALLS) * procs
    assert len(g["processes"]) == procs


def check_no_gpu(t, g, stdout):
    """Without a driver every call but the two version queries fails with
    cudaErrorInsufficientDriver: the service runs on CPU, a warning. The
    runtime's version is its own answer: recorded all the same."""
    if dict(printed(stdout))["cudaGetDeviceCount"] != 35:
        pytest.skip("this machine has a CUDA driver: the no-GPU case cannot be shown")
    assert g["calls"][1]["call"] == "cudaRuntimeGetVersion" and g["calls"][1]["ret"] == 0
    rt = [ln for ln in stdout.splitlines() if ln.startswith("cudaRuntimeGetVersion=")]
    assert g["processes"][0]["runtime_version"] == int(rt[0].split("version=")[1]) >= 13000
    assert g["processes"][0]["driver_version"] is None  # no driver: no answer
    for c in g["calls"][2:]:
        assert (c["ret"], c["error"]) == (35, "cudaErrorInsufficientDriver"), c
    assert g["tried"] is True and g["usable"] is False
    assert g["cpu_reason"]["code"] == "insufficient-driver"
    assert g["processes"][0]["errors"] == len(CALLS) - 2
    assert g["processes"][0]["memory_peak_bytes"] == 0  # nothing was allocated
    # the device's name and memory are recorded only from an answer: none here
    assert g["device"] is None and g["low_vram"] is None
    f = [f for f in t["findings"] if f["id"] == "gpu-cpu-fallback"]
    assert len(f) == 1 and f[0]["severity"] == "warning", t["findings"]
    assert "cudaErrorInsufficientDriver" in f[0]["message"]
    assert "driver" in f[0]["fix"] and "--gpus" in f[0]["fix"]
    return f[0]


def test_dlopened_runtime_copy(tmp_path, tracing_ok):
    lib = site_copy(tmp_path)
    t, out = run(tmp_path, PROBE, lib)
    g = t["gpu"]
    # the copy is no candidate known before the start: attached at its mmap,
    # the process held until then, so the first call is seen too
    mapped = [l for l in g["libraries"] if l["path"] == str(lib)]
    assert len(mapped) == 1, g["libraries"]
    assert mapped[0]["attached"] == "mapped" and mapped[0]["kind"] == "runtime"
    assert mapped[0]["mapped_ms"] > 0 and mapped[0]["probes"] == PROBES
    assert mapped[0]["held_ms"] > 0  # the stop lasted as long as the attach
    check_calls(g, out)
    # the timeline with GPU libraries, processes and calls is the schema's
    errs = [e.message for e in jsonschema.Draft7Validator(SCHEMA).iter_errors(t)]
    assert errs == [], errs
    f = check_no_gpu(t, g, out)
    assert f["evidence"]["library"] == str(lib)
    # the loader's failed search for the driver library is part of the reason
    assert f["evidence"]["libcuda_misses"] > 0
    # the summary line and the Prometheus figures
    r = subprocess.run([str(TTS), "report", str(tmp_path / "timeline.json")],
                       capture_output=True, text=True, timeout=60)
    assert "GPU: CUDA failed, the service runs on CPU" in r.stdout, r.stdout
    r = subprocess.run([str(TTS), "report", str(tmp_path / "timeline.json"), "--format", "prom"],
                       capture_output=True, text=True, timeout=60)
    # the init time is the timeline's, in seconds: cudaGetDeviceCount,
    # cudaSetDevice and cudaFree(0) (failed, but they took time)
    init = [float(ln.split()[1]) for ln in r.stdout.splitlines()
            if ln.startswith("indextts2_gpu_init_seconds ")]
    init_ms = sum(p["init_ms"] for p in g["processes"])
    assert len(init) == 1 and init_ms > 0, (r.stdout, g["processes"])
    assert abs(init[0] - init_ms / 1e3) <= 1e-9 + 1e-6 * init_ms / 1e3, (init, init_ms)
    assert "indextts2_h2d_bytes_total 0\n" in r.stdout  # the copy failed: nothing moved
    assert 'indextts2_gpu_memory_bytes{at="peak"} 0\n' in r.stdout


def test_cuda_visible_devices_of_the_service(tmp_path, tracing_ok):
    """gpu.cuda_visible_devices is the service's ([env] here), not tts-launch's
    own environment (which says 0): -1 hides every GPU, and the fix says so."""
    lib = site_copy(tmp_path)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="0")
    tl = tmp_path / "timeline.json"
    p = subprocess.run([str(TTS), "run", "--timeline", str(tl), "--set",
                        "env.CUDA_VISIBLE_DEVICES=-1", "--", str(PROBE), str(lib)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    t = json.loads(tl.read_text())
    assert t["gpu"]["cuda_visible_devices"] == "-1"
    f = [f for f in t["findings"] if f["id"] == "gpu-cpu-fallback"]
    assert len(f) == 1, t["findings"]
    assert "CUDA_VISIBLE_DEVICES hides every GPU" in f[0]["fix"], f[0]
    assert f[0]["evidence"]["cuda_visible_devices"] == "-1"


def test_linked_runtime(tmp_path, tracing_ok):
    """Linked: ld.so maps the DT_NEEDED libcudart before main; that mmap holds
    the process like a dlopen's, so the first call is seen too."""
    t, out = run(tmp_path, LINKED)
    g = t["gpu"]
    assert len(g["libraries"]) == 1, g["libraries"]
    lib = g["libraries"][0]
    assert lib["attached"] == "mapped" and lib["mapped_ms"] is not None
    assert os.path.realpath(lib["path"]) == os.path.realpath(LIBCUDART)
    assert lib["probes"] == PROBES
    assert "cuda:" + lib["path"] in t["tracing"]["probes"]
    check_calls(g, out)
    check_no_gpu(t, g, out)


def test_allocators_and_calls_within_calls(tmp_path, tracing_ok):
    """PyTorch's other allocators (cudaMallocAsync, and the driver's
    cuMemAllocAsync and cuMemCreate of expandable segments) are probed, on a
    driver library too: the toolkit's stub libcuda.so, found as libcuda.so.1
    first in LD_LIBRARY_PATH, answers every call with
    CUDA_ERROR_STUB_LIBRARY. The runtime's own call into the driver (its
    cudaDriverGetVersion asks cuDriverGetVersion, which fails, and answers
    success all the same) is listed `within` the runtime's call and is no
    error of the service's."""
    need(STUB.exists(), "the CUDA toolkit's stub driver library is missing (%s)" % STUB)
    drv = tmp_path / "driver"
    drv.mkdir()
    shutil.copy(STUB, drv / "libcuda.so.1")
    env = dict(os.environ, LD_LIBRARY_PATH=str(drv), CUDAPROBE_ALLOCATORS="libcuda.so.1")
    t, out = run(tmp_path, LINKED, env=env)
    g = t["gpu"]
    libs = {l["kind"]: l for l in g["libraries"]}
    assert sorted(libs) == ["driver", "runtime"], g["libraries"]
    assert libs["driver"]["path"] == str(drv / "libcuda.so.1")
    assert libs["driver"]["probes"] == DRIVER_PROBES and libs["runtime"]["probes"] == PROBES
    want = printed(out)
    allocs = ["cudaMallocAsync", "cudaFreeAsync", "cuMemAllocAsync", "cuMemFreeAsync",
              "cuMemCreate", "cuMemRelease"]
    assert [c for c, _ in want] == CALLS + allocs, out
    outer = [c for c in g["calls"] if c["within"] is None]
    assert [(c["call"], c["ret"]) for c in outer] == want, (g["calls"], want)
    by = {c["call"]: c for c in outer}
    for name in ("cudaMallocAsync", "cuMemAllocAsync", "cuMemCreate"):
        assert by[name]["bytes"] == 2 << 20, by[name]
    for name in allocs[2:]:
        assert by[name]["error"] == "CUDA_ERROR_STUB_LIBRARY", by[name]
    inner = [c for c in g["calls"] if c["within"] is not None]
    assert ("cuDriverGetVersion", "cudaDriverGetVersion", 34) in [
        (c["call"], c["within"], c["ret"]) for c in inner], g["calls"]
    assert by["cudaDriverGetVersion"]["ret"] == 0
    p = g["processes"][0]
    assert p["errors"] == len([r for _, r in want if r]), (p, want)
    assert p["memory_peak_bytes"] == 0 and p["allocations"] == 0
    assert g["calls_total"] == len(g["calls"]) == len(want) + len(inner)
    assert g["cpu_reason"]["code"] == "stub-library"
    errs = [e.message for e in jsonschema.Draft7Validator(SCHEMA).iter_errors(t)]
    assert errs == [], errs


def uprobe_links(pid):
    """The programs of the perf-event (uprobe) links whose fds pid holds: {name: count}."""
    ids, names = [], {}
    for fd in os.listdir("/proc/%d/fdinfo" % pid):
        try:
            info = open("/proc/%d/fdinfo/%s" % (pid, fd)).read()
        except OSError:
            continue
        if "link_type:\tperf" in info:
            ids += [l.split()[1] for l in info.splitlines() if l.startswith("prog_id:")]
    for i in ids:
        r = subprocess.run(["bpftool", "-j", "prog", "show", "id", i], capture_output=True,
                           text=True, timeout=60)
        name = json.loads(r.stdout)["name"] if r.returncode == 0 else "?"
        names[name] = names.get(name, 0) + 1
    return names


def links_while_running(tmp, first):
    """The uprobe links tts-launch and its keeper hold while the service
    (sh: first, then a wait for a file) waits: {program: count}, and the timeline."""
    go = tmp / "go"
    script = "%s >/dev/null && touch %s && while [ ! -e %s ]; do sleep 0.05; done" % (
        first, tmp / "waiting", go)
    p = subprocess.Popen([str(TTS), "run", "--timeline", str(tmp / "timeline.json"), "--",
                          "sh", "-c", script], cwd=tmp, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (tmp / "waiting").exists(), timeout=120, what="the service")
        keepers = wait_for(lambda: keepers_of(p.pid), what="the uprobe keeper")
        links = {}
        for holder in [p.pid] + keepers:
            for name, n in uprobe_links(holder).items():
                links[name] = links.get(name, 0) + n
        go.touch()
        assert p.wait(timeout=120) == 0
        return links, json.loads((tmp / "timeline.json").read_text())
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_no_cuda_uprobe_links_without_a_cuda_library(tmp_path, tracing_ok):
    """Issue 17: nothing is attached to CUDA libraries before the start; a
    service that maps none gets no CUDA uprobe link at all, though
    /usr/local/cuda is there. The same count for one that links libcudart
    shows that the check sees them."""
    (tmp_path / "none").mkdir()
    (tmp_path / "linked").mkdir()
    links, t = links_while_running(tmp_path / "none", "/bin/true")
    assert sum(links.values()) > 0, links  # getaddrinfo's pair: links are seen
    assert "gpu_enter" not in links and "gpu_exit" not in links, links
    assert t["gpu"]["libraries"] == [] and t["gpu"]["calls_total"] == 0
    assert not [p for p in t["tracing"]["probes"] if p.startswith("cuda:")]
    links, t = links_while_running(tmp_path / "linked", LINKED)
    # the keeper's copies and tts-launch's own: an enter and an exit per function
    assert links.get("gpu_enter") == links.get("gpu_exit") == 2 * PROBES, links
    assert len(t["gpu"]["libraries"]) == 1


def test_fake_device_node_changes_nothing(tmp_path, tracing_ok):
    """A /dev/nvidia0 that is no GPU (here a plain file, in a private /dev):
    the runtime's answer decides; the node is only evidence."""
    need(shutil.which("unshare"), "unshare is needed")
    lib = site_copy(tmp_path)
    dev = ("mount -t tmpfs tmpfs /dev && for n in null:1:3 zero:1:5 random:1:8 urandom:1:9; "
           "do IFS=: read name ma mi <<EOF\n$n\nEOF\nmknod -m 666 /dev/$name c $ma $mi; done && "
           "touch /dev/nvidia0 /dev/nvidiactl && exec \"$@\"")
    t, out = run(tmp_path, PROBE, lib, prefix=("unshare", "-m", "--propagation", "private",
                                               "bash", "-c", dev, "bash"))
    g = t["gpu"]
    assert "/dev/nvidia0" in g["device_nodes"]
    check_calls(g, out)
    f = check_no_gpu(t, g, out)
    assert f["evidence"]["device_nodes"] >= 1
    assert "no /dev/nvidia" not in f["message"]


def fake_torch(tmp, cuda_build):
    pkg = tmp / "site" / "torch"
    (pkg / "lib").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "lib" / "libtorch_cpu.so").write_bytes(b"")
    if cuda_build:
        (pkg / "lib" / "libtorch_cuda.so").write_bytes(b"")
    return tmp / "site"


@pytest.mark.parametrize("cuda_build", [False, True])
def test_cpu_torch_never_tries_cuda_info_only(tmp_path, tracing_ok, cuda_build):
    """A PyTorch that never loads a CUDA library (Debian's CPU-only build on
    the demo): an info finding, so diagnose still exits 0."""
    site = fake_torch(tmp_path, cuda_build)
    py = shutil.which("python3")
    env = dict(os.environ, PYTHONPATH=str(site))
    tl = tmp_path / "timeline.json"
    p = subprocess.run([str(TTS), "run", "--timeline", str(tl), "--", py, "-c", "import torch"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    t = json.loads(tl.read_text())
    g = t["gpu"]
    assert g["tried"] is False and g["usable"] is None and g["calls"] == []
    assert g["torch"] == {"imported": True, "lib": str(site / "torch" / "lib"),
                          "cuda_build": cuda_build}
    assert g["cpu_reason"]["code"] == ("no-cuda-library" if cuda_build else "cpu-torch")
    f = [f for f in t["findings"] if f["id"].startswith("gpu-")]
    assert [(x["id"], x["severity"]) for x in f] == [("gpu-cpu-only", "info")], f
    d = subprocess.run([str(TTS), "diagnose", str(tl)], capture_output=True, text=True,
                       timeout=60)
    assert d.returncode == 0, d.stdout + d.stderr
    assert "info[gpu-cpu-only]" in d.stdout


def test_no_torch_no_cuda_no_finding(tmp_path, tracing_ok):
    """A service that is no GPU program at all gets no GPU finding."""
    t, _ = run(tmp_path, "/bin/true")
    assert t["gpu"]["tried"] is False and t["gpu"]["cpu_reason"] is None
    assert not [f for f in t["findings"] if f["id"].startswith("gpu-")]


def state(pid):
    """The process's state letter (R, S, T...), or None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rpartition(")")[2].split()[0]
    except OSError:
        return None


HELD_WORKER = r'''
import signal, subprocess, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # outlives the guard's SIGTERM
with open(sys.argv[3], "w") as out:  # a worker in its own process group
    subprocess.Popen([sys.argv[1], sys.argv[2]], stdout=out, process_group=0).wait()
'''


def test_held_process_continued_when_tts_launch_is_killed(tmp_path, tracing_ok):
    """Issue 18: tts-launch SIGKILLed while a process of the tree is held at
    its mapping of a CUDA library (stopped until the attach): the uprobe
    keeper continues it. tts-launch is stopped first, so it can neither
    attach nor continue. The held one is a worker in its own process group
    under a live parent: no kernel rule continues it (a newly orphaned
    group with a stopped member gets SIGHUP and SIGCONT; this one is not
    orphaned), and the guard signals only the service's group."""
    lib = site_copy(tmp_path)
    gate = tmp_path / "gate"
    gate.mkdir()
    out = tmp_path / "worker.out"
    env = dict(os.environ, CUDAPROBE_GATE=str(gate))
    # a long stop grace: the guard's SIGKILL of the service's group (whose
    # parent's death would orphan the worker's group) cannot explain an exit
    p = subprocess.Popen([str(TTS), "run", "--timeline", str(tmp_path / "timeline.json"),
                          "--set", "service.stop_grace=900", "--",
                          PY, "-c", HELD_WORKER, str(PROBE), str(lib), str(out)],
                         cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    pid = parent = None
    try:
        pid = int(wait_for(lambda: (gate / "pid").exists() and (gate / "pid").read_text(),
                           timeout=120, what="cudaprobe at its gate"))
        parent = int(open("/proc/%d/stat" % pid).read().rpartition(")")[2].split()[1])
        wait_for(lambda: keepers_of(p.pid), what="the uprobe keeper")
        os.kill(p.pid, signal.SIGSTOP)
        (gate / "go").touch()
        wait_for(lambda: state(pid) == "T", timeout=120, what="cudaprobe held at its mmap")
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        # continued: it makes its calls (uncounted now) and exits
        wait_for(lambda: state(pid) in (None, "Z"), timeout=120, what="cudaprobe's exit")
        assert "cudaFree=" in out.read_text()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for q in (pid, parent):
            if q and alive(q):
                os.kill(q, signal.SIGKILL)


FORKER = r'''
import ctypes, os, sys
rt = ctypes.CDLL(sys.argv[1])  # the parent maps a CUDA runtime: attached for it
n = ctypes.c_int(0)
print("parent: cudaGetDeviceCount=%d" % rt.cudaGetDeviceCount(ctypes.byref(n)), flush=True)
for i in range(2):  # children forked after that attach, each running cudaprobe-linked
    pid = os.fork()
    if pid == 0:
        os.execv(sys.argv[2], [sys.argv[2]])
    os.waitpid(pid, 0)
'''


def test_children_forked_after_an_attach(tmp_path, tracing_ok):
    """Issue 18: uprobes are attached with a pid, so a child forked later
    gets none of its parent's; its own mapping of a CUDA library holds it
    and attaches for it: every call of each child is seen, with its pid."""
    lib = site_copy(tmp_path)
    t, out = run(tmp_path, PY, "-c", FORKER, lib, LINKED)
    g = t["gpu"]
    parent = [c for c in g["calls"] if c["call"] == "cudaGetDeviceCount"][0]["pid"]
    libs = sorted((l["pid"], l["path"]) for l in g["libraries"])
    kids = sorted(pid for pid, path in libs if os.path.realpath(path) ==
                  os.path.realpath(LIBCUDART))
    assert len(kids) == 2 and parent not in kids, libs
    assert (parent, str(lib)) in libs
    lines = [l for l in out.splitlines() if not l.startswith("parent: ")]
    want = printed("\n".join(lines))
    for k in kids:
        got = [(c["call"], c["ret"]) for c in g["calls"] if c["pid"] == k]
        assert got == want[:len(CALLS)], (k, got)
    assert g["calls_total"] == 1 + 2 * len(CALLS)
    assert sorted(p["pid"] for p in g["processes"]) == sorted([parent] + kids)


GPU_NAMES = set(CALLS) | {"CUDA init"}
HOLD_S = 0.4  # how long the fake driver library keeps cudaprobe's read waiting


def hold_fifo(fifo, done):
    """Once cudaprobe's loader opens the FIFO (its search for libcuda.so.1,
    inside the first CUDA call), hold it open HOLD_S, then close it: the read
    sees EOF, the library is no ELF, the search goes on. No reader within
    60 s: give up (the test then fails on the missing wait)."""
    import time
    deadline = time.monotonic() + 60
    while not done.is_set() and time.monotonic() < deadline:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader yet
            time.sleep(0.005)
            continue
        time.sleep(HOLD_S)
        os.close(fd)
        return


@pytest.mark.parametrize("linked", [False, True], ids=["dlopen", "linked"])
def test_time_inside_cuda_calls_is_attribution_kind_gpu(tmp_path, tracing_ok, linked):
    """The attribution's kind gpu: the critical thread's time inside CUDA
    calls, named by the call, whatever it did there. The runtime's first
    call searches for the driver (dlopen of libcuda.so.1); a FIFO of that
    name first in LD_LIBRARY_PATH keeps it in a read for HOLD_S: a wait on
    a pipe (kind other) outside a CUDA call, gpu inside one. The tiles stay
    exact, and the views take the kind."""
    import threading
    d = tmp_path / "fakedriver"
    d.mkdir()
    fifo = d / "libcuda.so.1"
    os.mkfifo(fifo)
    done = threading.Event()
    th = threading.Thread(target=hold_fifo, args=(fifo, done), daemon=True)
    th.start()
    try:
        cmd = [LINKED] if linked else [PROBE, site_copy(tmp_path)]
        t, out = run(tmp_path, "env", "LD_LIBRARY_PATH=%s" % d, *cmd)
    finally:
        done.set()
        th.join(timeout=70)
    assert [c for c, _ in printed(out)] == CALLS, out
    a = t["attribution"]
    # the contract: every ms in one cause, the causes summing to the window
    assert abs(sum(c["ms"] for c in a["causes"]) - a["window_ms"]) < 0.01, a
    other = sum(c["ms"] for c in a["causes"] if c["kind"] == "other")
    assert abs(a["explained_ms"] - (a["window_ms"] - other)) < 0.01
    assert all(c["ms"] > 0 for c in a["causes"])
    gpu = {c["what"]: c["ms"] for c in a["causes"] if c["kind"] == "gpu"}
    assert gpu and set(gpu) <= GPU_NAMES, a["causes"]
    # the wait in the fake driver's read is inside the first call: gpu
    first = t["gpu"]["calls"][0]
    assert first["call"] == "cudaDriverGetVersion" and first["dur_ms"] >= HOLD_S * 1000, first
    assert gpu["cudaDriverGetVersion"] >= HOLD_S * 1000, gpu
    # the call's time, all of it (the critical thread made it), and no more
    assert abs(gpu["cudaDriverGetVersion"] - first["dur_ms"]) < 0.01, (gpu, first)
    # not also (or instead) the pipe it waited on
    assert not [c for c in a["causes"] if c["kind"] != "gpu" and "pipe" in c["what"] or
                str(fifo) in c["what"]], a["causes"]
    # the stop at the library's mapping (tts-launch attaching) is named so
    held = [c for c in a["causes"] if c["what"] == "held by tts-launch (CUDA probes attach)"]
    assert len(held) == 1 and held[0]["kind"] == "other", a["causes"]
    assert held[0]["ms"] <= t["gpu"]["libraries"][0]["held_ms"] + 50
    runs = [s for s in a["strip"] if s["kind"] == "gpu"]
    assert any(s["what"] == "cudaDriverGetVersion" and
               s["end_ms"] - s["start_ms"] >= HOLD_S * 1000 for s in runs), a["strip"]
    # the views: the summary, the plot's strip, perfetto's state track
    tl = tmp_path / "timeline.json"

    def report(*fmt):
        r = subprocess.run([str(TTS), "report", str(tl), *fmt], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout
    assert any(ln.split()[2:4] == ["gpu", "cudaDriverGetVersion"]
               for ln in report().splitlines() if "%" in ln), report()
    assert 'data-kind="gpu"' in report("--format", "svg")
    evs = json.loads(report("--format", "perfetto"))["traceEvents"]
    assert any(e.get("cat") == "state" and e["name"] == "gpu" and
               e["args"]["what"] == "cudaDriverGetVersion" for e in evs)
    assert any(ln.startswith("gpu;cudaDriverGetVersion") for ln in
               report("--format", "folded").splitlines())


FORK_NO_EXEC = r'''
import ctypes, os, sys
rt = ctypes.CDLL(sys.argv[1])  # the parent maps a CUDA runtime: attached for it
n, v = ctypes.c_int(0), ctypes.c_int(0)
print("parent: cudaGetDeviceCount=%d" % rt.cudaGetDeviceCount(ctypes.byref(n)), flush=True)
pid = os.fork()  # no exec: the child inherits the mapping, not the probes
if pid == 0:
    print("cudaDriverGetVersion=%d" % rt.cudaDriverGetVersion(ctypes.byref(v)), flush=True)
    print("cudaGetDeviceCount=%d" % rt.cudaGetDeviceCount(ctypes.byref(n)), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
'''


def test_child_forked_without_exec(tmp_path, tracing_ok):
    """A child forked without exec from a process with CUDA probes maps
    nothing (no stop at an mmap): gpu_fork holds it at its return from
    clone, and its parent's library is attached for it (`attached`:
    `forked`): its calls are seen, with its pid."""
    lib = site_copy(tmp_path)
    t, out = run(tmp_path, PY, "-c", FORK_NO_EXEC, lib)
    g = t["gpu"]
    parent = g["calls"][0]["pid"]
    assert g["calls"][0]["call"] == "cudaGetDeviceCount"
    forked = [l for l in g["libraries"] if l["attached"] == "forked"]
    assert len(forked) == 1 and forked[0]["path"] == str(lib), g["libraries"]
    child = forked[0]["pid"]
    assert child != parent and forked[0]["probes"] == PROBES
    want = [(c, r) for c, r in printed("\n".join(l for l in out.splitlines()
                                                 if not l.startswith("parent: ")))]
    assert [(c["call"], c["ret"]) for c in g["calls"] if c["pid"] == child] == want, g["calls"]
    assert {"gpu_fork", "gpu_fork3"} <= set(t["tracing"]["probes"])


TREE_HOLDER = r'''
import ctypes, os, sys, time
rt = ctypes.CDLL(sys.argv[1])  # probes attached for this pid
rt.cudaGetDeviceCount(ctypes.byref(ctypes.c_int(0)))
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]):  # mapped, probed, alive while the outsiders run
    time.sleep(0.05)
'''


def test_process_outside_the_tree_is_never_held_nor_probed(tmp_path, tracing_ok):
    """Issue 18: probes are attached with the tree's pids, and only the
    tree's mappings hold a process. The service maps the toolkit's libcudart
    (probes attached for its pid), makes a call and waits; meanwhile a cudaprobe run
    outside the traced tree (dlopen of a wheel-like copy, then the linked
    one, the very library the tree's probes are on) completes its calls, is
    never seen stopped (T), and the timeline has nothing of its pid."""
    lib = site_copy(tmp_path)
    go, waiting = tmp_path / "go", tmp_path / "waiting"
    p = subprocess.Popen([str(TTS), "run", "--timeline", str(tmp_path / "timeline.json"), "--",
                          PY, "-c", TREE_HOLDER, str(LIBCUDART), str(waiting), str(go)],
                         cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    outsiders = []
    try:
        wait_for(lambda: waiting.exists(), timeout=120, what="the service")
        wait_for(lambda: keepers_of(p.pid), what="the uprobe keeper")  # tracing is on
        for cmd in ([PROBE, lib], [LINKED]):
            q = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, text=True)
            seen = set()
            while q.poll() is None:
                s = state(q.pid)
                if s:
                    seen.add(s)
            out, _ = q.communicate(timeout=120)
            assert q.returncode == 0, out
            assert [c for c, _ in printed(out)] == CALLS, out  # every call made
            assert "T" not in seen and "t" not in seen, (cmd, seen)
            outsiders.append(q.pid)
        go.touch()
        assert p.wait(timeout=120) == 0
    finally:
        go.touch()
        if p.poll() is None:
            p.kill()
            p.wait()
    g = json.loads((tmp_path / "timeline.json").read_text())["gpu"]
    assert not [l for l in g["libraries"] if l["pid"] in outsiders], g["libraries"]
    assert not [c for c in g["calls"] if c["pid"] in outsiders], g["calls"]
    assert not [x for x in g["processes"] if x["pid"] in outsiders], g["processes"]
    # the tree's own calls were seen: probes were on while the outsiders ran
    assert len(g["libraries"]) == 1 and g["calls_total"] == 1, g["libraries"]
    assert os.path.realpath(g["libraries"][0]["path"]) == os.path.realpath(LIBCUDART)
