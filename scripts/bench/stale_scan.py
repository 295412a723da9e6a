#!/usr/bin/python3
"""The stale scan (issue 17): how long `stale_find` (launcher/stale.c), the
/proc scan every start makes for earlier instances, takes with the host's
processes as they are and with --procs more (idle `sleep` processes, as a
busy desktop or a GPU server has hundreds more). stale_scan.c is linked
against this build's launcher objects, and with --baseline against
another build tree's (`git archive REV | tar -x -C DIR && make -C DIR`);
each build's harness is run in turn, --rounds rounds, each --calls calls
(the first of each dropped: a cold cache).

    scripts/bench/stale_scan.py [--baseline DIR] [--procs N] [--rounds N] [--calls N]

Needs cc and a built build/ (make).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBS = ["-lbpf", "-lelf", "-lz", "-lcap", "-liniparser", "-ljansson", "-lm"]


def harness(tree, out):
    objs = sorted(str(p) for p in (tree / "build" / "launcher").glob("*.o")
                  if p.name != "main.o")
    if not objs:
        raise SystemExit("%s has no build/launcher/*.o: run make there first" % tree)
    subprocess.run(["cc", "-O2", "-D_GNU_SOURCE", "-I", str(tree / "launcher"), "-I",
                    str(tree / "build"), "-o", str(out), str(ROOT / "scripts/bench/stale_scan.c")]
                   + objs + LIBS, check=True)
    return out


def processes():
    return sum(1 for d in os.listdir("/proc") if d.isdigit())


def measure(builds, rounds, calls):
    res = {name: [] for name, _ in builds}
    for r in range(rounds):
        for name, exe in (builds if r % 2 == 0 else builds[::-1]):
            out = subprocess.run([str(exe), str(calls)], capture_output=True, text=True,
                                 check=True).stdout.split()
            res[name] += [float(x) for x in out[1:]]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", help="another build tree (its build/launcher/*.o)")
    ap.add_argument("--procs", type=int, default=400, help="idle processes added")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=7)
    a = ap.parse_args()
    if a.procs < 0 or a.rounds < 1 or a.calls < 2:
        ap.error("--procs 0 or more, --rounds 1 or more, --calls 2 or more")
    with tempfile.TemporaryDirectory() as tmp:
        builds = [("this build", harness(ROOT, Path(tmp) / "this"))]
        if a.baseline:
            builds.append(("baseline (%s)" % a.baseline,
                           harness(Path(a.baseline).resolve(), Path(tmp) / "base")))
        rows = []
        for extra in (0, a.procs):
            crowd = [subprocess.Popen(["sleep", "600"]) for _ in range(extra)]
            try:
                n = processes()
                for name, v in measure(builds, a.rounds, a.calls).items():
                    rows.append((n, name, v))
            finally:
                for p in crowd:
                    p.kill()
                for p in crowd:
                    p.wait()
    print("| processes | build | stale_find median (ms) | min-max | calls |")
    print("| ---: | --- | ---: | --- | ---: |")
    for n, name, v in rows:
        print("| %d | %s | %.2f | %.2f-%.2f | %d |" % (n, name, statistics.median(v), min(v),
                                                      max(v), len(v)))


if __name__ == "__main__":
    sys.exit(main())
