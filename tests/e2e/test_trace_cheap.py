"""Issue 17: `[trace] syscalls = cheap`. Instead of raw sys_enter/sys_exit
(a program on every syscall of the host), per-syscall tracepoints on the
rare calls the timeline needs (tracer_syscalls.c); read/write figures come
from libc's calls (test_trace_libcio.py), from close where those are not
probed (listed in tracing.approximate then). Mechanism, not timing:
the BPF links tts-launch and its keeper hold are listed (as test_costs.py
does), and the timelines of small known workloads are checked. Skipped
without BPF, failed when CI is set (test_trace.tracing_ok)."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import wait_for
from simfix import SIM, WAIT, free_port, hub, hub_proc, make_app, models  # noqa: F401
from test_costs import APP, finish, keeper_of, light_of, prog_names, work  # noqa: F401
from test_trace import (FILEOPS, TTS, file_entry, missing_entry, serve_requests,  # noqa: F401
                        tracing_ok, validate)

CHEAP = ["--set", "trace.syscalls=cheap"]
RAW = {"sys_enter", "sys_exit"}
PAIR = {"syscall_enter", "syscall_exit"}
PATHS = "syscall_exit_paths"  # the path lookups' exits, verified apart
DRAINING = "syscall_exit (finishing the calls begun before the window ended)"


def run_cheap(tmp, *cmd, mode="cheap"):
    tl_path = tmp / "timeline.json"
    p = subprocess.run([str(TTS), "run", "--timeline", str(tl_path), "--set", "app.port=0",
                        "--set", "trace.syscalls=" + mode, "--", *map(str, cmd)],
                       cwd=tmp, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return validate(json.loads(tl_path.read_text()))


def test_bad_value_is_a_config_error(tmp_path):
    p = subprocess.run([str(TTS), "run", "--set", "trace.syscalls=fast", "--", "/bin/true"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "[trace] syscalls: 'fast' is not valid: expected one of: exact, cheap" in p.stderr


def test_cheap_is_the_default_and_exact_an_option(tmp_path, tracing_ok):
    """cheap by default (no program on every syscall of the host, libc's
    calls counted: nothing approximate for a dynamically linked command);
    exact when asked, the raw pair and nothing approximate either."""
    tl_path = tmp_path / "default.json"
    p = subprocess.run([str(TTS), "run", "--timeline", str(tl_path), "--set", "app.port=0", "--",
                        "/bin/true"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    tl = validate(json.loads(tl_path.read_text()))
    assert tl["tracing"]["syscalls"] == "cheap" and tl["launcher"]["config"]["trace"][
        "syscalls"] == "cheap"
    assert PAIR <= set(tl["tracing"]["probes"]) and not RAW & set(tl["tracing"]["probes"])
    assert tl["tracing"]["approximate"] == [], tl["tracing"]
    tl = run_cheap(tmp_path, "/bin/true", mode="exact")
    assert tl["tracing"]["syscalls"] == "exact" and tl["tracing"]["approximate"] == []
    assert RAW <= set(tl["tracing"]["probes"]) and not PAIR & set(tl["tracing"]["probes"])


def test_no_raw_syscall_link_in_cheap_mode(work):
    p, tl_path = launch_cheap(work)
    try:
        # ready (the first timeline is written then): every probe is attached
        wait_for(lambda: tl_path.exists() or None, timeout=60, what="the first timeline")
        before = prog_names(p.pid)
        assert not RAW & set(before), before
        # one link per tracepoint: ~40 exits, the entries of the calls timed
        # from their start; the path lookups' exits on their own program
        assert before.count("syscall_exit") >= 20 and before.count("syscall_enter") >= 5
        assert before.count(PATHS) >= 9, before  # arm64 has 9 of them, x86-64 17
        keeper = keeper_of(p.pid)
        # its copies (the detach is its)
        assert keeper and PAIR | {PATHS} <= set(prog_names(keeper))
        light = wait_for(lambda: light_of(tl_path), timeout=60, what="the window's timeline")
        assert PAIR | {PATHS} <= set(light["detached"]) and DRAINING not in light["kept"], light
        after = prog_names(p.pid)
        assert not (PAIR | RAW | {PATHS}) & set(after), after
        assert {"sched_process_exec", "sched_process_exit"} <= set(after)
        # the keeper closed its copies when told
        wait_for(lambda: not (PAIR | {PATHS}) & set(prog_names(keeper)), timeout=60,
                 what="the keeper's syscall links closed")
    finally:
        tl = finish(p, work)
    assert tl["tracing"]["syscalls"] == "cheap"
    assert PAIR <= set(tl["tracing"]["light"]["detached"])


def launch_cheap(work):
    """test_costs.launch with trace.syscalls=cheap, and a window long
    enough to list the links after ready (the first timeline) and before it
    ends."""
    app = work / "app.py"
    app.write_text(APP)
    tl_path = work / "timeline.json"
    p = subprocess.Popen([str(TTS), "run", "--timeline", str(tl_path), "--set",
                          "app.dir=%s" % work, "--set", "app.python=/usr/bin/python3", "--set",
                          "app.script=%s" % app, "--set", "app.host=127.0.0.1", "--set",
                          "app.port=%d" % free_port(), "--set", "trace.settle=0.1s",
                          "--set", "trace.requests_window=5s", "--set", "service.pidfile=",
                          "--set", "log.file="] + CHEAP,
                         cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p, tl_path


def test_cheap_keeps_opens_stats_and_counts_bytes(work):
    opened, readf, written = work / "opened.dat", work / "read.dat", work / "written.dat"
    opened.write_bytes(b"x" * 100)
    readf.write_bytes(os.urandom(50000))
    missing = work / "no" / "such" / "file"
    tl = run_cheap(work, FILEOPS, "open:%s:5" % opened, "stat:%s:7" % missing,
                   "read:%s:12345" % readf, "write:%s:4321" % written)
    tr = tl["tracing"]
    assert tr["enabled"] and tr["events_lost"] == 0 and tr["syscalls"] == "cheap"
    assert PAIR <= set(tr["probes"]) and not RAW & set(tr["probes"])
    # libc's read/write family is probed for the tree (test_trace_libcio.py):
    # nothing approximate
    assert any(p.startswith("libc_io:") for p in tr["probes"]) and tr["approximate"] == []
    # exact in this mode: opens, failed probes
    f = file_entry(tl, opened)
    assert (f["opens"], f["failed_opens"], f["bytes_read"]) == (5, 0, 0)
    m = missing_entry(tl, missing)
    assert (m["attempts"], m["errno"]) == (7, "ENOENT")
    # each call (libc's), as sys_exit counts them
    f = file_entry(tl, readf)
    assert (f["opens"], f["bytes_read"], f["bytes_written"]) == (1, 12345, 0)
    f = file_entry(tl, written)
    assert (f["opens"], f["bytes_read"], f["bytes_written"]) == (1, 0, 4321)


def test_cheap_connects_listens_and_tcp_bytes(work):
    tl = run_cheap(work, FILEOPS, "connect:1", "echo:100000", "listen:0")
    refused = [n for n in tl["network"] if n["peer"] == "127.0.0.1:1"]
    assert len(refused) == 1
    assert (refused[0]["connects"], refused[0]["failures"], refused[0]["errno"]) == \
        (1, 1, "ECONNREFUSED")
    # the calls (send/recv: the syscall tracepoints; read/write: libc's)
    assert any(n["bytes_out"] == 100000 and n["connects"] == 1 for n in tl["network"])
    assert any(n["bytes_in"] == 100000 for n in tl["network"])
    assert len(tl["listens"]) == 2 and tl["marks"]["ready"] == tl["listens"][0]["ms"]


def test_cheap_requests_exact(work):
    """reqserver's n requests (test_trace.test_requests_exact) in cheap mode:
    each one recorded, its bytes and writes from libc's calls (its end at its
    last write), its faults too."""
    n, size, pages = 3, 3000, 16
    port, got, _, tl = serve_requests(work, n, size, pages, tts_args=CHEAP)
    assert got == [size] * n and tl["tracing"]["syscalls"] == "cheap"
    assert tl["tracing"]["approximate"] == []
    reqs = tl["requests"]
    assert len(reqs) == n
    for r in reqs:
        # writes of at most 1000 bytes
        assert (r["port"], r["bytes_out"], r["bytes_in"], r["writes"]) == (port, size, 4, 3)
        assert r["faults"] >= pages and r["start_ms"] <= r["end_ms"] <= r["close_ms"]


def test_cheap_mlockall_recorded(work):
    tl = run_cheap(work, FILEOPS, "mlockall")
    calls = tl["memory"]["mlock_calls"]
    assert len(calls) == 1 and calls[0]["call"] == "mlockall" and calls[0]["result"] == 0


def test_cheap_simulator_cold_start(tmp_path, hub, models, tracing_ok):
    """The simulator's cold start (test_trace_sim.py) in cheap mode: its
    opens, failed stats, connects to the hub and downloads are recorded;
    the downloads' bytes from libc's writes."""
    app = make_app(tmp_path, models)
    # the app's own webui.py (a link): the simulator's path, shared by every
    # test, would make a concurrent test's stale kill end this one
    os.symlink(os.path.join(SIM, "webui.py"), app / "webui.py")
    port = free_port()
    tl_path = tmp_path / "timeline.json"
    log = app / "webui.log"
    argv = [str(TTS), "run", "--timeline", str(tl_path),
            "--set", "app.dir=%s" % app, "--set", "app.python=/usr/bin/python3",
            "--set", "app.script=webui.py",
            "--set", "app.host=127.0.0.1", "--set", "app.port=%d" % port,
            "--set", "env.HF_ENDPOINT=%s" % hub.url, "--set", "env.HF_HOME=%s" % (tmp_path / "home"),
            "--set", "trace.settle=0.1s", "--set", "service.pidfile=",
            "--set", "log.file=webui.log"] + CHEAP
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "SIM_"))}
    env["SIM_GENERATION"] = "classic"
    p = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + WAIT
        while not (log.exists() and "tts-launch: ready:" in log.read_text()):
            assert p.poll() is None, log.read_text() if log.exists() else "no log"
            assert time.monotonic() < deadline, "not ready"
            time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        p.wait(WAIT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    tl = validate(json.loads(tl_path.read_text()))
    assert tl["tracing"]["enabled"] and tl["tracing"]["events_lost"] == 0
    assert tl["tracing"]["syscalls"] == "cheap" and tl["tracing"]["approximate"] == []
    ck = app / "checkpoints"
    model = {f["path"]: f for f in tl["files"] if f["class"] == "model"}
    for name in ("gpt.pth", "s2mel.pth", "bpe.model", "wav2vec2bert_stats.pt"):
        assert str(ck / name) in model and model[str(ck / name)]["opens"] >= 1, sorted(model)
    assert tl["missing_paths"]  # failed stats/opens still traced
    hub_port = int(hub.url.rsplit(":", 1)[1].split("/")[0])
    conns = [n for n in tl["network"] if n["peer"].endswith(":%d" % hub_port)]
    assert conns and sum(n["connects"] for n in conns) >= 1, tl["network"]
    assert sum(n["bytes_in"] for n in conns) > 0
    cache = ck / "hf_cache"
    gets = [k for k in hub.state()["counts"] if k.startswith("GET ")]
    dls = tl["downloads"]
    assert len(dls) == len(gets) > 0, ([d["path"] for d in dls], gets)
    for d in dls:
        assert d["path"].startswith(str(cache) + "/") and d["path"].endswith(".incomplete")
        assert d["complete"] and d["completed"], d
        assert d["final_path"] == d["path"][:-len(".incomplete")]
        assert d["bytes"] == d["size"] == os.path.getsize(d["final_path"])
        assert d["first_ms"] <= d["last_ms"] <= d["rename_ms"]


# Each path lookup and directory operation of tracer_syscalls.c's table, by
# its x86-64 number (glibc's wrappers pick among them), failing on a path of
# its own: NAME -> (number, args after the path's place).
PATH_CALLS = r'''
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
d, f = sys.argv[1], sys.argv[2]  # a directory without the missing names, a file
buf = ctypes.create_string_buffer(512)
how = ctypes.create_string_buffer(24)  # struct open_how, zeroed: O_RDONLY
AT = -100  # AT_FDCWD
def p(name):
    return os.path.join(d, "missing", name).encode()
calls = [("open", 2, lambda q: (q, 0)), ("openat", 257, lambda q: (AT, q, 0)),
         ("openat2", 437, lambda q: (AT, q, how, 24)), ("stat", 4, lambda q: (q, buf)),
         ("lstat", 6, lambda q: (q, buf)), ("access", 21, lambda q: (q, 0)),
         ("readlink", 89, lambda q: (q, buf, 512)),
         ("newfstatat", 262, lambda q: (AT, q, buf, 0)),
         ("statx", 332, lambda q: (AT, q, 0, 0xfff, buf)),
         ("faccessat", 269, lambda q: (AT, q, 0)), ("faccessat2", 439, lambda q: (AT, q, 0, 0)),
         ("readlinkat", 267, lambda q: (AT, q, buf, 512)),
         ("mkdir", 83, lambda q: (q + b"/sub", 0o755)),
         ("mkdirat", 258, lambda q: (AT, q + b"/sub", 0o755))]
for name, nr, args in calls:
    assert libc.syscall(nr, *args(p(name))) == -1, name
# refused for another reason than ENOENT (which is not kept): a file as a
# directory, a directory as a file
assert libc.syscall(84, f.encode()) == -1  # rmdir: ENOTDIR
assert libc.syscall(87, d.encode()) == -1  # unlink: EISDIR
assert libc.syscall(263, AT, f.encode(), 0x200) == -1  # unlinkat AT_REMOVEDIR: ENOTDIR
'''


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the calls' x86-64 numbers")
def test_every_path_call_reaches_its_exit_program(tmp_path, tracing_ok):
    """cheap: syscall_exit_paths takes the path lookups' exits, syscall_exit
    the others (tracer_syscalls.c's AT_PATHS and syscalls.bpf.c's families
    must agree, or a call is dropped unseen): each lookup's failure is in
    missing_paths, each refused directory operation in failed_ops."""
    script, f = tmp_path / "calls.py", tmp_path / "afile"
    script.write_text(PATH_CALLS)
    f.write_bytes(b"x")
    tl = run_cheap(tmp_path, "/usr/bin/python3", script, tmp_path, f)
    for name in ("open", "openat", "openat2", "stat", "lstat", "access", "readlink",
                 "newfstatat", "statx", "faccessat", "faccessat2", "readlinkat"):
        assert missing_entry(tl, tmp_path / "missing" / name)["attempts"] == 1, name
    ops = {(o["op"], o["path"]) for o in tl["failed_ops"]}
    for name in ("mkdir", "mkdirat"):
        assert ("mkdir", str(tmp_path / "missing" / name / "sub")) in ops, (name, ops)
    assert ("rmdir", str(f)) in ops and ("unlink", str(tmp_path)) in ops, ops
