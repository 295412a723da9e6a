#!/usr/bin/python3
"""Tracing overhead, side by side in one run (issue 4's benchmark).

For each workload, N interleaved rounds (each in a rotated order, an
untraced run between any two others, a 0.5 s pause before each run) of:
untraced, traced by tts-launch (its defaults: [trace] syscalls = cheap),
the same with [trace] syscalls = exact (the raw sys_enter/sys_exit pair),
traced by tts-launch without the Python import probes ([trace] python_usdt
off: their uprobe traps are most of the cost), `strace -f`, and a bpftrace
script watching the same events
(bpftrace-equivalent.bt). Each variant runs the workload under timer.py, so
all measure the same window (fork of the workload to its exit, or to its
port accepting for the simulator: polled from this process, outside the
traced tree, see timer.py). Reported: median wall time and its ratio to
untraced, and the paired ratio (each run against the mean of the untraced
runs just before and after it) with its 95% bootstrap interval;
for tts-launch also the time from its start to the service's exec
with probes attached (the timeline's `exec` mark), its peak RSS (VmHWM), and
events lost.

    scripts/bench/trace_overhead.py [--runs N] [--workload torch|sim|sim-cold|all] [--json OUT]
                                    [--baseline TTS_LAUNCH] [--variants V,V...]

--baseline adds the variant "tts-launch (baseline)": another build of
tts-launch run the same way (e.g. one without a feature, to measure what
the feature costs: the attribution, issue 15); --variants runs only those
named (untraced always runs).

Needs root (BPF), strace, bpftrace (scripts/setup installs them) and a built
build/tts-launch. The simulator workload generates models (bench size) once
and warms its cache through the local hub, then starts offline; sim-cold
(a first start) empties the download caches before every run, so that each
one downloads the models from the local hub, which stays up.
"""
import argparse
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = "/usr/bin/python3"
TTS = Path(os.environ.get("TTS_LAUNCH", ROOT / "build" / "tts-launch"))
TIMER = [PY, str(ROOT / "scripts" / "bench" / "timer.py")]
BT = ROOT / "scripts" / "bench" / "bpftrace-equivalent.bt"
NO_USDT = "tts-launch, python_usdt off"
EXACT = "tts-launch, syscalls = exact"
BASELINE = "tts-launch (baseline)"
VARIANTS = ["untraced", "tts-launch", EXACT, NO_USDT, "strace -f", "bpftrace"]
baseline_tts = None  # --baseline


def tracer_timings(stderr, who):
    """The `tts-launch run -v` timings on stderr, in ms: load_ms, attach_ms
    (without the USDT and keeper steps), exec_ms, and cpu_before_exec_ms
    where the build says it; SystemExit naming who
    when a run printed none (it failed)."""
    m = re.search(r"open\+load ([\d.]+) ms, attach ([\d.]+) ms", stderr)
    e = re.search(r"exec at ([\d.]+)(ms|s)", stderr)
    if not m or not e:
        raise SystemExit("no -v timing from %s:\n%s" % (who, stderr))
    out = {"load_ms": float(m.group(1)), "attach_ms": float(m.group(2)),
           "exec_ms": float(e.group(1)) * (1 if e.group(2) == "ms" else 1000)}
    c = re.search(r"CPU before the exec: ([\d.]+) ms", stderr)
    if c:  # builds before 2026-12-05 evening do not say it
        out["cpu_before_exec_ms"] = float(c.group(1))
    # [trace] keep_loaded: 1 when the programs came from an earlier run's
    # entry (no verification), 0 when they were loaded; builds before it: 0
    out["kept"] = 1 if "programs kept loaded since an earlier run" in stderr else 0
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vm_hwm_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return None


def accepting(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def stop_at_port(p, out, port):
    """Wait for timer.py (a descendant of p) to start the service, then for
    the port to accept; hand timer.py the time and signal it."""
    pidfile, t1 = Path(str(out) + ".pid"), Path(str(out) + ".t1")
    while not pidfile.exists():
        if p.poll() is not None:
            return
        time.sleep(0.002)
    while not accepting(port):
        if p.poll() is not None:
            return
        time.sleep(0.002)
    t1.write_text("%d\n" % time.monotonic_ns())
    os.kill(int(pidfile.read_text()), signal.SIGUSR1)


def timer_argv(port):
    return TIMER + (["--until-signal"] if port else []) + ["--"]


def clear_out(out):
    for f in (out, Path(str(out) + ".pid"), Path(str(out) + ".t1")):
        f.unlink(missing_ok=True)


def run_variant(variant, workload_argv, cwd, env, tmp, port=None):
    """One measured run. Returns (wall_ms, extra dict)."""
    out = tmp / "elapsed"
    clear_out(out)
    timed = timer_argv(port) + workload_argv
    extra = {}
    tl = tmp / "timeline.json"
    if variant == "untraced":
        argv = timed
    elif variant in ("tts-launch", NO_USDT, EXACT, BASELINE):
        # NO_USDT: without the Python import probes, whose uprobe traps are
        # most of the cost (the split is the point of this variant)
        tl.unlink(missing_ok=True)
        argv = [str(baseline_tts if variant == BASELINE else TTS), "run", "--set", "app.dir=%s" % cwd, "--set", "log.file=%s" % (tmp / "log"),
                "--set", "service.pidfile=", "--timeline", str(tl)] + \
            (["--set", "trace.python_usdt=false"] if variant == NO_USDT else []) + \
            (["--set", "trace.syscalls=exact"] if variant == EXACT else []) + ["--"] + timed
    elif variant == "strace -f":
        argv = ["strace", "-f", "-qq", "-o", "/dev/null"] + timed
    elif variant == "bpftrace":
        # bpftrace -c splits on spaces without quoting: go through a script.
        script = tmp / "cmd.sh"
        script.write_text("exec %s\n" % " ".join(shlex.quote(x) for x in timed))
        argv = ["bpftrace", "-q", str(BT), "-c", "/bin/sh %s" % script]
    p = subprocess.Popen(argv, cwd=cwd, env={**env, "BENCH_OUT": str(out)},
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    hwm = None
    if port:
        stop_at_port(p, out, port)
    while p.poll() is None:
        if variant == "tts-launch":
            hwm = vm_hwm_kib(p.pid) or hwm
        time.sleep(0.01)
    err = p.stderr.read().decode(errors="replace")
    if p.returncode != 0 or not out.exists():
        raise RuntimeError("%s failed (%s):\n%s" % (variant, p.returncode, err[-2000:]))
    wall, cpu = out.read_text().split()[-2:]
    wall = float(wall)
    extra_cpu = None if cpu == "-" else float(cpu)
    if variant == "tts-launch":
        t = json.loads(tl.read_text())
        extra = {"exec_ms": t["marks"]["exec"], "rss_kib": hwm,
                 "events_lost": t["tracing"]["events_lost"], "traced": t["tracing"]["enabled"]}
        if not t["tracing"]["enabled"]:
            raise RuntimeError("tts-launch ran untraced: %s" % t["tracing"].get("reason"))
    extra["cpu_ms"] = extra_cpu
    return wall, extra


def prepare_sim(tmp, cold=False):
    """An app dir whose cache is warm; returns (cwd, argv, env, port,
    before_each, hub). cold: the hub stays up (stop it with hub.terminate())
    and before_each empties the download caches, so that each run
    downloads the models from it (a first start); else before_each is None
    and the runs start offline."""
    models = ROOT / "build" / "sim" / "bench"
    subprocess.run([PY, str(ROOT / "scripts/sim/genmodels.py"), "--size", "bench", "--out", str(models)],
                   check=True)
    app = tmp / ("app-cold" if cold else "app")
    (app / "checkpoints").mkdir(parents=True)
    for f in (models / "checkpoints").iterdir():
        (app / "checkpoints" / f.name).symlink_to(f)
    (app / "webui.py").symlink_to(ROOT / "scripts/sim/webui.py")
    port = free_port()
    home = tmp / ("hf_home-cold" if cold else "hf_home")
    env = {**os.environ, "HF_HOME": str(home)}
    port_file = tmp / ("hub-cold.port" if cold else "hub.port")
    hub = subprocess.Popen([PY, str(ROOT / "scripts/sim/hub.py"), "--root", str(models / "hub"),
                            "--port", "0", "--port-file", str(port_file)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if port_file.exists() and port_file.read_text().strip():
                break
            time.sleep(0.05)
        env["HF_ENDPOINT"] = "http://127.0.0.1:%s" % port_file.read_text().strip()
        # the first start: the models downloaded once (the page cache warm
        # for what the runs read back, as on a machine that just fetched them)
        p = subprocess.Popen(timer_argv(port) + [PY, "webui.py", "--port", str(port), "--host", "127.0.0.1"],
                             cwd=app, env={**env, "BENCH_OUT": str(tmp / "warmup")})
        stop_at_port(p, tmp / "warmup", port)
        if p.wait() != 0:
            raise RuntimeError("warming the cache failed (%d)" % p.returncode)
    finally:
        if not cold:
            hub.terminate()
            hub.wait()
    argv = [PY, "webui.py", "--port", str(port), "--host", "127.0.0.1"]
    if not cold:
        env["HF_HUB_OFFLINE"] = "1"
        return app, argv, env, port, None, None

    def empty_caches():
        # what the downloads made: the models' cache, HF_HOME (and the
        # Xet chunk cache in it)
        shutil.rmtree(app / "checkpoints" / "hf_cache", ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
    return app, argv, env, port, empty_caches, hub


SETTLE_S = 0.5  # a pause before each run, for the previous one's deferred work


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--workload", choices=["torch", "sim", "sim-cold", "all"], default="all")
    ap.add_argument("--json", help="write raw results here")
    ap.add_argument("--baseline", help="another tts-launch build, run as a variant")
    ap.add_argument("--variants", help="comma-separated variants to run (untraced always)")
    a = ap.parse_args()
    global baseline_tts
    if a.baseline:
        baseline_tts = Path(a.baseline).resolve()
        VARIANTS.append(BASELINE)
    if a.variants:
        # short names for the variants whose names hold a comma
        alias = {"exact": EXACT, "nousdt": NO_USDT, "strace": "strace -f"}
        keep = {alias.get(v.strip(), v.strip()) for v in a.variants.split(",")}
        unknown = keep - set(VARIANTS)
        if unknown:
            ap.error("--variants: unknown %s (known: %s, or exact, nousdt, strace)" % (
                ", ".join(sorted(unknown)), ", ".join(VARIANTS)))
        VARIANTS[:] = [v for v in VARIANTS if v in ("untraced", BASELINE) or v in keep]
    if os.geteuid() != 0:
        sys.exit("trace_overhead: run as root (tts-launch needs BPF)")
    for tool in ("strace", "bpftrace"):
        if not shutil.which(tool):
            sys.exit("trace_overhead: %s missing: run scripts/setup" % tool)
    if not os.path.exists("/sys/kernel/tracing/events"):
        subprocess.run(["mount", "-t", "tracefs", "tracefs", "/sys/kernel/tracing"], check=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="tts-bench-") as d:
        tmp = Path(d)
        workloads = []
        if a.workload in ("torch", "all"):
            workloads.append(("python3 -c 'import torch'", tmp, [PY, "-c", "import torch"],
                              dict(os.environ), None, None, None))
        if a.workload in ("sim", "all"):
            workloads.append(("simulator start-up (warm cache) to ready",) + prepare_sim(tmp))
        if a.workload in ("sim-cold", "all"):
            workloads.append(("simulator first start (models downloaded from the local hub) "
                              "to ready",) + prepare_sim(tmp, cold=True))
        for name, cwd, argv, env, port, before_each, hub in workloads:
            if before_each:
                before_each()
            run_variant("untraced", argv, cwd, env, tmp, port)  # warm the page cache
            walls = {v: [] for v in VARIANTS}
            cpus = {v: [] for v in VARIANTS}
            base_w = {v: [] for v in VARIANTS}  # the untraced runs next to each run
            base_c = {v: [] for v in VARIANTS}
            extras = []

            def run(v):
                if before_each:
                    before_each()
                time.sleep(SETTLE_S)
                w, extra = run_variant(v, argv, cwd, env, tmp, port)
                c = extra.pop("cpu_ms")
                if extra:
                    extras.append(extra)
                return w, c

            for i in range(a.runs):
                # an untraced run before and after every other run, which is
                # paired with their mean: this VM's speed drifts within
                # seconds, less between neighbours. Each round in a rotated
                # order, so no variant always runs after the same one (the
                # previous run's deferred work lands in the next)
                others = VARIANTS[1:]
                others = others[i % len(others):] + others[:i % len(others)]
                before = run("untraced")
                walls["untraced"].append(before[0])
                cpus["untraced"].append(before[1])
                for v in others:
                    w, c = run(v)
                    after = run("untraced")
                    walls[v].append(w)
                    cpus[v].append(c)
                    base_w[v].append((before[0] + after[0]) / 2)
                    base_c[v].append(None if None in (before[1], after[1])
                                     else (before[1] + after[1]) / 2)
                    before = after
                print("%s: round %d/%d: %s" % (name, i + 1, a.runs,
                      ", ".join("%s %.0f ms" % (v, walls[v][-1]) for v in VARIANTS)), file=sys.stderr)
            if hub:
                hub.terminate()
                hub.wait()
            base_w["untraced"], base_c["untraced"] = walls["untraced"], cpus["untraced"]
            results[name] = {"walls_ms": walls, "cpu_ms": cpus, "base_walls_ms": base_w,
                             "base_cpu_ms": base_c, "tts_launch": extras}
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    print_table(results, a.runs)


def paired(xs, base):
    """Median of the per-run ratios: each run against the mean of the
    untraced runs just before and after it, which cancels the drift of a
    shared machine (the plain ratio of medians does not)."""
    return statistics.median(x / b for x, b in zip(xs, base))


def paired_ci(xs, base, resamples=2000):
    """95% bootstrap interval of the paired ratio (rounds resampled with
    replacement, fixed seed): how far the noise of this many rounds lets the
    median move."""
    ratios = [x / b for x, b in zip(xs, base)]
    rng = random.Random(0)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(resamples))
    return meds[int(0.025 * resamples)], meds[int(0.975 * resamples) - 1]


def print_table(results, runs):
    print("| workload | variant | median wall (ms) | ratio of medians | paired ratio | its 95% interval "
          "| min-max (ms) | median CPU of the workload (ms) | CPU paired ratio |")
    print("| --- | --- | ---: | ---: | ---: | --- | --- | ---: | ---: |")
    for name, r in results.items():
        median_base = statistics.median(r["walls_ms"]["untraced"])
        cpu_ok = all(None not in r["cpu_ms"][v] + r["base_cpu_ms"][v] for v in VARIANTS)
        for v in VARIANTS:
            w, base = r["walls_ms"][v], r["base_walls_ms"][v]
            cpu = ("%.0f | %.3fx" % (statistics.median(r["cpu_ms"][v]),
                                     paired(r["cpu_ms"][v], r["base_cpu_ms"][v]))
                   if cpu_ok else "- | -")
            print("| %s | %s | %.0f | %.3fx | %.3fx | %.3f-%.3f | %.0f-%.0f | %s |" % (
                name, v, statistics.median(w), statistics.median(w) / median_base,
                paired(w, base), *paired_ci(w, base), min(w), max(w), cpu))
    print()
    print("| workload | tts-launch start to exec, probes attached (median ms) | tts-launch peak RSS (median MiB) | events lost (max) |")
    print("| --- | ---: | ---: | ---: |")
    for name, r in results.items():
        e = r["tts_launch"]
        print("| %s | %.1f | %.1f | %d |" % (name, statistics.median(x["exec_ms"] for x in e),
                                             statistics.median(x["rss_kib"] for x in e) / 1024,
                                             max(x["events_lost"] for x in e)))
    print("\n(%d interleaved rounds per workload, each in a rotated order, an untraced run\n"
          "between any two others; medians. Paired ratio: the median over rounds of each\n"
          "run's ratio to the mean of the untraced runs just before and after it.)" % runs)


if __name__ == "__main__":
    main()
