#!/usr/bin/python3
"""The whole command as a user times it (issue 17): `tts-launch -- /usr/bin/python3 -c pass`
(and `-c 'import torch'`) from its fork to its exit, against the same command
untraced, paired and interleaved like trace_overhead.py (each round in a
rotated order, an untraced run between any two others, a 0.5 s pause before
each run; the paired ratio is each run against the mean of the untraced runs
just before and after it, with a 95% bootstrap interval). Unlike
trace_overhead.py, which times the workload inside tts-launch, this includes
tts-launch's own start (open, load, attach) and its end (the timeline, the
probes' teardown: detaching a uprobe costs an RCU grace period).

Variants: untraced; tts-launch; tts-launch with [trace] python_usdt = false;
`strace -f` and the bpftrace script of trace_overhead.py
(bpftrace-equivalent.bt: the same kinds of events), each wrapping the same
command; and with --baseline BIN, another tts-launch build (the one before a
change) with the same settings, so before/after are measured side by side.
--variants picks some of them (untraced always runs).

    scripts/bench/whole_command.py [--runs N] [--workload pass|torch|all] [--baseline BIN]
                                   [--variants tts,nousdt,strace,bpftrace,baseline] [--json OUT]

Needs root (BPF) and a built build/tts-launch.
"""
import argparse
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trace_overhead import BT, PY, SETTLE_S, TTS, paired, paired_ci  # noqa: E402

WORKLOADS = {"pass": [PY, "-c", "pass"], "torch": [PY, "-c", "import torch"]}


STRACE, BPFTRACE = "strace -f", "bpftrace"
SHORT = ("tts", "nousdt", "strace", "bpftrace", "baseline")


def variants(baseline, want):
    v = [("untraced", None, [])]
    if "tts" in want:
        v.append(("tts-launch", TTS, []))
    if "nousdt" in want:
        v.append(("tts-launch, python_usdt off", TTS, ["--set", "trace.python_usdt=false"]))
    if "strace" in want:
        v.append((STRACE, STRACE, []))
    if "bpftrace" in want:
        v.append((BPFTRACE, BPFTRACE, []))
    if baseline and "baseline" in want:
        v.append(("baseline tts-launch (%s)" % baseline, Path(baseline), []))
    return v


def run_once(tts, sets, argv, tmp):
    """Fork to exit of the whole command: (wall ms, CPU ms of it and its
    waited-for descendants, and for tts-launch the ms from the service's
    exit, as its timeline marks it, to the command's: the wall less the
    exit mark, which counts from tts-launch's start, so this includes its
    own exec and dynamic linking, ~2 ms)."""
    if tts == STRACE:
        argv = ["strace", "-f", "-qq", "-o", "/dev/null"] + argv
    elif tts == BPFTRACE:
        # bpftrace -c splits on spaces without quoting: through a script
        script = tmp / "cmd.sh"
        script.write_text("exec %s\n" % " ".join(shlex.quote(x) for x in argv))
        argv = ["bpftrace", "-q", str(BT), "-c", "/bin/sh %s" % script]
    elif tts:
        argv = [str(tts), "run", "--set", "app.dir=%s" % tmp, "--set",
                "log.file=%s" % (tmp / "log"), "--set", "service.pidfile=", "--timeline",
                str(tmp / "t.json"), *sets, "--", *argv]
    t0 = time.monotonic_ns()
    p = subprocess.Popen(argv, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = (time.monotonic_ns() - t0) / 1e6
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError("%s exited %d" % (" ".join(argv), p.returncode))
    tail = None
    if isinstance(tts, Path):
        tl = json.loads((tmp / "t.json").read_text())
        if not tl["tracing"]["enabled"]:
            raise RuntimeError("%s ran untraced" % tts)
        tail = wall - tl["marks"]["exit"]
    return wall, (ru.ru_utime + ru.ru_stime) * 1000, tail


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--workload", choices=["pass", "torch", "all"], default="all")
    ap.add_argument("--baseline", help="another tts-launch binary, measured beside this one")
    ap.add_argument("--json", help="write raw results here")
    ap.add_argument("--variants", default=",".join(SHORT),
                    help="comma-separated, besides untraced (default: all): " + ",".join(SHORT))
    a = ap.parse_args()
    want = [v.strip() for v in a.variants.split(",")]
    bad = [v for v in want if v not in SHORT]
    if bad:
        sys.exit("whole_command: unknown variant(s): %s" % ", ".join(bad))
    if os.geteuid() != 0:
        sys.exit("whole_command: run as root (tts-launch needs BPF)")
    for tool, name in (("strace", "strace"), ("bpftrace", "bpftrace")):
        if name in want and not shutil.which(tool):
            sys.exit("whole_command: %s missing: run scripts/setup" % tool)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    vs = variants(a.baseline, want)
    results = {}
    with tempfile.TemporaryDirectory(prefix="tts-bench-whole-") as d:
        tmp = Path(d)
        names = ["pass", "torch"] if a.workload == "all" else [a.workload]
        for wl in names:
            argv = WORKLOADS[wl]
            run_once(None, [], argv, tmp)  # warm the page cache
            walls = {v[0]: [] for v in vs}
            cpus = {v[0]: [] for v in vs}
            tails = {v[0]: [] for v in vs}
            base = {v[0]: [] for v in vs}
            for i in range(a.runs):
                others = vs[1:]
                others = others[i % len(others):] + others[:i % len(others)]
                time.sleep(SETTLE_S)
                before = run_once(None, [], argv, tmp)
                walls["untraced"].append(before[0])
                cpus["untraced"].append(before[1])
                for name, tts, sets in others:
                    time.sleep(SETTLE_S)
                    w, c, tail = run_once(tts, sets, argv, tmp)
                    time.sleep(SETTLE_S)
                    after = run_once(None, [], argv, tmp)
                    walls[name].append(w)
                    cpus[name].append(c)
                    if tail is not None:
                        tails[name].append(tail)
                    base[name].append((before[0] + after[0]) / 2)
                    before = after
                print("%s: round %d/%d: %s" % (wl, i + 1, a.runs, ", ".join(
                    "%s %.0f ms" % (v[0], walls[v[0]][-1]) for v in vs)), file=sys.stderr)
            base["untraced"] = walls["untraced"]
            results[" ".join(argv)] = {"walls_ms": walls, "cpu_ms": cpus, "base_walls_ms": base,
                                       "exit_to_end_ms": tails}
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    print("| command | variant | median wall (ms) | paired ratio | its 95% interval | min-max (ms) "
          "| median CPU (ms) | service exit -> end (median ms) |")
    print("| --- | --- | ---: | ---: | --- | --- | ---: | ---: |")
    for cmd, r in results.items():
        for name, _, _ in vs:
            w, b = r["walls_ms"][name], r["base_walls_ms"][name]
            t = r["exit_to_end_ms"][name]
            print("| `%s` | %s | %.0f | %.3fx | %.3f-%.3f | %.0f-%.0f | %.0f | %s |" % (
                cmd, name, statistics.median(w), paired(w, b), *paired_ci(w, b), min(w), max(w),
                statistics.median(r["cpu_ms"][name]),
                "%.1f" % statistics.median(t) if t else "-"))
    print("\n(%d interleaved rounds per command, each in a rotated order, an untraced run\n"
          "between any two others; fork to exit of the whole command, as a user times it;\n"
          "service exit -> end: the wall less the timeline's exit mark, tts-launch's own\n"
          "exec and linking included.)" % a.runs)


if __name__ == "__main__":
    main()
