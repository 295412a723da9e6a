"""Issue 12, config part: as root, the service runs as the owner of [app]
dir unless [service] user says otherwise; root reads only a config root
owns and no one else can write; hostile or broken config files are exit 2
before anything is killed; each verb accepts only its own options."""
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import PY, TTS, alive, free_port

NOBODY = 65534
AS_NOBODY = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]

# a webui.py that says who it runs as, then exits
WHOAMI = r'''
import os
with open("uid.txt", "w") as f:
    f.write("%d %s\n" % (os.getuid(), os.environ.get("HOME", "")))
'''

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="root's defaults are tested as root")


def tts(*args, cwd, timeout=60):
    return subprocess.run([str(TTS), *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)


@pytest.fixture
def checkout():
    """An IndexTTS2-like checkout in /tmp (traversable by nobody), and a
    root-owned directory beside it for configs."""
    top = Path(tempfile.mkdtemp(prefix="tts-cfgsec-"))
    os.chmod(top, 0o755)
    app = top / "app"
    app.mkdir()
    (app / "webui.py").write_text(WHOAMI)
    etc = top / "etc"
    etc.mkdir()
    yield top, app, etc
    # a run that should have been refused may have left its service behind
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink("/proc/%s/cwd" % pid).startswith(str(top)):
                os.kill(int(pid), 9)
        except OSError:
            pass
    shutil.rmtree(top)


def write_ini(path, app, extra=""):
    path.write_text("[app]\ndir = %s\npython = %s\nport = 0\n[trace]\nenabled = false\n"
                    "timeline =\n%s" % (app, PY, extra))
    os.chmod(path, 0o644)
    return path


def ran_as(app):
    uid, home = (app / "uid.txt").read_text().split()
    return int(uid), home


# --- root runs only what root chose ------------------------------------------

def test_checkout_owned_by_nobody_runs_as_nobody(checkout):
    top, app, etc = checkout
    for p in [app, *app.iterdir()]:
        os.chown(p, NOBODY, NOBODY)
    ini = write_ini(etc / "tts-launch.ini", app)
    r = tts("run", "-c", str(ini), cwd=top)
    assert r.returncode == 0, r.stderr
    uid, home = ran_as(app)
    assert uid == NOBODY
    assert home == pwd.getpwuid(NOBODY).pw_dir  # its own HOME, not root's
    # --print-env shows the same decision
    r = tts("run", "-c", str(ini), "--print-env", cwd=top)
    assert r.returncode == 0, r.stderr
    assert "USER=nobody" in r.stdout.splitlines()


def test_service_user_root_opts_out_with_a_warning(checkout):
    top, app, etc = checkout
    for p in [app, *app.iterdir()]:
        os.chown(p, NOBODY, NOBODY)
    os.chmod(app, 0o777)  # root without capabilities (as any [service] user) writes uid.txt
    ini = write_ini(etc / "tts-launch.ini", app, "[service]\nuser = root\n")
    r = tts("run", "-c", str(ini), cwd=top)
    assert r.returncode == 0, r.stderr
    assert ran_as(app)[0] == 0
    assert "warning: [service] user = root: the service runs as root" in r.stderr


def test_root_owned_checkout_still_runs_as_root(checkout):
    top, app, etc = checkout
    ini = write_ini(etc / "tts-launch.ini", app)
    r = tts("run", "-c", str(ini), cwd=top)
    assert r.returncode == 0, r.stderr
    assert ran_as(app)[0] == 0
    assert "warning" not in r.stderr


def test_explicit_user_wins_over_the_owner(checkout):
    top, app, etc = checkout
    os.chmod(app, 0o777)  # so that nobody can write uid.txt
    ini = write_ini(etc / "tts-launch.ini", app, "[service]\nuser = nobody\n")
    r = tts("run", "-c", str(ini), cwd=top)
    assert r.returncode == 0, r.stderr
    assert ran_as(app)[0] == NOBODY


def plant_as_nobody(path, text):
    """nobody writes path (its directory must be nobody's)."""
    subprocess.run(AS_NOBODY + ["sh", "-c", 'cat > "$1"', "sh", str(path)], input=text,
                   text=True, check=True)


def stale_instance(app):
    """A running `python3 webui.py` in the app dir: what a run that got
    this far would kill as the stale instance."""
    (app / "webui.py").write_text("import time\ntime.sleep(600)\n")
    p = subprocess.Popen([PY, "webui.py"], cwd=app, start_new_session=True)
    time.sleep(0.2)
    return p


@pytest.mark.parametrize("where", ["explicit", "cwd"])
def test_config_planted_by_nobody_is_refused(checkout, where):
    top, app, etc = checkout
    os.chown(app, NOBODY, NOBODY)
    ini = app / "tts-launch.ini"
    plant_as_nobody(ini, "[app]\ndir = %s\npython = %s\nport = 0\n[env]\nLD_PRELOAD = /tmp/x.so\n"
                    % (app, PY))
    stale = stale_instance(app)
    try:
        args = ["run", "-c", str(ini)] if where == "explicit" else ["run"]
        r = tts(*args, cwd=app)
        assert r.returncode == 2
        shown = str(ini) if where == "explicit" else "tts-launch.ini"
        assert "%s: is owned by uid 65534 (nobody), not root" % shown in r.stderr
        assert "chown root:root" in r.stderr
        assert alive(stale.pid)  # nothing killed
        assert not (app / "uid.txt").exists() and not (app / "webui.log").exists()
    finally:
        stale.kill()
        stale.wait()


def test_config_writable_by_others_is_refused(checkout):
    top, app, etc = checkout
    ini = write_ini(etc / "tts-launch.ini", app)
    os.chmod(ini, 0o666)
    r = tts("run", "-c", str(ini), cwd=top)
    assert r.returncode == 2
    assert "%s: is writable by others (mode 0666)" % ini in r.stderr
    assert "chmod go-w" in r.stderr
    assert not (app / "uid.txt").exists() and not (app / "webui.log").exists()
    os.chmod(ini, 0o664)
    r = tts("run", "-c", str(ini), cwd=top)
    assert r.returncode == 2 and "writable by its group (mode 0664)" in r.stderr


def test_link_planted_by_nobody_is_refused(checkout):
    top, app, etc = checkout
    os.chown(app, NOBODY, NOBODY)
    good = write_ini(etc / "good.ini", app)
    link = app / "tts-launch.ini"
    subprocess.run(AS_NOBODY + ["ln", "-s", str(good), str(link)], check=True)
    r = tts("run", "-c", str(link), cwd=top)
    assert r.returncode == 2
    assert "is a symbolic link owned by uid 65534, not root" in r.stderr
    assert not (app / "uid.txt").exists()


# --- hostile or broken input ---------------------------------------------------

@pytest.mark.parametrize("path,why", [
    ("/tmp", "/tmp: is a directory, not a config file"),
    ("/dev/zero", "/dev/zero: is not a regular file"),
    ("/dev/null", "/dev/null: is not a regular file"),
])
def test_config_that_is_not_a_file(checkout, path, why):
    top, app, etc = checkout
    # a hang would end in the subprocess timeout, failing the test
    r = tts("run", "-c", path, cwd=top, timeout=30)
    assert r.returncode == 2 and why in r.stderr


def test_fifo_config_does_not_hang(checkout):
    top, app, etc = checkout
    fifo = etc / "fifo.ini"
    os.mkfifo(fifo, 0o600)
    r = tts("run", "-c", str(fifo), cwd=top, timeout=30)
    assert r.returncode == 2 and "is not a regular file" in r.stderr


@pytest.mark.parametrize("body,why", [
    ("[app]\npython = \"   \"\n", "[app] python is empty"),
    ("[app]\nscript = \" \"\n", "[app] script is empty"),
    ("[app]\nport = 7860\nport = 7861\n", "[app] port is set twice (lines 4 and 5)"),
    ("[env:HF_TOKEN]\n", "[env:HF_TOKEN] is not a section"),
    ("[log]\nmax_size = 10MiBB\n", "'10MiBB' is not valid"),
    ("[app]\nargs = \"--fp16\n", "never closed"),
    ("[app]\nport = 7860\0\n", "contains a NUL byte"),
])
def test_bad_config_kills_nothing(checkout, body, why):
    top, app, etc = checkout
    ini = etc / "bad.ini"
    ini.write_text("[app]\ndir = %s\n%s" % (app, body))
    stale = stale_instance(app)
    try:
        r = tts("run", "-c", str(ini), cwd=top)
        assert r.returncode == 2, r.stderr
        assert why in r.stderr and str(ini) in r.stderr
        assert alive(stale.pid)
        assert not (app / "webui.log").exists()
    finally:
        stale.kill()
        stale.wait()


@pytest.mark.parametrize("extra,why", [
    ("script = nope.py\n", "[app] script 'nope.py': %s/nope.py: No such file or directory"),
    ("python = /nonexistent/python3\n", "[app] python '/nonexistent/python3': no executable file"),
    ("python = no-such-runner run\n", "[app] python 'no-such-runner': not found on PATH"),
    ("python = webui.py\n", "[app] python 'webui.py': not found on PATH"),
])
def test_missing_script_or_interpreter_kills_nothing(checkout, extra, why):
    top, app, etc = checkout
    ini = etc / "x.ini"
    ini.write_text("[app]\ndir = %s\n%s" % (app, extra))
    stale = stale_instance(app)
    try:
        r = tts("run", "-c", str(ini), cwd=top)
        assert r.returncode == 2, r.stderr
        assert (why % app if "%s" in why else why) in r.stderr
        assert alive(stale.pid)
        assert not (app / "webui.log").exists()
    finally:
        stale.kill()
        stale.wait()


def test_app_dir_naming_a_file(checkout):
    top, app, etc = checkout
    ini = etc / "x.ini"
    ini.write_text("[app]\ndir = %s\n" % (app / "webui.py"))
    r = tts("run", "-c", str(ini), cwd=top)
    assert r.returncode == 2
    assert "[app] dir '%s' is a file, not a directory" % (app / "webui.py") in r.stderr


def test_oversized_config(checkout):
    top, app, etc = checkout
    ini = etc / "big.ini"
    ini.write_text("[app]\n" + "; padding\n" * 120000)
    r = tts("run", "-c", str(ini), cwd=top)
    assert r.returncode == 2 and "a config file is at most 1048576 bytes" in r.stderr


# --- each verb its own options -------------------------------------------------

@pytest.mark.parametrize("argv,opt", [
    (["stop", "--format", "json"], "--format"),
    (["status", "-o", "x"], "-o/--output"),
    (["run", "-o", "x.svg"], "-o/--output"),
    (["-o", "x.svg"], "-o/--output"),
    (["doctor", "--timeline", "t.json"], "--timeline"),
    (["diagnose", "--daemon"], "--daemon"),
    (["report", "t.json", "--set", "app.port=1"], "--set"),
    (["report", "t.json", "-c", "x.ini"], "-c/--config"),
    (["stop", "--check-io"], "--check-io"),
    (["run", "--format", "json"], "--format"),
])
def test_option_of_another_verb_is_refused(app, argv, opt):
    stale = app.spawn([PY, "webui.py", "--port", "0"])
    time.sleep(0.2)
    r = app.run(*argv)
    verb = argv[0] if argv[0] in ("stop", "status", "doctor", "diagnose", "report") else "run"
    assert r.returncode == 2
    assert "option %s is not valid for '%s'" % (opt, verb) in r.stderr
    assert "Try 'tts-launch %s --help'" % verb in r.stderr
    assert alive(stale.pid)  # nothing was stopped or started
    assert not (app.dir / "webui.log").exists()
    assert not (app.dir / "x.svg").exists()


def test_dashdash_without_command(app):
    stale = app.spawn([PY, "webui.py", "--port", "0"])
    time.sleep(0.2)
    for argv in (["--"], ["run", "--"], ["run", "-c", str(app.ini), "--"]):
        r = app.run(*argv)
        assert r.returncode == 2
        assert "-- needs a COMMAND to run" in r.stderr
    assert alive(stale.pid)
    assert not (app.dir / "webui.log").exists()


def test_compare_takes_only_its_options(app):
    r = app.run("compare", "a.json", "b.json", "-c", "x.ini")
    assert r.returncode == 2 and "unknown option '-c'" in r.stderr


@pytest.mark.parametrize("verb,has,lacks", [
    ("stop", ["-c, --config FILE", "--set"], ["--format", "--daemon", "--mlock"]),
    ("status", ["-c, --config FILE"], ["--output", "--print-env"]),
    ("report", ["--format text|json|perfetto|svg|html|prom", "-o, --output FILE"],
     ["--config", "--daemon", "--check-io"]),
    ("diagnose", ["--check-io", "--format text|json"], ["--output", "--daemon"]),
    ("run", ["--mlock", "--daemon", "-- COMMAND"], ["--format", "--output", "--check-io"]),
    ("doctor", ["-c, --config FILE"], ["--format", "--timeline"]),
])
def test_each_verb_has_its_own_help(app, verb, has, lacks):
    r = app.run(verb, "--help")
    assert r.returncode == 0
    assert r.stdout.startswith("Usage:\n  tts-launch ")
    for s in has:
        assert s in r.stdout, s
    for s in lacks:
        assert s not in r.stdout, s


def test_full_help_lists_every_verb(app):
    r = app.run("--help")
    assert r.returncode == 0
    for verb in ("run", "stop", "status", "doctor", "report", "diagnose", "compare"):
        assert "\n  tts-launch %s" % verb in r.stdout or "[%s]" % verb in r.stdout
    assert "owner of [app] dir" in r.stdout
