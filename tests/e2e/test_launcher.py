"""End-to-end tests of the launcher core (issue 2), as root, against the
built binary: stale kill, port conflicts, bad configs, exit codes, signal
forwarding, log rotation, daemon/status/stop, --print-env, user switch."""
import json
import re
import os
import resource
import pwd
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import PY, TTS, alive, port_open, wait_for


def test_help_and_usage_errors(app):
    r = app.run("--help")
    assert r.returncode == 0
    assert "Exit codes" in r.stdout and "--mlock" in r.stdout
    r = app.run("frobnicate")
    assert r.returncode == 2
    assert "unknown command 'frobnicate'" in r.stderr
    r = app.run("run", "--bogus-flag")
    assert r.returncode == 2
    r = app.run("run", "--mlock=sometimes")
    assert r.returncode == 2 and "unknown --mlock mode 'sometimes'" in r.stderr


def test_stale_instance_killed_lookalikes_survive(app, tmp_path_factory):
    # A stale webui.py of this app holding the port...
    stale = app.spawn([PY, "webui.py", "--port", str(app.port)])
    wait_for(lambda: port_open(app.port), what="stale instance listening")
    # ...and look-alikes that must never be signalled: the same script name
    # in another directory, and a process with webui.py as a mere argument.
    other = tmp_path_factory.mktemp("other")
    (other / "webui.py").write_text((app.dir / "webui.py").read_text())
    lookalike_dir = app.spawn([PY, "webui.py", "--port", "0"], cwd=other)
    lookalike_arg = app.spawn([PY, "-c", "import time; time.sleep(60)", "webui.py"])
    time.sleep(0.3)

    r = app.run("run", "-c", str(app.ini), "--no-trace", "--daemon")
    assert r.returncode == 0, r.stderr
    assert "stale instance pid %d" % stale.pid in r.stderr
    assert "ended on SIGTERM" in r.stderr
    assert stale.wait(timeout=5) == -signal.SIGTERM
    assert alive(lookalike_dir.pid) and alive(lookalike_arg.pid)
    wait_for(lambda: port_open(app.port), what="new service listening")
    st = app.run("status", "-c", str(app.ini))
    assert st.returncode == 0 and "running" in st.stdout


def test_stale_instance_ignoring_sigterm_is_sigkilled(app):
    stale = app.spawn([PY, "webui.py", "--port", str(app.port), "--ignore-term"])
    wait_for(lambda: port_open(app.port), what="stale instance listening")
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--set", "stale.grace=0.5s",
                "--set", "stale.match=webui.py", "--", "true")
    assert r.returncode == 0, r.stderr
    assert "killed with SIGKILL" in r.stderr
    assert stale.wait(timeout=5) == -signal.SIGKILL


def test_port_held_by_foreign_process_exit_3(app):
    holder = app.spawn([PY, "-c", "import socket,time; s=socket.socket(); "
                        "s.bind(('127.0.0.1', %d)); s.listen(); time.sleep(60)" % app.port])
    wait_for(lambda: port_open(app.port), what="foreign listener")
    r = app.run("run", "-c", str(app.ini), "--no-trace")
    assert r.returncode == 3, r.stderr
    assert "port %d is held by pid %d" % (app.port, holder.pid) in r.stderr
    assert "nothing was killed" in r.stderr
    assert alive(holder.pid)
    assert not (app.dir / "webui.log").exists()  # nothing started


def test_stale_policy_fail_exits_3_and_kills_nothing(app):
    stale = app.spawn([PY, "webui.py", "--port", "0"])
    time.sleep(0.3)
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--set", "stale.policy=fail")
    assert r.returncode == 3
    assert "stale instance pid %d" % stale.pid in r.stderr
    assert alive(stale.pid)


def test_stale_scan_of_a_busy_host_in_parts(app):
    """Hundreds of processes: the scan reads them in parts on threads
    (stale.c, SCAN_SPLIT). An instance started before the crowd and one
    after it (the two ends of /proc's order: different parts) are both
    found, the look-alike among them is not one. (On a machine with one CPU
    the scan is one part: then this checks only the scan itself.)"""
    first = app.spawn([PY, "webui.py", "--port", "0"])
    crowd = [subprocess.Popen(["sleep", "300"]) for _ in range(400)]
    try:
        lookalike_arg = app.spawn([PY, "-c", "import time; time.sleep(60)", "webui.py"])
        last = app.spawn([PY, "webui.py", "--port", "0"])
        time.sleep(0.5)
        assert len([d for d in os.listdir("/proc") if d.isdigit()]) > 2 * 128
        r = app.run("run", "-c", str(app.ini), "--no-trace", "--set", "stale.policy=fail")
        assert r.returncode == 3, r.stderr
        found = sorted(int(m) for m in re.findall(r"stale instance pid (\d+)", r.stderr))
        assert found == sorted([first.pid, last.pid]), r.stderr
        assert alive(first.pid) and alive(last.pid) and alive(lookalike_arg.pid)
    finally:
        for p in crowd:
            p.kill()
        for p in crowd:
            p.wait()


def test_bad_config_exit_2_starts_and_kills_nothing(app):
    stale = app.spawn([PY, "webui.py", "--port", "0"])
    time.sleep(0.3)
    bad = app.dir / "bad.ini"
    bad.write_text("[app]\ndir = %s\nprot = 7860\n" % app.dir)
    r = app.run("run", "-c", str(bad))
    assert r.returncode == 2
    assert "unknown key 'prot' in section [app] (did you mean 'port'?)" in r.stderr
    assert str(bad) in r.stderr
    assert alive(stale.pid)
    assert not (app.dir / "webui.log").exists()
    r = app.run("run", "-c", str(app.dir / "missing.ini"))
    assert r.returncode == 2 and "cannot read config file" in r.stderr
    r = app.run("run", "-c", str(app.ini), "--set", "service.user=no-such-user-here", "--no-trace")
    assert r.returncode == 2 and "user 'no-such-user-here' does not exist" in r.stderr
    assert alive(stale.pid)  # the user is checked before anything is killed
    assert not any(p.name.startswith("tts-launch.pid") for p in app.dir.iterdir())


@pytest.mark.parametrize("cmd,code", [
    (["sh", "-c", "exit 7"], 7),
    (["sh", "-c", "exit 0"], 0),
    (["sh", "-c", "kill -TERM $$"], 128 + signal.SIGTERM),
    (["sh", "-c", "kill -KILL $$"], 128 + signal.SIGKILL),
    (["/nonexistent/program"], 127),
    (["/etc/passwd"], 126),
])
def test_exit_codes(app, cmd, code):
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--", *cmd)
    assert r.returncode == code, r.stderr
    if code in (126, 127):
        assert "cannot execute" in r.stderr
    # the pidfile (written before the exec) went with the run, however it ended
    st = app.run("status", "-c", str(app.ini))
    assert st.returncode == 3 and "no pidfile" in st.stdout, st.stdout + st.stderr


def test_sigint_forwarded_to_service(app):
    script = ("import signal, sys, time\n"
              "signal.signal(signal.SIGINT, lambda *a: sys.exit(42))\n"
              "print('armed', flush=True)\n"
              "time.sleep(60)\n")
    p = app.popen("run", "-c", str(app.ini), "--no-trace", "--", PY, "-c", script)
    wait_for(lambda: "armed" in (app.dir / "webui.log").read_text()
             if (app.dir / "webui.log").exists() else False, what="service armed")
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=20)
    assert p.returncode == 42, err
    assert "SIGINT: stopping the service" in err


def test_second_interrupt_kills_at_once(app):
    script = ("import signal, time\n"
              "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
              "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "print('armed', flush=True)\n"
              "time.sleep(600)\n")
    # a grace far longer than the wait below: only the second Ctrl-C ends it
    p = app.popen("run", "-c", str(app.ini), "--no-trace", "--set", "service.stop_grace=600s",
                  "--", PY, "-c", script)
    wait_for(lambda: "armed" in (app.dir / "webui.log").read_text()
             if (app.dir / "webui.log").exists() else False, what="service armed")
    p.send_signal(signal.SIGINT)
    seen = []
    while not any("SIGINT: stopping the service" in l for l in seen):
        line = p.stderr.readline()
        assert line, "tts-launch ended after one SIGINT: %s" % "".join(seen)
        seen.append(line)
    p.send_signal(signal.SIGINT)  # the first was handled: this is a second one
    out, err = p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGKILL, "".join(seen) + err
    assert "SIGINT again: killing the service" in err


def test_sigterm_then_sigkill_after_grace(app):
    p = app.popen("run", "-c", str(app.ini), "--no-trace", "--set", "service.stop_grace=0.5s",
                  "--", PY, "webui.py", "--port", str(app.port), "--ignore-term")
    wait_for(lambda: port_open(app.port), what="service listening")
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=20)
    assert p.returncode == 128 + signal.SIGKILL, err
    assert "outlived its" in err


def test_ready_reported_and_output_relayed(app):
    p = app.popen("run", "-c", str(app.ini), "--no-trace")
    wait_for(lambda: port_open(app.port), what="service listening")
    wait_for(lambda: "ready: listening on 127.0.0.1:%d" % app.port in
             (app.dir / "webui.log").read_text(), what="ready line")
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=20)
    assert "Running on local URL" in out  # foreground: service output on the terminal
    assert "ready: listening on" in err
    log = (app.dir / "webui.log").read_text()
    assert "Running on local URL" in log and "fake webui starting" in log
    assert p.returncode == 128 + signal.SIGTERM


def test_ready_timeout_only_warns(app):
    p = app.popen("run", "-c", str(app.ini), "--no-trace", "--set", "service.ready_timeout=0.3s",
                  "--set", "app.port=%d" % app.port, "--", PY, "webui.py", "--port", str(app.port), "--delay", "1.5")
    wait_for(lambda: port_open(app.port), what="slow service listening")
    wait_for(lambda: "ready:" in (app.dir / "webui.log").read_text(), what="ready line")
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=20)
    assert "warning: not ready after" in err
    assert err.index("not ready after") < err.index("ready: listening")


def test_log_rotation(app):
    writer = "import sys\nfor i in range(3000): print('line %05d ' % i + 'x' * 40)\n"
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--set", "log.max_size=8K",
                "--set", "log.backups=2", "--", PY, "-c", writer)
    assert r.returncode == 0, r.stderr
    log = app.dir / "webui.log"
    assert log.exists() and (app.dir / "webui.log.1").exists()
    assert (app.dir / "webui.log.2").exists()
    assert not (app.dir / "webui.log.3").exists()  # only 2 backups kept
    for f in (log, app.dir / "webui.log.1", app.dir / "webui.log.2"):
        assert f.stat().st_size <= 8 * 1024
    # The newest lines are in the current file, the older ones in .1.
    assert "line 02999" in log.read_text() + (app.dir / "webui.log.1").read_text()
    assert "line 00000" not in log.read_text()


def test_daemon_status_stop(app):
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--daemon")
    assert r.returncode == 0, r.stderr
    assert "started pid" in r.stderr
    wait_for(lambda: port_open(app.port), what="daemon service listening")
    st = app.run("status", "-c", str(app.ini))
    assert st.returncode == 0
    # As root the pidfile lives in /run/tts-launch/ (status says where).
    pidfile = Path(next(l.split(" ", 1)[1] for l in st.stdout.splitlines()
                        if l.startswith("pidfile: ")))
    svc, sup = [int(l.split()[0]) for l in pidfile.read_text().splitlines()]
    assert alive(svc) and alive(sup)
    assert "running: pid %d" % svc in st.stdout and "listening" in st.stdout
    # The supervisor detached into its own session.
    assert os.getsid(sup) == sup
    stop = app.run("stop", "-c", str(app.ini))
    assert stop.returncode == 0, stop.stdout + stop.stderr
    wait_for(lambda: not alive(svc) and not alive(sup), what="daemon gone")
    assert not pidfile.exists()
    st = app.run("status", "-c", str(app.ini))
    assert st.returncode == 3 and "not running" in st.stdout
    log = (app.dir / "webui.log").read_text()
    assert "SIGTERM: stopping the service" in log
    assert not port_open(app.port)


def test_print_env(app):
    r = app.run("run", "-c", str(app.ini), "--print-env", "--set", "env.HF_HUB_OFFLINE=1",
                "--set", "env.pythonpath=extra", env={**os.environ, "PYTHONPATH": "/inh"})
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert "PYTHONPATH=%s:%s/extra:/inh" % (app.dir, app.dir) in lines
    assert "HF_HUB_OFFLINE=1" in lines
    assert lines[0] == "# command: %s webui.py --port %d --host 127.0.0.1 --model_dir ./checkpoints" % (
        PY, app.port)
    assert not (app.dir / "webui.log").exists()  # nothing started


def test_service_user_gets_its_own_home(app):
    nobody = pwd.getpwnam("nobody")
    r = app.run("run", "-c", str(app.ini), "--print-env", "--set", "service.user=nobody",
                env={**os.environ, "HOME": "/root", "USER": "root"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "HOME=%s" % nobody.pw_dir in lines and "HOME=/root" not in lines
    assert "USER=nobody" in lines and "LOGNAME=nobody" in lines
    # [env] wins over the user's defaults
    r = app.run("run", "-c", str(app.ini), "--print-env", "--set", "service.user=nobody",
                "--set", "env.HOME=/srv/tts")
    assert "HOME=/srv/tts" in r.stdout.splitlines()


def test_service_user_has_no_capabilities(app):
    nobody = pwd.getpwnam("nobody")
    os.chmod(app.dir, 0o755)
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--set", "service.user=nobody",
                "--", "sh", "-c", "id -u; id -g; grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status")
    assert r.returncode == 0, r.stderr
    out = (app.dir / "webui.log").read_text()
    assert "\n%d\n%d\n" % (nobody.pw_uid, nobody.pw_gid) in "\n" + out
    caps = dict(l.split(":\t") for l in out.splitlines() if l.startswith("Cap"))
    assert caps and all(int(v, 16) == 0 for v in caps.values()), caps


def test_timeline_written_untraced(app):
    tl = app.dir / "t.json"
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--timeline", str(tl), "--", "sh", "-c", "exit 5")
    assert r.returncode == 5
    data = json.loads(tl.read_text())
    assert data["schema"] == "tts-launch.timeline/2"
    assert data["tracing"]["enabled"] is False
    assert {"launch", "spawn", "exec"} <= set(m["name"] if isinstance(m, dict) else m
                                             for m in data["marks"])
    assert not [p for p in app.dir.iterdir() if ".tmp" in p.name]  # no temp file left behind


def test_doctor(app):
    r = app.run("doctor", "-c", str(app.ini))
    lines = r.stdout.splitlines()
    checks = {l.split()[1]: l.split()[0] for l in lines[1:-1]}
    for name in ("kernel", "BTF", "tracefs", "BPF", "unprivileged", "lockdown", "RLIMIT_MEMLOCK",
                 "RLIMIT_NOFILE", "interpreter", "script", "port"):
        assert name in checks, r.stdout
    assert checks["script"] == "OK" and checks["interpreter"] == "OK" and checks["port"] == "OK"
    assert r.returncode == (1 if "FAIL" in checks.values() else 0)
    # A missing script is a FAIL with its fix (run's message), and exit 1.
    r = app.run("doctor", "-c", str(app.ini), "--set", "app.script=nope.py")
    assert r.returncode == 1
    assert any(l.startswith("FAIL") and "nope.py" in l and "set [app] dir to the IndexTTS2 "
               "directory, or [app] script" in l for l in r.stdout.splitlines())
    # An open-files limit too low for tracing, with no room to raise it: a
    # FAIL that says how to raise it; room to raise it: OK.
    def nofile(soft, hard):
        # never above the hard limit this runner has (a user's cannot be raised)
        top = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        top = hard if top == resource.RLIM_INFINITY else min(hard, top)
        return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, top), top))
    r = app.run("doctor", "-c", str(app.ini), preexec_fn=nofile(200, 200))
    fail = [l for l in r.stdout.splitlines() if l.split()[1:2] == ["RLIMIT_NOFILE"]]
    assert fail and fail[0].startswith("FAIL") and "ulimit -n is 200" in fail[0], r.stdout
    assert "LimitNOFILE=1024" in fail[0] and r.returncode == 1
    r = app.run("doctor", "-c", str(app.ini), preexec_fn=nofile(200, 4096))
    assert [l for l in r.stdout.splitlines() if l.startswith("OK") and "RLIMIT_NOFILE" in l]
    # A held port is named.
    holder = app.spawn([PY, "webui.py", "--port", str(app.port)])
    wait_for(lambda: port_open(app.port), what="listener")
    r = app.run("doctor", "-c", str(app.ini))
    assert "is held by pid %d" % holder.pid in r.stdout


def test_make_install_honours_prefix_and_destdir(tmp_path):
    root = TTS.parent.parent
    r = subprocess.run(["make", "-s", "-C", str(root), "install", "PREFIX=/opt/tts",
                        "DESTDIR=%s" % tmp_path], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    installed = tmp_path / "opt/tts/bin/tts-launch"
    assert installed.exists() and os.access(installed, os.X_OK)
    assert (tmp_path / "opt/tts/share/doc/tts-launch/tts-launch.ini.example").exists()
    v = subprocess.run([str(installed), "--version"], capture_output=True, text=True)
    assert v.returncode == 0 and v.stdout.startswith("tts-launch ")


def test_stale_instance_holding_the_port_with_policy_ignore_exits_3(app):
    stale = app.spawn([PY, "webui.py", "--port", str(app.port)])
    wait_for(lambda: port_open(app.port), what="stale instance listening")
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--set", "stale.policy=ignore")
    assert r.returncode == 3, r.stderr
    assert "stale instance pid %d" % stale.pid in r.stderr and "left running" in r.stderr
    assert "it holds port %d" % app.port in r.stderr
    assert "which is not a stale instance" not in r.stderr  # it is one
    assert alive(stale.pid)


def test_bad_log_path_exit_2_kills_nothing(app):
    stale = app.spawn([PY, "webui.py", "--port", "0"])
    time.sleep(0.3)
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--set", "log.file=/nonexistent/dir/x.log")
    assert r.returncode == 2
    assert "failed to open log file /nonexistent/dir/x.log" in r.stderr
    assert alive(stale.pid)


def test_config_lookup_order(app, tmp_path_factory):
    # ./tts-launch.ini of the current directory, when no -c is given
    r = app.run("run", "--print-env")
    assert r.returncode == 0
    assert "--port %d" % app.port in r.stdout.splitlines()[0]
    # -c wins over ./tts-launch.ini
    other = tmp_path_factory.mktemp("other") / "x.ini"
    other.write_text("[app]\ndir = %s\nport = 7999\n" % app.dir)
    r = app.run("run", "-c", str(other), "--print-env")
    assert "--port 7999" in r.stdout.splitlines()[0]
    # neither (and no /etc/tts-launch.ini): the built-in defaults
    empty = tmp_path_factory.mktemp("empty")
    r = subprocess.run([str(TTS), "--print-env"], cwd=empty, capture_output=True, text=True)
    if not os.path.exists("/etc/tts-launch.ini"):
        assert r.returncode == 0
        assert r.stdout.splitlines()[0].endswith("webui.py --port 7860 --host 0.0.0.0 "
                                                 "--model_dir ./checkpoints")


def test_inherited_hf_settings_are_in_the_effective_config(app):
    cache = app.dir / "inherited-cache"
    tl = app.dir / "t.json"
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--timeline", str(tl), "--", "true",
                env={**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 0, r.stderr
    env = json.loads(tl.read_text())["launcher"]["config"]["env"]["vars"]
    assert env["HF_HUB_CACHE"] == str(cache) and env["HF_HUB_OFFLINE"] == "1"
    assert env["HOME"] == os.environ["HOME"]


def test_every_client_setting_the_service_inherits_is_recorded(app):
    """The rules read HF_HUB_DISABLE_XET, USE_MODELSCOPE, HF_XET_CACHE from
    the recorded config: one exported in the shell is what the service sees,
    so it is recorded too (a token is not: the service still inherits it)."""
    tl = app.dir / "t2.json"
    xet = app.dir / "xet"
    env = {**os.environ, "HF_HUB_DISABLE_XET": "1", "USE_MODELSCOPE": "false",
           "HF_XET_CACHE": str(xet), "HF_TOKEN": "hf_secretsecretsecret", "MY_APP_VAR": "x"}
    r = app.run("run", "-c", str(app.ini), "--no-trace", "--timeline", str(tl), "--",
                "/bin/sh", "-c", "echo token=$HF_TOKEN", env=env)
    assert r.returncode == 0, r.stderr
    vars_ = json.loads(tl.read_text())["launcher"]["config"]["env"]["vars"]
    assert vars_["HF_HUB_DISABLE_XET"] == "1" and vars_["USE_MODELSCOPE"] == "false"
    assert vars_["HF_XET_CACHE"] == str(xet)
    assert "HF_TOKEN" not in vars_ and "MY_APP_VAR" not in vars_
    assert "hf_secretsecretsecret" not in tl.read_text()
    # doctor reads the same: [env] or the environment the service inherits
    r = app.run("doctor", "-c", str(app.ini), env=env)
    assert re.search(r"^INFO\s+HF_HUB_DISABLE_XET\s+1$", r.stdout, re.M), r.stdout
