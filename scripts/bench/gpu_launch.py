#!/usr/bin/python3
"""Launch -> exec of `tts-launch run -v -- /bin/true` (the "exec at" line of
-v) and the tracer's own split (open+load, attach), for this build and a
baseline build, in interleaved pairs; medians and ranges (docs/gpu.md, "What
it costs": issue 17's CUDA pre-attach). With --strace, also the uprobe and
tracepoint perf_event_open calls each run makes, and their time.

    scripts/bench/gpu_launch.py [--runs N] [--gap S] [--block K] [--strace] [BASELINE_BIN [BIN]]

Each field is also given paired: the median of this build's run minus the
baseline's in the same round, with a 95% bootstrap interval. Without
BASELINE_BIN (`make bench`), build/tts-launch alone.

--gap S waits S seconds before each run, so that the last run's uprobe
keeper (which lingers 10 s, then detaches its held tracepoints one by one,
~1-2 s more) is gone: a single start as a user makes it (14; at 11 a run
can start during those detaches and wait for them, 0.4-1.4 s); a small gap
(2) is a loop of runs: the held tracepoints still up, and a kept load's
maps reset (~0.3 s after a run), so [trace] keep_loaded's entry is taken.
The "kept" field says whether it was (1).

--block K runs each build K times in a row (--gap apart), after 14 s
without any run: since a keeper holds the run's raw tracepoints through its
linger (tphold.c), interleaved builds would each attach beside the other's
holders. Round i then pairs the builds' runs 2..K of the same place in their
blocks; --runs is the number of blocks per build.

A baseline is another build, e.g. the commit before a change:
    git archive 69bdd19 | tar -x -m -C /tmp/base && make -C /tmp/base -j2
    scripts/bench/gpu_launch.py /tmp/base/build/tts-launch

Needs root (BPF). Not a test: the figures depend on the machine's load (each
uprobe or tracepoint registration can wait for an RCU grace period).
"""
import argparse
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "bench"))
from trace_overhead import tracer_timings  # noqa: E402


def one(binary, tmp, strace):
    cmd = [binary, "run", "-v", "--timeline", str(tmp / "t.json"), "--", "/bin/true"]
    st = tmp / "strace.txt"
    if strace:
        cmd = ["strace", "-T", "-e", "trace=perf_event_open", "-o", str(st)] + cmd
    r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=600)
    out = tracer_timings(r.stderr, binary)
    if strace:
        for k in ("uprobes", "uprobe_s", "tracepoints", "tracepoint_s"):
            out[k] = 0
        for line in st.read_text().splitlines():
            t = re.search(r"<([\d.]+)>$", line)
            if not t:
                continue
            kind = ("uprobe" if "type=0x8" in line else
                    "tracepoint" if "PERF_TYPE_TRACEPOINT" in line else None)
            if kind:
                out[kind + "s"] += 1
                out[kind + "_s"] += float(t.group(1))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--strace", action="store_true")
    ap.add_argument("--gap", type=float, default=0.0,
                    help="seconds to wait before each run (14: the last keeper is gone)")
    ap.add_argument("--block", type=int, default=0,
                    help="runs of one build one after another (--gap apart), 14 s between "
                         "blocks: a loop's held tracepoints are then those its own build's "
                         "keepers left; each block's first run is left out")
    ap.add_argument("baseline", nargs="?",
                    help="another build, run interleaved and paired (without it: this build only)")
    ap.add_argument("binary", nargs="?", default=str(ROOT / "build" / "tts-launch"))
    a = ap.parse_args()
    if a.block == 1:
        ap.error("--block needs 2 runs at least (each block's first is left out)")
    bins = {"baseline": a.baseline, "this": a.binary} if a.baseline else {"this": a.binary}
    res = {k: [] for k in bins}
    with tempfile.TemporaryDirectory() as d:
        for i in range(a.runs):
            order = list(bins) if i % 2 == 0 else list(reversed(list(bins)))
            for k in order:
                tmp = Path(d) / k
                tmp.mkdir(exist_ok=True)
                if a.block:
                    time.sleep(14)
                    for j in range(a.block):
                        time.sleep(a.gap)
                        r = one(bins[k], tmp, a.strace)
                        if j:
                            res[k].append(r)
                    continue
                time.sleep(a.gap)
                res[k].append(one(bins[k], tmp, a.strace))
    for k in bins:
        print("%-8s %s" % (k, bins[k]))
        for f in res[k][0]:
            v = [r[f] for r in res[k]]
            print("  %-13s median %9.3f  range %.3f-%.3f" % (f, statistics.median(v), min(v),
                                                            max(v)))
    if "baseline" not in bins:
        return
    # each run of this build against the baseline's run of the same round:
    # the rounds' drift (a neighbour, the last run's detach) cancels
    print("paired (this - baseline, per round)")
    for f in [f for f in res["this"][0] if f in res["baseline"][0]]:
        d = [t[f] - b[f] for t, b in zip(res["this"], res["baseline"])]
        lo, hi = diff_ci(d)
        print("  %-13s median %+9.3f  95%% interval %+.3f..%+.3f  lower in %d of %d" % (
            f, statistics.median(d), lo, hi, sum(x < 0 for x in d), len(d)))


def diff_ci(d, resamples=2000):
    """95% bootstrap interval of the median difference (rounds resampled
    with replacement, fixed seed)"""
    rng = random.Random(0)
    meds = sorted(statistics.median(rng.choices(d, k=len(d))) for _ in range(resamples))
    return meds[int(0.025 * resamples)], meds[int(0.975 * resamples) - 1]


if __name__ == "__main__":
    main()
