#!/usr/bin/python3
"""What a traced service pays to start a thread or a process (issue 17):
the inherited perf events a traced tree carries (the followers of the
probes bound to the tree, tracer_libcio.c, and the fault tick) are copied
at every clone and torn down at every exit. The workload, timed inside
itself so that tts-launch's own start and end are left out:

  threads:   300 times: a Python thread started and joined
  processes: 100 times: subprocess.run(["/bin/true"])

untraced, under tts-launch with `[trace] syscalls = cheap` (the default)
and `exact`, and with --baseline BIN another build (cheap); interleaved
rounds, medians, and each traced run's ratio to the mean of the untraced
runs beside it.

    scripts/bench/spawn_cost.py [--runs N] [--baseline BIN]

Needs root (BPF) and a built build/tts-launch.
"""
import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trace_overhead import PY, SETTLE_S, TTS, paired, paired_ci  # noqa: E402

WORK = {
    "threads": "import threading, time\nt0 = time.perf_counter()\nfor _ in range(300):\n"
               "    t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
               "print((time.perf_counter() - t0) * 1000)\n",
    "processes": "import subprocess, time\nt0 = time.perf_counter()\nfor _ in range(100):\n"
                 "    subprocess.run(['/bin/true'])\nprint((time.perf_counter() - t0) * 1000)\n",
}


def run(variant, tts, script, tmp):
    argv = [PY, str(script)]
    if tts:
        argv = [str(tts), "run", "--timeline", str(tmp / "t.json"), "--set",
                "trace.syscalls=" + variant.split()[-1], "--set", "app.dir=%s" % tmp, "--set",
                "log.file=", "--set", "service.pidfile=", "--"] + argv
    time.sleep(SETTLE_S)
    out = subprocess.run(argv, cwd=tmp, capture_output=True, text=True, timeout=300)
    if out.returncode:
        raise RuntimeError("%s failed: %s" % (variant, out.stderr[-2000:]))
    return float(out.stdout.split()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--baseline", help="another tts-launch build, traced with cheap")
    a = ap.parse_args()
    variants = [("untraced", None), ("tts-launch cheap", TTS), ("tts-launch exact", TTS)]
    if a.baseline:
        variants.append(("baseline tts-launch cheap", Path(a.baseline)))
    print("| workload | variant | median (ms) | per thread/process (ms) | paired ratio "
          "| its 95% interval | min-max (ms) |")
    print("| --- | --- | ---: | ---: | ---: | --- | --- |")
    with tempfile.TemporaryDirectory(prefix="tts-bench-spawn-") as d:
        tmp = Path(d)
        for name, code in WORK.items():
            script = tmp / (name + ".py")
            script.write_text(code)
            n = 300 if name == "threads" else 100
            ms = {v: [] for v, _ in variants}
            base = {v: [] for v, _ in variants}
            for i in range(a.runs):
                others = variants[1:]
                others = others[i % len(others):] + others[:i % len(others)]
                before = run("untraced", None, script, tmp)
                ms["untraced"].append(before)
                for v, tts in others:
                    x = run(v, tts, script, tmp)
                    after = run("untraced", None, script, tmp)
                    ms[v].append(x)
                    base[v].append((before + after) / 2)
                    before = after
                print("%s: round %d/%d" % (name, i + 1, a.runs), file=sys.stderr)
            base["untraced"] = ms["untraced"]
            for v, _ in variants:
                m = statistics.median(ms[v])
                lo, hi = paired_ci(ms[v], base[v])
                print("| %s (%d) | %s | %.0f | %.2f | %.3fx | %.3f-%.3f | %.0f-%.0f |" % (
                    name, n, v, m, m / n, paired(ms[v], base[v]), lo, hi, min(ms[v]),
                    max(ms[v])))
    print("\n(%d interleaved rounds, each in a rotated order, an untraced run between any two "
          "others;\ntimed inside the workload: tts-launch's own start and end left out.)" % a.runs)


if __name__ == "__main__":
    main()
