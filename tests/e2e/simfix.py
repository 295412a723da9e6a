"""Shared helpers for the simulator tests (test_sim*.py): models, hub, client, webui.

A plain module, not a conftest: import what you need and use the fixtures.
Every process started here is killed in teardown.
"""
import fcntl
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.path.join(ROOT, "scripts", "sim")
PY = "/usr/bin/python3"  # Debian's torch/fastapi are installed for this interpreter only
MODELS = os.path.join(ROOT, "build", "sim", "small")
# Generous: for waiting only, never asserted as a duration.
WAIT = 120


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port):
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def base_env(**extra):
    """The test's environment minus any HF_* setting inherited from the caller.
    The simulator runs its classic generation (2025's IndexTTS2) unless extra
    says SIM_GENERATION=2026: what tts-launch recognizes today."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "SIM_"))}
    env["SIM_GENERATION"] = "classic"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def kill(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def need(ok, why):
    """A requirement of the test: skip without it, or fail when CI is set
    (CI runs as root on this kernel, so nothing a test needs may be missing
    there)."""
    if not ok:
        if os.environ.get("CI"):
            pytest.fail(why + " (required when CI is set)")
        pytest.skip(why)


def need_world():
    """What the 2026 world (scripts/sim/world.py) needs: root for unshare -mn
    and port 443, unshare, the built binary."""
    need(os.geteuid() == 0, "the world needs root (unshare -mn, port 443)")
    need(shutil.which("unshare"), "unshare is needed")
    need(TTS.exists(), "build/tts-launch missing: run make")


@pytest.fixture
def world_ok():
    """need_world() for every test of a module:
    `pytestmark = pytest.mark.usefixtures("world_ok")` (import it too)."""
    need_world()


@pytest.fixture(scope="session")
def models():
    """Small generated models (a few MB), built once; genmodels skips if stamped.
    Under a lock: the parallel workers share build/sim/small, and on a fresh
    clone one would read what the other is still writing."""
    os.makedirs(os.path.dirname(MODELS), exist_ok=True)
    with open(MODELS + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run([PY, os.path.join(SIM, "genmodels.py"), "--size", "small", "--out",
                        MODELS], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(MODELS, "hub", "manifest.json")) as f:
        manifest = json.load(f)["repos"]
    return {"dir": MODELS, "checkpoints": os.path.join(MODELS, "checkpoints"), "manifest": manifest}


class Hub:
    def __init__(self, root, tmp):
        port_file = os.path.join(tmp, "hub.port")
        self.log = open(os.path.join(tmp, "hub.log"), "w")
        self.proc = subprocess.Popen([PY, os.path.join(SIM, "hub.py"), "--root", root,
                                      "--port", "0", "--port-file", port_file, "--verbose"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + WAIT
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"hub did not start; see {self.log.name}")
            time.sleep(0.05)
        self.port = int(open(port_file).read())
        self.url = f"http://127.0.0.1:{self.port}"

    def control(self, **knobs):
        req = urllib.request.Request(self.url + "/_control", data=json.dumps(knobs).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.load(r)

    def state(self):
        return self.control()

    def stop(self):
        kill(self.proc)
        self.log.close()


@pytest.fixture(scope="module")
def hub_proc(models, tmp_path_factory):
    h = Hub(os.path.join(models["dir"], "hub"), str(tmp_path_factory.mktemp("hub")))
    yield h
    h.stop()


@pytest.fixture
def hub(hub_proc):
    """The module's hub with default knobs and zeroed counters."""
    hub_proc.control(reset=True)
    yield hub_proc
    hub_proc.control(reset=True)


def make_app(tmp_path, models, omit=()):
    """An app dir like IndexTTS2's: checkpoints/ with links to the generated files
    (so a cache written into checkpoints/hf_cache stays in the test's tmp dir)."""
    app = tmp_path / "app"
    ck = app / "checkpoints"
    ck.mkdir(parents=True)
    for name in os.listdir(models["checkpoints"]):
        if name not in omit and name != "hf_cache":
            os.symlink(os.path.join(models["checkpoints"], name), ck / name)
    return app


def run_client(env, repo, filename, timeout=WAIT):
    """hfclient.py in a fresh process: it reads HF_* at import, like huggingface_hub."""
    return subprocess.run([PY, os.path.join(SIM, "hfclient.py"), repo, filename], env=env,
                          capture_output=True, text=True, timeout=timeout)


class Webui:
    def __init__(self, app, env, port, *args):
        self.port = port
        self.log_path = str(app / "webui.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([PY, os.path.join(SIM, "webui.py"), "--host", "127.0.0.1",
                                      "--port", str(port), *args],
                                     cwd=app, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def output(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        kill(self.proc)
        self.log.close()


@pytest.fixture
def webuis():
    """Factory: webuis(app, env, port, *args) starts webui.py; all killed at teardown."""
    started = []

    def start(app, env, port, *args):
        w = Webui(app, env, port, *args)
        started.append(w)
        return w
    yield start
    for w in started:
        w.stop()


def sim_app(tmp, models):
    """An app dir like an IndexTTS2 checkout, running the simulator's webui.py."""
    app = make_app(Path(tmp), models)
    os.symlink(os.path.join(SIM, "webui.py"), app / "webui.py")
    return app


TTS = Path(os.environ.get("TTS_LAUNCH", os.path.join(ROOT, "build", "tts-launch")))


class Launch:
    """tts-launch run (foreground, output to a file: not a terminal) of the
    simulator, or of cmd, with a config of its own under tmp; stop() ends it
    and returns the final timeline. env: [env] beyond HF_HOME and a 5 s
    download timeout; trace: more [trace] lines."""

    def __init__(self, tmp, app, env=None, cmd=None, trace=""):
        self.tmp = Path(tmp)
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.app = Path(app)
        self.ini = self.tmp / "tts-launch.ini"
        self.timeline = self.tmp / "timeline.json"
        self.log = self.tmp / "webui.log"
        vars = {"HF_HOME": str(self.tmp / "hf_home"), "HF_HUB_DOWNLOAD_TIMEOUT": "5"}
        vars.update(env or {})
        self.ini.write_text(
            "[app]\ndir = %s\npython = %s\nhost = 127.0.0.1\nport = %d\n"
            "[env]\n%s\n[service]\npidfile = %s\nstop_grace = 15s\n"
            "[log]\nfile = %s\n[trace]\nsettle = 0.3s\ntimeline = %s\n%s\n"
            % (self.app, PY, 0 if cmd else free_port(),
               "\n".join("%s = %s" % kv for kv in vars.items()), self.tmp / "pid", self.log,
               self.timeline, trace))
        argv = [str(TTS), "run", "-c", str(self.ini), "--foreground"]
        if cmd:
            argv += ["--", *cmd]
        self.out = open(self.tmp / "run.out", "w")
        self.proc = subprocess.Popen(argv, cwd=self.tmp, env=base_env(), stdout=self.out,
                                     stderr=subprocess.STDOUT)

    def output(self):
        if not self.out.closed:
            self.out.flush()
        return (self.tmp / "run.out").read_text()

    def wait(self, pred=None):
        """Until pred() (default: the ready+settle timeline exists) or exit."""
        pred = pred or self.timeline.exists
        deadline = time.monotonic() + WAIT
        while not pred() and self.proc.poll() is None:
            assert time.monotonic() < deadline, self.output()
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            subprocess.run([str(TTS), "stop", "-c", str(self.ini)], capture_output=True,
                           timeout=WAIT)
        self.proc.wait(WAIT)
        self.out.close()
        self.rc = self.proc.returncode
        return json.loads(self.timeline.read_text())


class HubLaunch(Launch):
    """Launch against the hub at endpoint (HF_ENDPOINT), with a short ETag
    timeout (HF_HUB_ETAG_TIMEOUT, 1 s by default: a hub that does not answer
    costs little); env: more [env]; service: more [service] lines."""

    def __init__(self, tmp, app, env=None, endpoint=None, cmd=None, service="",
                 etag_timeout=1):
        vars = {"HF_HUB_ETAG_TIMEOUT": str(etag_timeout)}
        if endpoint:
            vars["HF_ENDPOINT"] = endpoint
        vars.update(env or {})
        super().__init__(tmp, app, vars, cmd=cmd,
                         trace="[service]\n%s\n" % service if service else "")


def finding(tl, fid):
    """The first finding fid of timeline tl (fails, listing them, if none)."""
    hits = [f for f in tl["findings"] if f["id"] == fid]
    assert hits, "no %s finding in %s" % (fid, json.dumps(tl["findings"], indent=1))
    return hits[0]


# -- the 2026 world (scripts/sim/world.py) ------------------------------------------------
WORLD = os.path.join(SIM, "world.py")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
# The world's defaults are the real timeouts; tests run them 10 times faster.
TIME_SCALE = "0.1"


def world_env(**extra):
    """base_env for the 2026 generation, the time scale of the tests."""
    return base_env(**{"SIM_GENERATION": "2026", "SIM_TIME_SCALE": TIME_SCALE, **extra})


def in_world(tmp, cmd, *world_args, env=None, timeout=WAIT, cwd=None):
    """Run cmd inside a private world (its dir: tmp/world); CompletedProcess
    (text output). world_args: --down NAME, --unreachable NAME, --knobs N=JSON..."""
    Path(tmp).mkdir(parents=True, exist_ok=True)
    return subprocess.run([PY, WORLD, "--dir", str(Path(tmp) / "world"), "--models", MODELS,
                           *world_args, "--", *cmd], env=env or world_env(),
                          cwd=cwd or tmp, capture_output=True, text=True, timeout=timeout)


class WorldLaunch:
    """tts-launch run (foreground) of the simulator's webui.py in a private world,
    until ready + settle, then stopped: like Launch, in the 2026 world. env: more
    [env] lines beyond HF_HOME, SIM_GENERATION (2026) and SIM_TIME_SCALE;
    world_args: world.py's fault options. After it: .rc, .timeline (parsed),
    .output(), .world (the world's dir: server logs, dns.log). stop_grace is
    15 s: a healthy webui.py exits at once on SIGTERM, but on a loaded 2-core
    machine 3 s was seen to run out (the service SIGKILLed, exit 137)."""

    def __init__(self, tmp, app, env=None, world_args=(), trace=""):
        self.tmp = Path(tmp)
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.world = self.tmp / "world"
        tl = self.tmp / "timeline.json"
        vars = {"HF_HOME": str(self.tmp / "hf_home"), "SIM_GENERATION": "2026",
                "SIM_TIME_SCALE": TIME_SCALE}
        vars.update(env or {})
        ini = self.tmp / "tts-launch.ini"
        ini.write_text(
            "[app]\ndir = %s\npython = %s\nhost = 127.0.0.1\nport = 7860\n"
            "[env]\n%s\n[service]\npidfile = %s\nstop_grace = 15s\n"
            "[log]\nfile = %s\n[trace]\nsettle = 0.3s\ntimeline = %s\n%s\n"
            % (app, PY, "\n".join("%s = %s" % kv for kv in vars.items()), self.tmp / "pid",
               self.tmp / "webui.log", tl, trace))
        self.proc = in_world(self.tmp, [PY, os.path.join(FIXTURES, "tts_launch_once.py"),
                                        str(TTS), str(ini), str(tl), str(self.tmp / "run.out")],
                             *world_args, env=base_env(), timeout=WAIT * 3)
        self.rc = self.proc.returncode
        self.timeline = json.loads(tl.read_text()) if tl.exists() else None

    def output(self):
        return (self.tmp / "run.out").read_text() + self.proc.stderr
