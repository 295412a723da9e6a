"""Issue 14 (the interpreter, imports without USDT), issue 16 (`run` checks
the app before killing or starting anything) and issue 17 (uprobe teardown):

- [app] python unset and the app has .venv/bin/python (uv's layout): that
  interpreter, for `run` and `doctor` alike (one resolution, one message);
- `python = uv run` (tests/fixtures/uv/uv: uv spawns python as a child and
  waits, astral-sh/uv#3095): the python grandchild is followed for status,
  signals, death, mlock and the timeline;
- an interpreter without USDT probes (pyenv's builds) or python_usdt =
  false: imports derived from its module files, said in tracing.fallbacks;
- the main process never closes a uprobe link (USDT, getaddrinfo): a keeper process holds
  their last references and dies with tts-launch, SIGKILL included."""
import glob
import json
import re
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (FAKE_WEBUI, PY, ROOT, TTS, alive, fd_count, fds_to, free_port, keepers_of,
                      port_open, wait_for)

UV = ROOT / "tests" / "fixtures" / "uv" / "uv"

# a webui.py that says which interpreter runs it
WHICH = r'''
import os, sys
with open("which.txt", "w") as f:
    f.write(sys.executable + "\n")
'''


def tts(*args, cwd, timeout=60):
    return subprocess.run([str(TTS), *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)


def venv(app):
    (app / ".venv" / "bin").mkdir(parents=True)
    py = app / ".venv" / "bin" / "python"
    py.symlink_to(PY)
    return py


def ini(app, python=None, script="webui.py"):
    p = app / "tts-launch.ini"
    p.write_text("[app]\ndir = %s\n%sscript = %s\nport = 0\n[trace]\nenabled = false\n"
                 "timeline =\n" % (app, "python = %s\n" % python if python else "", script))
    return p


# --- the interpreter: .venv by default, run and doctor agree -----------------

def test_venv_python_is_the_default(tmp_path):
    (tmp_path / "webui.py").write_text(WHICH)
    py = venv(tmp_path)
    cfg = ini(tmp_path)
    r = tts("run", "-c", str(cfg), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "which.txt").read_text().strip() == str(py)
    d = tts("doctor", "-c", str(cfg), cwd=tmp_path)
    assert "OK    interpreter            %s (the app's .venv/bin/python: [app] python unset)" \
        % py in d.stdout, d.stdout
    # a setting wins over the .venv
    (tmp_path / "which.txt").unlink()
    r = tts("run", "-c", str(ini(tmp_path, python=PY)), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "which.txt").read_text().strip() == PY


def test_without_venv_the_system_python(tmp_path):
    (tmp_path / "webui.py").write_text(WHICH)
    r = tts("run", "-c", str(ini(tmp_path)), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "which.txt").read_text().strip() == PY


@pytest.mark.parametrize("python,script,why", [
    ("/nonexistent/python3", "webui.py",
     "[app] python '/nonexistent/python3': no executable file there"),
    ("no-such-runner run", "webui.py", "[app] python 'no-such-runner': not found on PATH"),
    (PY, "nope.py", "[app] script 'nope.py': %s/nope.py: No such file or directory"),
])
def test_run_refuses_what_doctor_fails_with_the_same_message(tmp_path, python, script, why):
    (tmp_path / "webui.py").write_text(WHICH)
    cfg = ini(tmp_path, python=python, script=script)
    why = why % tmp_path if "%s" in why else why
    r = tts("run", "-c", str(cfg), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert why in r.stderr
    assert not (tmp_path / "which.txt").exists()  # nothing started
    d = tts("doctor", "-c", str(cfg), cwd=tmp_path)
    fail = [l for l in d.stdout.splitlines() if l.startswith("FAIL") and why in l]
    assert fail, d.stdout
    # the very message run gives
    assert fail[0].split(None, 2)[2] in r.stderr


def test_a_command_that_fails_to_exec_stays_127(tmp_path):
    r = tts("run", "--no-trace", "--", str(tmp_path / "nope"), cwd=tmp_path)
    assert r.returncode == 127, r.stderr


# --- uv run: the python grandchild ---------------------------------------------

class UvApp:
    def __init__(self, d, extra=""):
        self.dir = d
        self.port = free_port()
        (d / "webui.py").write_text(FAKE_WEBUI)
        venv(d)
        self.ini = d / "tts-launch.ini"
        self.ini.write_text(
            "[app]\ndir = %s\npython = %s run\nport = %d\nhost = 127.0.0.1\n"
            "[service]\nstop_grace = 5s\n[trace]\nsettle = 0.2s\nrequests_window = 1s\n%s"
            % (d, UV, self.port, extra))
        self.proc = None

    def start(self, *args):
        self.proc = subprocess.Popen([str(TTS), "run", "-c", str(self.ini), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, cwd=self.dir)
        wait_for(lambda: port_open(self.port), what="the app's port")

    def interpreter(self):
        """The python that uv started: (pid, status output)."""
        st = tts("status", "-c", str(self.ini), cwd=self.dir)
        line = [l for l in st.stdout.splitlines() if l.startswith("interpreter: pid ")]
        assert line, st.stdout
        return int(line[0].split()[2]), st.stdout

    def finish(self):
        out, _ = self.proc.communicate(timeout=60)
        return self.proc.returncode, out

    def timeline(self):
        return json.loads((self.dir / "tts-launch-timeline.json").read_text())

    def cleanup(self):
        if self.proc and self.proc.poll() is None:
            tts("stop", "-c", str(self.ini), cwd=self.dir)
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def uvapp(tmp_path):
    a = UvApp(tmp_path)
    yield a
    a.cleanup()


def test_uv_run_interpreter_followed(uvapp, tracing_ok):
    uvapp.start()
    pid, st = uvapp.interpreter()
    svc = int(st.split("running: pid ")[1].split(",")[0])
    assert "interpreter: pid %d (%s/.venv/bin/python), started by pid %d" % (
        pid, uvapp.dir, svc) in st
    with open("/proc/%d/status" % pid) as f:
        assert "PPid:\t%d" % svc in f.read()  # uv's child, not tts-launch's
    os.kill(pid, signal.SIGKILL)
    rc, out = uvapp.finish()
    assert rc == 137, out
    assert ("the interpreter %s/.venv/bin/python (pid %d, started by uv) was killed by SIGKILL;"
            " uv passed it on as exit 137" % (uvapp.dir, pid)) in out
    t = uvapp.timeline()
    ip = t["python"]["interpreter"]
    assert ip["pid"] == pid and ip["command"] == "%s/.venv/bin/python" % uvapp.dir
    assert ip["runner"] == {"pid": svc, "command": str(UV)}
    assert ip["exit"] == {"code": None, "signal": 9}
    phases = {p["name"]: p for p in t["phases"]}
    # uv's own start, then the interpreter's
    assert phases["runner"]["end_ms"] == pytest.approx(ip["exec_ms"], abs=0.002)
    assert phases["interpreter_start"]["start_ms"] == pytest.approx(ip["exec_ms"], abs=0.002)
    assert phases["imports"]["start_ms"] >= ip["exec_ms"]
    # the imports are the interpreter's: webui.py's argparse among them
    names = {i["name"] for i in t["python"]["imports"] if i["pid"] == pid}
    assert "argparse" in names


def test_doctor_names_the_runner(uvapp):
    d = tts("doctor", "-c", str(uvapp.ini), cwd=uvapp.dir)
    assert "OK    interpreter            %s (a runner: it starts the app's .venv/bin/python" \
        % UV in d.stdout, d.stdout


def test_uv_run_stop_ends_the_interpreter(uvapp):
    uvapp.start("--no-trace")
    pid, _ = uvapp.interpreter()
    r = tts("stop", "-c", str(uvapp.ini), cwd=uvapp.dir)
    assert r.returncode == 0, r.stderr
    rc, out = uvapp.finish()
    assert rc == 143, out  # uv passes the python's SIGTERM on
    assert not alive(pid)


def vmlck(pid):
    with open("/proc/%d/status" % pid) as f:
        return int([l for l in f if l.startswith("VmLck")][0].split()[1])


def test_uv_run_mlock_locks_the_interpreter(uvapp, tracing_ok):
    uvapp.start("--mlock")
    pid, st = uvapp.interpreter()
    uv = int(st.split("running: pid ")[1].split(",")[0])
    wait_for(lambda: vmlck(pid) > 0, what="VmLck of the interpreter")
    assert vmlck(uv) == 0  # the shim stays inert in the runner
    tts("stop", "-c", str(uvapp.ini), cwd=uvapp.dir)
    rc, out = uvapp.finish()
    m = uvapp.timeline()["memory"]["mlock"]
    assert m["status"] == "locked", out
    assert m["pid"] == pid  # the python, not uv


# --- imports without USDT --------------------------------------------------------

def no_usdt_pythons():
    """pyenv builds carry no USDT probes (no --with-dtrace)."""
    found = []
    for p in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3"))):
        r = subprocess.run(["readelf", "-n", os.path.realpath(p)], capture_output=True,
                           text=True)
        if r.returncode == 0 and "stapsdt" not in r.stdout:
            found.append(p)
    return found[-1:]


CASES = [("usdt-off", PY, ["--set", "trace.python_usdt=false"])] + \
    [("no-probes", p, []) for p in no_usdt_pythons()]


@pytest.mark.parametrize("case,python,args", CASES, ids=[c[0] for c in CASES])
def test_imports_derived_without_usdt(tmp_path, tracing_ok, case, python, args):
    tl = tmp_path / "t.json"
    r = tts("run", "--timeline", str(tl), *args, "--", python, "-c",
            "import json, email.parser, decimal", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    t = json.loads(tl.read_text())
    py = t["python"]
    assert py["imports_from"] == "module_files"
    assert py["usdt"] is False
    names = [i["name"] for i in py["imports"]]
    for m in ("json", "json.decoder", "email", "email.parser", "decimal"):
        assert m in names, names
    assert all(i["derived"] is True and i["depth"] == 0 for i in py["imports"])
    assert names == [i["name"] for i in sorted(py["imports"], key=lambda i: i["start_ms"])]
    fb = [f["reason"] for f in t["tracing"]["fallbacks"] if f["probe"] == "python_imports"]
    assert any("imports derived from the interpreter's module files" in f for f in fb), fb
    if case == "no-probes":
        assert any("has no USDT probes" in f for f in fb), fb
    phases = {p["name"]: p for p in t["phases"]}
    assert phases["imports"]["start_ms"] == min(i["start_ms"] for i in py["imports"])


def test_usdt_imports_are_not_derived(tmp_path, tracing_ok):
    tl = tmp_path / "t.json"
    r = tts("run", "--timeline", str(tl), "--", PY, "-c", "import json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    py = json.loads(tl.read_text())["python"]
    assert py["imports_from"] == "usdt" and py["usdt"] is True
    assert not any(i.get("derived") for i in py["imports"])
    assert "json" in [i["name"] for i in py["imports"]]


# --- #17: the uprobe links' last references ------------------------------------

def bpf_links(pid):
    """How many BPF link descriptors process pid holds."""
    return fds_to(pid, "anon_inode:bpf_link")


def strace_child(pid):
    """The process strace (pid) started, or None yet."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = f.read().split()
    except OSError:
        return None
    return int(kids[0]) if kids else None


@pytest.mark.skipif(not shutil.which("strace"), reason="strace is needed")
def test_main_process_never_closes_a_uprobe_link(tmp_path, tracing_ok):
    """tts-launch closes no BPF link itself, a uprobe's or any other: the
    keeper holds a copy of every link it holds and closes it (the detach, a
    grace period or a patch of the kernel's text, is paid there), and
    tts-launch leaves its own copies to its exit (supervise.c,
    session_free), where they are never the last."""
    held = {}
    for usdt in ("true", "false"):
        out = tmp_path / ("strace." + usdt)
        p = subprocess.Popen(["strace", "-f", "-qq", "-y", "-e", "trace=close,clone,clone3,bpf",
                              "-o", str(out),
                              str(TTS), "run", "--set", "trace.python_usdt=" + usdt,
                              # the raw pair's links (cheap's tracepoint and libc
                              # links: test_trace_libcio.py)
                              "--set", "trace.syscalls=exact",
                              "--timeline", str(tmp_path / "t.json"), "--", PY, "-c",
                              "import time; time.sleep(1)"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=tmp_path)
        try:
            main = wait_for(lambda: strace_child(p.pid), what="tts-launch under strace")
            # the keeper starts with every link (after the release)
            wait_for(lambda: keepers_of(main) or None, what="the uprobe keeper")
            links = bpf_links(main)
        finally:
            _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        closes, process, pending = {}, {}, set()
        lines = out.read_text().splitlines()
        for l in lines:
            tid = int(l.split()[0])
            # a thread's closes are its process's (the keeper closes on
            # several threads: ukeeper.c, keeper_close); strace may split
            # the clone that makes a thread in two lines, and show the
            # thread's first calls before it
            if re.search(r"clone3?\(.*CLONE_THREAD", l) and "<unfinished" in l:
                pending.add(tid)
            new = re.search(r"\) = (\d+)$", l)
            if new and ("clone" in l and "CLONE_THREAD" in l or
                        "resumed>" in l and tid in pending):
                pending.discard(tid)
                process[int(new.group(1))] = process.get(tid, tid)
        own = {}  # the keeper's holders (tphold.c): links it makes and closes itself
        opening = set()  # threads in a raw tracepoint open strace split in two lines
        for l in lines:
            tid = int(l.split()[0])
            pid = process.get(tid, tid)
            if "<anon_inode:bpf_link>" in l and "close(" in l:
                closes[pid] = closes.get(pid, 0) + 1
            elif "bpf(BPF_RAW_TRACEPOINT_OPEN" in l and "<unfinished" in l:
                opening.add(tid)
            elif (re.search(r"bpf\(BPF_RAW_TRACEPOINT_OPEN, .* = \d+", l) or
                  tid in opening and re.search(r"<\.\.\. bpf resumed>.* = \d+", l)):
                opening.discard(tid)
                own[pid] = own.get(pid, 0) + 1
        t = json.loads((tmp_path / "t.json").read_text())
        assert t["tracing"]["enabled"]
        if usdt == "true":
            assert "python_imports:" in " ".join(t["tracing"]["probes"])
        # one process closed links, the keeper: a copy of each of tts-launch's,
        # and the holders it made itself at the end
        assert len(closes) == 1, (main, closes, own)
        [(keeper, closed)] = closes.items()
        assert main not in closes and closed == links + own.get(keeper, 0), (main, links,
                                                                             closes, own)
        held[usdt] = links
    # the import probes' pair among them (uprobes: their detach waits longest)
    assert held["true"] == held["false"] + 2, held


def start_cuda_links(t):
    """The uprobe links on CUDA libraries attached before the start (issue 18:
    the toolkit's libcudart where /usr/local/cuda exists), held by the keeper too."""
    return sum(2 * l["probes"] for l in t.get("gpu", {}).get("libraries", [])
               if l["attached"] == "start")


def perf_links(pid):
    return fd_count(pid, "link_type:\tperf")


def link_progs(pid):
    """The program ids behind the BPF link fds of pid, with their count."""
    progs = {}
    for fd in os.listdir("/proc/%d/fdinfo" % pid):
        try:
            info = open("/proc/%d/fdinfo/%s" % (pid, fd)).read()
        except OSError:
            continue
        if "link_type:" in info:
            prog = [l.split()[1] for l in info.splitlines() if l.startswith("prog_id:")]
            progs[prog[0]] = progs.get(prog[0], 0) + 1
    return progs


def test_keeper_dies_with_a_killed_tts_launch(tmp_path, tracing_ok):
    r = subprocess.run([str(TTS), "run", "--timeline", str(tmp_path / "c.json"), "--", PY, "-c",
                        "pass"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    cuda = start_cuda_links(json.loads((tmp_path / "c.json").read_text()))
    p = subprocess.Popen([str(TTS), "run", "--timeline", str(tmp_path / "t.json"), "--set",
                          "trace.syscalls=exact", "--", PY,  # its links counted below
                          "-c", "import time; time.sleep(120)"], cwd=tmp_path,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        keeper = wait_for(lambda: keepers_of(p.pid), what="the uprobe keeper")[0]
        # the two USDT links, getaddrinfo's two uprobes and the CUDA pairs, and
        # a copy of every other link of tts-launch (raw tracepoints, perf events):
        # no detach is ever waited for in tts-launch's exit
        assert perf_links(keeper) >= 4 + cuda
        assert link_progs(keeper) == link_progs(p.pid)
        assert len(link_progs(keeper)) > 4 + cuda
        with open("/proc/%d/status" % keeper) as f:
            assert "PPid:\t%d\n" % p.pid not in f.read()  # not one of the service's orphans
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        wait_for(lambda: not alive(keeper), what="the keeper's exit")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_wrapper_script_interpreter_gets_derived_imports(tmp_path, tracing_ok):
    """A wrapper named python3 (a pyenv shim) is no binary to probe: said so,
    and the imports of the python it execs are derived."""
    shim = tmp_path / "bin" / "python3"
    shim.parent.mkdir()
    shim.write_text("#!/bin/sh\nexec %s \"$@\"\n" % PY)
    shim.chmod(0o755)
    tl = tmp_path / "t.json"
    r = tts("run", "--timeline", str(tl), "--", str(shim), "-c", "import json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    t = json.loads(tl.read_text())
    fb = [f["reason"] for f in t["tracing"]["fallbacks"] if f["probe"] == "python_imports"]
    assert "%s is not an ELF binary" % shim in " ".join(fb), fb
    assert t["python"]["imports_from"] == "module_files"
    assert "json" in [i["name"] for i in t["python"]["imports"]]
    assert t["python"]["interpreter"]["command"] == PY  # the wrapper exec'd it
