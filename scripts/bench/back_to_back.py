#!/usr/bin/python3
"""A run started while the previous run's keeper still detaches (issue 17):
run X of a launcher ends, and OFFSET seconds later run Y of the same launcher
starts; Y's launch -> exec and its attach (from `-v`), and how long X's
keeper lived after X ended. The last close of a tracepoint's perf event
waits a grace period under the kernel's event_mutex, which Y's attach needs
too: `cheap` has ~75 such events (the per-syscall tracepoints, libc's
probes), `exact` a few. Each [trace] syscalls mode (and with --baseline,
another build: the one before a change) is measured in turn, each pair of
runs alone on the machine: the next pair starts once every keeper is gone.

    scripts/bench/back_to_back.py [--baseline BIN] [--runs N] [--offsets 0,1,2,4]
                                  [--modes cheap,exact] [--json OUT]

Needs root (BPF) and a built build/tts-launch.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trace_overhead import PY, TTS  # noqa: E402

WORK = [PY, "-c", "import time; time.sleep(0.3)"]


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


def quiet(timeout=60):
    end = time.monotonic() + timeout
    while keepers() and time.monotonic() < end:
        time.sleep(0.05)


def start(tts, mode):
    return subprocess.Popen([str(tts), "run", "-v", "--timeline", "", "--set",
                             "trace.syscalls=" + mode, "--"] + WORK,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def verbose(err):
    ex = re.search(r"exec at ([0-9.]+)(m?s)", err)
    att = re.search(r"attach ([0-9.]+) ms", err)
    ms = float(ex.group(1)) * (1 if ex.group(2) == "ms" else 1000) if ex else float("nan")
    return ms, float(att.group(1)) if att else float("nan")


def pair(tts, mode, offset):
    quiet()
    x = start(tts, mode)
    x.communicate()
    ended = time.monotonic()
    mine = keepers()  # X's (the machine was quiet before it)
    time.sleep(offset)
    y = start(tts, mode)
    exec_ms, attach_ms = verbose(y.communicate()[1])
    while any(os.path.exists("/proc/%d" % k) for k in mine):
        time.sleep(0.02)
    return {"exec_ms": exec_ms, "attach_ms": attach_ms, "keeper_s": time.monotonic() - ended}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", help="another tts-launch build, measured alternately")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--offsets", default="0,1,2,4")
    ap.add_argument("--modes", default="cheap,exact")
    ap.add_argument("--json")
    a = ap.parse_args()
    builds = [("this build", TTS)] + ([("baseline", Path(a.baseline))] if a.baseline else [])
    builds = [(n + ", " + m, t, m) for n, t in builds for m in a.modes.split(",")]
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
