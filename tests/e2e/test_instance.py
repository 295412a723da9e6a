"""The running instance's identity (issue 12): the pidfile is written
without following links another user planted, `stop` and `status` act
only on the supervisor holding the app's lock and on its child, and two
starts of one app end with exactly one instance. Attacks are planted as
nobody; everything else runs as root, as in CI."""
import os
import random
import shutil
import string
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import PY, TTS, alive, port_open, wait_for

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def as_nobody(code):
    """Run Python code as nobody; returns its stdout."""
    r = subprocess.run(NOBODY + [PY, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def start_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def ini_add(app, section, line):
    """Add a line to one of the sections App.write_ini writes."""
    head = "[%s]\n" % section
    text = app.ini.read_text()
    assert head in text
    app.ini.write_text(text.replace(head, head + line + "\n", 1))


def status_lines(r):
    return dict(l.split(": ", 1) for l in r.stdout.splitlines() if ": " in l)


def services(app):
    """Pids of live processes running this app's webui.py (its port is unique)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            argv = Path("/proc/%s/cmdline" % d).read_bytes().split(b"\0")
        except OSError:
            continue
        if b"webui.py" in argv and str(app.port).encode() in argv and alive(int(d)):
            found.append(int(d))
    return found


@pytest.fixture
def nobody_dir():
    """A directory outside root's 0700 pytest tree that nobody owns."""
    d = Path(tempfile.mkdtemp(prefix="tts-inst-", dir="/tmp"))
    os.chmod(d, 0o755)
    os.chown(d, 65534, 65534)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_pidfile_temp_links_planted_by_nobody_change_nothing(app, nobody_dir):
    # A root-owned file in a directory only root can enter.
    secret_dir = app.dir / "root-only"
    secret_dir.mkdir(mode=0o700)
    secret = secret_dir / "secret"
    secret.write_text("ORIGINAL\n")
    pidfile = nobody_dir / "tts.pid"
    ini_add(app, "service", "pidfile = %s" % pidfile)
    # Links at every name a pidfile writer might use: the old
    # PIDFILE.tmp.<pid> for the next 500 pids, and the .NAME.XXXXXX form.
    last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    rnd = random.Random(12)
    names = ["tts.pid.tmp.%d" % p for p in range(last + 1, last + 501)]
    names += [".tts.pid." + "".join(rnd.choice(string.ascii_letters + string.digits)
                                    for _ in range(6)) for _ in range(500)]
    names += ["tts.pid.tmp", ".tts.pid.tmp", "tts.pid.new", "tts.pid.lock"]
    as_nobody("import os\nfor n in %r:\n    os.symlink(%r, os.path.join(%r, n))\n"
              % (names, str(secret), str(nobody_dir)))
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--daemon")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: port_open(app.port), what="service listening")
    assert secret.read_text() == "ORIGINAL\n"
    assert oct(secret.stat().st_mode & 0o777) == oct(0o644)
    # The pidfile is a regular file naming the running service.
    assert pidfile.is_file() and not pidfile.is_symlink()
    svc, sup = [int(l.split()[0]) for l in pidfile.read_text().splitlines()]
    assert alive(svc) and alive(sup)
    for n in names:
        assert (nobody_dir / n).is_symlink(), n
    assert app.run("stop", "-c", str(app.ini)).returncode == 0
    wait_for(lambda: not alive(svc) and not alive(sup), what="instance gone")
    assert secret.read_text() == "ORIGINAL\n"


def test_link_at_the_pidfile_is_not_followed(app, nobody_dir):
    secret = app.dir / "secret"
    secret.write_text("ORIGINAL\n")
    pidfile = nobody_dir / "tts.pid"
    ini_add(app, "service", "pidfile = %s" % pidfile)
    as_nobody("import os; os.symlink(%r, %r)" % (str(secret), str(pidfile)))
    p = app.popen("run", "-c", str(app.ini), "--no-trace")
    wait_for(lambda: port_open(app.port), what="service listening")
    assert secret.read_text() == "ORIGINAL\n" and pidfile.is_symlink()
    # Without a pidfile stop still finds the instance: the lock names it.
    st = app.run("status", "-c", str(app.ini))
    assert st.returncode == 0 and "running: pid" in st.stdout, st.stdout + st.stderr
    assert app.run("stop", "-c", str(app.ini)).returncode == 0
    assert p.wait(timeout=30) == 143
    assert "symbolic link" in p.stderr.read()
    assert secret.read_text() == "ORIGINAL\n"


def hostile_sleep(app, pidfile):
    """nobody starts two sleeps and writes a pidfile naming them as the
    service and the supervisor, with their start times."""
    sleepers = []
    for _ in range(2):
        p = subprocess.Popen(NOBODY + ["sleep", "1000"])
        app.procs.append(p)
        wait_for(lambda: "sleep" in Path("/proc/%d/cmdline" % p.pid).read_text(), what="sleep")
        sleepers.append(p)
    sleeper, fake_sup = sleepers
    body = "%d %d\n%d %d\n" % (sleeper.pid, start_ticks(sleeper.pid), fake_sup.pid,
                               start_ticks(fake_sup.pid))
    as_nobody("import os\ntmp = %r + '.x'\nopen(tmp, 'w').write(%r)\nos.rename(tmp, %r)"
              % (str(pidfile), body, str(pidfile)))
    return sleepers


def test_stop_refuses_a_hostile_pidfile(app, nobody_dir):
    pidfile = nobody_dir / "tts.pid"
    ini_add(app, "service", "pidfile = %s" % pidfile)
    sleeper, fake_sup = hostile_sleep(app, pidfile)
    stop = app.run("stop", "-c", str(app.ini))
    assert stop.returncode == 4, stop.stdout + stop.stderr
    assert "not trusted" in stop.stdout and "nothing signalled" in stop.stdout
    assert "pid %d" % sleeper.pid in stop.stdout
    st = app.run("status", "-c", str(app.ini))
    assert st.returncode == 4 and "not trusted" in st.stdout
    for p in (sleeper, fake_sup):
        assert alive(p.pid) and p.poll() is None


def test_a_running_instance_ignores_a_tampered_pidfile(app, nobody_dir):
    pidfile = nobody_dir / "tts.pid"
    ini_add(app, "service", "pidfile = %s" % pidfile)
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--daemon")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: port_open(app.port), what="service listening")
    svc, sup = [int(l.split()[0]) for l in pidfile.read_text().splitlines()]
    sleeper, fake_sup = hostile_sleep(app, pidfile)
    st = app.run("status", "-c", str(app.ini))
    assert st.returncode == 0
    assert "running: pid %d," % svc in st.stdout and "not trusted" in st.stdout
    assert "supervisor: pid %d " % sup in st.stdout
    stop = app.run("stop", "-c", str(app.ini))
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert not alive(sup) and not alive(svc) and not port_open(app.port)
    for p in (sleeper, fake_sup):
        assert alive(p.pid) and p.poll() is None
    # stop removed only a pidfile that named the supervisor it ended.
    assert str(sleeper.pid) in pidfile.read_text()


def test_status_port_zombie_and_lock(app):
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--daemon")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: port_open(app.port), what="service listening")
    # The port the service really listens on, whatever the caller's config says.
    st = app.run("status", "-c", str(app.ini), "--set", "app.port=1")
    assert st.returncode == 0, st.stdout + st.stderr
    assert "port %d: listening" % app.port in st.stdout
    lines = status_lines(st)
    svc = int(lines["running"].split()[1].rstrip(","))
    sup = int(lines["supervisor"].split()[1])
    lock = Path(lines["supervisor"].split("holds the lock ")[1].rstrip(")"))
    # As root the lock and pidfile are root's, in a directory only root writes.
    assert lock.parent == Path("/run/tts-launch")
    assert Path(lines["pidfile"]).parent == lock.parent
    ds = lock.parent.stat()
    assert ds.st_uid == 0 and ds.st_mode & 0o022 == 0
    assert lock.stat().st_uid == 0 and lock.stat().st_mode & 0o077 == 0
    # A service that exited but is not reaped yet is dead, not running.
    os.kill(sup, 19)  # SIGSTOP: the supervisor cannot reap
    try:
        os.kill(svc, 9)
        wait_for(lambda: not alive(svc), what="service a zombie")
        st = app.run("status", "-c", str(app.ini))
        assert st.returncode == 1 and "dead" in st.stdout, st.stdout
    finally:
        os.kill(sup, 18)  # SIGCONT
    wait_for(lambda: not alive(sup), what="supervisor exit")
    # The supervisor removed its pidfile and lock on the way out.
    assert not lock.exists() and not Path(lines["pidfile"]).exists()
    st = app.run("status", "-c", str(app.ini))
    assert st.returncode == 3 and "not running" in st.stdout


def test_pidfile_names_the_service_before_it_runs(app):
    """Written before the exec: the service's first instruction can already
    read itself there (a `status` that sees its port finds it named, however
    busy the machine)."""
    pidfile = app.dir / "svc.pid"
    ini_add(app, "service", "pidfile = %s" % pidfile)
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--", "sh", "-c",
                "echo $$ > seen; cat %s >> seen" % pidfile)
    assert r.returncode == 0, r.stderr
    seen = (app.dir / "seen").read_text().split("\n")
    assert int(seen[1].split()[0]) == int(seen[0]), seen  # the pidfile's service: this sh
    assert not pidfile.exists()  # and it went with the run


def instance(app):
    st = app.run("status", "-c", str(app.ini))
    assert st.returncode == 0, st.stdout + st.stderr
    lines = status_lines(st)
    svc = int(lines["running"].split()[1].rstrip(","))
    sup = int(lines["supervisor"].split()[1])
    names = [int(l.split()[0]) for l in Path(lines["pidfile"]).read_text().splitlines()]
    assert names == [svc, sup]
    return svc, sup


def test_second_start_replaces_the_first_with_policy_kill(app):
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--daemon")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: port_open(app.port), what="first listening")
    svc_a, sup_a = instance(app)
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--daemon")
    assert r.returncode == 0, r.stderr
    assert "ending the running instance: supervisor pid %d" % sup_a in r.stderr
    # B started only after A's supervisor and service were gone.
    assert not alive(sup_a) and not alive(svc_a)
    wait_for(lambda: port_open(app.port), what="second listening")
    svc_b, sup_b = instance(app)
    assert svc_b != svc_a and services(app) == [svc_b]
    stop = app.run("stop", "-c", str(app.ini))
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert not alive(sup_b) and not alive(svc_b) and not port_open(app.port)
    assert app.run("status", "-c", str(app.ini)).returncode == 3


def test_second_start_with_policy_fail_exits_3_naming_the_first(app):
    ini_add(app, "stale", "policy = fail")
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--daemon")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: port_open(app.port), what="first listening")
    svc_a, sup_a = instance(app)
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--daemon")
    assert r.returncode == 3, r.stderr
    assert "supervisor pid %d, service pid %d" % (sup_a, svc_a) in r.stderr
    assert "policy = kill" in r.stderr
    assert alive(sup_a) and alive(svc_a) and port_open(app.port)
    assert instance(app) == (svc_a, sup_a)


@pytest.mark.parametrize("mode", ["--daemon", "--foreground"])
def test_simultaneous_starts_end_with_one_instance(app, mode):
    for _ in range(3):
        a = app.popen("run", "-c", str(app.ini), "--no-trace", mode)
        b = app.popen("run", "-c", str(app.ini), "--no-trace", mode)
        if mode == "--daemon":
            codes = sorted([a.wait(timeout=60), b.wait(timeout=60)])
            # The loser was ended before or after its start (SIGTERM).
            assert codes[0] == 0 and codes[1] in (0, 143), codes
        else:
            # The loser exits (SIGTERM from the winner); the winner runs.
            wait_for(lambda: (a.poll() is None) != (b.poll() is None), 60,
                     "one of two foreground starts to end")
            loser = a if a.poll() is not None else b
            assert loser.returncode == 143, loser.stderr.read()
        wait_for(lambda: port_open(app.port), what="the winner listening")
        svc, sup = instance(app)
        assert services(app) == [svc]
        stop = app.run("stop", "-c", str(app.ini))
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert not alive(svc) and not alive(sup) and services(app) == []
        for p in (a, b):
            p.wait(timeout=30)
        assert app.run("status", "-c", str(app.ini)).returncode == 3


def test_not_root_without_a_writable_lock_place_only_warns():
    """Not root: the lock is PIDFILE.lock; where the user cannot create it,
    the run goes on with a warning (as root, /run/tts-launch is checked:
    tests/unit/test_instance.c)."""
    d = Path(tempfile.mkdtemp(prefix="tts-inst-", dir="/tmp"))
    try:
        os.chmod(d, 0o755)
        cfg = d / "tts-launch.ini"
        cfg.write_text("[app]\ndir = %s\npython = %s\nport = 0\n"
                       "[service]\npidfile = %s/tts.pid\n[log]\nfile =\n[trace]\nenabled = false\n"
                       % (d, PY, d))
        os.chmod(cfg, 0o644)
        r = subprocess.run(NOBODY + [str(TTS), "run", "-c", str(cfg),
                                     "--", "/bin/true"], capture_output=True, text=True,
                           timeout=60, cwd="/")
        assert r.returncode == 0, r.stderr
        assert "warning" in r.stderr and "lock" in r.stderr
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_status_by_another_user_of_a_root_instance_is_refused(nobody_dir):
    """nobody cannot open root's lock: status says so (exit 4), and stop
    signals nothing; the instance runs on."""
    from conftest import App
    d = Path(tempfile.mkdtemp(prefix="tts-inst-app-", dir="/tmp"))
    os.chmod(d, 0o755)
    app = App(d)
    try:
        os.chmod(app.ini, 0o644)
        r = app.run("run", "-c", str(app.ini), "--no-trace", "--daemon")
        assert r.returncode == 0, r.stderr
        wait_for(lambda: port_open(app.port), what="service listening")
        svc, sup = instance(app)
        for verb in ("status", "stop"):
            r = subprocess.run(NOBODY + [str(TTS), verb, "-c", str(app.ini)],
                               capture_output=True, text=True, timeout=60, cwd="/")
            assert r.returncode == 4, r.stdout + r.stderr
            assert "run this as root" in r.stderr
        assert alive(svc) and alive(sup)
    finally:
        app.cleanup()
        shutil.rmtree(d, ignore_errors=True)


def test_not_root_the_configured_pidfile_and_its_lock(nobody_dir):
    from conftest import App
    app = App(nobody_dir)
    ini_add(app, "service", "pidfile = run/tts.pid")
    (nobody_dir / "run").mkdir()
    for p in (nobody_dir / "run", nobody_dir / "webui.py", app.ini):
        os.chown(p, 65534, 65534)

    def as_user(*args):
        return subprocess.run(NOBODY + [str(TTS), *args, "-c", str(app.ini)], capture_output=True,
                              text=True, timeout=60, cwd="/")
    try:
        r = as_user("run", "--no-trace", "--daemon", "--set", "log.file=")
        assert r.returncode == 0, r.stderr
        wait_for(lambda: port_open(app.port), what="service listening")
        st = as_user("status")
        assert st.returncode == 0, st.stdout + st.stderr
        lines = status_lines(st)
        assert lines["pidfile"] == str(nobody_dir / "run/tts.pid")
        assert "holds the lock %s/run/tts.pid.lock" % nobody_dir in lines["supervisor"]
        assert (nobody_dir / "run/tts.pid.lock").stat().st_uid == 65534
        svc = int(lines["running"].split()[1].rstrip(","))
        stop = as_user("stop")
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert not alive(svc) and not port_open(app.port)
        assert not (nobody_dir / "run/tts.pid").exists()
        assert not (nobody_dir / "run/tts.pid.lock").exists()
        assert as_user("status").returncode == 3
    finally:
        app.cleanup()


@pytest.mark.parametrize("mode", ["--daemon", "--foreground"])
def test_interrupted_while_ending_the_running_instance_starts_nothing(app, mode):
    # The running service ignores SIGTERM: ending it takes stop_grace (2 s).
    ini_add(app, "app", "args = --ignore-term")
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--daemon")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: port_open(app.port), what="first listening")
    svc_a, sup_a = instance(app)
    b = app.popen("run", "-c", str(app.ini), "--no-trace", mode)
    # The first supervisor has been told to stop (its log says so): the
    # second start is now waiting for it. Ctrl-C the second start.
    log = app.dir / "webui.log"
    wait_for(lambda: "SIGTERM: stopping the service" in log.read_text(), what="first told")
    b.send_signal(2)
    assert b.wait(timeout=60) == 130, b.stderr.read()
    assert "SIGINT before the service started: not starting it" in b.stderr.read()
    assert not alive(sup_a) and not alive(svc_a)
    assert services(app) == [] and not port_open(app.port)
    assert app.run("status", "-c", str(app.ini)).returncode == 3


def test_a_start_inside_the_instance_it_would_replace_is_refused(app):
    inner = "%s run -c %s --no-trace -- /bin/true" % (TTS, app.ini)
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--", "/bin/sh", "-c", inner)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "runs inside the instance" in r.stdout + r.stderr
    # With a pidfile of its own it is another instance and runs.
    inner = "%s run -c %s --no-trace --set service.pidfile=inner.pid -- /bin/true" % (TTS, app.ini)
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--", "/bin/sh", "-c", inner)
    assert r.returncode == 0, r.stdout + r.stderr


def test_hard_link_at_the_pidfile_is_replaced_not_written(app, nobody_dir):
    # protected_hardlinks stops nobody from linking root's file: plant as root.
    secret = nobody_dir / "secret"
    secret.write_text("ORIGINAL\n")
    pidfile = nobody_dir / "tts.pid"
    os.link(secret, pidfile)
    ini_add(app, "service", "pidfile = %s" % pidfile)
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--daemon")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: port_open(app.port), what="service listening")
    assert secret.read_text() == "ORIGINAL\n" and secret.stat().st_nlink == 1
    svc, sup = instance(app)
    assert app.run("stop", "-c", str(app.ini)).returncode == 0
    assert secret.read_text() == "ORIGINAL\n"


def test_stop_during_the_start_starts_nothing(app):
    # A stale instance that ignores SIGTERM keeps the start busy for 5 s.
    app.ini.write_text(app.ini.read_text().replace("[stale]\ngrace = 2s\n",
                                                   "[stale]\ngrace = 5s\n", 1))
    stale = app.spawn([PY, "webui.py", "--port", str(app.port), "--ignore-term"])
    wait_for(lambda: port_open(app.port), what="stale instance listening")
    p = app.popen("run", "-c", str(app.ini), "--no-trace")

    def starting():
        st = app.run("status", "-c", str(app.ini))
        return st.returncode == 0 and st.stdout.startswith("starting: supervisor pid %d " % p.pid)
    wait_for(starting, what="status: starting")
    stop = app.run("stop", "-c", str(app.ini))
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert "stopped supervisor pid %d" % p.pid in stop.stdout
    assert p.wait(timeout=30) == 143
    assert "SIGTERM before the service started: not starting it" in p.stderr.read()
    assert stale.poll() is not None and services(app) == [] and not port_open(app.port)
