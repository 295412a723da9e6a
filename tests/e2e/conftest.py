"""Shared fixtures for the end-to-end tests: the built binary, a scratch
IndexTTS2-like app directory, free ports, and process helpers."""
import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
TTS = Path(os.environ.get("TTS_LAUNCH", BUILD / "tts-launch"))
PY = "/usr/bin/python3"

# A stand-in for webui.py whose behaviour is exactly known: it binds
# --port (after an optional delay), prints a line, and sleeps.
FAKE_WEBUI = r'''
import argparse, os, signal, socket, sys, time
p = argparse.ArgumentParser()
p.add_argument("--port", type=int, default=7860)
p.add_argument("--host", default="0.0.0.0")
p.add_argument("--model_dir", default="./checkpoints")
p.add_argument("--delay", type=float, default=0)
p.add_argument("--ignore-term", action="store_true")
a = p.parse_args()
if a.ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("fake webui starting pid", os.getpid(), flush=True)
time.sleep(a.delay)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", a.port))
s.listen()
print("Running on local URL: http://127.0.0.1:%d" % a.port, flush=True)
while True:
    time.sleep(3600)
'''


def pytest_configure(config):
    """The Makefile's e2e runs the tests in parallel (pytest-xdist, -n 2
    --dist loadgroup), then the serial ones alone."""
    config.addinivalue_line(
        "markers", "serial: looks at the whole host (every keeper, every tracefs definition): "
        "run alone, after the parallel part")
    config.addinivalue_line(
        "markers", "xdist_group(name): tests sharing state outside their tmp dirs (the demo's "
        "build/sim/demo, build/demo and timeline in the repository root) run on one worker")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout=30.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def keepers():
    """Every tts-launch-upr process (the uprobe keepers) of the host."""
    found = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and open("/proc/%s/comm" % d).read().strip() == "tts-launch-upr":
                found.append(int(d))
        except OSError:
            continue
    return found


def fd_count(pid, has):
    """How many fds of pid have the text has in their fdinfo."""
    n = 0
    for fd in os.listdir("/proc/%d/fdinfo" % pid):
        try:
            n += has in open("/proc/%d/fdinfo/%s" % (pid, fd)).read()
        except OSError:
            continue  # closed meanwhile
    return n


def fds_to(pid, target):
    """How many of pid's descriptors are target (what readlink gives, e.g.
    anon_inode:bpf_link)."""
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            n += os.readlink("/proc/%d/fd/%s" % (pid, fd)) == target
        except OSError:
            pass  # closed meanwhile
    return n


def holder_progs():
    """The ids of the keepers' holder programs (tphold.c: tts_hold, which
    does nothing; its links keep a rare tracepoint registered past a run)."""
    # every program (a list always, and one that goes meanwhile is
    # skipped), not `show name`: with none of that name it prints nothing
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {p["id"] for p in json.loads(out) if p.get("name") == "tts_hold"}


def links_of(pid):
    """pid's BPF links: (program id, tracepoint name or None) each."""
    links = []
    for fd in os.listdir("/proc/%d/fdinfo" % pid):
        try:
            info = open("/proc/%d/fdinfo/%s" % (pid, fd)).read()
        except OSError:
            continue  # closed meanwhile
        prog, tp = re.search(r"prog_id:\s*(\d+)", info), re.search(r"tp_name:\s*(\S+)", info)
        if "link_type:" in info:
            links.append((int(prog.group(1)) if prog else None, tp and tp.group(1)))
    return links


def run_links(pid):
    """How many BPF links pid holds, the keepers' holders' left out."""
    holders = holder_progs()
    return sum(prog not in holders for prog, _ in links_of(pid))


def keepers_of(pid):
    """tts-launch-upr processes holding a pidfd of pid (only their pidfds'
    fdinfo is read: a lingering keeper holds ~80 other fds, and a test
    polling this under load must not miss a 1 s window)."""
    found = []
    for k in keepers():
        try:
            for fd in os.listdir("/proc/%d/fd" % k):
                if os.readlink("/proc/%d/fd/%s" % (k, fd)) == "anon_inode:[pidfd]" and \
                        "Pid:\t%d\n" % pid in open("/proc/%d/fdinfo/%s" % (k, fd)).read():
                    found.append(k)
                    break
        except OSError:
            continue
    return found


def port_open(port):
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


class App:
    """A scratch app dir with a fake webui.py and a config for it."""

    def __init__(self, path):
        self.dir = path
        self.port = free_port()
        (path / "webui.py").write_text(FAKE_WEBUI)
        self.ini = path / "tts-launch.ini"
        self.write_ini()
        self.procs = []

    def write_ini(self, extra=""):
        self.ini.write_text(
            "[app]\ndir = %s\npython = %s\nport = %d\nhost = 127.0.0.1\n"
            "[stale]\ngrace = 2s\n[service]\nstop_grace = 2s\n"
            "[trace]\nsettle = 0.2s\n%s" % (self.dir, PY, self.port, extra))

    def run(self, *args, timeout=60, **kw):
        return subprocess.run([str(TTS), *args], capture_output=True, text=True,
                              timeout=timeout, cwd=self.dir, **kw)

    def popen(self, *args, **kw):
        p = subprocess.Popen([str(TTS), *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=self.dir, **kw)
        self.procs.append(p)
        return p

    def spawn(self, argv, cwd=None):
        """A process outside tts-launch (a stale instance, a look-alike)."""
        p = subprocess.Popen(argv, cwd=cwd or self.dir, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(p)
        return p

    def cleanup(self):
        subprocess.run([str(TTS), "stop", "-c", str(self.ini)], capture_output=True)
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    p.kill()
                p.wait()


@pytest.fixture
def app(tmp_path):
    a = App(tmp_path)
    yield a
    a.cleanup()


@pytest.fixture(scope="session", autouse=True)
def built():
    assert TTS.exists(), "build/tts-launch missing: run `make` first"


@pytest.fixture(scope="session")
def tracing_ok(tmp_path_factory):
    """Tracing works here (root, BTF, BPF): else skip, or fail when CI is set."""
    tmp = tmp_path_factory.mktemp("probe")
    tl = tmp / "t.json"
    subprocess.run([str(TTS), "run", "--timeline", str(tl), "--set", "app.port=0", "--",
                    "/bin/true"], cwd=tmp, capture_output=True, timeout=60)
    t = json.loads(tl.read_text())
    if not t["tracing"]["enabled"]:
        why = "BPF tracing unavailable: %s" % t["tracing"]["reason"]
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
