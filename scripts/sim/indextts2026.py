"""IndexTTS2's start-up helpers since #692/#703/#741 (index-tts ee40fa7), for the
simulator's 2026 generation: indextts/utils/network_detection.py (need_proxy),
examples_downloader.py (examples and the hf-mirror fallback) and
model_download.py (ensure_config_available, ensure_models_available,
snapshot_download; HF or ModelScope by need_proxy()).

The downloads go through hfhub (huggingface_hub 0.35 + hf_xet) or msclient
(modelscope 1.27); hf-mirror through urllib (NAME.tmp, os.replace).
"""
import os
import shutil
import socket
import sys
import time
import urllib.request

import hfhub
import msclient
from simtime import scaled

HF_TO_MODELSCOPE_REPO_MAP = {
    "funasr/campplus": "iic/speech_campplus_sv_zh-cn_16k-common",
    "facebook/w2v-bert-2.0": "AI-ModelScope/w2v-bert-2.0",
}
BIGVGAN_REPO = "nvidia/bigvgan_v2_22khz_80band_256x"
HF_RAW_URL = "https://huggingface.co/spaces/IndexTeam/IndexTTS-2-Demo/resolve/main"
MS_RAW_URL = "https://hf-mirror.com/spaces/IndexTeam/IndexTTS-2-Demo/resolve/main"
EXTRA_FILES = ["voice_01.wav"]
# A probe that connects this much later than the other counts as "slower"
# (loopback connects take microseconds: only a real delay decides).
SLOWER_BY = 1.0
# ... and never less than this, in real seconds, whatever the time scale: a
# threshold is no wait to shorten, and a loaded 2-CPU test machine stalls a
# probe (its name lookup through the DNS stand-in, its connect) by 100 ms
# and more, which the scaled 0.1 s took for a slower Hugging Face (CI
# runs of test_downloads and test_sim_world went to ModelScope so).
SLOWER_FLOOR = 0.5


def log(msg):
    print(msg, flush=True)


# -- network_detection.py --------------------------------------------------------------
def _probe(host, timeout):
    """A bare TCP connect to host:443, closed at once, nothing sent: (ok, seconds)."""
    t0 = time.monotonic()
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            pass
        return True, time.monotonic() - t0
    except OSError:
        return False, time.monotonic() - t0


def need_proxy(timeout=3.0):
    """True: use ModelScope (and hf-mirror.com). USE_MODELSCOPE=true|false decides
    without probing; else huggingface.co:443 then modelscope.cn:443, 3 s each."""
    env = (os.environ.get("USE_MODELSCOPE") or "").strip().lower()
    if env in ("1", "true", "yes"):
        return True
    if env in ("0", "false", "no"):
        return False
    t = scaled(timeout)
    hf_ok, hf_t = _probe("huggingface.co", t)
    ms_ok, ms_t = _probe("modelscope.cn", t)
    if not hf_ok:
        log(f">> huggingface.co unreachable; {'using ModelScope' if ms_ok else 'modelscope.cn unreachable too'}")
        return ms_ok
    return ms_ok and hf_t > ms_t + max(scaled(SLOWER_BY), SLOWER_FLOOR)


_USING_MODELSCOPE = None


def using_modelscope():
    global _USING_MODELSCOPE
    if _USING_MODELSCOPE is None:
        _USING_MODELSCOPE = need_proxy()
    return _USING_MODELSCOPE


# -- examples_downloader.py --------------------------------------------------------------
def download_file(url, local_path, timeout=60, min_size=0):
    """urlopen, write NAME.tmp in 8 KiB pieces, os.replace; the .tmp removed on failure."""
    req = urllib.request.Request(url, headers={"User-Agent": "IndexTTS/2.0"})
    with urllib.request.urlopen(req, timeout=timeout) as response:
        if "text/html" in response.headers.get("Content-Type", ""):
            raise RuntimeError(f"Server returned HTML instead of binary file for {url}")
        tmp_path = local_path + ".tmp"
        try:
            with open(tmp_path, "wb") as f:
                while True:
                    chunk = response.read(8192)
                    if not chunk:
                        break
                    f.write(chunk)
            if min_size and os.path.getsize(tmp_path) < min_size:
                raise RuntimeError(f"Downloaded file is suspiciously small for {url}")
            os.replace(tmp_path, local_path)
        finally:
            if os.path.exists(tmp_path):
                os.remove(tmp_path)


def ensure_examples_available(app_dir):
    examples = os.path.join(app_dir, "examples")
    os.makedirs(examples, exist_ok=True)
    base = MS_RAW_URL if need_proxy() else HF_RAW_URL
    for name in EXTRA_FILES:
        path = os.path.join(examples, name)
        if os.path.exists(path):
            continue
        try:
            download_file(f"{base}/examples/{name}", path, timeout=scaled(60), min_size=100)
        except Exception as e:  # noqa: BLE001  (the real one logs any failure and goes on)
            log(f">> Failed to download {name}: {e}")


# -- model_download.py -----------------------------------------------------------------------
def _download_single_file(repo_id, filename, local_path):
    local_dir = os.path.dirname(local_path)
    os.makedirs(local_dir, exist_ok=True)
    if using_modelscope():
        ms_id = HF_TO_MODELSCOPE_REPO_MAP.get(repo_id, repo_id)
        try:
            got = msclient.model_file_download(ms_id, filename, local_dir)
            if got and os.path.abspath(got) != os.path.abspath(local_path):
                shutil.copy2(got, local_path)
            if not os.path.isfile(local_path):
                raise RuntimeError(f"Downloaded file not found at expected path: {local_path}")
            return local_path
        except Exception as e:  # noqa: BLE001
            log(f">> ModelScope download failed for {ms_id}/{filename}: {e}. Falling back to "
                "hf-mirror.")
        url = f"https://hf-mirror.com/{repo_id}/resolve/main/{filename}"
        download_file(url, local_path, timeout=scaled(300))
    else:
        got = hfhub.hf_hub_download(repo_id, filename, local_dir=local_dir)
        if got and os.path.abspath(got) != os.path.abspath(local_path):
            shutil.copy2(got, local_path)
        if not os.path.isfile(local_path):
            raise RuntimeError(f"Downloaded file not found at expected path: {local_path}")
    return local_path


def ensure_config_available(model_dir):
    path = os.path.join(model_dir, "config.yaml")
    if os.path.isfile(path):
        return
    log(f">> config.yaml not found in {model_dir}, downloading...")
    _download_single_file("IndexTeam/IndexTTS-2", "config.yaml", path)
    log(">> config.yaml downloaded.")


def _find_hf_cache_snapshot(cache_dir, repo_id):
    models = os.path.join(cache_dir, "models--" + repo_id.replace("/", "--"))
    snaps = os.path.join(models, "snapshots")
    if not os.path.isdir(models) or not os.path.isdir(snaps):
        return None
    ref = os.path.join(models, "refs", "main")
    if os.path.isfile(ref):
        with open(ref) as f:
            snap = os.path.join(snaps, f.read().strip())
        if os.path.isdir(snap) and os.listdir(snap):
            return snap
    try:
        entries = [os.path.join(snaps, e) for e in os.listdir(snaps)
                   if os.path.isdir(os.path.join(snaps, e))]
        if len(entries) == 1:
            return entries[0]
    except OSError:
        pass
    return None


def _locate_snapshot(repo_id, local_cache_dir):
    default = os.environ.get("HF_HUB_CACHE",
                             os.path.join(os.path.expanduser("~"), ".cache", "huggingface", "hub"))
    dirs = [local_cache_dir]
    if os.path.abspath(default) != os.path.abspath(local_cache_dir):
        dirs.append(default)
    for d in dirs:
        snap = _find_hf_cache_snapshot(d, repo_id)
        if snap:
            return snap
    return None


def snapshot_download(repo_id, local_dir):
    if using_modelscope():
        ms_id = HF_TO_MODELSCOPE_REPO_MAP.get(repo_id, repo_id)
        os.makedirs(local_dir, exist_ok=True)
        return msclient.snapshot_download(ms_id, local_dir)
    return hfhub.snapshot_download(repo_id, local_dir=local_dir, max_workers=8)


def ensure_models_available(model_dir, bigvgan_repo=BIGVGAN_REPO):
    """The flat layout under <model_dir>/hf_cache/; an old models-- cache is copied."""
    cache_dir = os.path.join(model_dir, "hf_cache")
    os.makedirs(cache_dir, exist_ok=True)
    paths = {}
    w2v_dir = os.path.join(cache_dir, "w2v-bert-2.0")
    if not os.path.isdir(w2v_dir) or not os.listdir(w2v_dir):
        old = _locate_snapshot("facebook/w2v-bert-2.0", cache_dir)
        if old:
            log(f">> Migrating w2v-bert-2.0 from existing HF cache to {w2v_dir}...")
            shutil.copytree(old, w2v_dir, dirs_exist_ok=True)
        else:
            log(f">> Downloading w2v-bert-2.0 to {w2v_dir}...")
            snapshot_download("facebook/w2v-bert-2.0", w2v_dir)
    paths["w2v_bert"] = w2v_dir
    for key, repo_id, remote, local, label in (
            ("semantic_codec", "amphion/MaskGCT", "semantic_codec/model.safetensors",
             os.path.join(cache_dir, "semantic_codec_model.safetensors"), "MaskGCT semantic codec"),
            ("campplus", "funasr/campplus", "campplus_cn_common.bin",
             os.path.join(cache_dir, "campplus_cn_common.bin"), "CAMPPlus")):
        if not os.path.isfile(local):
            old = _locate_snapshot(repo_id, cache_dir)
            old_file = os.path.join(old, *remote.split("/")) if old else None
            if old_file and os.path.isfile(old_file):
                log(f">> Migrating {label} from existing HF cache...")
                shutil.copy2(old_file, local)
            else:
                log(f">> Downloading {label} to {local}...")
                _download_single_file(repo_id, remote, local)
        paths[key] = local
    bigvgan_dir = os.path.join(cache_dir, "bigvgan")
    missing = [f for f in ("config.json", "bigvgan_generator.pt")
               if not os.path.isfile(os.path.join(bigvgan_dir, f))]
    if missing:
        old = _locate_snapshot(bigvgan_repo, cache_dir)
        os.makedirs(bigvgan_dir, exist_ok=True)
        if old and all(os.path.isfile(os.path.join(old, f)) for f in missing):
            log(f">> Migrating BigVGAN from existing HF cache to {bigvgan_dir}...")
            for f in missing:
                shutil.copy2(os.path.join(old, f), os.path.join(bigvgan_dir, f))
        else:
            log(f">> Downloading BigVGAN to {bigvgan_dir}...")
            for f in missing:
                _download_single_file(bigvgan_repo, f, os.path.join(bigvgan_dir, f))
    paths["bigvgan"] = bigvgan_dir
    log(">> All auxiliary models ready.")
    return paths


def local_path(paths, repo_id, filename):
    """Where the flat layout keeps (repo_id, filename): what the models load."""
    if repo_id == "facebook/w2v-bert-2.0":
        return os.path.join(paths["w2v_bert"], filename)
    if repo_id == "amphion/MaskGCT":
        return paths["semantic_codec"]
    if repo_id == "funasr/campplus":
        return paths["campplus"]
    return os.path.join(paths["bigvgan"], filename)


if __name__ == "__main__":
    sys.exit("indextts2026.py is a module of webui.py (--sim-generation 2026)")
