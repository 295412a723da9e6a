"""mlock shim tests (hooks/mlock_shim.c, launcher/mlock.c, docs/mlock.md):
tts-launch --mlock injects the shim into a small service whose behaviour is
exactly known (it maps a *.safetensors file, then listens), and the
service's /proc/PID/status, its children and the timeline must show the
outcome. Untraced (--no-trace) except where tracing is the point. Root."""
import hashlib
import json
import os
import pwd
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from conftest import PY, App, alive, port_open, wait_for
from simfix import Launch, hub, hub_proc, models, sim_app  # noqa: F401

MiB = 1024 * 1024
MODEL_MB = 16  # above the 8 MiB RLIMIT_MEMLOCK of an unprivileged process

# A stand-in for webui.py: maps model.safetensors (untouched: not resident),
# then binds --port (the listen trigger), optionally after dropping
# CAP_IPC_LOCK and lowering RLIMIT_MEMLOCK, and optionally runs a child
# that records its environment, maps and descriptors.
SERVICE = r'''
import argparse, ctypes, mmap, os, resource, socket, subprocess, sys, time
p = argparse.ArgumentParser()
p.add_argument("--port", type=int, default=7860)
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--model_dir", default=".")
p.add_argument("--drop-ipc-lock", action="store_true")
p.add_argument("--memlock", type=int, default=-1)
p.add_argument("--child", action="store_true")
p.add_argument("--pieces", type=int, default=0)
p.add_argument("--weights", action="append")  # under model_dir; default model.safetensors
a = p.parse_args()
if a.drop_ipc_lock:
    # capget/capset (capabilities(7), version 3): clear CAP_IPC_LOCK (14)
    class Hdr(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
    class Data(ctypes.Structure):
        _fields_ = [("eff", ctypes.c_uint32), ("prm", ctypes.c_uint32), ("inh", ctypes.c_uint32)]
    libc = ctypes.CDLL(None, use_errno=True)
    h, d = Hdr(0x20080522, 0), (Data * 2)()
    assert libc.capget(ctypes.byref(h), d) == 0
    d[0].eff &= ~(1 << 14); d[0].prm &= ~(1 << 14); d[0].inh &= ~(1 << 14)
    assert libc.capset(ctypes.byref(h), d) == 0, ctypes.get_errno()
if a.memlock >= 0:
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (a.memlock, resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]))
f = open(os.path.join(a.model_dir, "model.safetensors"), "rb")
others = [mmap.mmap(g.fileno(), 0, prot=mmap.PROT_READ)
          for g in (open(os.path.join(a.model_dir, w), "rb") for w in a.weights or [])]
if a.pieces:
    # one page per mapping, pages taken again in turn: offsets never follow
    # on from the neighbour's, so the kernel cannot merge them
    n = os.fstat(f.fileno()).st_size // mmap.PAGESIZE
    weights = [mmap.mmap(f.fileno(), mmap.PAGESIZE, offset=(i % n) * mmap.PAGESIZE,
                         prot=mmap.PROT_READ) for i in range(a.pieces)]
else:
    weights = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
with open("service.pid.tmp", "w") as out:
    out.write(str(os.getpid()))
os.rename("service.pid.tmp", "service.pid")
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", a.port))
s.listen()
open("listened", "w").close()  # listen() has returned
print("Running on local URL: http://127.0.0.1:%d" % a.port, flush=True)
if a.child:
    subprocess.run(["/bin/sh", "-c", "tr '\\0' '\\n' < /proc/self/environ > child.env.tmp; "
                    "cat /proc/self/maps > child.maps; ls -l /proc/self/fd/ > child.fds; "
                    "mv child.env.tmp child.env"])
while True:
    time.sleep(3600)
'''


def status(pid):
    """/proc/PID/status as a dict of strings."""
    with open("/proc/%d/status" % pid) as f:
        return dict(l.rstrip("\n").split(":\t", 1) for l in f if ":\t" in l)


def vmlck(pid):
    return int(status(pid)["VmLck"].split()[0]) * 1024


def locked_in(pid, name):
    """Locked bytes of the mappings of a file named name (smaps 'Locked:')."""
    total, cur = 0, False
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
                cur = len(head) >= 6 and head[-1].endswith("/" + name)
            elif cur and head[0] == "Locked:":
                total += int(head[1]) * 1024
    return total


class Svc:
    """tts-launch running the stand-in service in an app dir."""

    def __init__(self, app, *args, mlock="all", extra="", service_args=(), user=None,
                 trace=False, service=SERVICE):
        self.app = app
        (app.dir / "webui.py").write_text(service)
        (app.dir / "checkpoints").mkdir(exist_ok=True)
        with open(app.dir / "checkpoints" / "model.safetensors", "wb") as f:
            f.truncate(MODEL_MB * MiB)  # sparse: pages come in when locked
        app.write_ini("[mlock]\nmode = %s\n%s" % (mlock, extra) +
                      ("[service]\nuser = %s\n" % user if user else "") +
                      "[app]\nargs = %s\n" % " ".join(service_args))
        if user:
            os.chmod(app.dir, 0o777)
        self.timeline = app.dir / "t.json"
        self.log = app.dir / "webui.log"
        self.proc = app.popen("run", "-c", str(app.ini), *([] if trace else ["--no-trace"]),
                              "--timeline", str(self.timeline), *args)
        self.pid = int(wait_for(lambda: self.running() and _read(app.dir / "service.pid"),
                                what="service pid"))
        wait_for(lambda: port_open(app.port), what="port %d" % app.port)

    def running(self):
        if self.proc.poll() is not None:
            raise AssertionError("tts-launch exited %s: %s" % (self.proc.returncode, _read(self.log)))
        return True

    def wait_line(self, text):
        return wait_for(lambda: text in _read(self.log) and _read(self.log),
                        what="%r in the log" % text)

    def stop(self):
        """Stop tts-launch and the service; the timeline as written at exit."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.communicate(timeout=30)
        return json.loads(self.timeline.read_text())


def _read(path):
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def test_all_locks_at_listen(app):
    s = Svc(app, mlock="all")
    s.wait_line("tts-launch: mlock (all, at listen): locked")
    # mlockall(MCL_CURRENT): the model mapping too, beyond what was resident
    assert vmlck(s.pid) >= MODEL_MB * MiB
    assert locked_in(s.pid, "model.safetensors") == MODEL_MB * MiB
    assert alive(s.pid)
    tl = s.stop()
    m = tl["memory"]["mlock"]
    assert m["mode"] == "all" and m["trigger"] == "listen" and m["status"] == "locked"
    assert m["loaded"] is True and m["errno"] is None and m["fix"] is None
    assert m["bytes_locked"] >= MODEL_MB * MiB and m["bytes_to_lock"] > 0
    assert [e["event"] for e in m["events"]] == ["armed", "locked"]
    assert any(p["name"] == "mlock" for p in tl["phases"])
    assert tl["launcher"]["config"]["mlock"]["mode"] == "all"
    # the outcome said once, live
    out = _read(s.log)
    assert out.count("tts-launch: mlock (all, at listen): locked") == 1, out


def test_models_locks_only_model_mappings(app):
    s = Svc(app, mlock="models")
    line = s.wait_line("tts-launch: mlock (models, at listen): locked")
    assert "(1 model mapping)" in line
    assert locked_in(s.pid, "model.safetensors") == MODEL_MB * MiB
    # nothing but the model: VmLck is exactly its mapping
    assert vmlck(s.pid) == MODEL_MB * MiB
    m = s.stop()["memory"]["mlock"]
    assert m["status"] == "locked" and m["mappings"] == 1
    assert m["bytes_to_lock"] == MODEL_MB * MiB


def test_models_locks_every_mapping_however_many(app):
    pieces = 5000  # more than any fixed table would hold
    s = Svc(app, mlock="models", service_args=["--pieces", str(pieces)])
    line = s.wait_line("tts-launch: mlock (models, at listen): locked")
    assert "(%d model mappings)" % pieces in line
    assert vmlck(s.pid) == pieces * 4096  # VmLck: the size of every locked mapping
    m = s.stop()["memory"]["mlock"]
    assert m["mappings"] == pieces and m["bytes_to_lock"] == pieces * 4096


def test_models_patterns_configurable(app):
    s = Svc(app, mlock="models", extra="patterns = *.gguf\n")
    s.wait_line("tts-launch: mlock (models, at listen): locked")
    assert vmlck(s.pid) == 0  # *.safetensors no longer matches
    assert s.stop()["memory"]["mlock"]["mappings"] == 0


def hub_cache(app, files, repo="models--facebook--w2v-bert-2.0", commit="c0ffee" * 6 + "c0ff"):
    """Files in a hub cache in checkpoints/hf_cache, laid out as huggingface_hub
    writes it: each file's content once, REPO/blobs/HASH (no extension), named
    by a relative link REPO/snapshots/COMMIT/NAME -> ../../blobs/HASH (one more
    ../ per subfolder). files: {name: size}; returns {name: (link under
    checkpoints/, blob's file name)}."""
    root = app.dir / "checkpoints" / "hf_cache" / repo
    out = {}
    for name, size in files.items():
        h = hashlib.sha256(("%s %s" % (repo, name)).encode()).hexdigest()
        blob = root / "blobs" / h
        blob.parent.mkdir(parents=True, exist_ok=True)
        with open(blob, "wb") as f:
            f.truncate(size)  # sparse: locking brings the pages in
        link = root / "snapshots" / commit / name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
        out[name] = (str(link.relative_to(app.dir / "checkpoints")), h)
    return out


def test_models_locks_hub_cache_blobs_by_their_snapshot_names(app):
    # The service opens snapshots/COMMIT/NAME; the kernel maps blobs/HASH,
    # which has no extension: the shim matches the snapshot's names.
    files = hub_cache(app, {"model.safetensors": 3 * MiB, "sub/dir/model.safetensors": 2 * MiB,
                            "tokenizer.json": 1 * MiB})
    weights = [a for n in files for a in ("--weights", files[n][0])]
    s = Svc(app, mlock="models", service_args=weights)
    line = s.wait_line("tts-launch: mlock (models, at listen): locked")
    assert "(3 model mappings)" in line  # checkpoints/model.safetensors and two blobs
    assert locked_in(s.pid, files["model.safetensors"][1]) == 3 * MiB
    assert locked_in(s.pid, files["sub/dir/model.safetensors"][1]) == 2 * MiB
    assert locked_in(s.pid, files["tokenizer.json"][1]) == 0  # not a model file
    assert vmlck(s.pid) == (MODEL_MB + 3 + 2) * MiB
    m = s.stop()["memory"]["mlock"]
    assert m["status"] == "locked" and m["mappings"] == 3
    assert m["bytes_to_lock"] == (MODEL_MB + 3 + 2) * MiB


def test_hub_cache_blob_patterns_with_a_slash_match_the_snapshot_path(app):
    files = hub_cache(app, {"model.safetensors": 3 * MiB}, repo="models--amphion--MaskGCT")
    s = Svc(app, mlock="models", extra="patterns = */models--amphion--MaskGCT/snapshots/*\n",
            service_args=["--weights", files["model.safetensors"][0]])
    s.wait_line("tts-launch: mlock (models, at listen): locked")
    assert locked_in(s.pid, files["model.safetensors"][1]) == 3 * MiB
    assert vmlck(s.pid) == 3 * MiB  # checkpoints/model.safetensors is not in it
    s.stop()


def test_default_patterns_are_the_model_suffixes(app):
    # [mlock] patterns defaults to classify.c's model-file suffixes, not a
    # narrower list: an .onnx, a .gguf and a sentencepiece .model are locked
    (app.dir / "checkpoints").mkdir()
    for name in ("w.onnx", "w.gguf", "bpe.model"):
        with open(app.dir / "checkpoints" / name, "wb") as f:
            f.truncate(MiB)
    s = Svc(app, mlock="models", service_args=[a for n in ("w.onnx", "w.gguf", "bpe.model")
                                               for a in ("--weights", n)])
    s.wait_line("tts-launch: mlock (models, at listen): locked")
    for name in ("w.onnx", "w.gguf", "bpe.model"):
        assert locked_in(s.pid, name) == MiB, name
    assert vmlck(s.pid) == (MODEL_MB + 3) * MiB
    tl = s.stop()
    assert tl["memory"]["mlock"]["mappings"] == 4


def test_onfault_locks_only_what_is_resident(app):
    s = Svc(app, mlock="onfault")
    s.wait_line("tts-launch: mlock (onfault, at listen): locked")
    # MCL_ONFAULT: the untouched model pages are not faulted in
    assert locked_in(s.pid, "model.safetensors") == 0
    assert vmlck(s.pid) > 0  # VmLck counts the whole locked areas
    s.stop()


def test_signal_trigger(app):
    s = Svc(app, mlock="all", extra="trigger = signal\n")
    wait_for(lambda: json.loads(_read(s.timeline) or "{}"), what="timeline at ready")
    assert vmlck(s.pid) == 0  # armed, not triggered
    os.kill(s.pid, signal.SIGUSR2)
    s.wait_line("tts-launch: mlock (all, at signal): locked")
    assert vmlck(s.pid) >= MODEL_MB * MiB
    assert alive(s.pid)  # SIGUSR2's default action would have killed it
    assert s.stop()["memory"]["mlock"]["trigger"] == "signal"


# IndexTTS2's layout: webui.py builds indextts.infer_v2.IndexTTS2 at module
# level (the model maps its weights in __init__), then listens.
INFER_V2 = r'''
import mmap, os
class IndexTTS2:
    def __init__(self, model_dir):
        self.f = open(os.path.join(model_dir, "model.safetensors"), "rb")
        self.weights = mmap.mmap(self.f.fileno(), 0, prot=mmap.PROT_READ)
    def infer(self):
        return len(self.weights)
'''

CALLABLE_SERVICE = r'''
import argparse, os, socket, time
from indextts.infer_v2 import IndexTTS2
p = argparse.ArgumentParser()
p.add_argument("--port", type=int, default=7860)
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--model_dir", default=".")
a = p.parse_args()
tts = IndexTTS2(a.model_dir)
with open("service.pid.tmp", "w") as out:
    out.write(str(os.getpid()))
os.rename("service.pid.tmp", "service.pid")
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", a.port))
s.listen()
while True:
    time.sleep(3600)
'''


def callable_app(app):
    pkg = app.dir / "indextts"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "infer_v2.py").write_text(INFER_V2)


def test_callable_trigger(app):
    """The default callable, IndexTTS2.__init__ of indextts.infer_v2: the lock
    follows its return (the shim's profile function in the interpreter)."""
    callable_app(app)
    s = Svc(app, mlock="models", extra="trigger = callable\n", service=CALLABLE_SERVICE)
    s.wait_line("tts-launch: mlock (models, at callable): locked")
    assert locked_in(s.pid, "model.safetensors") == MODEL_MB * MiB
    m = s.stop()["memory"]["mlock"]
    assert m["trigger"] == "callable" and m["status"] == "locked" and m["mappings"] == 1


def test_callable_trigger_waits_for_the_named_callable(app):
    callable_app(app)
    s = Svc(app, mlock="models", service=CALLABLE_SERVICE,
            extra="trigger = callable\ncallable = indextts.infer_v2:IndexTTS2.infer\n")
    wait_for(lambda: json.loads(_read(s.timeline) or "{}"), what="timeline at ready")
    assert vmlck(s.pid) == 0  # __init__ returned, infer never ran: nothing locked
    m = s.stop()["memory"]["mlock"]
    assert m["trigger"] == "callable" and m["status"] != "locked"


def test_delay_trigger(app):
    s = Svc(app, mlock="models", extra="trigger = delay\ndelay = 300ms\n")
    s.wait_line("tts-launch: mlock (models, at delay): locked")
    assert vmlck(s.pid) == MODEL_MB * MiB
    s.stop()


def test_blocking_lock_done_when_listen_returns(app):
    s = Svc(app, mlock="models", extra="blocking = true\n")
    wait_for(lambda: (app.dir / "listened").exists(), what="listen() to return")
    assert vmlck(s.pid) == MODEL_MB * MiB  # locked inside listen()
    s.wait_line("tts-launch: mlock (models, at listen): locked")
    s.stop()


def test_guard_refuses_above_the_limit(app):
    s = Svc(app, mlock="all", extra="limit = 1M\n")
    line = s.wait_line("tts-launch: mlock (all, at listen) refused")
    assert "above the limit of 1.0 MiB" in line and "fix: raise [mlock] limit" in line
    assert vmlck(s.pid) == 0
    assert alive(s.pid) and port_open(app.port)
    m = s.stop()["memory"]["mlock"]
    assert m["status"] == "refused" and m["bytes_to_lock"] > MiB and m["bytes_locked"] == 0
    assert "limit" in m["fix"]


@pytest.mark.parametrize("args,err,fix", [
    (["--drop-ipc-lock", "--memlock", "0"], "EPERM", "CAP_IPC_LOCK"),
    (["--drop-ipc-lock"], "ENOMEM", "RLIMIT_MEMLOCK (8.0 MiB)"),
])
def test_failed_lock_is_reported_and_service_lives(app, args, err, fix):
    s = Svc(app, mlock="all", service_args=args)
    line = s.wait_line("tts-launch: mlock (all, at listen) failed")
    assert "failed: %s:" % err in line and fix in line and "the service keeps running" in line
    assert vmlck(s.pid) == 0
    assert alive(s.pid) and port_open(app.port)
    m = s.stop()["memory"]["mlock"]
    assert m["status"] == "failed" and m["errno"] == err and fix in m["fix"]
    assert m["events"][-1]["cap_ipc_lock"] is False


@pytest.fixture
def open_app():
    """An app dir nobody can reach (pytest's own tmp dirs are 0700)."""
    d = Path(tempfile.mkdtemp(prefix="tts-mlock-"))
    d.chmod(0o755)
    a = App(d)
    yield a
    a.cleanup()
    shutil.rmtree(d, ignore_errors=True)


def test_unprivileged_service_locks_with_only_cap_ipc_lock(open_app):
    app = open_app
    s = Svc(app, mlock="all", user="nobody")
    s.wait_line("tts-launch: mlock (all, at listen): locked")
    st = status(s.pid)
    assert int(st["Uid"].split()[0]) == pwd.getpwnam("nobody").pw_uid
    ipc_lock = 1 << 14
    for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"):
        assert int(st[k], 16) == ipc_lock, (k, st[k])
    # beyond the 8 MiB RLIMIT_MEMLOCK: only CAP_IPC_LOCK allows that
    assert vmlck(s.pid) >= MODEL_MB * MiB
    m = s.stop()["memory"]["mlock"]
    assert m["status"] == "locked" and m["cap_ipc_lock"] is True


def test_shim_not_inherited_by_children(app):
    s = Svc(app, mlock="all", service_args=["--child"])
    s.wait_line("tts-launch: mlock (all, at listen): locked")
    env = wait_for(lambda: _read(app.dir / "child.env"), what="child.env")
    assert "LD_PRELOAD" not in env and "TTS_LAUNCH_MLOCK" not in env
    assert "PYTHONPATH=" in env  # the rest of the environment is passed on
    assert "mlock_shim" not in (app.dir / "child.maps").read_text()
    assert "socket:" not in (app.dir / "child.fds").read_text()  # no report socket
    # while the service itself has it
    assert "mlock_shim.so" in Path("/proc/%d/maps" % s.pid).read_text()
    environ = Path("/proc/%d/environ" % s.pid).read_bytes()
    assert b"TTS_LAUNCH_MLOCK_MODE=all" in environ  # as exec'd; removed from environ since
    s.stop()


def test_runner_passes_the_shim_on_to_python(app):
    # [app] python = a runner (as `uv run`): the shim stays inert in it and
    # arms in the python it starts
    # (--set: a second "python =" in the file is a duplicate key, exit 2)
    s = Svc(app, "--set", "app.python=/usr/bin/env %s" % PY, mlock="models")
    s.wait_line("tts-launch: mlock (models, at listen): locked")
    assert vmlck(s.pid) == MODEL_MB * MiB
    s.stop()


def test_not_injected_when_off(app):
    s = Svc(app, mlock="off")
    assert "mlock_shim" not in Path("/proc/%d/maps" % s.pid).read_text()
    assert b"LD_PRELOAD" not in Path("/proc/%d/environ" % s.pid).read_bytes()
    assert vmlck(s.pid) == 0
    m = s.stop()["memory"]["mlock"]
    assert m is None
    assert "mlock (" not in _read(s.log)


def test_cli_overrides_mode(app):
    s = Svc(app, "--mlock=models", mlock="off")
    s.wait_line("tts-launch: mlock (models, at listen): locked")
    s.stop()


def test_traced_run_has_both_the_calls_and_the_outcome(app):
    # With tracing, memory.mlock lists the traced mlock calls and
    # memory.mlock what the shim reported; the timeline stays valid.
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).resolve().parents[1] / "schema" /
                         "timeline.schema.json").read_text())
    s = Svc(app, mlock="all", trace=True)
    s.wait_line("tts-launch: mlock (all, at listen): locked")
    tl = s.stop()
    jsonschema.Draft7Validator(schema).validate(tl)
    if not tl["tracing"]["enabled"]:
        pytest.skip("tracing unavailable: %s" % tl["tracing"]["reason"])
    calls = [c for c in tl["memory"]["mlock_calls"] if c["pid"] == s.pid]
    assert [c["call"] for c in calls] == ["mlockall"] and calls[0]["result"] == 0
    assert tl["memory"]["mlock"]["status"] == "locked"
    # the outcome said twice in all: the live line, and the summary's recap
    # (not the traced mlockall as a third, docs/mlock.md)
    out = _read(s.log)
    assert out.count("tts-launch: mlock (all, at listen): locked") == 1, out
    assert out.count("mlock shim (all, at listen): locked") == 1, out
    assert "mlockall" not in out, out


def test_models_locks_the_simulators_hub_cache_models(tmp_path, hub, models):
    """IndexTTS2 (the simulator's classic generation) downloads w2v-bert-2.0
    into its hub cache, checkpoints/hf_cache, and maps it from there:
    --mlock=models locks that blob mapping (the 65.8 MiB one of the demo
    models; a small one here) at listen, with the checkpoints' own model."""
    app = sim_app(tmp_path / "t", models)
    run = Launch(tmp_path / "t", app, env={"HF_ENDPOINT": hub.url},
                 trace="enabled = false\n[mlock]\nmode = models\n")
    done = "tts-launch: mlock (models, at listen): locked"
    run.wait(lambda: done in run.output() + _read(run.log))
    repo = app / "checkpoints" / "hf_cache" / "models--facebook--w2v-bert-2.0"
    snap = list(repo.glob("snapshots/*/model.safetensors"))
    assert len(snap) == 1 and snap[0].is_symlink(), list(repo.rglob("*"))
    blob = Path(os.path.realpath(snap[0]))
    assert blob.parent == repo / "blobs" and "." not in blob.name
    pids = [int(p.parent.name) for p in Path("/proc").glob("[0-9]*/maps")
            if str(blob) in _maps(p)]
    assert len(pids) == 1, pids  # the service
    mapped, locked = mapping_of(pids[0], str(blob))
    assert mapped >= blob.stat().st_size > 0
    assert locked == mapped, (mapped, locked)
    # the emotion model, mapped under its own name, is locked too
    assert locked_in(pids[0], "qwen0.6bemo4-merge/model.safetensors") > 0
    tl = run.stop()
    m = tl["memory"]["mlock"]
    assert m["status"] == "locked" and m["mappings"] >= 2
    line = [l for l in (run.output() + _read(run.log)).splitlines() if done in l]
    assert line and "model mappings)" in line[0], line


def _maps(path):
    try:
        return path.read_text()
    except OSError:  # gone, or not ours to read
        return ""


def mapping_of(pid, path):
    """Size and Locked bytes of pid's mappings of exactly path (smaps)."""
    size = locked = 0
    cur = False
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
                cur = len(head) >= 6 and head[5] == path
            elif cur and head[0] == "Size:":
                size += int(head[1]) * 1024
            elif cur and head[0] == "Locked:":
                locked += int(head[1]) * 1024
    return size, locked
