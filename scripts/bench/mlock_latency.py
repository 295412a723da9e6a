#!/usr/bin/python3
"""Request latency with and without --mlock under memory pressure (issue 5's benchmark).

The simulator (scripts/sim/webui.py) with bench-size weights (~340 MB; its
safetensors files are mmapped and read by every synthesis) is started by
tts-launch from a warm hub cache, offline, with the page cache dropped
before each start. Each run sends the same N synthesis requests (POST
/synthesize) one after another. Between requests the host is "loaded": every
K-th request (--pressure-every, default 3) is preceded by paging out the
service's file mappings with process_madvise(MADV_PAGEOUT), as reclaim on a
busy host would; locked pages cannot be paged out. Variants, interleaved
run by run: without mlock, --mlock=all (the simulator mmaps only part of its
weights, torch.load copies the rest), and --mlock=models.

Per variant: start-up time to ready (launch to the port accepting), the
lock's duration and the service's VmLck, first-request latency (median over
runs; the page cache was dropped, so it reads from disk), p50/p99 of the
other requests of every run (nearest rank) and their spread (p99/p50), and
minor/major page faults per request (/proc/PID/stat deltas around each
request, for the service process). The goal (issue 5): with mlock, no page
faults on the model mappings during requests (shown by the resident model
pages paged out per request: 0 when locked, and major faults) and the
spread cut by >= 80%.

    scripts/bench/mlock_latency.py [--runs N] [--requests N] [--pressure-every K]
                                   [--variants off,all,models] [--json OUT]

Needs root (drop_caches, process_madvise), a built build/tts-launch and
build/hooks/mlock_shim.so.
"""
import argparse
import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trace_overhead import prepare_sim  # noqa: E402  (models, warm cache, offline env)

ROOT = Path(__file__).resolve().parents[2]
TTS = ROOT / "build" / "tts-launch"
SHIM = ROOT / "build" / "hooks" / "mlock_shim.so"
TEXT = "The quick brown fox jumps over the lazy dog, twice, before breakfast."
MODEL_RE = re.compile(r"\.(pth|pt|safetensors|bin)$")

# Syscall numbers from the generic table (the same on x86_64 and arm64).
SYS_PIDFD_OPEN = 434
SYS_PROCESS_MADVISE = 440
MADV_PAGEOUT = 21
libc = ctypes.CDLL(None, use_errno=True)


class IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def file_mappings(pid):
    """(start, end, path) of each file-backed mapping of pid."""
    out = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/"):
                a, b = (int(x, 16) for x in parts[0].split("-"))
                out.append((a, b, parts[5].strip()))
    return out


def model_rss_kib(pid):
    """Resident KiB of the mappings of model files (smaps Rss)."""
    total, model = 0, False
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split(None, 5)
                model = len(parts) == 6 and bool(MODEL_RE.search(parts[5].strip()))
            elif model and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


def page_out(pid):
    """process_madvise(MADV_PAGEOUT) over every file mapping of pid, one
    range per call: a locked mapping fails with EINVAL (can_madv_lru_vma,
    mm/madvise.c) and would stop a batched call there. Returns (bytes
    advised, mappings refused)."""
    pidfd = libc.syscall(SYS_PIDFD_OPEN, pid, 0)
    if pidfd < 0:
        raise OSError(ctypes.get_errno(), "pidfd_open(%d)" % pid)
    done, refused = 0, 0
    try:
        for a, b, _ in file_mappings(pid):
            iov = IoVec(a, b - a)
            r = libc.syscall(SYS_PROCESS_MADVISE, pidfd, ctypes.byref(iov), ctypes.c_size_t(1),
                             MADV_PAGEOUT, ctypes.c_uint(0))
            if r < 0:
                e = ctypes.get_errno()
                if e in (22, 12):  # EINVAL: locked (or special) mapping; ENOMEM: unmapped since
                    refused += 1
                    continue
                raise OSError(e, "process_madvise(MADV_PAGEOUT)")
            done += r
    finally:
        os.close(pidfd)
    return done, refused


def faults(pid):
    """(minflt, majflt) of the whole process (every thread)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[7]), int(fields[9])  # fields 10 and 12 of proc(5)


def vm_lck_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmLck:"):
                return int(line.split()[1])
    return 0


def drop_caches():
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def service_pid(launcher_pid, timeout=60):
    """The service: tts-launch's child (it execs the interpreter directly)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            kids = Path("/proc/%d/task/%d/children" % (launcher_pid, launcher_pid)).read_text().split()
        except FileNotFoundError:
            raise RuntimeError("tts-launch exited early")
        if kids:
            return int(kids[0])
        time.sleep(0.005)
    raise RuntimeError("no service process")


def synthesize(port):
    req = urllib.request.Request("http://127.0.0.1:%d/synthesize" % port, method="POST",
                                 data=json.dumps({"text": TEXT}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        body = r.read()
    if not body.startswith(b"RIFF"):
        raise RuntimeError("not a WAV")


def one_run(variant, app, env, port, tmp, n_requests, pressure_every):
    log = tmp / ("%s.log" % variant)
    log.unlink(missing_ok=True)
    argv = [str(TTS), "run", "--no-trace", "--set", "app.dir=%s" % app, "--set", "app.port=%d" % port,
            "--set", "app.host=127.0.0.1", "--set", "log.file=%s" % log, "--set", "service.pidfile=",
            "--timeline", str(tmp / ("%s.json" % variant))]
    if variant != "off":
        argv.append("--mlock=%s" % variant)
    drop_caches()
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=app, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        pid = service_pid(p.pid)
        while True:  # ready: the port accepts
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if p.poll() is not None:
                raise RuntimeError("%s: tts-launch exited (%s): %s" % (variant, p.returncode, log.read_text()[-2000:]))
            time.sleep(0.002)
        ready_ms = (time.monotonic() - t0) * 1000
        lock_s = None
        if variant != "off":
            # the shim locks in its own thread after listen(); wait for its report
            end = time.monotonic() + 120
            while time.monotonic() < end:
                m = re.search(r"mlock \([^)]*\)(: locked .* in ([0-9.]+) s| refused.*| failed.*)",
                              log.read_text(errors="replace"))
                if m:
                    if not m.group(2):
                        raise RuntimeError("%s: %s" % (variant, m.group(0)))
                    lock_s = float(m.group(2))
                    break
                time.sleep(0.01)
            else:
                raise RuntimeError("%s: no mlock report in %s" % (variant, log))
        vmlck = vm_lck_kib(pid)
        reqs = []
        for i in range(n_requests):
            paged, refused, model_out = 0, 0, 0
            if i and pressure_every and i % pressure_every == 0:
                before = model_rss_kib(pid)
                paged, refused = page_out(pid)
                model_out = before - model_rss_kib(pid)
            f0 = faults(pid)
            t = time.monotonic()
            synthesize(port)
            lat = (time.monotonic() - t) * 1000
            f1 = faults(pid)
            reqs.append({"latency_ms": lat, "minflt": f1[0] - f0[0], "majflt": f1[1] - f0[1],
                         "pressure": bool(paged or refused), "paged_bytes": paged,
                         "refused_mappings": refused, "model_paged_out_kib": model_out})
        return {"ready_ms": ready_ms, "lock_s": lock_s, "vmlck_kib": vmlck, "requests": reqs}
    finally:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def pct(values, p):
    """Nearest rank, as tts-launch compare (docs/compare.md)."""
    v = sorted(values)
    if not v:
        return float("nan")
    k = max(1, -(-p * len(v) // 100))
    return v[min(k, len(v)) - 1]


def median(values):
    return pct(values, 50)


def summarize(runs):
    first = [r["requests"][0]["latency_ms"] for r in runs]
    rest = [q for r in runs for q in r["requests"][1:]]
    all_reqs = [q for r in runs for q in r["requests"]]
    lat = [q["latency_ms"] for q in rest]
    p50, p99 = pct(lat, 50), pct(lat, 99)
    n = len(all_reqs)
    pressured = [q for q in all_reqs if q["pressure"]]
    return {
        "ready_ms": median([r["ready_ms"] for r in runs]),
        "lock_s": median([r["lock_s"] for r in runs]) if runs[0]["lock_s"] is not None else None,
        "vmlck_mib": median([r["vmlck_kib"] for r in runs]) / 1024,
        "first_ms": median(first), "p50_ms": p50, "p99_ms": p99, "spread": p99 / p50,
        "minflt": sum(q["minflt"] for q in all_reqs) / n, "majflt": sum(q["majflt"] for q in all_reqs) / n,
        "model_out_mib": (sum(q["model_paged_out_kib"] for q in pressured) / len(pressured) / 1024
                          if pressured else 0.0),
    }


def print_table(results, a):
    print("| variant | start-up to ready (ms) | lock (s) | VmLck (MiB) | first request (ms) "
          "| p50 (ms) | p99 (ms) | spread p99/p50 | minor faults / request | major faults / request "
          "| model pages paged out / pressure (MiB) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    names = {"off": "without mlock", "all": "--mlock=all", "models": "--mlock=models"}
    for v, s in results.items():
        print("| %s | %.0f | %s | %.0f | %.1f | %.1f | %.1f | %.2f | %.0f | %.1f | %.1f |" % (
            names.get(v, v), s["ready_ms"], "-" if s["lock_s"] is None else "%.2f" % s["lock_s"],
            s["vmlck_mib"], s["first_ms"], s["p50_ms"], s["p99_ms"], s["spread"], s["minflt"],
            s["majflt"], s["model_out_mib"]))
    print()
    base = results.get("off")
    if base:
        for v, s in results.items():
            if v == "off":
                continue
            # spread is at least 1: the cut is measured on its excess over 1
            cut = (1 - (s["spread"] - 1) / (base["spread"] - 1)) * 100 if base["spread"] > 1 else float("nan")
            ok = cut >= 80 and s["majflt"] == 0 and s["model_out_mib"] == 0
            print("- %s: spread %.2f -> %.2f (excess over 1 cut by %.0f%%), p99 %.1f -> %.1f ms; "
                  "major faults/request %.1f -> %.1f; model pages paged out under pressure "
                  "%.1f -> %.1f MiB; costs %+.0f ms start-up, %.0f MiB locked. Goal (no model faults, "
                  "spread cut >= 80%%): %s" % (
                      names[v], base["spread"], s["spread"], cut, base["p99_ms"], s["p99_ms"],
                      base["majflt"], s["majflt"], base["model_out_mib"], s["model_out_mib"],
                      s["ready_ms"] - base["ready_ms"], s["vmlck_mib"], "met" if ok else "NOT met"))
    print("\n(%d interleaved runs per variant, %d requests each; page cache dropped before each "
          "start; file mappings paged out (process_madvise MADV_PAGEOUT) before every %srequest "
          "after the first; first request: median over runs; p50/p99 (nearest rank) over the "
          "other requests of all runs; faults per request over all requests.)" % (
              a.runs, a.requests, "%s" % ordinal(a.pressure_every)))


def ordinal(k):
    return {1: "", 2: "2nd ", 3: "3rd "}.get(k, "%dth " % k)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--requests", type=int, default=10)
    ap.add_argument("--pressure-every", type=int, default=3,
                    help="page out before every K-th request (1: before each but the first; 0: never)")
    ap.add_argument("--variants", default="off,all,models")
    ap.add_argument("--json", help="write raw results here")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("mlock_latency: run as root (drop_caches, process_madvise)")
    for f in (TTS, SHIM):
        if not f.exists():
            sys.exit("mlock_latency: %s missing: run make" % f)
    variants = a.variants.split(",")
    if not a.requests >= 2 or any(v not in ("off", "all", "models") for v in variants):
        sys.exit("mlock_latency: --requests >= 2; --variants from off, all, models")
    raw = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="tts-mlock-bench-") as d:
        tmp = Path(d)
        # the warm-up run's download progress goes to stderr, not into the table
        saved = os.dup(1)
        sys.stdout.flush()
        os.dup2(2, 1)
        try:
            app, _argv, env, port = prepare_sim(tmp)[:4]
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        for i in range(a.runs):
            for v in variants:
                r = one_run(v, app, env, port, tmp, a.requests, a.pressure_every)
                raw[v].append(r)
                lat = [q["latency_ms"] for q in r["requests"]]
                print("run %d/%d %s: ready %.0f ms, VmLck %.0f MiB, latencies %s ms" % (
                    i + 1, a.runs, v, r["ready_ms"], r["vmlck_kib"] / 1024,
                    " ".join("%.0f" % x for x in lat)), file=sys.stderr)
    if a.json:
        Path(a.json).write_text(json.dumps(raw, indent=1))
    print_table({v: summarize(raw[v]) for v in variants}, a)


if __name__ == "__main__":
    main()
