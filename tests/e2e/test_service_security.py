"""The service's privileges, what it inherits, and the lifetime of its whole
process tree (issue 12): PR_SET_NO_NEW_PRIVS and no stray descriptors in an
unprivileged service; a SIGKILLed supervisor or a main process that exits
leaves no worker holding the port; other users' look-alikes are not stale
instances; a flooding mlock reporter keeps the launcher and the timeline
small."""
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import PY, TTS, App, alive, port_open, wait_for

NOBODY = pwd.getpwnam("nobody")
AS_NOBODY = ["setpriv", "--reuid=%d" % NOBODY.pw_uid, "--regid=%d" % NOBODY.pw_gid,
             "--clear-groups"]

# A service that forks a worker holding the port, prints both pids, and then
# either stays (stay) or exits with status 7 (exit). --stubborn: the worker
# ignores SIGTERM, so only a SIGKILL ends it; --setsid: it leaves the group.
FORKING = r'''
import os, signal, socket, sys, time
port, mode = int(sys.argv[1]), sys.argv[2]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
if os.fork() == 0:
    if "--setsid" in sys.argv:
        os.setsid()  # out of the group: only the supervisor's adoption finds it
    if "--stubborn" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    s.listen()
    os.write(1, b"worker %d listening\n" % os.getpid())  # one write: lines never mix
    while True:
        time.sleep(3600)
s.close()
os.write(1, b"main %d\n" % os.getpid())
if mode == "exit":
    # exit only once the worker listens (deterministic, no sleep)
    while not open("/proc/net/tcp").read().count(":%04X 00000000:0000 0A" % port):
        time.sleep(0.01)
    sys.exit(7)
while True:
    time.sleep(3600)
'''

# The mlock report socket is the only socket the service inherits: find it
# and flood it (as a hostile or broken service would), then listen.
FLOOD = r'''
import os, signal, socket, stat, sys
port, count = int(sys.argv[1]), int(sys.argv[2])
def is_socket(fd):
    try:
        return fd > 2 and stat.S_ISSOCK(os.fstat(fd).st_mode)
    except OSError:  # the descriptor listdir used
        return False
fd = next(int(f) for f in os.listdir("/proc/self/fd") if is_socket(int(f)))
r = socket.socket(fileno=fd)
good = ('{"event":"failed","pid":%d,"trigger":"signal","mode":"models","errno":"ENOMEM",'
        '"start_ns":1,"dur_ns":1,"error":"' % os.getpid() + "x" * 3800 + '"}').encode()
bad = b'{"event":"locked","pid":1,"trigger":"signal","mode":"models","start_ns":-1,"vmlck":-5}'
for i in range(count):
    r.send(bad if i % 10 == 0 else good)  # blocking: paced by tts-launch's reads
print("flood done", count, flush=True)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen()
while True:
    signal.pause()
'''


# The service's descriptors, one line each; the one listdir used is closed
# by the time it is looked at.
LISTER = r'''
import os
for f in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        print("FD", f, os.readlink("/proc/self/fd/" + f), flush=True)
    except FileNotFoundError:
        print("FD", f, "(listing)", flush=True)
'''


@pytest.fixture
def open_app():
    """A root-owned app dir nobody can enter (pytest's tmp dirs are 0700)."""
    d = Path(tempfile.mkdtemp(prefix="tts-svcsec-"))
    d.chmod(0o755)
    a = App(d)
    (d / "svc.py").write_text(FORKING)
    (d / "flood.py").write_text(FLOOD)
    yield a
    a.cleanup()
    shutil.rmtree(d, ignore_errors=True)


def log(app):
    try:
        return (app.dir / "webui.log").read_text()
    except FileNotFoundError:
        return ""


def pids_in_log(app, what):
    """{'main': pid, 'worker': pid} once both are printed."""
    out = {}
    for line in log(app).splitlines():
        w = line.split()
        if len(w) >= 2 and w[0] in ("main", "worker") and w[1].isdigit():
            out[w[0]] = int(w[1])
    return out if set(what) <= set(out) else None


def status(pid):
    with open("/proc/%d/status" % pid) as f:
        return dict(l.rstrip("\n").split(":\t", 1) for l in f if ":\t" in l)


def test_unprivileged_service_cannot_regain_root(open_app):
    app = open_app
    # a setuid-root program where the service can run it
    shutil.copy("/usr/bin/id", app.dir / "suid-id")
    os.chown(app.dir / "suid-id", 0, 0)
    os.chmod(app.dir / "suid-id", 0o4755)
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--set", "service.user=nobody", "--",
                "sh", "-c", "grep NoNewPrivs /proc/self/status; echo euid=$(./suid-id -u)")
    assert r.returncode == 0, r.stderr
    out = log(app)
    assert "NoNewPrivs:\t1" in out, out
    # without PR_SET_NO_NEW_PRIVS the setuid bit gives euid 0 back (Uid: N 0 0 0)
    assert "euid=%d\n" % NOBODY.pw_uid in out, out


@pytest.mark.parametrize("user", [None, "nobody"])
def test_caller_descriptors_do_not_reach_the_service(open_app, user):
    app = open_app
    secret = app.dir / "caller-secret"
    secret.write_text("x")
    (app.dir / "fds.py").write_text(LISTER)
    with open(secret) as held:
        r = app.run("run", "-c", str(app.ini), "--no-trace",
                    *(["--set", "service.user=" + user] if user else []),
                    "--", PY, "fds.py", pass_fds=[held.fileno()])
    assert r.returncode == 0, r.stderr
    fds = {int(l.split()[1]): l.split()[2] for l in log(app).splitlines() if l.startswith("FD ")}
    assert fds, log(app)
    assert "caller-secret" not in log(app)
    # 0-2 and the directory listdir itself opened, nothing else
    extra = {fd: path for fd, path in fds.items() if fd > 2 and path != "(listing)"}
    assert extra == {}, fds


def test_mlock_socket_is_the_one_descriptor_passed(open_app):
    app = open_app
    (app.dir / "fds.py").write_text(LISTER)
    with open(app.dir / "svc.py") as held:
        # trigger delay: the shim opens no pipe of its own
        r = app.run("run", "-c", str(app.ini), "--no-trace", "--mlock=models",
                    "--set", "mlock.trigger=delay", "--set", "mlock.delay=3600s", "--", PY, "fds.py",
                    pass_fds=[held.fileno()])
    assert r.returncode == 0, r.stderr
    fds = {int(l.split()[1]): l.split()[2] for l in log(app).splitlines() if l.startswith("FD ")}
    extra = [p for fd, p in fds.items() if fd > 2 and p != "(listing)"]
    assert len(extra) == 1 and extra[0].startswith("socket:"), fds


def test_supervisor_sigkill_ends_the_whole_group(open_app):
    """SIGKILL of tts-launch (service as nobody, a forked worker that ignores
    SIGTERM and holds the port): the guard sends the group SIGTERM, then
    SIGKILL after stop_grace; nothing is left holding the port."""
    app = open_app
    p = app.popen("run", "-c", str(app.ini), "--no-trace", "--set", "service.user=nobody",
                  "--", PY, "svc.py", str(app.port), "stay", "--stubborn")
    pids = wait_for(lambda: pids_in_log(app, ("main", "worker")), what="service pids")
    wait_for(lambda: port_open(app.port), what="port")
    assert int(status(pids["worker"])["Uid"].split()[0]) == NOBODY.pw_uid
    assert os.getpgid(pids["worker"]) == pids["main"]
    p.send_signal(signal.SIGKILL)
    _, err = p.communicate(timeout=60)  # stderr closes once the guard is done
    # bounded wait, no assertion on speed
    wait_for(lambda: not alive(pids["main"]) and not alive(pids["worker"]), timeout=60,
             what="the service's group to end")
    assert not port_open(app.port)
    assert "the supervisor died: SIGTERM to the service's process group %d" % pids["main"] in err
    assert "outlived its 2s grace: SIGKILL" in err


def test_supervisor_sigkill_main_only(open_app):
    """The main process alone also ends (PR_SET_PDEATHSIG set after the
    drop to nobody, and the guard)."""
    app = open_app
    p = app.popen("run", "-c", str(app.ini), "--no-trace", "--set", "service.user=nobody",
                  "--", PY, "-c", "import time, os; print('main', os.getpid(), flush=True); "
                  "time.sleep(3600)")
    pids = wait_for(lambda: pids_in_log(app, ("main",)), what="service pid")
    assert status(pids["main"])["NoNewPrivs"] == "1"
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=60)
    wait_for(lambda: not alive(pids["main"]), timeout=60, what="the service to end")


@pytest.mark.parametrize("worker", [["--stubborn"], ["--stubborn", "--setsid"]])
def test_group_ended_when_main_exits(open_app, worker):
    app = open_app
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--", PY, "svc.py", str(app.port),
                "exit", *worker)
    assert r.returncode == 7, r.stderr  # the main process's own status
    pids = pids_in_log(app, ("main", "worker"))
    assert pids, log(app)
    # tts-launch returns only once the group is gone: no waiting here
    assert not alive(pids["worker"])
    assert not port_open(app.port)
    assert "1 process of the service's group still runs (pid %d): SIGTERM" % pids["worker"] in r.stderr
    assert "group outlived its 2s grace: SIGKILL" in r.stderr
    # and the next start finds the port free (it exited 3 before)
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--", PY, "svc.py", str(app.port), "exit")
    assert r.returncode == 7, r.stderr


def test_other_users_lookalike_is_not_an_instance(open_app):
    app = open_app
    lookalike = ["bash", "-c", "exec -a python3 tail -f webui.py"]
    # control: root's look-alike is an instance (the matcher sees this line)
    mine = app.spawn(lookalike)
    wait_for(lambda: open("/proc/%d/cmdline" % mine.pid).read().startswith("python3\0"),
             what="the look-alike's exec")
    app.write_ini("[stale]\npolicy = fail\n")
    r = app.run("run", "-c", str(app.ini), "--no-trace")
    assert r.returncode == 3 and "stale instance pid %d" % mine.pid in r.stderr, r.stderr
    os.killpg(mine.pid, signal.SIGKILL)
    mine.wait()
    # nobody's look-alike in the root-owned app dir: neither killed nor counted
    theirs = app.spawn(AS_NOBODY + lookalike)
    wait_for(lambda: open("/proc/%d/cmdline" % theirs.pid).read().startswith("python3\0"),
             what="the look-alike's exec")
    for policy in ("fail", "kill"):
        app.write_ini("[stale]\npolicy = %s\n" % policy)
        p = app.popen("run", "-c", str(app.ini), "--no-trace")
        wait_for(lambda: port_open(app.port) or p.poll() is not None, what="start")
        assert p.poll() is None, p.communicate()
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
        assert "pid %d runs like an instance" % theirs.pid in err, err
        assert "belongs to nobody (uid %d)" % NOBODY.pw_uid in err and "left alone" in err
        assert alive(theirs.pid), policy


def test_flooding_mlock_reporter_is_bounded(open_app):
    app = open_app
    count = 25000  # ~95 MB of reports
    tl = app.dir / "t.json"
    p = app.popen("run", "-c", str(app.ini), "--no-trace", "--mlock=models",
                  "--set", "mlock.trigger=signal", "--timeline", str(tl), "--",
                  PY, "flood.py", str(app.port), str(count))
    wait_for(lambda: "flood done" in log(app) or p.poll() is not None, timeout=120,
             what="the flood")
    assert p.poll() is None, p.communicate()
    wait_for(lambda: port_open(app.port), what="port")
    hwm_kb = int(status(p.pid)["VmHWM"].split()[0])
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert hwm_kb < 64 * 1024, hwm_kb  # 292 MB before the cap
    assert tl.stat().st_size < 1 << 20, tl.stat().st_size  # 66 MB before
    m = json.loads(tl.read_text())["memory"]["mlock"]
    rep = m["reports"]
    assert rep["kept"] + rep["rejected"] <= 64
    assert rep["dropped"] >= count - 64 - 1100  # the last poll may leave some unread
    assert rep["dropped_bytes"] >= rep["dropped"] * 80
    assert rep["rejected"] >= 1 and rep["clamped"] >= 1
    assert len(m["events"]) <= 64
    assert m["source"] == "service-report"
    # the log says it once, not 25,000 times
    assert err.count("mlock (models, at signal) failed") <= 64
    assert "the rest are counted, not read" in err
