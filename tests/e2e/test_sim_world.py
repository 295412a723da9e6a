"""The simulator's 2026 world (scripts/sim/world.py): the hub, CAS, ModelScope and
hf-mirror by name over HTTPS in a private namespace; each client mode's file and
network operations against its golden sequence (tests/sim-golden/, written from
the upstream sources cited there); webui.py's 2026 start-up; the fault knobs;
the uv stand-in; Hugging Face's own JavaScript client against the hub.

Needs root (unshare -mn, port 443) and strace; CI runs as root.
"""
import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

import stracenorm
from simfix import (FIXTURES, PY, ROOT, SIM, TTS, WAIT, WorldLaunch, in_world,  # noqa: F401
                    make_app, models, need, world_env, world_ok)

GOLDEN = Path(ROOT) / "tests" / "sim-golden"
UPDATE = os.environ.get("SIM_GOLDEN_UPDATE") == "1"
HFHUB = os.path.join(SIM, "hfhub.py")
MSCLIENT = os.path.join(SIM, "msclient.py")
STRACE = ["strace", "-f", "-qq", "-yy", "-s", "0", "-e", "trace=file,network,desc"]


pytestmark = pytest.mark.usefixtures("world_ok")


@pytest.fixture(autouse=True)
def _strace_ok():
    need(shutil.which("strace"), "strace is needed (the client's syscalls are compared)")


def hub_file(models, repo, path):
    return os.path.join(models["dir"], "hub", *repo.split("/"), path)


def same(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def check_golden(name, ops):
    path = GOLDEN / f"{name}.golden"
    if UPDATE:
        # for review only: a golden's lines are checked against the cited sources by hand
        path.with_suffix(".golden.new").write_text("\n".join(ops) + "\n")
    want = stracenorm.read_golden(path)
    assert ops == want, "\n".join(
        [f"{name}: normalized strace differs from {path} (got, then want):"] + ops + ["---"] + want)


def traced(tmp, cmd, *world_args, env=None, wrapper=()):
    """Run cmd under strace in a world; (CompletedProcess, normalized ops, raw trace)."""
    r = Path(tmp) / "r"
    r.mkdir(exist_ok=True)
    trace = Path(tmp) / "trace"
    e = world_env(HF_HOME=str(r / "home"), **(env or {}))
    p = in_world(tmp, [*wrapper, *STRACE, "-o", str(trace), *cmd], *world_args, env=e, cwd=r)
    raw = trace.read_text() if trace.exists() else ""
    return p, stracenorm.normalize(raw, str(r)), raw


# -- names, TLS, the namespace --------------------------------------------------------------
def test_world_names_tls_and_api(tmp_path, models):
    """Every server by name on :443 with the generated CA, DNS answers from the
    world's server, nothing else resolves; the hub's API as the clients call it."""
    script = r"""
import json, socket, ssl, sys, urllib.request
def get(url, data=None, headers={}):
    req = urllib.request.Request(url, data=data, headers=headers)
    with urllib.request.urlopen(req, timeout=20) as r:
        return r.status, dict(r.headers), r.read()
out = {}
for h in ("huggingface.co", "cas-bridge.xethub.hf.co", "transfer.xethub.hf.co",
          "modelscope.cn", "www.modelscope.cn", "hf-mirror.com"):
    out[h] = socket.gethostbyname(h)
try:
    socket.gethostbyname("example.com"); out["example.com"] = "resolved"
except OSError:
    out["example.com"] = None
s, h, b = get("https://huggingface.co/api/models/facebook/w2v-bert-2.0/revision/main")
out["siblings"] = sorted(x["rfilename"] for x in json.loads(b)["siblings"])
s, h, b = get("https://huggingface.co/api/models/amphion/MaskGCT/tree/main?recursive=true")
out["tree"] = sorted(x["type"] + " " + x["path"] for x in json.loads(b))
s, h, b = get("https://huggingface.co/api/models/facebook/w2v-bert-2.0/paths-info/main",
              data=b"paths=model.safetensors&expand=True")
out["paths_info"] = json.loads(b)
s, h, b = get("https://huggingface.co/api/models/facebook/w2v-bert-2.0/xet-read-token/main")
out["token_cas"] = h["X-Xet-Cas-Url"]
print(json.dumps(out))
"""
    p = in_world(tmp_path, [PY, "-c", script])
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["huggingface.co"] == "127.0.0.2"
    assert out["cas-bridge.xethub.hf.co"] == out["transfer.xethub.hf.co"] == "127.0.0.3"
    assert out["modelscope.cn"] == out["www.modelscope.cn"] == "127.0.0.4"
    assert out["hf-mirror.com"] == "127.0.0.5"
    assert out["example.com"] is None
    files = models["manifest"]["facebook/w2v-bert-2.0"]["files"]
    assert out["siblings"] == sorted(files)
    assert "directory semantic_codec" in out["tree"]
    assert "file semantic_codec/model.safetensors" in out["tree"]
    info = out["paths_info"][0]
    assert info["path"] == "model.safetensors" and info["size"] == files["model.safetensors"]["size"]
    assert info["lfs"]["oid"] == files["model.safetensors"]["sha256"] and len(info["xetHash"]) == 64
    assert out["token_cas"] == "https://cas-bridge.xethub.hf.co"
    dns = (tmp_path / "world" / "dns.log").read_text()
    assert "huggingface.co A" in dns and "example.com A" in dns
    # the namespace is private: nothing of it is visible outside
    assert "127.0.0.2:443" not in subprocess.run(["ss", "-Htln"], capture_output=True,
                                                 text=True).stdout


# -- each client mode against its golden sequence ------------------------------------------
W2V = "facebook/w2v-bert-2.0"
CAMPPLUS = "funasr/campplus"


def test_golden_hf_local_dir_xet(tmp_path, models):
    """hf_hub_download(local_dir) through Xet: lock, metadata, .incomplete written
    at offsets by several threads, chunk cache, rename into place."""
    p, ops, raw = traced(tmp_path, [PY, HFHUB, "--local-dir", "ld", W2V, "model.safetensors"])
    assert p.returncode == 0, p.stderr
    assert same(tmp_path / "r" / "ld" / "model.safetensors",
                hub_file(models, W2V, "model.safetensors"))
    check_golden("hf-local-dir-xet", ops)
    writers = {m.group(1) for m in re.finditer(r"^(\d+)\s+pwrite64\(", raw, re.M)}
    assert len(writers) >= 2, "Xet wrote from one thread only"
    cas = (tmp_path / "world" / "cas.log").read_text()
    assert cas.count("GET /xorbs/default/") == 9 and "GET /v1/reconstructions/" in cas


def test_golden_hf_local_dir_http(tmp_path, models):
    """HF_HUB_DISABLE_XET=1: one streamed GET, redirected to the CAS bridge."""
    p, ops, _ = traced(tmp_path, [PY, HFHUB, "--local-dir", "ld", CAMPPLUS,
                                  "campplus_cn_common.bin"], env={"HF_HUB_DISABLE_XET": "1"})
    assert p.returncode == 0, p.stderr
    assert same(tmp_path / "r" / "ld" / "campplus_cn_common.bin",
                hub_file(models, CAMPPLUS, "campplus_cn_common.bin"))
    check_golden("hf-local-dir-http", ops)


def test_golden_hf_cache_http(tmp_path, models):
    """The hub cache: .locks/, blobs/<etag>.incomplete, rename, relative link."""
    p, ops, _ = traced(tmp_path, [PY, HFHUB, CAMPPLUS, "campplus_cn_common.bin"],
                       env={"HF_HUB_DISABLE_XET": "1"})
    assert p.returncode == 0, p.stderr
    check_golden("hf-cache-http", ops)


def test_golden_hf_snapshot_local_dir(tmp_path, models):
    """snapshot_download(repo, local_dir) as IndexTTS2 fetches its main repo: repo
    info with siblings, refs/main in the hub cache, every file by hf_hub_download
    (revision = the commit) from a pool of 8 threads."""
    repo = "IndexTeam/IndexTTS-2"
    p, ops, raw = traced(tmp_path, [PY, HFHUB, "--snapshot", "--local-dir", "ck", repo])
    assert p.returncode == 0, p.stderr
    for f in models["manifest"][repo]["files"]:
        assert same(tmp_path / "r" / "ck" / f, hub_file(models, repo, f)), f
    # the 8 threads race for .gitignore's lock (EAGAIN or not, O_CREAT or not):
    # real (_local_folder.py:427 "thread-safe enough"), not part of the golden
    check_golden("hf-snapshot-local-dir", [o for o in ops if ".gitignore" not in o])
    main = raw.split(None, 1)[0]
    workers = {m.group(1) for m in re.finditer(r"^(\d+)\s+openat\(.*\.incomplete", raw, re.M)}
    assert main not in workers and 2 <= len(workers) <= 8 + 48, workers
    hub = (tmp_path / "world" / "hub.log").read_text()
    commit = models["manifest"][repo]["commit"]
    assert "GET /api/models/IndexTeam/IndexTTS-2/revision/main" in hub
    assert hub.count(f"HEAD /IndexTeam/IndexTTS-2/resolve/{commit}/") == len(models["manifest"][repo]["files"])


def test_golden_hf_cache_xet(tmp_path, models):
    """The hub cache through Xet: blobs/<etag>.incomplete written at offsets."""
    p, ops, _ = traced(tmp_path, [PY, HFHUB, "nvidia/bigvgan_v2_22khz_80band_256x",
                                  "bigvgan_generator.pt"])
    assert p.returncode == 0, p.stderr
    check_golden("hf-cache-xet", ops)


def test_golden_modelscope(tmp_path, models):
    """modelscope: LOCAL/._____temp/NAME appended (Range), moved to LOCAL/NAME."""
    p, ops, _ = traced(tmp_path, [PY, MSCLIENT, "iic/speech_campplus_sv_zh-cn_16k-common",
                                  "campplus_cn_common.bin", "ld"])
    assert p.returncode == 0, p.stderr
    assert same(tmp_path / "r" / "ld" / "campplus_cn_common.bin",
                hub_file(models, CAMPPLUS, "campplus_cn_common.bin"))
    check_golden("modelscope", ops)
    log = (tmp_path / "world" / "modelscope.log").read_text()
    assert "GET /api/v1/models/iic/speech_campplus_sv_zh-cn_16k-common/repo?" in log


def test_golden_hf_mirror(tmp_path, models):
    """IndexTTS2's hf-mirror fallback: NAME.tmp, then os.replace."""
    (tmp_path / "r").mkdir()
    code = ("import sys; sys.path.insert(0, %r); import indextts2026 as i; "
            "i.download_file('https://hf-mirror.com/funasr/campplus/resolve/main/"
            "campplus_cn_common.bin', 'campplus_cn_common.bin', timeout=300)" % SIM)
    p, ops, _ = traced(tmp_path, [PY, "-c", code])
    assert p.returncode == 0, p.stderr
    assert same(tmp_path / "r" / "campplus_cn_common.bin",
                hub_file(models, CAMPPLUS, "campplus_cn_common.bin"))
    check_golden("hf-mirror", ops)


def test_golden_filelock_held(tmp_path, models):
    """A lock held by another process: filelock polls (LOCK_NB, 50 ms), then goes on."""
    r = tmp_path / "r"
    lock = r / "ld" / ".cache" / "huggingface" / "download" / "campplus_cn_common.bin.lock"
    p, ops, raw = traced(tmp_path, [PY, HFHUB, "--local-dir", "ld", CAMPPLUS,
                                    "campplus_cn_common.bin"],
                         wrapper=[PY, os.path.join(FIXTURES, "lock_held.py"), str(lock),
                                  str(tmp_path / "trace"), "3", "--"])
    assert p.returncode == 0, p.stderr
    assert "released after 3 polls" in p.stderr
    assert len(re.findall(r"flock\(\d+<[^>]*campplus_cn_common\.bin\.lock>, "
                          r"LOCK_EX\|LOCK_NB\) = -1 EAGAIN", raw)) >= 3
    assert lock.exists()  # filelock never unlinks it
    check_golden("filelock-held", ops)


# -- webui.py's 2026 start-up ------------------------------------------------------------------
def webui_once(tmp, app, n, *args, world_args=(), env=None, port=7860):
    """webui.py once (inside the same kind of world): {"listening", "rc"} and its log."""
    log = Path(tmp) / f"webui{n}.log"
    drv = os.path.join(FIXTURES, "webui_once.py")
    e = world_env(HF_HOME=str(Path(tmp) / "home"), **(env or {}))
    p = in_world(Path(tmp) / f"w{n}", [PY, drv, str(app), str(port), str(log), *args],
                 *world_args, env=e)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), log.read_text()


def world_log(tmp, n, name):
    return (Path(tmp) / f"w{n}" / "world" / f"{name}.log").read_text()


def flat_layout_ok(models, ck):
    hf = ck / "hf_cache"
    pairs = [(hf / "w2v-bert-2.0" / "model.safetensors", W2V, "model.safetensors"),
             (hf / "w2v-bert-2.0" / "config.json", W2V, "config.json"),
             (hf / "semantic_codec_model.safetensors", "amphion/MaskGCT",
              "semantic_codec/model.safetensors"),
             (hf / "campplus_cn_common.bin", CAMPPLUS, "campplus_cn_common.bin"),
             (hf / "bigvgan" / "bigvgan_generator.pt", "nvidia/bigvgan_v2_22khz_80band_256x",
              "bigvgan_generator.pt")]
    for local, repo, f in pairs:
        assert same(local, hub_file(models, repo, f)), local
    assert not list(hf.glob("models--*"))


def test_webui_2026_cold_then_warm(tmp_path, models):
    """Cold: the main repo by snapshot_download (8 at once), examples, the flat
    hf_cache/ by local_dir downloads through Xet, then listening. Warm: no download."""
    app = make_app(tmp_path, models, omit=("gpt.pth", "s2mel.pth"))
    res, log = webui_once(tmp_path, app, 1)
    assert res["listening"], log
    ck = app / "checkpoints"
    assert same(ck / "gpt.pth", os.path.join(models["checkpoints"], "gpt.pth"))
    assert (ck / ".cache" / "huggingface" / "download" / "gpt.pth.metadata").exists()
    flat_layout_ok(models, ck)
    assert (app / "examples" / "voice_01.wav").stat().st_size > 100
    hub = world_log(tmp_path, 1, "hub")
    assert "GET /api/models/IndexTeam/IndexTTS-2.5/revision/main" in hub
    assert "GET /spaces/IndexTeam/IndexTTS-2-Demo/resolve/main/examples/voice_01.wav" in hub
    assert "Fetching 10 files" in log
    cas = world_log(tmp_path, 1, "cas")
    assert "GET /v1/reconstructions/" in cas and "GET /xorbs/default/" in cas
    assert list((tmp_path / "home" / "xet").glob("*/chunk-cache/*/*/*"))
    dns = world_log(tmp_path, 1, "dns")
    assert "huggingface.co A" in dns and "modelscope.cn A" in dns  # the need_proxy() probes

    res, log = webui_once(tmp_path, app, 2)
    assert res["listening"], log
    assert "Downloading" not in log and "Migrating" not in log
    assert "GET /xorbs/" not in world_log(tmp_path, 2, "cas")


def test_webui_2026_version_2_and_migration(tmp_path, models):
    """--version 2 fetches IndexTeam/IndexTTS-2; an old models-- cache in hf_cache/
    is copied into the flat layout, not downloaded."""
    app = make_app(tmp_path, models, omit=("bpe.model",))
    old = app / "checkpoints" / "hf_cache"
    env = world_env(HF_HOME=str(tmp_path / "h0"), HF_HUB_CACHE=str(old), HF_HUB_DISABLE_XET="1")
    for repo, f in ((W2V, "config.json"), (W2V, "model.safetensors"), (CAMPPLUS, "campplus_cn_common.bin")):
        p = in_world(tmp_path / "pre", [PY, HFHUB, repo, f], env=env)
        assert p.returncode == 0, p.stderr
    res, log = webui_once(tmp_path, app, 1, "--version", "2")
    assert res["listening"], log
    assert "Migrating w2v-bert-2.0 from existing HF cache" in log
    assert "Migrating CAMPPlus from existing HF cache" in log
    hub = world_log(tmp_path, 1, "hub")
    assert "GET /api/models/IndexTeam/IndexTTS-2/revision/main" in hub
    assert "facebook/w2v-bert-2.0/resolve" not in hub and "funasr/campplus/resolve" not in hub
    assert same(old / "w2v-bert-2.0" / "model.safetensors", hub_file(models, W2V, "model.safetensors"))
    assert same(old / "campplus_cn_common.bin", hub_file(models, CAMPPLUS, "campplus_cn_common.bin"))


def test_webui_2026_modelscope_when_hub_unreachable(tmp_path, models):
    """huggingface.co's SYNs dropped: the 3 s probe times out (scaled), the start
    goes to ModelScope (._____temp/), every model file arrives."""
    app = make_app(tmp_path, models)
    res, log = webui_once(tmp_path, app, 1, world_args=("--unreachable", "hub"))
    assert res["listening"], log
    assert "huggingface.co unreachable; using ModelScope" in log
    flat_layout_ok(models, app / "checkpoints")
    ms = world_log(tmp_path, 1, "modelscope")
    assert "AI-ModelScope/w2v-bert-2.0/repo?" in ms
    assert "iic/speech_campplus_sv_zh-cn_16k-common/repo?" in ms
    assert (app / "checkpoints" / "hf_cache" / "._____temp").is_dir()
    mirror = world_log(tmp_path, 1, "mirror")
    assert "examples/voice_01.wav" in mirror  # examples from hf-mirror.com when proxied


def test_webui_2026_hf_mirror_fallback_and_5xx(tmp_path, models):
    """USE_MODELSCOPE=true with ModelScope down: the hf-mirror fallback (.tmp +
    replace) brings the single files; with the mirror answering 500 the start
    fails. (w2v-bert-2.0 is a snapshot: ModelScope's, no fallback; it is there.)"""
    def app_with_w2v(tmp):
        app = make_app(tmp, models)
        w2v = app / "checkpoints" / "hf_cache" / "w2v-bert-2.0"
        w2v.mkdir(parents=True)
        for f in models["manifest"][W2V]["files"]:
            shutil.copy(hub_file(models, W2V, f), w2v / f)
        return app
    app = app_with_w2v(tmp_path)
    res, log = webui_once(tmp_path, app, 1, world_args=("--down", "modelscope"),
                          env={"USE_MODELSCOPE": "true"})
    assert res["listening"], log
    assert "Falling back to hf-mirror" in log
    flat_layout_ok(models, app / "checkpoints")
    assert "GET /funasr/campplus/resolve/main/campplus_cn_common.bin" in world_log(tmp_path, 1, "mirror")

    app2 = app_with_w2v(tmp_path / "b")
    res, log = webui_once(tmp_path / "b", app2, 1, world_args=(
        "--down", "modelscope", "--knobs", 'mirror={"status": {"*": 500}}'),
        env={"USE_MODELSCOPE": "true"})
    assert not res["listening"] and res["rc"] == 1, log
    assert "HTTP Error 500" in log
    assert not list((app2 / "checkpoints" / "hf_cache").rglob("*.tmp"))


# -- Xet faults ---------------------------------------------------------------------------------
XET_HANG = r"""
import os, subprocess, sys, time, json, urllib.request, ssl
ctx = ssl.create_default_context(cafile=os.environ["SIM_WORLD"] + "/ca.pem")
def state(name):
    with urllib.request.urlopen(os.environ["SIM_CONTROL_" + name], context=ctx, timeout=10) as r:
        return json.load(r)
p = subprocess.Popen([sys.executable, %(hfhub)r, "--local-dir", "ld", %(repo)r, %(file)r],
                     stderr=open("client.err", "w"))
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    c = state("CAS")["counts"]
    if sum(v for k, v in c.items() if %(path)r in k) >= %(n)d:
        break
    time.sleep(0.05)
time.sleep(%(settle)s)
alive = p.poll() is None
inc = [f for f in os.listdir("ld/.cache/huggingface/download") if f.endswith(".incomplete")]
p.kill(); p.wait()
print(json.dumps({"alive": alive, "incomplete": inc, "done": os.path.exists("ld/" + %(file)r)}))
"""


def xet_hang(tmp_path, knobs, path, n=1):
    code = XET_HANG % {"hfhub": HFHUB, "repo": W2V, "file": "model.safetensors", "path": path,
                       "n": n, "settle": 2}
    (tmp_path / "r").mkdir()
    p = in_world(tmp_path, [PY, "-c", code], "--knobs", "cas=" + json.dumps(knobs),
                 env=world_env(HF_HOME=str(tmp_path / "r" / "home")), cwd=tmp_path / "r")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_xet_blackholed_cas_hangs_without_timeout(tmp_path, models):
    """The CAS reads the request and never answers: no read timeout ends the
    transfer (xet-core #869): the client is still waiting, the .incomplete there."""
    out = xet_hang(tmp_path, {"blackhole": True}, "/v1/reconstructions/")
    assert out["alive"] and out["incomplete"] and not out["done"]


def test_xet_cas_stalls_mid_range(tmp_path, models):
    """A range that stops after 1000 bytes on an open connection: the client hangs."""
    out = xet_hang(tmp_path, {"stall_after": 1000}, "/xorbs/default/", n=2)
    assert out["alive"] and out["incomplete"] and not out["done"]


def test_xet_slow_cas_completes(tmp_path, models):
    """A slow CAS (bandwidth cap) is slow, not broken: the file arrives intact."""
    (tmp_path / "r").mkdir()
    p = in_world(tmp_path, [PY, HFHUB, "--local-dir", "ld", W2V, "model.safetensors"],
                 "--knobs", 'cas={"bandwidth": 2000000}',
                 env=world_env(HF_HOME=str(tmp_path / "r" / "home")), cwd=tmp_path / "r")
    assert p.returncode == 0, p.stderr
    assert same(tmp_path / "r" / "ld" / "model.safetensors", hub_file(models, W2V, "model.safetensors"))


def test_xet_cas_5xx_retried_with_backoff(tmp_path, models):
    """Reconstruction answering 500: xet-core retries 5 times with back-off, then fails."""
    (tmp_path / "r").mkdir()
    p = in_world(tmp_path, [PY, HFHUB, "--local-dir", "ld", CAMPPLUS, "campplus_cn_common.bin"],
                 "--knobs", 'cas={"status": {"*": 500}}',
                 env=world_env(HF_HOME=str(tmp_path / "r" / "home"), SIM_TIME_SCALE="0.01"),
                 cwd=tmp_path / "r", timeout=WAIT)
    assert p.returncode == 1
    assert len(re.findall(r"xet: GET \S+/v1/reconstructions/\S+: .*retry \d/5", p.stderr)) == 5


# -- uv ---------------------------------------------------------------------------------------
def test_uv_run_spawns_a_child_and_forwards_signals(tmp_path):
    """`uv run x.py`: python is uv's child (not exec'd); SIGTERM to uv reaches it;
    uv exits with the child's status; .venv/bin/python is the interpreter."""
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    os.symlink(PY, venv / "python")
    (tmp_path / "x.py").write_text(
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('TERM', flush=True), sys.exit(7)))\n"
        "print(os.getppid(), sys.prefix, flush=True)\n"
        "time.sleep(60)\n")
    uv = subprocess.Popen([os.path.join(FIXTURES, "uv", "uv"), "run", "x.py"], cwd=tmp_path,
                          stdout=subprocess.PIPE, text=True)
    first = uv.stdout.readline().split()
    assert int(first[0]) == uv.pid  # a child of uv
    kids = (Path("/proc") / str(uv.pid) / "task" / str(uv.pid) / "children").read_text().split()
    assert len(kids) == 1 and os.readlink(f"/proc/{kids[0]}/exe") == os.path.realpath(PY)
    env = dict(l.split("=", 1) for l in
               Path(f"/proc/{kids[0]}/environ").read_bytes().decode().split("\0") if "=" in l)
    assert env["VIRTUAL_ENV"] == str(tmp_path / ".venv")
    uv.send_signal(signal.SIGTERM)
    assert uv.stdout.readline().strip() == "TERM"
    assert uv.wait(WAIT) == 7


# -- @huggingface/hub ------------------------------------------------------------------------
NPM = Path(ROOT) / "build" / "npm"


def test_huggingface_js_client_downloads_every_file(tmp_path, models):
    """Hugging Face's JavaScript client downloads every file of every repo of the
    hub (Xet where the hub advertises it), bytes matching."""
    need((NPM / "node_modules" / "@huggingface" / "hub").is_dir() and shutil.which("node"),
          "@huggingface/hub missing: run `make npm-hub` (needs the npm registry)")
    out = tmp_path / "js"
    p = in_world(tmp_path, ["node", os.path.join(FIXTURES, "hfjs_download.mjs"), str(out),
                            json.dumps({r: sorted(v["files"]) for r, v in models["manifest"].items()})],
                 env=world_env(NODE_PATH=str(NPM / "node_modules")), timeout=WAIT)
    assert p.returncode == 0, p.stdout + p.stderr
    for repo, v in models["manifest"].items():
        for f in v["files"]:
            assert same(out / repo / f, hub_file(models, repo, f)), (repo, f)
    report = json.loads(p.stdout.strip().splitlines()[-1])
    total = sum(len(v["files"]) for v in models["manifest"].values())
    lfs = sum(e["lfs"] for v in models["manifest"].values() for e in v["files"].values())
    assert report == {"files": total, "xet": lfs, "paths_info": total}
    cas = (tmp_path / "world" / "cas.log").read_text()
    assert cas.count("GET /v2/reconstructions/") == lfs and "GET /xorbs/default/" in cas
    hub = (tmp_path / "world" / "hub.log").read_text()
    assert '"POST /api/models/facebook/w2v-bert-2.0/paths-info/main HTTP/1.1" 200' in hub


# -- need_proxy() and the plain-HTTP mid-stream drop ----------------------------------------------
NEED_PROXY = "import sys; sys.path.insert(0, %r); import indextts2026 as i; print(i.need_proxy())" % SIM


@pytest.mark.parametrize("world_args,env,want", [
    ((), {}, "False"),                                      # both answer: Hugging Face
    (("--unreachable", "hub"), {}, "True"),                 # probe timed out: ModelScope
    (("--unreachable", "modelscope"), {}, "False"),         # ModelScope unreachable: stays on HF
    (("--down", "hub", "--down", "modelscope"), {}, "False"),
    (("--unreachable", "hub"), {"USE_MODELSCOPE": "false"}, "False"),  # no probe at all
])
def test_need_proxy_probes(tmp_path, models, world_args, env, want):
    """need_proxy(): bare TCP connects to huggingface.co:443 then modelscope.cn:443
    (3 s each, scaled), closed at once; USE_MODELSCOPE decides without probing."""
    p, ops, _ = traced(tmp_path, [PY, "-c", NEED_PROXY], *world_args, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == want
    connects = [o for o in ops if o.startswith("connect ") and o != "connect dns"]
    # (with a timeout the connect is non-blocking: EINPROGRESS, the refusal comes later)
    assert connects == ([] if env.get("USE_MODELSCOPE") else
                        ["connect hub:443", "connect modelscope:443"])


def test_plain_http_mid_stream_drop_fails_the_start(tmp_path, models):
    """HF_HUB_DISABLE_XET=1 and the CAS bridge closing after 20000 bytes: urllib3
    2.x raises ChunkedEncodingError, which http_get does not retry: the download
    fails and the .incomplete stays, 20000 bytes long."""
    (tmp_path / "r").mkdir()
    p = in_world(tmp_path, [PY, HFHUB, "--local-dir", "ld", CAMPPLUS, "campplus_cn_common.bin"],
                 "--knobs", 'cas={"drop_after": 20000}',
                 env=world_env(HF_HOME=str(tmp_path / "r" / "home"), HF_HUB_DISABLE_XET="1"),
                 cwd=tmp_path / "r")
    assert p.returncode == 1 and "ChunkedEncodingError" in p.stderr, p.stderr
    inc = list((tmp_path / "r" / "ld" / ".cache" / "huggingface" / "download").glob("*.incomplete"))
    assert len(inc) == 1 and inc[0].stat().st_size == 20000
    assert not (tmp_path / "r" / "ld" / "campplus_cn_common.bin").exists()


# -- tts-launch inside the world (for the recognition work) --------------------------------------
def test_tts_launch_runs_the_2026_start_inside_the_world(tmp_path, models):
    """simfix.WorldLaunch: tts-launch and the servers in one private world; the
    service is the 2026 webui.py, ready once its downloads are done. (What
    tts-launch makes of them is the recognition work's to assert.)"""
    need(TTS.exists(), "build/tts-launch missing: run make")
    app = make_app(tmp_path, models)
    os.symlink(os.path.join(SIM, "webui.py"), app / "webui.py")
    run = WorldLaunch(tmp_path / "run", app)
    assert run.rc == 0 and run.timeline is not None, run.output()
    assert same(app / "checkpoints" / "hf_cache" / "w2v-bert-2.0" / "model.safetensors",
                hub_file(models, W2V, "model.safetensors"))
    peers = json.dumps(run.timeline.get("network", {}))
    assert "127.0.0.3" in peers and "127.0.0.2" in peers  # CAS and hub, seen from inside
