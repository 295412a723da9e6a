"""Secrets (issue 12, "Secrets and trust"): values of secret-looking
variables and URL userinfo never reach what tts-launch writes or prints (the
timeline, the log, every report format, --print-env, /metrics, diagnose),
whether they came from [env], --set, the inherited environment, [app] args,
the arguments after `--` or the argv of a process the tracer saw exec; the
service still gets the real values."""
import json
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

from conftest import PY, TTS, free_port, port_open, wait_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "timelines"
FORMATS = ["text", "json", "perfetto", "svg", "html", "prom"]

# The service: runs a child with a secret argument (the tracer sees it exec),
# dumps its environment and argv, listens on --port (ready), and exits once
# the test creates "go". Nothing it prints holds a secret.
APP = r'''
import json, os, socket, subprocess, sys, time
here = os.path.dirname(os.path.abspath(__file__))
subprocess.run(["/bin/sh", "-c", "true", "sh", "--api-key", "childkey_secret_31"])
# the tracer keeps 127 bytes of argv: cut inside the userinfo, before its '@'
subprocess.run(["/bin/sh", "-c", "true", "p" * 92, "https://cutuser:cutpw@127.0.0.1:3/"])
port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0
with open(os.path.join(here, "service-env.tmp"), "w") as f:
    json.dump({"env": dict(os.environ), "argv": sys.argv}, f)
os.rename(os.path.join(here, "service-env.tmp"), os.path.join(here, "service-env.json"))
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen()
print("service listening", flush=True)
while not os.path.exists(os.path.join(here, "go")):
    time.sleep(0.05)
'''

# Written by the test itself (config, the service and what it dumps): the
# secrets are there by design. Every other file is tts-launch's.
OURS = {"app.py", "tts-launch.ini", "service-env.json"}


def assert_clean(what, text, secrets):
    for s in secrets:
        assert s not in text, "%s shows the secret %r" % (what, s)


def scan_dir(d, secrets):
    """Every file tts-launch wrote under d."""
    n = 0
    for p in sorted(Path(d).rglob("*")):
        if p.is_file() and p.name not in OURS:
            assert_clean(str(p), p.read_text(errors="replace"), secrets)
            n += 1
    return n


def reports(timeline, out_dir, secrets):
    """report in every format, diagnose in both: stdout, stderr and -o files."""
    for fmt in FORMATS:
        out = Path(out_dir) / ("report." + fmt)
        r = subprocess.run([str(TTS), "report", str(timeline), "--format", fmt],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip(), fmt
        assert_clean("report --format " + fmt, r.stdout + r.stderr, secrets)
        r = subprocess.run([str(TTS), "report", str(timeline), "--format", fmt, "-o", str(out)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert_clean(str(out), out.read_text(), secrets)
    for fmt in ("text", "json"):
        r = subprocess.run([str(TTS), "diagnose", str(timeline), "--format", fmt],
                           capture_output=True, text=True, timeout=60)
        # 0 clean, 1 warnings, 2 errors: findings are printed either way
        assert r.returncode in (0, 1, 2) and r.stdout.strip(), r.stderr
        assert_clean("diagnose --format " + fmt, r.stdout + r.stderr, secrets)
        if fmt == "json":
            json.loads(r.stdout)


def env_of(cmd_env, **extra):
    e = dict(cmd_env)
    e.update(extra)
    return e


def test_secrets_never_written_service_gets_them(tmp_path):
    port, mport = free_port(), free_port()
    (tmp_path / "app.py").write_text(APP)
    ini = tmp_path / "tts-launch.ini"
    ini.write_text(
        "[app]\ndir = %s\npython = %s\nscript = app.py\nport = %d\nhost = 127.0.0.1\n"
        "args = --token tokabc_secret\n"
        "[env]\nHF_TOKEN = hf_secretvalue123\nHF_ENDPOINT = https://user:pw@127.0.0.1:1\n"
        "KEYBOARD_LAYOUT = us\n"
        "[trace]\nsettle = 0.2s\n[metrics]\nlisten = 127.0.0.1:%d\n" % (tmp_path, PY, port, mport))
    secrets = ["hf_secretvalue123", "user:pw", "setkey_secret_42", "inherited_secret_77",
               "tokabc_secret", "childkey_secret_31", "cutuser"]
    env = env_of(os.environ, OPENAI_API_KEY="inherited_secret_77")
    sets = ["--set", "env.MY_API_KEY=setkey_secret_42"]
    timeline = tmp_path / "timeline.json"

    # --print-env: what the service would get, redacted
    r = subprocess.run([str(TTS), "run", "-c", str(ini), *sets, "--print-env"], env=env,
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert_clean("--print-env", r.stdout + r.stderr, secrets)
    lines = r.stdout.splitlines()
    for line in ("HF_TOKEN=***", "MY_API_KEY=***", "OPENAI_API_KEY=***",
                 "HF_ENDPOINT=https://***@127.0.0.1:1", "KEYBOARD_LAYOUT=us"):
        assert line in lines, r.stdout
    assert lines[0].endswith(" --token ***"), lines[0]
    # --print-env=secrets: asked for, shown as the service gets them
    r = subprocess.run([str(TTS), "run", "-c", str(ini), *sets, "--print-env=secrets"], env=env,
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for line in ("HF_TOKEN=hf_secretvalue123", "MY_API_KEY=setkey_secret_42",
                 "HF_ENDPOINT=https://user:pw@127.0.0.1:1"):
        assert line in lines, r.stdout
    assert lines[0].endswith(" --token tokabc_secret"), lines[0]
    r = subprocess.run([str(TTS), "run", "-c", str(ini), "--print-env=all"], env=env,
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and "expected secrets" in r.stderr, r.stderr

    p = subprocess.Popen([str(TTS), "run", "-c", str(ini), *sets, "--timeline", str(timeline)],
                         env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        wait_for(lambda: (tmp_path / "service-env.json").exists() and port_open(port),
                 what="service listening")
        # /metrics while it runs
        wait_for(lambda: port_open(mport), what="/metrics listening")
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport, timeout=10) as m:
            body = m.read().decode()
        assert "indextts2_running 1" in body
        assert_clean("/metrics", body, secrets)
        # status prints the service's command line: redacted too
        st = subprocess.run([str(TTS), "status", "-c", str(ini)], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
        assert st.returncode == 0 and "running: pid" in st.stdout, st.stdout + st.stderr
        assert "--token ***" in st.stdout, st.stdout
        assert_clean("status", st.stdout + st.stderr, secrets)
        (tmp_path / "go").touch()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, err
    assert_clean("tts-launch's terminal output", out + err, secrets)

    # the service got every real value
    got = json.loads((tmp_path / "service-env.json").read_text())
    assert got["env"]["HF_TOKEN"] == "hf_secretvalue123"
    assert got["env"]["HF_ENDPOINT"] == "https://user:pw@127.0.0.1:1"
    assert got["env"]["MY_API_KEY"] == "setkey_secret_42"
    assert got["env"]["OPENAI_API_KEY"] == "inherited_secret_77"
    assert got["argv"][-2:] == ["--token", "tokabc_secret"]

    # every file tts-launch wrote: the timeline, the log (its own lines)
    assert (tmp_path / "webui.log").exists()
    assert "service listening" in (tmp_path / "webui.log").read_text()
    assert scan_dir(tmp_path, secrets) >= 2
    t = json.loads(timeline.read_text())
    vars_ = t["launcher"]["config"]["env"]["vars"]
    assert vars_["HF_TOKEN"] == "***" and vars_["MY_API_KEY"] == "***"
    assert vars_["HF_ENDPOINT"] == "https://***@127.0.0.1:1"
    assert vars_["KEYBOARD_LAYOUT"] == "us"  # not a secret: still readable
    assert t["launcher"]["config"]["app"]["args"] == "--token ***"
    assert "env.MY_API_KEY=***" in t["launcher"]["argv"]
    assert t["process"]["command"][-2:] == ["--token", "***"]
    (tmp_path / "reports").mkdir()
    reports(timeline, tmp_path / "reports", secrets)

    # the argv of processes the tracer saw exec
    if not t["tracing"]["enabled"]:
        why = "BPF tracing unavailable: %s" % t["tracing"]["reason"]
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    child = [q for q in t["processes"] if "--api-key" in (q.get("argv") or [])]
    assert child, [q.get("argv") for q in t["processes"]]
    argv = child[0]["argv"]
    assert argv[argv.index("--api-key") + 1] == "***"
    cut = [q for q in t["processes"] if "p" * 92 in (q.get("argv") or [])]
    assert cut and cut[0]["argv"][-1] == "https://***", [q.get("argv") for q in t["processes"]]
    root = [q for q in t["processes"] if "app.py" in (q.get("argv") or [])]
    assert root and root[0]["argv"][-2:] == ["--token", "***"]


def test_command_after_dashdash_and_inherited_endpoint(tmp_path):
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "go").touch()  # exits right after listening
    secrets = ["xyz_secret_9", "dashdash_tok_5", "inhpw", "childkey_secret_31", "cutuser"]
    env = env_of(os.environ, HF_ENDPOINT="https://inhuser:inhpw@127.0.0.1:2")
    timeline = tmp_path / "timeline.json"
    cmd = ["--", PY, str(tmp_path / "app.py"), "--hf-token=xyz_secret_9", "--token",
           "dashdash_tok_5"]
    base = [str(TTS), "run", "--no-trace", "--set", "app.dir=%s" % tmp_path,
            "--timeline", str(timeline)]

    r = subprocess.run(base + ["--print-env"] + cmd, env=env, capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert_clean("--print-env", r.stdout + r.stderr, secrets)
    assert "HF_ENDPOINT=https://***@127.0.0.1:2" in r.stdout.splitlines()
    assert "--hf-token=*** --token ***" in r.stdout.splitlines()[0]

    r = subprocess.run(base + cmd, env=env, capture_output=True, text=True, timeout=60,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert_clean("tts-launch's terminal output", r.stdout + r.stderr, secrets)
    got = json.loads((tmp_path / "service-env.json").read_text())
    assert got["env"]["HF_ENDPOINT"] == "https://inhuser:inhpw@127.0.0.1:2"
    assert got["argv"][1:] == ["--hf-token=xyz_secret_9", "--token", "dashdash_tok_5"]

    t = json.loads(timeline.read_text())
    assert t["launcher"]["config"]["env"]["vars"]["HF_ENDPOINT"] == "https://***@127.0.0.1:2"
    assert t["launcher"]["config"]["command"][-3:] == ["--hf-token=***", "--token", "***"]
    assert t["process"]["command"][-3:] == ["--hf-token=***", "--token", "***"]
    assert t["launcher"]["argv"][-3:] == ["--hf-token=***", "--token", "***"]
    assert scan_dir(tmp_path, secrets) >= 2
    (tmp_path / "reports").mkdir()
    reports(timeline, tmp_path / "reports", secrets)


def test_report_of_an_older_timeline_is_redacted(tmp_path):
    """A timeline written before redaction (or by another tool): every
    report format and diagnose redact it when they load it."""
    t = json.loads((FIXTURES / "cold.json").read_text())
    secrets = ["hf_oldsecret_1", "olduser:oldpw", "oldkey_2", "oldtok_3", "oldchild_4"]
    t["launcher"]["argv"] += ["--set", "env.MY_API_KEY=oldkey_2"]
    cfg = t["launcher"]["config"]
    cfg.setdefault("env", {}).setdefault("vars", {}).update(
        {"HF_TOKEN": "hf_oldsecret_1", "HF_ENDPOINT": "https://olduser:oldpw@127.0.0.1:1"})
    cfg.setdefault("app", {})["args"] = "--token oldtok_3"
    t["process"]["command"] = (t["process"].get("command") or ["python3"]) + ["--token",
                                                                            "oldtok_3"]
    t["processes"].append({"pid": 999999, "ppid": 1, "command": "/bin/sh",
                           "argv": ["sh", "--hf-token=oldchild_4"], "fork_ms": None,
                           "exec_ms": None, "exit_ms": None, "exit": None})
    old = tmp_path / "old.json"
    old.write_text(json.dumps(t))
    for s in secrets:
        assert s in old.read_text()
    reports(old, tmp_path, secrets)
    r = subprocess.run([str(TTS), "report", str(old), "--format", "json"], capture_output=True,
                       text=True, timeout=60)
    j = json.loads(r.stdout)
    assert j["launcher"]["config"]["env"]["vars"]["HF_ENDPOINT"] == "https://***@127.0.0.1:1"
    assert j["processes"][-1]["argv"] == ["sh", "--hf-token=***"]


def test_own_log_lines_redacted(tmp_path):
    """tts-launch's own lines (here: the exec failure naming the command) are
    redacted on the terminal and in the log."""
    r = subprocess.run([str(TTS), "run", "--no-trace", "--set", "app.dir=%s" % tmp_path,
                        "--timeline", str(tmp_path / "t.json"), "--",
                        "https://cmduser:cmdpw@127.0.0.1/x"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 127, r.stderr
    log = (tmp_path / "webui.log").read_text()
    assert "tts-launch: error: https://***@127.0.0.1/x: cannot execute" in log
    assert "https://***@127.0.0.1/x: cannot execute" in r.stderr
    assert_clean("the terminal", r.stdout + r.stderr, ["cmduser", "cmdpw"])
    assert scan_dir(tmp_path, ["cmduser", "cmdpw"]) >= 2


def test_a_config_error_quoting_a_value_is_redacted(tmp_path):
    r = subprocess.run([str(TTS), "run", "--set", "app.port=https://user:pw_secret_9@hub", "--",
                        "/bin/true"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2
    assert "https://***@hub" in r.stderr and "pw_secret_9" not in r.stderr, r.stderr
