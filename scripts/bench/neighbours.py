#!/usr/bin/python3
"""What tracing costs the neighbours (issue 17): processes *outside* the
traced tree, timed while a tracer traces something else.

Neighbours: a syscall-bound one, `dd if=/dev/zero of=/dev/null bs=1
count=2000000` (two syscalls per byte), a context-switch-heavy one,
pingpong.c (two processes passing a byte over two pipes, 100000 round
trips: two writes, two reads, two switches each), and (--neighbour
pyimport) another python of the host importing a module again and again
(--pyimports N imports: each passes CPython's import probes).

Tracers, each started before the neighbour runs and stopped after it:
- tts-launch syscalls=exact, during start-up: `tts-launch run --set
  trace.syscalls=exact -- /bin/sleep` (a command after -- keeps every probe
  of a start-up for as long as it runs; raw sys_enter/sys_exit on every
  syscall of the host);
- tts-launch syscalls=cheap, during start-up: the same with `[trace]
  syscalls = cheap` (the default: per-syscall tracepoints on the rare calls,
  libc's read/write family probed in the traced tree's memory only);
- tts-launch, after the window: a service (it listens, then sleeps) with
  `[trace] requests_window = 1s`, measured once the timeline says the
  probes were lightened (tracing.light) and nothing is left draining;
- tts-launch tracing a python (`-- python3 -c 'time.sleep()'`: Python's
  import probes attached), this build and with --baseline BIN another
  build (the one before a change);
- strace -f of /bin/sleep (ptrace is per process: a neighbour pays nothing);
- bpftrace scripts/bench/bpftrace-equivalent.bt -c /bin/sleep (tracepoints
  filtered in the program, like tts-launch).
Untraced runs have no tracer at all.

Paired and interleaved like trace_overhead.py: each round in a rotated
order, an untraced run between any two others, a pause before each run;
the paired ratio is each run against the mean of the untraced runs just
before and after it, with a 95% bootstrap interval. Also: the neighbour's
CPU time (user + system: BPF programs run in its context), and the BPF run
time the tracer's programs spent during the neighbour's run (bpf_stats:
kernel.bpf_stats_enabled is set to 1 while this runs, then restored; the
run_time_ns of the tracer's program fds in /proc/PID/fdinfo, before and
after). With --rss, tts-launch's own peak RSS (VmHWM) during simulator
start-ups (trace_overhead.py's warm-cache simulator, to ready).

    scripts/bench/neighbours.py [--runs N] [--neighbour dd|pingpong|pyimport|all]
                                [--dd-count N] [--pingpong N] [--pyimports N] [--rss N]
                                [--json OUT] [--baseline BIN]
                                [--variants startup,cheap,light,python,python-baseline,
                                            strace,bpftrace]

Needs root (BPF), strace, bpftrace, cc, and a built build/tts-launch.
"""
import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trace_overhead import (BT, PY, ROOT, SETTLE_S, TTS, free_port, paired, paired_ci,  # noqa: E402
                            prepare_sim, run_variant)

STARTUP = "tts-launch syscalls=exact, during start-up"
CHEAP = "tts-launch syscalls=cheap, during start-up"
LIGHT = "tts-launch, after the window"
PYTHON = "tts-launch tracing a python, during start-up"
PYBASE = "baseline tts-launch tracing a python, during start-up"
VARIANTS = ["untraced", STARTUP, CHEAP, LIGHT, PYTHON, "strace -f", "bpftrace"]
SHORT = {"startup": STARTUP, "cheap": CHEAP, "light": LIGHT, "python": PYTHON,
         "python-baseline": PYBASE, "strace": "strace -f", "bpftrace": "bpftrace"}  # --variants
BASELINE = [None]  # --baseline
PYSLEEP = [PY, "-c", "import time\ntime.sleep(100000)"]
# the import statement (importlib.import_module would not pass CPython's C
# import_find_and_load, where the probes are)
PYIMPORT = ("import sys\nfor i in range(%d):\n    sys.modules.pop('colorsys', None)\n"
            "    import colorsys\n")
SLEEP = ["/bin/sleep", "100000"]
# the service of the LIGHT variant: listens on --port, then sleeps
SERVICE = r'''
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])))
s.listen()
while True:
    time.sleep(3600)
'''


def wait_until(pred, what, timeout=120):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.02)
    raise RuntimeError("timed out waiting for " + what)


def children(pid):
    try:
        kids = Path("/proc/%d/task/%d/children" % (pid, pid)).read_text().split()
    except OSError:
        return []
    return [int(k) for k in kids]


def comm(pid):
    try:
        return Path("/proc/%d/comm" % pid).read_text().strip()
    except OSError:
        return ""


def has_sleep_child(p, names=("sleep",)):
    if p.poll() is not None:
        raise RuntimeError("the tracer exited (%s): %s" % (p.returncode, p.stderr.read()[-2000:]))
    return any(comm(k) in names for k in children(p.pid))


def bpf_run_ns(pid):
    """Sum of run_time_ns over the BPF program fds process pid holds."""
    total = 0
    try:
        fds = os.listdir("/proc/%d/fdinfo" % pid)
    except OSError:
        return 0
    for fd in fds:
        try:
            info = Path("/proc/%d/fdinfo/%s" % (pid, fd)).read_text()
        except OSError:
            continue
        if "prog_type:" not in info:
            continue
        for line in info.splitlines():
            if line.startswith("run_time_ns:"):
                total += int(line.split(":")[1])
    return total


def start_tracer(variant, tmp):
    """Start a tracer of something else and wait until it traces; the
    process whose fds hold the BPF programs (None: strace)."""
    tl = tmp / "t.json"
    tl.unlink(missing_ok=True)
    common = [str(TTS), "run", "--set", "app.dir=%s" % tmp, "--set", "log.file=",
              "--set", "service.pidfile=", "--timeline", str(tl)]
    if variant == STARTUP:
        argv = common + ["--set", "trace.syscalls=exact", "--"] + SLEEP
    elif variant == CHEAP:
        argv = common + ["--set", "trace.syscalls=cheap", "--"] + SLEEP
    elif variant in (PYTHON, PYBASE):
        if variant == PYBASE:
            common[0] = BASELINE[0]
        argv = common + ["--"] + PYSLEEP
    elif variant == LIGHT:
        (tmp / "service.py").write_text(SERVICE)
        argv = common + ["--set", "app.python=%s" % PY, "--set", "app.script=%s" %
                         (tmp / "service.py"), "--set", "app.host=127.0.0.1", "--set",
                         "app.port=%d" % free_port(), "--set", "trace.settle=0.1s", "--set",
                         "trace.requests_window=1s"]
    elif variant == "strace -f":
        argv = ["strace", "-f", "-qq", "-o", "/dev/null"] + SLEEP
    else:
        argv = ["bpftrace", "-q", str(BT), "-c", " ".join(SLEEP)]
    p = subprocess.Popen(argv, cwd=tmp, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    if variant == LIGHT:
        def lightened():
            if p.poll() is not None:
                raise RuntimeError("tts-launch exited: %s" % p.stderr.read()[-2000:])
            try:
                light = json.loads(tl.read_text())["tracing"]["light"]
            except (OSError, ValueError, KeyError):
                return False
            return light is not None and bool({"sys_exit", "syscall_exit"} &
                                               set(light["detached"]))
        wait_until(lightened, "the requests window's end")
    elif variant in (PYTHON, PYBASE):
        wait_until(lambda: has_sleep_child(p, ("python3", "python3.11")),
                   "%s to start its command" % variant)
    else:
        wait_until(lambda: has_sleep_child(p), "%s to start its command" % variant)
    return p


def stop_tracer(p, variant, tmp):
    os.killpg(p.pid, signal.SIGINT if variant == "bpftrace" else signal.SIGTERM)
    try:
        p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
    if variant in (STARTUP, CHEAP, LIGHT, PYTHON, PYBASE):
        t = json.loads((tmp / "t.json").read_text())["tracing"]
        if not t["enabled"]:
            raise RuntimeError("tts-launch ran untraced: %s" % t["reason"])


def run_neighbour(argv, cwd):
    """Fork to exit: (wall ms, CPU ms)."""
    t0 = time.monotonic_ns()
    p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = (time.monotonic_ns() - t0) / 1e6
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("%s failed" % " ".join(argv))
    return wall, (ru.ru_utime + ru.ru_stime) * 1000


def measure(variant, argv, tmp):
    """One run of the neighbour under variant: (wall, cpu, BPF run ms or None)."""
    if variant == "untraced":
        time.sleep(SETTLE_S)
        w, c = run_neighbour(argv, tmp)
        return w, c, None
    p = start_tracer(variant, tmp)
    try:
        time.sleep(SETTLE_S)
        holder = p.pid if variant != "strace -f" else None
        b0 = bpf_run_ns(holder) if holder else 0
        w, c = run_neighbour(argv, tmp)
        b1 = bpf_run_ns(holder) if holder else 0
    finally:
        stop_tracer(p, variant, tmp)
    return w, c, (b1 - b0) / 1e6 if holder else None


def peak_rss(runs, tmp):
    """tts-launch's VmHWM (MiB) over simulator start-ups to ready."""
    cwd, argv, env, port = prepare_sim(tmp)[:4]
    out = []
    for _ in range(runs):
        time.sleep(SETTLE_S)
        _, extra = run_variant("tts-launch", argv, cwd, env, tmp, port)
        out.append(extra["rss_kib"] / 1024)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--neighbour", choices=["dd", "pingpong", "pyimport", "all"], default="all")
    ap.add_argument("--pyimports", type=int, default=20000, help="imports of the pyimport "
                    "neighbour")
    ap.add_argument("--baseline", help="another tts-launch build for the python-baseline "
                    "variant")
    ap.add_argument("--dd-count", type=int, default=2000000)
    ap.add_argument("--pingpong", type=int, default=100000, help="round trips")
    ap.add_argument("--rss", type=int, default=3, help="simulator start-ups for the peak RSS "
                    "(0: none)")
    ap.add_argument("--json", help="write raw results here")
    ap.add_argument("--pin", type=int, metavar="CPU", help="run the neighbour on this CPU only "
                    "(taskset -c): the ping-pong's two processes then switch on one CPU, "
                    "every round trip two context switches and two wake-ups, no IPI")
    ap.add_argument("--no-bpf-stats", action="store_true", help="leave "
                    "kernel.bpf_stats_enabled as it is (its clock reads cost every traced "
                    "program run ~20-40 ns): the walls and CPU without that cost, no BPF "
                    "run time column")
    ap.add_argument("--variants", help="comma-separated tracers to run besides untraced "
                    "(default: all): " + ",".join(SHORT))
    a = ap.parse_args()
    if a.variants:
        want = [v.strip() for v in a.variants.split(",")]
        bad = [v for v in want if v not in SHORT]
        if bad:
            sys.exit("neighbours: unknown variant(s): %s" % ", ".join(bad))
        VARIANTS[1:] = [SHORT[v] for v in SHORT if v in want]
    if PYBASE in VARIANTS and not a.baseline:
        sys.exit("neighbours: the python-baseline variant needs --baseline BIN")
    BASELINE[0] = a.baseline
    if os.geteuid() != 0:
        sys.exit("neighbours: run as root (tts-launch needs BPF)")
    for tool in ("strace", "bpftrace", "cc"):
        if not shutil.which(tool):
            sys.exit("neighbours: %s missing: run scripts/setup" % tool)
    if not os.path.exists("/sys/kernel/tracing/events"):
        subprocess.run(["mount", "-t", "tracefs", "tracefs", "/sys/kernel/tracing"], check=True)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # a SIGTERM unwinds too: the tracer stopped, bpf_stats restored
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("neighbours: terminated"))
    stats = Path("/proc/sys/kernel/bpf_stats_enabled")
    stats_was = stats.read_text().strip()
    results = {}
    with tempfile.TemporaryDirectory(prefix="tts-bench-nb-") as d:
        tmp = Path(d)
        pp = tmp / "pingpong"
        subprocess.run(["cc", "-O2", "-o", str(pp), str(ROOT / "scripts/bench/pingpong.c")],
                       check=True)
        neighbours = {"dd": ["dd", "if=/dev/zero", "of=/dev/null", "bs=1",
                             "count=%d" % a.dd_count],
                      "pingpong": [str(pp), str(a.pingpong)],
                      "pyimport": [PY, "-c", PYIMPORT % a.pyimports]}
        if a.pin is not None:
            neighbours = {k: ["taskset", "-c", str(a.pin)] + v for k, v in neighbours.items()}
        names = ["dd", "pingpong", "pyimport"] if a.neighbour == "all" else [a.neighbour]
        if not a.no_bpf_stats:
            stats.write_text("1\n")
        try:
            for nb in names:
                argv = neighbours[nb]
                run_neighbour(argv, tmp)  # warm
                r = {k: {v: [] for v in VARIANTS} for k in ("walls_ms", "cpu_ms", "base_walls_ms",
                                                           "base_cpu_ms", "bpf_ms")}
                for i in range(a.runs):
                    others = VARIANTS[1:]
                    others = others[i % len(others):] + others[:i % len(others)]
                    before = measure("untraced", argv, tmp)
                    r["walls_ms"]["untraced"].append(before[0])
                    r["cpu_ms"]["untraced"].append(before[1])
                    for v in others:
                        w, c, b = measure(v, argv, tmp)
                        after = measure("untraced", argv, tmp)
                        r["walls_ms"][v].append(w)
                        r["cpu_ms"][v].append(c)
                        r["bpf_ms"][v].append(b)
                        r["base_walls_ms"][v].append((before[0] + after[0]) / 2)
                        r["base_cpu_ms"][v].append((before[1] + after[1]) / 2)
                        before = after
                    print("%s: round %d/%d: %s" % (nb, i + 1, a.runs, ", ".join(
                        "%s %.0f ms" % (v, r["walls_ms"][v][-1]) for v in VARIANTS)),
                        file=sys.stderr)
                r["base_walls_ms"]["untraced"] = r["walls_ms"]["untraced"]
                r["base_cpu_ms"]["untraced"] = r["cpu_ms"]["untraced"]
                if a.no_bpf_stats:
                    r["bpf_ms"] = {v: [None] * len(r["bpf_ms"][v]) for v in r["bpf_ms"]}
                label = "python3 -c (%d imports of colorsys)" % a.pyimports \
                    if nb == "pyimport" else " ".join(argv).replace(str(pp), "pingpong")
                results[label] = r
        finally:
            stats.write_text(stats_was + "\n")
        rss = peak_rss(a.rss, tmp) if a.rss else []
    if a.json:
        Path(a.json).write_text(json.dumps({"neighbours": results, "rss_mib": rss}, indent=1))
    print_table(results, rss, a.runs)


def print_table(results, rss, runs):
    print("| neighbour | tracer (tracing something else) | median wall (ms) | paired ratio "
          "| its 95% interval | min-max (ms) | median CPU (ms) | CPU paired ratio "
          "| BPF run time in the run (median ms) |")
    print("| --- | --- | ---: | ---: | --- | --- | ---: | ---: | ---: |")
    for cmd, r in results.items():
        for v in VARIANTS:
            w, b = r["walls_ms"][v], r["base_walls_ms"][v]
            c, bc = r["cpu_ms"][v], r["base_cpu_ms"][v]
            bpf = [x for x in r["bpf_ms"][v] if x is not None]
            print("| `%s` | %s | %.0f | %.3fx | %.3f-%.3f | %.0f-%.0f | %.0f | %.3fx | %s |" % (
                cmd, v, statistics.median(w), paired(w, b), *paired_ci(w, b), min(w), max(w),
                statistics.median(c), paired(c, bc),
                "%.1f" % statistics.median(bpf) if bpf else "-"))
    if rss:
        print("\ntts-launch peak RSS (VmHWM) during a simulator start-up to ready: median "
              "%.1f MiB (%s)" % (statistics.median(rss), ", ".join("%.1f" % x for x in rss)))
    print("\n(%d interleaved rounds per neighbour, each in a rotated order, an untraced run\n"
          "between any two others; fork to exit of the neighbour, outside the traced tree.)"
          % runs)


if __name__ == "__main__":
    main()
