"""The IndexTTS2 simulator: hfclient against the local hub, and webui.py's start-up."""
import os
import socket
import subprocess
import time
import urllib.request
import wave

from simfix import (PY, SIM, WAIT, base_env, free_port, hub, hub_proc, make_app,  # noqa: F401
                    models, port_open, run_client, webuis)

CAMPPLUS = ("funasr/campplus", "campplus_cn_common.bin")
CODEC = ("amphion/MaskGCT", "semantic_codec/model.safetensors")


def client_env(tmp_path, hub, **extra):
    return base_env(HF_HOME=tmp_path / "hf", HF_ENDPOINT=hub.url, **extra)


def entry(models, repo, filename):
    r = models["manifest"][repo]
    return r["commit"], r["files"][filename]


def hub_file(models, repo, filename):
    return os.path.join(models["dir"], "hub", repo, filename)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def test_download_layout_and_warm_start(tmp_path, hub, models):
    env = client_env(tmp_path, hub)
    for repo, fn in (CAMPPLUS, CODEC):
        r = run_client(env, repo, fn)
        assert r.returncode == 0, r.stderr
        commit, info = entry(models, repo, fn)
        storage = tmp_path / "hf" / "hub" / ("models--" + repo.replace("/", "--"))
        pointer = storage / "snapshots" / commit / fn
        assert r.stdout.strip() == str(pointer)
        # LFS files are stored under their sha256 (the hub's X-Linked-Etag).
        blob = storage / "blobs" / info["sha256"]
        assert read(blob) == read(hub_file(models, repo, fn))
        assert os.readlink(pointer) == os.path.relpath(blob, pointer.parent)
        assert os.readlink(pointer).startswith("../../")
        assert (storage / "refs" / "main").read_text() == commit
        lock = tmp_path / "hf" / "hub" / ".locks" / storage.name / (info["sha256"] + ".lock")
        assert lock.exists()
        assert not list((storage / "blobs").glob("*.incomplete"))
    # Warm: one HEAD per file and no GET.
    hub.control(reset=True)
    assert run_client(env, *CAMPPLUS).returncode == 0
    counts = hub.state()["counts"]
    assert counts == {"HEAD /funasr/campplus/resolve/main/campplus_cn_common.bin": 1}


def test_resume_after_mid_stream_drop(tmp_path, hub, models):
    hub.control(drop_after=20000, drop_times=1)
    r = run_client(client_env(tmp_path, hub), *CAMPPLUS)
    assert r.returncode == 0, r.stderr
    assert "Trying to resume download" in r.stderr
    path = "/funasr/campplus/resolve/main/campplus_cn_common.bin"
    assert hub.state()["ranges"] == {path: ["bytes=20000-"]}
    assert read(r.stdout.strip()) == read(hub_file(models, *CAMPPLUS))


def test_resume_from_incomplete_left_by_a_previous_run(tmp_path, hub, models):
    commit, info = entry(models, *CAMPPLUS)
    blobs = tmp_path / "hf" / "hub" / "models--funasr--campplus" / "blobs"
    blobs.mkdir(parents=True)
    data = read(hub_file(models, *CAMPPLUS))
    (blobs / (info["sha256"] + ".incomplete")).write_bytes(data[:12345])
    r = run_client(client_env(tmp_path, hub), *CAMPPLUS)
    assert r.returncode == 0, r.stderr
    assert "resume from 12345/" in r.stderr
    assert list(hub.state()["ranges"].values()) == [["bytes=12345-"]]
    assert read(blobs / info["sha256"]) == data


def test_complete_incomplete_is_renamed_without_a_request(tmp_path, hub, models):
    """Killed after the last byte, before the rename: no GET (a Range past
    the end would get 416 on every start), just the rename."""
    commit, info = entry(models, *CAMPPLUS)
    blobs = tmp_path / "hf" / "hub" / "models--funasr--campplus" / "blobs"
    blobs.mkdir(parents=True)
    data = read(hub_file(models, *CAMPPLUS))
    (blobs / (info["sha256"] + ".incomplete")).write_bytes(data)
    r = run_client(client_env(tmp_path, hub), *CAMPPLUS)
    assert r.returncode == 0, r.stderr
    assert hub.state()["ranges"] == {}
    assert not any(k.startswith("GET") for k in hub.state()["counts"])
    assert read(blobs / info["sha256"]) == data


def test_404_recorded_in_no_exist(tmp_path, hub, models):
    env = client_env(tmp_path, hub)
    r = run_client(env, "funasr/campplus", "missing.bin")
    assert r.returncode == 1 and "EntryNotFoundError" in r.stderr
    # The status knob makes an existing file 404 (as if deleted from the repo).
    hub.control(status={"amphion/MaskGCT/semantic_codec/*": 404})
    r = run_client(env, *CODEC)
    assert r.returncode == 1 and "EntryNotFoundError" in r.stderr
    hub_root = tmp_path / "hf" / "hub"
    for (repo, fn) in (("funasr/campplus", "missing.bin"), CODEC):
        commit = models["manifest"][repo]["commit"]
        storage = hub_root / ("models--" + repo.replace("/", "--"))
        assert (storage / ".no_exist" / commit / fn).is_file()
        assert not (storage / "blobs").exists() or not list((storage / "blobs").iterdir())


def test_offline_mode_served_from_cache(tmp_path, hub, models):
    env = client_env(tmp_path, hub)
    online = run_client(env, *CAMPPLUS)
    assert online.returncode == 0, online.stderr
    hub.control(reset=True)
    offline_env = client_env(tmp_path, hub, HF_HUB_OFFLINE=1)
    r = run_client(offline_env, *CAMPPLUS)
    assert r.returncode == 0, r.stderr
    assert r.stdout == online.stdout
    r = run_client(offline_env, *CODEC)
    assert r.returncode == 1 and "LocalEntryNotFoundError" in r.stderr
    assert hub.state()["counts"] == {}  # offline: not a single request


def test_blackholed_hub_times_out_then_falls_back_to_cache(tmp_path, hub, models):
    env = client_env(tmp_path, hub, HF_HUB_ETAG_TIMEOUT=1)
    cached = run_client(env, *CAMPPLUS)
    assert cached.returncode == 0, cached.stderr
    hub.control(blackhole=True)
    # Not cached: the HEAD waits for the etag timeout, then the client gives up.
    t0 = time.monotonic()
    r = run_client(env, *CODEC)
    assert r.returncode == 1 and "LocalEntryNotFoundError" in r.stderr
    assert time.monotonic() - t0 >= 1.0  # it did wait for the timeout
    # Cached: same wait, then the snapshot found through refs/main.
    r = run_client(env, *CAMPPLUS)
    assert r.returncode == 0, r.stderr
    assert r.stdout == cached.stdout
    assert hub.state()["counts"]["HEAD /" + CODEC[0] + "/resolve/main/" + CODEC[1]] == 1


def test_missing_checkpoint_exits_1(tmp_path, models):
    app = make_app(tmp_path, models, omit=("s2mel.pth",))
    webui = os.path.join(SIM, "webui.py")
    r = subprocess.run([PY, webui], cwd=app, env=base_env(), capture_output=True, text=True,
                       timeout=WAIT)
    assert r.returncode == 1
    assert "Required file ./checkpoints/s2mel.pth does not exist" in r.stdout
    r = subprocess.run([PY, webui, "--model_dir", str(tmp_path / "nope")], env=base_env(),
                       capture_output=True, text=True, timeout=WAIT)
    assert r.returncode == 1 and "does not exist. Please download the model first" in r.stdout


def test_cache_bug_and_taken_port(tmp_path, hub, models, webuis):
    """SIM_CACHE_BUG=1: downloads land in $HF_HOME/hub, not ./checkpoints/hf_cache;
    after loading everything, a taken port is fatal."""
    app = make_app(tmp_path, models)
    home = tmp_path / "home"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        w = webuis(app, base_env(HF_HOME=home, HF_ENDPOINT=hub.url, SIM_CACHE_BUG=1), port)
        rc = w.proc.wait(WAIT)
    out = w.output()
    assert rc != 0
    assert f"Cannot find empty port in range: {port}-{port}" in out
    assert not (app / "checkpoints" / "hf_cache").exists()
    cached = sorted(p.name for p in (home / "hub").iterdir() if p.name.startswith("models--"))
    assert cached == ["models--amphion--MaskGCT", "models--facebook--w2v-bert-2.0",
                      "models--funasr--campplus", "models--nvidia--bigvgan_v2_22khz_80band_256x"]


def test_not_listening_until_loaded_then_synthesizes_wav(tmp_path, hub, models, webuis):
    app = make_app(tmp_path, models)
    port = free_port()
    # Slow every hub request down so the downloads take a while.
    hub.control(latency=0.3)
    w = webuis(app, base_env(HF_HOME=tmp_path / "home", HF_ENDPOINT=hub.url), port)
    last = app / "checkpoints" / "hf_cache" / "models--nvidia--bigvgan_v2_22khz_80band_256x"
    seen_closed_while_downloading = False
    deadline = time.monotonic() + WAIT
    while True:
        assert w.proc.poll() is None, w.output()
        assert time.monotonic() < deadline, "webui did not listen in time:\n" + w.output()
        downloading = bool(hub.state()["counts"])
        loading = "bpe model loaded" not in w.output()
        if port_open(port):
            # Read the log again: the last load step is logged before the bind.
            assert "bpe model loaded" in w.output(), "listening before the model was loaded"
            break
        seen_closed_while_downloading |= downloading and loading
        time.sleep(0.1)
    assert seen_closed_while_downloading
    # Fixed cache location: <model_dir>/hf_cache, the last download done before listening.
    assert list(last.glob("snapshots/*/bigvgan_generator.pt"))
    assert not (tmp_path / "home" / "hub").exists()
    hub.control(latency=0)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:
        assert b"IndexTTS2" in r.read()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/synthesize", method="POST",
                                 data=b'{"text": "Hello from the simulator"}',
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.headers["Content-Type"] == "audio/wav"
        path = tmp_path / "out.wav"
        path.write_bytes(r.read())
    with wave.open(str(path)) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 22050)
        frames = wav.readframes(wav.getnframes())
    assert wav.getnframes() > 22050 // 2 and any(frames)
