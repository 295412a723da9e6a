#!/usr/bin/python3
"""A run started while the previous run's keeper still detaches (issue 17):
run X of a launcher ends, and OFFSET seconds later run Y of the same launcher
starts; Y's launch -> exec and its attach (from `-v`), and how long X's
keeper lived after X ended. Each link of a program on a perf event waits a
grace period when the keeper closes it (the program's detach; the last
event of a tracepoint or uprobe definition a second one, under the kernel's
event_mutex, which Y's attach needs too): `cheap` has ~75 such links (the
per-syscall tracepoints, libc's probes), `exact` a few. Each [trace] syscalls mode (and with --baseline,
another build: the one before a change) is measured in turn, each pair of
runs alone on the machine: the next pair starts once every keeper is gone.

    scripts/bench/back_to_back.py [--baseline BIN] [--runs N] [--offsets 0,1,2,4]
                                  [--modes cheap,exact] [--loop N] [--work-s S]
                                  [--json OUT]

With --loop N: a loop of N runs instead of pairs, each started as soon as
the last one exited (a test suite, a user's script); per build and mode,
the loop's wall time, the attach and launch -> exec of its runs after the
first, and how many of those took the programs an earlier run kept loaded
([trace] keep_loaded), RUNS loops each, interleaved. The workload sleeps
--work-s seconds (default 0.3; 0: `python3 -c pass`).

Needs root (BPF) and a built build/tts-launch.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trace_overhead import PY, TTS, tracer_timings  # noqa: E402

WORK_S = 0.3
MODES = ("cheap", "exact")
KEEPER_WAIT_S = 120  # far above a keeper's detach (BENCHMARKS.md: 7-9 s in cheap)


def keepers():
    """pids of every tts-launch-upr process"""
    out = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and open("/proc/%s/comm" % d).read().strip() == "tts-launch-upr":
                out.append(int(d))
        except OSError:
            pass
    return out


def wait_gone(pids, what):
    """until none of pids is alive; SystemExit after KEEPER_WAIT_S"""
    end = time.monotonic() + KEEPER_WAIT_S
    while any(os.path.exists("/proc/%d" % k) for k in pids):
        if time.monotonic() > end:
            raise SystemExit("%s still alive after %d s (pids %s): the figures would mix "
                             "its detach with the next runs' (stop the tts-launch that owns it)" % (what, KEEPER_WAIT_S, pids))
        time.sleep(0.02)


def work():
    return [PY, "-c", "import time; time.sleep(%g)" % WORK_S if WORK_S else "pass"]


def start(tts, mode):
    return subprocess.Popen([str(tts), "run", "-v", "--timeline", "", "--set",
                             "trace.syscalls=" + mode, "--"] + work(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def pair(tts, mode, offset):
    wait_gone(keepers(), "a tts-launch-upr keeper from before")
    x = start(tts, mode)
    tracer_timings(x.communicate()[1], tts)  # it ran
    ended = time.monotonic()
    mine = keepers()  # X's (the machine was quiet before it)
    time.sleep(offset)
    y = start(tts, mode)
    t = tracer_timings(y.communicate()[1], tts)
    wait_gone(mine, "the first run's keeper")
    return {"exec_ms": t["exec_ms"], "attach_ms": t["attach_ms"],
            "keeper_s": time.monotonic() - ended}


def loop(tts, mode, n):
    """n runs back to back: the wall from the first start to the last exit,
    and the attach and exec of runs 2..n"""
    wait_gone(keepers(), "a tts-launch-upr keeper from before")
    t0, runs = time.monotonic(), []
    for _ in range(n):
        x = start(tts, mode)
        runs.append(tracer_timings(x.communicate()[1], tts))
    wall = time.monotonic() - t0
    return {"wall_s": wall, "attach_ms": [r["attach_ms"] for r in runs[1:]],
            "exec_ms": [r["exec_ms"] for r in runs[1:]],
            "kept": [r["kept"] for r in runs[1:]]}


def main_loop(a, builds):
    res = {name: [] for name, _, _ in builds}
    for r in range(a.runs):
        for name, tts, mode in (builds if r % 2 == 0 else builds[::-1]):
            res[name].append(loop(tts, mode, a.loop))
            print("  round %d %s: %.1f s, attach %s" % (
                r + 1, name, res[name][-1]["wall_s"],
                " ".join("%.0f" % x for x in res[name][-1]["attach_ms"])),
                file=sys.stderr, flush=True)
    print("| build, [trace] syscalls | runs in a loop | the loop's wall (median s) | min-max |"
          " attach of runs 2..N (median ms) | its max | launch -> exec of runs 2..N (median ms) |"
          " runs 2..N with programs kept |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for name, tts, _ in builds:
        ls = res[name]
        walls = [x["wall_s"] for x in ls]
        att = [v for x in ls for v in x["attach_ms"]]
        ex = [v for x in ls for v in x["exec_ms"]]
        kept = [v for x in ls for v in x["kept"]]
        print("| %s | %d | %.2f | %.2f-%.2f | %.0f | %.0f | %.1f | %d of %d |" % (
            name.replace("baseline", "baseline (%s)" % tts), a.loop, statistics.median(walls),
            min(walls), max(walls), statistics.median(att), max(att), statistics.median(ex),
            sum(kept), len(kept)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


def main():
    global WORK_S
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", help="another tts-launch build, measured alternately")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--offsets", default="0,1,2,4")
    ap.add_argument("--modes", default="cheap,exact", help="[trace] syscalls values, comma-separated")
    ap.add_argument("--loop", type=int, help="loops of this many runs instead of pairs")
    ap.add_argument("--work-s", type=float, default=WORK_S,
                    help="the workload's sleep in seconds (0: python3 -c pass)")
    ap.add_argument("--json")
    a = ap.parse_args()
    bad = [m for m in a.modes.split(",") if m not in MODES]
    if bad or a.runs < 1:
        ap.error("--modes takes %s (got %s), --runs at least 1" % (", ".join(MODES), a.modes))
    if a.loop is not None and a.loop < 2:
        ap.error("--loop takes 2 runs or more (got %d)" % a.loop)
    if a.work_s < 0:
        ap.error("--work-s takes 0 or more seconds (got %g)" % a.work_s)
    WORK_S = a.work_s
    if a.baseline and not os.access(a.baseline, os.X_OK):
        ap.error("--baseline %s: not an executable file" % a.baseline)
    builds = [("this build", TTS)] + ([("baseline", Path(a.baseline))] if a.baseline else [])
    builds = [(n + ", " + m, t, m) for n, t in builds for m in a.modes.split(",")]
    if a.loop:
        return main_loop(a, builds)
    offsets = [float(o) for o in a.offsets.split(",")]
    res = {name: {o: [] for o in offsets} for name, _, _ in builds}
    for r in range(a.runs):
        for o in offsets:
            for name, tts, mode in (builds if r % 2 == 0 else builds[::-1]):
                res[name][o].append(pair(tts, mode, o))
                print("  round %d offset %.1f %s: %s" % (r + 1, o, name, res[name][o][-1]),
                      file=sys.stderr, flush=True)
    print("| build, [trace] syscalls | second run started after | its launch -> exec (median ms) | min-max |"
          " its attach (median ms) | first run's keeper lived (median s) |")
    print("| --- | ---: | ---: | --- | ---: | ---: |")
    for name, tts, _ in builds:
        for o in offsets:
            rs = res[name][o]
            ex = [x["exec_ms"] for x in rs]
            print("| %s | %.1f s | %.0f | %.0f-%.0f | %.0f | %.1f |" % (
                name.replace("baseline", "baseline (%s)" % tts), o, statistics.median(ex),
                min(ex), max(ex), statistics.median(x["attach_ms"] for x in rs),
                statistics.median(x["keeper_s"] for x in rs)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({n: {str(o): v for o, v in d.items()} for n, d in res.items()}, f, indent=1)


if __name__ == "__main__":
    main()
