#!/usr/bin/python3
"""Where the tracing cost goes: CPU time of each BPF program over a
simulator start-up (warm cache, to ready), from the kernel's own BPF run-time
statistics (kernel.bpf_stats_enabled, switched on for the measurement and
restored after).

    scripts/bench/probe_cost.py [--runs N] [--json OUT]

Each run starts the simulator under `tts-launch run`; right after the port
accepts (polled from this process, outside the traced tree), the service's
shell reads every program's run_time_ns / run_cnt with bpftool while the
programs are still attached. Reported per program: median runs, median
total ms, and ns per run. The counts are system-wide (a syscall or fault of
any process runs the program; those outside the tree return at the first
lookup). The statistics themselves add two clock reads per run, so ns per
run is an upper bound. Uprobe traps (the Python import probes) are not in
the BPF run time: trace_overhead.py measures the whole.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import trace_overhead as bench  # noqa: E402  (shares the simulator set-up)


def sysctl(name, value=None):
    if value is None:
        return subprocess.run(["sysctl", "-n", name], capture_output=True, text=True,
                              check=True).stdout.strip()
    subprocess.run(["sysctl", "-q", "%s=%s" % (name, value)], check=True)
    return value


def one_run(tmp, app, argv, env, port):
    stats, out = tmp / "stats.json", tmp / "elapsed"
    bench.clear_out(out)
    stats.unlink(missing_ok=True)
    t0 = int(time.time())
    timed = " ".join(shlex.quote(x) for x in bench.timer_argv(port) + argv)
    cmd = "%s; bpftool -j prog show > %s" % (timed, shlex.quote(str(stats)))
    p = subprocess.Popen([str(bench.TTS), "run", "--set", "app.dir=%s" % app,
                          "--set", "log.file=%s" % (tmp / "log"), "--set", "service.pidfile=",
                          "--timeline", str(tmp / "timeline.json"), "--", "/bin/sh", "-c", cmd],
                         cwd=app, env={**env, "BENCH_OUT": str(out)},
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    bench.stop_at_port(p, out, port)
    err = p.communicate()[1].decode(errors="replace")
    if p.returncode != 0 or not stats.exists():
        raise RuntimeError("tts-launch run failed (%s):\n%s" % (p.returncode, err[-2000:]))
    wall, cpu = out.read_text().split()[-2:]
    progs = {}
    for prog in json.loads(stats.read_text()):
        # this run's programs: loaded since it started
        if "run_cnt" in prog and prog.get("loaded_at", 0) >= t0 - 1:
            progs[prog["name"]] = (prog["run_time_ns"], prog["run_cnt"])
    return float(wall), None if cpu == "-" else float(cpu), progs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", help="write raw results here")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("probe_cost: run as root (BPF statistics and tts-launch need it)")
    before = sysctl("kernel.bpf_stats_enabled")
    runs = []
    with tempfile.TemporaryDirectory(prefix="tts-probe-cost-") as d:
        tmp = Path(d)
        app, argv, env, port = bench.prepare_sim(tmp)[:4]
        sysctl("kernel.bpf_stats_enabled", 1)
        try:
            for i in range(a.runs):
                runs.append(one_run(tmp, app, argv, env, port))
                print("round %d/%d: %.0f ms to ready" % (i + 1, a.runs, runs[-1][0]), file=sys.stderr)
        finally:
            sysctl("kernel.bpf_stats_enabled", before)
    if a.json:
        Path(a.json).write_text(json.dumps(runs, indent=1))
    names = sorted({n for _, _, p in runs for n in p})
    rows = []
    for n in names:
        t = statistics.median(p.get(n, (0, 0))[0] for _, _, p in runs) / 1e6
        c = statistics.median(p.get(n, (0, 0))[1] for _, _, p in runs)
        rows.append((t, n, c))
    rows.sort(reverse=True)
    cpu = [c for _, c, _ in runs if c is not None]
    print("| program | runs (median) | BPF time (median ms) | ns per run |")
    print("| --- | ---: | ---: | ---: |")
    for t, n, c in rows:
        print("| %s | %d | %.2f | %.0f |" % (n, c, t, t * 1e6 / c if c else 0))
    print("| all programs | | %.2f | |" % sum(t for t, _, _ in rows))
    print()
    print("(%d runs; simulator start-up to ready: median %.0f ms wall, %s ms CPU of the service.)"
          % (a.runs, statistics.median(w for w, _, _ in runs),
             "%.0f" % statistics.median(cpu) if cpu else "-"))


if __name__ == "__main__":
    main()
