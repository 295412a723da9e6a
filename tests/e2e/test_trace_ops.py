"""Tracing tests of connect outcomes, DNS accounting, lock waits, failed
directory operations and writes, file faults after ready, and the light
probes after the requests window: tests/helpers/netops.c and fileops.c do
exactly known things and the timeline must say exactly that. Skipped
without BPF, failed when CI is set (test_trace.tracing_ok). No timed
assertions: durations are only checked to be recorded (> 0)."""
import json
import os
import socket
import subprocess
import sys

import pytest

from test_trace import FILEOPS, ROOT, TTS, file_entry, run_traced, tracing_ok, validate  # noqa: F401

NETOPS = ROOT / "build" / "tests" / "helpers" / "netops"


@pytest.fixture
def work(tmp_path, tracing_ok):
    return tmp_path


def test_connect_outcomes(work):
    _, tl = run_traced(work, NETOPS, "refused", "silent:300:100", "dropped:200")
    assert tl["tracing"]["events_lost"] == 0
    c = tl["connects"]
    assert len(c) == 4, c
    refused, silent, first, dropped = c
    # a non-blocking connect to a closed port: refused, not "pending"
    assert (refused["syscall_ret"], refused["pending"], refused["result"], refused["errno"]) == \
        (-115, False, "refused", "ECONNREFUSED")
    assert refused["ret"] == -111 and refused["ms_to_result"] > 0
    # connected, 300 bytes sent, nothing ever came back, then closed by us
    assert (silent["result"], silent["errno"], silent["bytes_out"], silent["bytes_in"]) == \
        ("connected", None, 300, 0)
    assert silent["open_ms"] > 0 and silent["closed_ms"] > silent["established_ms"]
    assert silent["ended_by"] == "local-close"
    # the connection filling the backlog, then one whose SYN is dropped:
    # the caller gave up and closed it
    assert (first["result"], first["syscall_ret"], first["bytes_out"]) == ("connected", 0, 0)
    assert (dropped["result"], dropped["errno"], dropped["pending"]) == \
        ("closed-by-caller", None, False)
    assert dropped["ms_to_result"] > 0 and dropped["established_ms"] is None
    [net] = [n for n in tl["network"] if n["peer"] == refused["peer"]]
    assert (net["connects"], net["failures"], net["errno"]) == (1, 1, "ECONNREFUSED")


def test_dns_bytes_both_ways(work):
    p, tl = run_traced(work, NETOPS, "dns:40", check_rc=False)
    if p.returncode == 77:
        pytest.skip("127.0.0.1:53 is taken on this machine")
    assert p.returncode == 0, p.stderr
    [ns] = [n for n in tl["network"] if n["peer"] == "127.0.0.1:53"]
    assert (ns["proto"], ns["dns"]) == ("udp", True)
    # 2 queries by sendmmsg + 1 by sendto + 1 unanswered; 3 answers of 140
    assert (ns["bytes_out"], ns["bytes_in"]) == (4 * 40, 3 * 140)
    assert (ns["dns_queries"], ns["dns_answers"], ns["dns_failures"], ns["dns_unanswered"]) == \
        (4, 3, 1, 1)
    assert (ns["io_errors"], ns["io_errno"]) == (1, "ECONNREFUSED")


def test_flock_wait_recorded(work):
    lock = work / ".locks" / "models--org--name" / "etag.lock"
    lock.parent.mkdir(parents=True)
    _, tl = run_traced(work, NETOPS, "flock:%s:300" % lock)
    [lk] = tl["locks"]
    assert lk["path"] == str(lock)
    # the holder's call and the waiter's: both blocking, both acquired
    assert (lk["calls"], lk["blocking_calls"], lk["failures"], lk["waiting"]) == (2, 2, 0, False)
    assert lk["max_wait_ms"] > 0 and lk["wait_ms"] >= lk["max_wait_ms"]
    assert lk["acquired_ms"] is not None


@pytest.fixture
def mount_dir(work):
    """mount(8) a file system over a directory; unmounted afterwards."""
    mounted = []

    def mount(*args, target):
        target.mkdir(exist_ok=True)
        r = subprocess.run(["mount", *args, str(target)], capture_output=True, text=True)
        if r.returncode:
            pytest.skip("cannot mount here: %s" % r.stderr.strip())
        mounted.append(target)
        return target
    yield mount
    for m in reversed(mounted):
        subprocess.run(["umount", "-l", str(m)])


def test_mkdir_on_read_only_mount(work, mount_dir):
    src = work / "src"
    src.mkdir()
    ro = mount_dir("-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", target=work / "ro")
    target = ro / "hub" / "models--org--name"
    _, tl = run_traced(work, NETOPS, "mkdir:%s:3" % (ro / "hub"))
    ops = [o for o in tl["failed_ops"] if o["path"] == str(ro / "hub")]
    assert len(ops) == 1, tl["failed_ops"]
    assert (ops[0]["op"], ops[0]["count"], ops[0]["errno"]) == ("mkdir", 3, "EROFS")
    assert not target.exists()


def test_write_enospc(work, mount_dir):
    full = mount_dir("-t", "tmpfs", "-o", "size=256k", "tmpfs", target=work / "small")
    blob = full / "blob.incomplete"
    _, tl = run_traced(work, NETOPS, "fill:%s" % blob)
    f = file_entry(tl, blob)
    assert (f["write_errors"], f["write_errno"]) == (1, "ENOSPC")
    [op] = [o for o in tl["failed_ops"] if o["op"] == "write"]
    assert (op["path"], op["count"], op["errno"]) == (str(blob), 1, "ENOSPC")


def test_file_faults_after_ready(work):
    data = work / "weights.safetensors"
    data.write_bytes(b"\0" * (64 * 4096))
    # listen (ready, no port configured), then map and touch the model file
    _, tl = run_traced(work, FILEOPS, "listen:0", "mmap:%s" % data)
    f = file_entry(tl, data)
    assert f["faults"] >= 1  # fault-around maps several pages per fault
    assert f["faults_after_ready"] == f["faults"]
    assert f["first_fault_ms"] >= tl["marks"]["ready"]
    assert f["last_fault_ms"] >= f["first_fault_ms"]
    # and before ready: none after it
    _, tl = run_traced(work, FILEOPS, "mmap:%s" % data, "listen:0")
    f = file_entry(tl, data)
    assert f["faults"] >= 1 and f["faults_after_ready"] == 0


LIGHT_APP = r'''
import ctypes, fcntl, os, socket, subprocess, sys, time
# a lock held for 2.5 s by a child, so that our blocking flock below waits
# across the end of the requests window
subprocess.Popen([sys.executable, "-c", "import fcntl, time; f = open('held.lock', 'w'); "
                  "fcntl.flock(f, fcntl.LOCK_EX); open('held', 'w').close(); time.sleep(2.5)"])
while not os.path.exists("held"):
    time.sleep(0.01)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])))
s.listen()
f = open("held.lock", "w")
fcntl.flock(f, fcntl.LOCK_EX)        # the requests window (1 s) ends meanwhile
libc = ctypes.CDLL(None, use_errno=True)
libc.mlockall(1)                     # after the window: not traced (the shim's to report)
libc.munlockall()
'''


def test_light_probes_after_requests_window(work):
    app = work / "app.py"
    app.write_text(LIGHT_APP)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tl_path = work / "timeline.json"
    p = subprocess.run([str(TTS), "run", "--timeline", str(tl_path), "--set", "app.dir=%s" % work,
                        "--set", "app.python=/usr/bin/python3", "--set", "app.script=%s" % app,
                        "--set", "app.host=127.0.0.1", "--set", "app.port=%d" % port,
                        "--set", "trace.settle=0.1s", "--set", "trace.requests_window=1s",
                        "--set", "service.pidfile=", "--set", "log.file=",
                        "--set", "trace.syscalls=exact"],  # the raw pair's names below
                       cwd=work, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    tl = validate(json.loads(tl_path.read_text()))
    light = tl["tracing"]["light"]
    assert light is not None and light["ms"] >= tl["marks"]["ready"]
    # nothing on every syscall or context switch of the host (issue 17; sys_exit once the
    # flock begun before has returned: tests/e2e/test_costs.py)
    assert {"block_bio_queue", "block_rq_issue", "block_rq_complete", "inet_sock_set_state",
            "sys_enter", "sys_exit",
            "sched_switch"} <= set(light["detached"])
    assert {"sched_process_exit", "fault_tick"} <= set(light["kept"])
    # nor on every page fault, nor in every python or getaddrinfo of the host (uprobes
    # are per inode), each pair listed once
    assert "page_fault_user" in light["detached"] and "page_fault_user" not in light["kept"]
    assert light["detached"].count("getaddrinfo") == ("getaddrinfo" in tl["tracing"]["probes"])
    usdt = any(x.startswith("python_imports:") for x in tl["tracing"]["probes"])
    assert light["detached"].count("python_imports") == usdt
    assert not {"getaddrinfo", "python_imports", "py_import_start"} & set(light["kept"])
    # faults are still counted to the end: exactly the kernel's, per exited process
    mem = tl["memory"]
    assert len(mem["per_process"]) == 2
    for p in mem["per_process"]:
        assert p["page_faults"] == p["minor_faults"] + p["major_faults"] > 0
    assert sum(mem["fault_rate"]["counts"]) == mem["page_faults"]
    # the mlockall after the window is not traced: no syscall program is left. (On a loaded
    # machine the window's end can come after the flock's return; a call that started before
    # it is then rightly traced.)
    assert [c for c in tl["memory"]["mlock_calls"] if c["start_ms"] >= light["ms"]] == []
    # a call that began before the window ended is finished after it
    [lock] = [l for l in tl["locks"] if l["path"] == str(work / "held.lock")]
    assert lock["blocking_calls"] == 2 and lock["max_wait_ms"] >= 1000
    assert not lock.get("waiting")
    assert tl["process"]["exit"]["code"] == 0
