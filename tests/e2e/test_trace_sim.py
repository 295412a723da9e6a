"""Tracing the simulator's cold start (tests/e2e/simfix.py: small models, the
local hub): downloads complete with absolute final paths, model files
classified, `ready` after the last model-file read, nothing lost; then
requests after ready, one record per synthesis. Skipped without BPF, failed
when CI is set (test_trace.tracing_ok)."""
import json
import os
import signal
import subprocess
import time
import urllib.request

from simfix import SIM, WAIT, free_port, hub, hub_proc, make_app, models  # noqa: F401
from test_trace import TTS, tracing_ok, validate  # noqa: F401

N_REQUESTS = 3


def synthesize(port, text):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/synthesize", method="POST",
                                 data=json.dumps({"text": text}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=WAIT) as r:
        assert r.headers["Content-Type"] == "audio/wav"
        return len(r.read())


def test_cold_start_traced(tmp_path, hub, models, tracing_ok):
    app = make_app(tmp_path, models)
    # the app's own webui.py (a link): the simulator's path, shared by every
    # test, would make a concurrent test's stale kill end this one
    os.symlink(os.path.join(SIM, "webui.py"), app / "webui.py")
    port = free_port()
    tl_path = tmp_path / "timeline.json"
    log = app / "webui.log"
    argv = [str(TTS), "run", "--timeline", str(tl_path),
            "--set", "app.dir=%s" % app, "--set", "app.python=/usr/bin/python3",
            "--set", "app.script=webui.py",
            "--set", "app.host=127.0.0.1", "--set", "app.port=%d" % port,
            "--set", "env.HF_ENDPOINT=%s" % hub.url, "--set", "env.HF_HOME=%s" % (tmp_path / "home"),
            "--set", "trace.settle=0.1s", "--set", "service.pidfile=",
            "--set", "log.file=webui.log"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "SIM_"))}
    env["SIM_GENERATION"] = "classic"  # the simulator's 2025 IndexTTS2
    p = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    sizes = []
    try:
        # ready from tts-launch's own message (a port probe would be a request)
        deadline = time.monotonic() + WAIT
        while not (log.exists() and "tts-launch: ready:" in log.read_text()):
            assert p.poll() is None, log.read_text() if log.exists() else "no log"
            assert time.monotonic() < deadline, "not ready"
            time.sleep(0.05)
        for i in range(N_REQUESTS):
            sizes.append(synthesize(port, "request number %d" % i))
        p.send_signal(signal.SIGTERM)
        p.wait(WAIT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    out = log.read_text()
    tl = validate(json.loads(tl_path.read_text()))
    assert tl["tracing"]["enabled"] and tl["tracing"]["events_lost"] == 0, out

    # every path absolute (inherited descriptors aside)
    for f in tl["files"] + tl["missing_paths"]:
        assert f["path"].startswith("/") or f["path"].startswith("[fd] "), f["path"]

    # downloads: one per run-time file the hub has, each complete from the trace
    cache = app / "checkpoints" / "hf_cache"
    gets = [k for k in hub.state()["counts"] if k.startswith("GET ")]
    dls = tl["downloads"]
    assert len(dls) == len(gets) > 0, ([d["path"] for d in dls], gets)
    for d in dls:
        assert d["path"].startswith(str(cache) + "/") and d["path"].endswith(".incomplete")
        assert d["complete"] and d["completed"], d
        assert d["final_path"] == d["path"][:-len(".incomplete")]
        assert os.path.isfile(d["final_path"]) and not os.path.exists(d["path"])
        assert d["bytes"] == d["size"] == os.path.getsize(d["final_path"])
        assert d["link"] and os.path.realpath(d["link"]) == d["final_path"]
        assert d["first_ms"] <= d["last_ms"] <= d["rename_ms"]
    assert "INCOMPLETE" not in out and "(incomplete)" not in out

    # model files classified; all read before ready
    ready = tl["marks"]["ready"]
    model = {f["path"]: f for f in tl["files"] if f["class"] == "model"}
    ck = app / "checkpoints"
    for name in ("gpt.pth", "s2mel.pth", "bpe.model", "wav2vec2bert_stats.pt"):
        assert str(ck / name) in model, sorted(model)
    snap = [p for p in model if p.startswith(str(cache)) and "/snapshots/" in p]
    assert any(p.endswith("/model.safetensors") for p in snap), sorted(model)
    assert any(p.endswith("/bigvgan_generator.pt") for p in snap), sorted(model)
    read = [f for f in model.values() if f["bytes_read"] + f["mmap_bytes"] > 0]
    assert read and max(f["last_ms"] for f in read if f["bytes_read"]) <= ready
    assert any(ph["name"] == "model_load" and ph["end_ms"] <= ready for ph in tl["phases"])

    # requests: exactly the synthesis calls, in order, after ready
    reqs = tl["requests"]
    assert len(reqs) == N_REQUESTS, reqs
    for r, size in zip(reqs, sizes):
        assert r["port"] == port and r["pid"] == tl["process"]["pid"]
        assert r["start_ms"] >= ready and r["bytes_out"] > size
    rep = subprocess.run([str(TTS), "report", str(tl_path)], capture_output=True, text=True,
                         timeout=WAIT)
    assert "requests: %d, latency p50" % N_REQUESTS in rep.stdout + rep.stderr
    assert "heaviest files" in rep.stdout + rep.stderr
