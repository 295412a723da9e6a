"""tts-launch's recognition of downloads, the file side (issue 14), on the
simulator's 2026 world (scripts/sim/world.py): every writer (hub cache,
local_dir, ModelScope, hf-mirror, Xet's offset writes from several threads),
each download named by the file it becomes, its bytes the distinct ranges
written, copies shown as copies, and the download rules of diagnose.

Needs root (the world: unshare -mn, port 443) and BPF; CI runs as root.
"""
import json
import os
import shutil
import subprocess

import pytest

from simfix import (PY, SIM, TTS, WorldLaunch, in_world, make_app, models, need,  # noqa: F401
                    world_env, world_ok)


pytestmark = pytest.mark.usefixtures("world_ok")


def size_of(models, repo, f):
    return models["manifest"][repo]["files"][f]["size"]


def downloads(run):
    assert run.timeline is not None, run.output()
    return {d["name"]: d for d in run.timeline["downloads"]}


def findings(run):
    """The findings to act on: an `info` one (a fact that is no problem here,
    such as Debian's CPU-only torch never trying CUDA) changes nothing."""
    return {f["id"]: f for f in run.timeline["findings"] if f["severity"] != "info"}


def launch(tmp_path, models, omit=(), env=None, world_args=(), pre=None):
    app = make_app(tmp_path, models, omit=omit)
    os.symlink(os.path.join(SIM, "webui.py"), app / "webui.py")
    if pre:
        pre(app)
    run = WorldLaunch(tmp_path / "run", app, env=env, world_args=world_args)
    if os.environ.get("DL_DUMP") and run.timeline:  # for debugging a test: the timeline
        with open(os.environ["DL_DUMP"], "w") as f:
            json.dump({"rc": run.rc, "tl": run.timeline, "out": run.output()}, f)
    return run, app


W2V = "facebook/w2v-bert-2.0"
CAMPPLUS = "funasr/campplus"
MASKGCT = "amphion/MaskGCT"
BIGVGAN = "nvidia/bigvgan_v2_22khz_80band_256x"
# peers' rules (network side, issue 14): the need_proxy() probe is still
# reported by them until they learn it; not this file's to assert
NET_RULES = {"hub-unreachable", "dns-failure"}
# ensure_models_available's flat layout: name -> (repo, file)
FLAT = {"hf_cache/w2v-bert-2.0/model.safetensors": (W2V, "model.safetensors"),
        "hf_cache/w2v-bert-2.0/config.json": (W2V, "config.json"),
        "hf_cache/semantic_codec/model.safetensors": (MASKGCT, "semantic_codec/model.safetensors"),
        "hf_cache/campplus_cn_common.bin": (CAMPPLUS, "campplus_cn_common.bin"),
        "hf_cache/bigvgan/config.json": (BIGVGAN, "config.json"),
        "hf_cache/bigvgan/bigvgan_generator.pt": (BIGVGAN, "bigvgan_generator.pt")}


def ck_size(models, name):
    return os.path.getsize(os.path.join(models["checkpoints"], name))


def own_findings(run, also_ok=()):
    """The download check's findings but the network side's (NET_RULES)."""
    return {k: v for k, v in findings(run).items()
            if v["check"] == "download" and k not in NET_RULES and k not in also_ok}


def test_cold_start_every_local_dir_download_named_with_exact_bytes(tmp_path, models):
    """The 2026 cold start: snapshot_download of the main repo (8 workers, Xet:
    offset writes from several threads) and the flat hf_cache/ layout by
    local_dir downloads: each named by the file it becomes, from the
    <b64(sha1(NAME.metadata))>.<etag>.incomplete temp name; bytes = the
    distinct ranges written = the file's size; the semantic codec's copy2 into
    its flat name is a copy, not a download; no download finding."""
    main = ("gpt.pth", "s2mel.pth", "bpe.model", "feat1.pt", "feat2.pt", "wav2vec2bert_stats.pt",
            "qwen0.6bemo4-merge")
    run, app = launch(tmp_path, models, omit=main)
    assert run.rc == 0, run.output()
    dl = downloads(run)
    ck = app / "checkpoints"
    # the main repo's snapshot_download, 8 files at once: every one named, exact
    for name in ("bpe.model", "feat1.pt", "feat2.pt", "wav2vec2bert_stats.pt",
                 "qwen0.6bemo4-merge/config.json", "qwen0.6bemo4-merge/model.safetensors",
                 "qwen0.6bemo4-merge/tokenizer.json"):
        assert dl[name]["writer"] == "local_dir" and dl[name]["complete"], name
        assert dl[name]["bytes"] == ck_size(models, name), name
    for name in ("gpt.pth", "s2mel.pth"):
        d = dl[name]
        assert d["writer"] == "local_dir" and d["complete"], d
        assert d["bytes"] == d["size"] == ck_size(models, name), d
        assert d["final_path"] == str(ck / name)
        assert "/.cache/huggingface/download/" in d["path"] and d["path"].endswith(".incomplete")
        assert d["ranges_exact"] and d["percent"] == 100.0 and d["expected_from"] == "kernel"
    # Xet: several threads wrote gpt.pth at offsets; the union is one range
    assert dl["gpt.pth"]["threads"] > 1 and dl["gpt.pth"]["ranges"] == 1
    for name, (repo, f) in FLAT.items():
        assert dl[name]["writer"] == "local_dir", name
        assert dl[name]["bytes"] == size_of(models, repo, f), name
    # the examples come through requests into examples/ (NAME.tmp, os.replace)
    assert dl["examples/voice_01.wav"]["writer"] == "mirror"
    # WeTextProcessing's FSTs (NAME.tmp built locally) are not downloads
    assert not [n for n in dl if "tagger_cache" in n]
    copies = {c["name"]: c for c in run.timeline["copies"]}
    cp = copies["hf_cache/semantic_codec_model.safetensors"]
    assert cp["kind"] == "copy" and not cp["from_cache"]
    assert cp["bytes"] == size_of(models, MASKGCT, "semantic_codec/model.safetensors")
    assert cp["source"] == str(ck / "hf_cache" / "semantic_codec" / "model.safetensors")
    assert "hf_cache/semantic_codec_model.safetensors" not in dl
    # Xet's chunk cache is the transfer's, not a download
    classes = {f["path"]: f["class"] for f in run.timeline["files"]}
    assert any(c == "xet_cache" for p, c in classes.items() if "/chunk-cache/" in p)
    # (download-slow depends on how loaded the machine is: a cold start may be slow)
    assert own_findings(run, also_ok=("download-slow",)) == {}, own_findings(run)


def test_warm_start_has_no_download_and_no_finding(tmp_path, models):
    """Every file there (the flat layout from a first start): nothing written,
    nothing copied, no finding at all (the network side's included)."""
    run, app = launch(tmp_path / "a", models)
    assert run.rc == 0, run.output()
    run2 = WorldLaunch(tmp_path / "b", app)
    assert run2.rc == 0, run2.output()
    assert run2.timeline["downloads"] == [] and run2.timeline["copies"] == []
    # no finding at all: the reachability probe (need_proxy) is not a failure
    assert findings(run2) == {}, findings(run2)


def test_classic_hub_cache_named_by_repo_and_file_and_wrong_cache(tmp_path, models):
    """The classic generation (#690): hf_hub_download into ~/.cache/huggingface/hub
    although model_dir/hf_cache was meant: blobs/ETAG.incomplete named
    ORG/NAME:FILE (from the snapshot link); wrong-cache's fix moves the
    models--* folders of the cache root, never a temp file."""
    run, app = launch(tmp_path, models, env={"SIM_GENERATION": "classic", "SIM_CACHE_BUG": "1"})
    assert run.rc == 0, run.output()
    dl = downloads(run)
    d = dl["facebook/w2v-bert-2.0:model.safetensors"]
    assert d["writer"] == "hub_cache" and d["complete"]
    assert d["bytes"] == size_of(models, W2V, "model.safetensors")
    assert "/models--facebook--w2v-bert-2.0/blobs/" in d["path"]
    assert d["link"].endswith("/snapshots/" + d["link"].split("/snapshots/")[1])
    assert "funasr/campplus:campplus_cn_common.bin" in dl
    wc = findings(run)["wrong-cache"]
    home = str(tmp_path / "run" / "hf_home" / "hub")
    assert wc["evidence"]["written_to"] == home
    assert "mv %s/models--* " % home in wc["fix"]
    assert ".incomplete" not in wc["fix"]


def test_modelscope_downloads_named_from_the_temp_dir(tmp_path, models):
    """huggingface.co unreachable: IndexTTS2 goes to ModelScope, which writes
    LOCAL/._____temp/NAME and moves it into LOCAL/NAME."""
    run, app = launch(tmp_path, models, world_args=("--unreachable", "hub"))
    assert run.rc == 0, run.output()
    dl = downloads(run)
    for name in ("hf_cache/campplus_cn_common.bin", "hf_cache/w2v-bert-2.0/model.safetensors"):
        d = dl[name]
        assert d["writer"] == "modelscope" and d["complete"], d
        assert "/._____temp/" in d["path"]
        repo, f = FLAT[name]
        assert d["bytes"] == size_of(models, repo, f)
    assert "wrong-cache" not in findings(run)


def test_mirror_fallback_downloads_named_from_the_tmp_name(tmp_path, models):
    """USE_MODELSCOPE=true, ModelScope down: the hf-mirror fallback writes
    NAME.tmp and os.replace()s it (w2v-bert-2.0, a snapshot, is there)."""
    def pre(app):
        w2v = app / "checkpoints" / "hf_cache" / "w2v-bert-2.0"
        w2v.mkdir(parents=True)
        for f in models["manifest"][W2V]["files"]:
            shutil.copy(os.path.join(models["dir"], "hub", *W2V.split("/"), f), w2v / f)
    run, app = launch(tmp_path, models, env={"USE_MODELSCOPE": "true"},
                      world_args=("--down", "modelscope"), pre=pre)
    assert run.rc == 0, run.output()
    dl = downloads(run)
    d = dl["hf_cache/campplus_cn_common.bin"]
    assert d["writer"] == "mirror" and d["complete"] and d["path"].endswith(".bin.tmp")
    assert d["bytes"] == size_of(models, CAMPPLUS, "campplus_cn_common.bin")
    assert dl["hf_cache/bigvgan/bigvgan_generator.pt"]["writer"] == "mirror"
    assert "wrong-cache" not in findings(run)


def test_migration_from_an_old_cache_is_copies_not_downloads(tmp_path, models):
    """An old models-- cache in hf_cache/: ensure_models_available copies it
    (copytree/copy2: sendfile) into the flat layout; shown as copies from the
    cache, with their bytes, and not as downloads."""
    def pre(app):
        old = app / "checkpoints" / "hf_cache"
        env = world_env(HF_HOME=str(tmp_path / "h0"), HF_HUB_CACHE=str(old),
                        HF_HUB_DISABLE_XET="1")
        for repo, f in ((W2V, "config.json"), (W2V, "model.safetensors"),
                        (CAMPPLUS, "campplus_cn_common.bin")):
            p = in_world(tmp_path / "pre", [PY, os.path.join(SIM, "hfhub.py"), repo, f], env=env)
            assert p.returncode == 0, p.stderr
    run, app = launch(tmp_path, models, pre=pre)
    assert run.rc == 0, run.output()
    copies = {c["name"]: c for c in run.timeline["copies"]}
    for name in ("hf_cache/w2v-bert-2.0/model.safetensors", "hf_cache/campplus_cn_common.bin"):
        c = copies[name]
        assert c["from_cache"] and "/models--" in c["source"], c
        repo, f = FLAT[name]
        assert c["bytes"] == size_of(models, repo, f)
    dl = downloads(run)
    assert "hf_cache/w2v-bert-2.0/model.safetensors" not in dl
    assert "hf_cache/campplus_cn_common.bin" not in dl
    out = run.output()
    assert "tts-launch: migrating hf_cache/w2v-bert-2.0/model.safetensors (" in out, out
    assert "from the old cache (" in out and "copied, not downloaded)" in out
    assert "hf_cache/bigvgan/bigvgan_generator.pt" in dl  # not in the old cache


def test_mid_stream_drop_fails_the_start_and_names_the_partial_file(tmp_path, models):
    """HF_HUB_DISABLE_XET=1, the CAS bridge closing after 20000 bytes: urllib3
    2.x's ChunkedEncodingError ends the start; the download is there with its
    20000 bytes, never completed, and download-interrupted names it."""
    def pre(app):
        # w2v-bert-2.0 there: the first transfer is a single file (a partial
        # snapshot folder would not be fetched again: IndexTTS2 checks that
        # the folder is not empty, not what is in it)
        w2v = app / "checkpoints" / "hf_cache" / "w2v-bert-2.0"
        w2v.mkdir(parents=True)
        for f in models["manifest"][W2V]["files"]:
            shutil.copy(os.path.join(models["dir"], "hub", *W2V.split("/"), f), w2v / f)
    run, app = launch(tmp_path, models, env={"HF_HUB_DISABLE_XET": "1"}, pre=pre,
                      world_args=("--knobs", 'cas={"drop_after": 20000}'))
    assert run.rc != 0, run.output()
    dl = downloads(run)
    partial = [d for d in dl.values() if not d["complete"]]
    assert len(partial) == 1, dl
    d = partial[0]
    assert d["bytes"] == 20000 and d["threads"] == 1 and d["writer"] == "local_dir"
    f = findings(run)["download-interrupted"]
    assert f["evidence"]["name"] == d["name"] and f["message"].startswith(d["name"] + ":")
    assert f["evidence"]["bytes_written"] == 20000
    # started again: plain HTTP resumes the partial file (Range): this run
    # writes the rest, from 20000 on; the file is whole
    run2 = WorldLaunch(tmp_path / "run2", app, env={"HF_HUB_DISABLE_XET": "1"})
    assert run2.rc == 0, run2.output()
    d2 = downloads(run2)[d["name"]]
    assert d2["complete"] and d2["resumed_from"] == 20000 and d2["percent"] == 100.0
    assert d2["bytes"] == d2["size"] - 20000 and d2["path"] == d["path"]
    assert "download-interrupted" not in findings(run2)


def test_xet_chunk_cache_on_tmpfs(tmp_path, models):
    """HF_XET_CACHE on tmpfs (/dev/shm): the Xet transfer's chunk cache files are
    the transfer's (class xet_cache, the model's xet section), not downloads;
    xet-cache says every byte is written twice, into RAM."""
    shm = "/dev/shm/tts-launch-test-%d" % os.getpid()
    need(subprocess.run(["stat", "-f", "-c", "%T", "/dev/shm"], capture_output=True,
                         text=True).stdout.strip() == "tmpfs", "/dev/shm is not a tmpfs")
    try:
        run, app = launch(tmp_path, models, omit=("gpt.pth",), env={"HF_XET_CACHE": shm})
        assert run.rc == 0, run.output()
        x = run.timeline["xet"]
        assert x["dir"] == shm and x["fs_type"] == "tmpfs" and not x["persistent"]
        assert x["files"] > 0 and x["bytes_written"] >= ck_size(models, "gpt.pth")
        assert not [d for d in run.timeline["downloads"] if d["path"].startswith(shm)]
        f = findings(run)["xet-cache"]
        assert f["evidence"]["dir"] == shm and "HF_XET_CACHE" in f["fix"]
    finally:
        shutil.rmtree(shm, ignore_errors=True)


HOLD = r"""
import fcntl, os, sys, time
lock, want = sys.argv[1], int(sys.argv[2])
os.makedirs(os.path.dirname(lock), exist_ok=True)
fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
st = os.stat(lock)
seen, polls = (st.st_mtime_ns, st.st_ctime_ns), 0
# filelock opens the lock O_TRUNC and fchmods it on every poll (50 ms apart):
# each poll changes its times; let go after `want` of them
while polls < want:
    time.sleep(0.005)
    st = os.stat(lock)
    if (st.st_mtime_ns, st.st_ctime_ns) != seen:
        seen, polls = (st.st_mtime_ns, st.st_ctime_ns), polls + 1
fcntl.flock(fd, fcntl.LOCK_UN)
"""


def test_start_waiting_on_another_process_download_lock(tmp_path, models):
    """Another process holds hf_cache's download lock of campplus_cn_common.bin
    until the start has polled it 60 times (filelock: LOCK_NB + 50 ms sleep, so
    at least 2.95 s; live snapshots, at least one a second while polls are
    refused, see the holder): download-lock-wait names the file, the lock and the
    holder's pid."""
    lock = (tmp_path / "app" / "checkpoints" / "hf_cache" / ".cache" / "huggingface" /
            "download" / "campplus_cn_common.bin.lock")
    holder = {}

    def pre(app):
        holder["p"] = subprocess.Popen([PY, "-c", HOLD, str(lock), "60"], stdout=subprocess.PIPE,
                                       text=True)
        assert holder["p"].stdout.readline().strip() == "held"
    try:
        run, app = launch(tmp_path, models, pre=pre)
    finally:
        holder["p"].kill()
        holder["p"].wait()
    assert run.rc == 0, run.output()
    f = findings(run)["download-lock-wait"]
    ev = f["evidence"]
    assert ev["name"] == "hf_cache/campplus_cn_common.bin" and ev["lock"] == str(lock)
    # (the holder may count one more change than refusals: the first open)
    assert ev["holder_pid"] == holder["p"].pid and ev["polls"] >= 55
    assert ev["seconds"] >= 2.5 and not ev["still_waiting"]
    assert "pid %d" % holder["p"].pid in f["message"]


def test_models_downloaded_twice_when_the_old_cache_is_elsewhere(tmp_path, models):
    """HF_HOME/hub holds campplus from an older revision (the same file: its
    blob, by etag): huggingface_hub's local_dir mode copies from the cache
    only at the exact commit, so the flat layout downloads it again;
    downloaded-twice names the file and the cache that had it."""
    home = tmp_path / "run" / "hf_home"

    def pre(app):
        env = world_env(HF_HOME=str(home), HF_HUB_DISABLE_XET="1")
        p = in_world(tmp_path / "pre", [PY, os.path.join(SIM, "hfhub.py"), CAMPPLUS,
                                        "campplus_cn_common.bin"], env=env)
        assert p.returncode == 0, p.stderr
        # the snapshot as an older commit had it
        repo = home / "hub" / "models--funasr--campplus"
        (snap,) = (repo / "snapshots").iterdir()
        snap.rename(repo / "snapshots" / ("0" * 40))
        (repo / "refs" / "main").write_text("0" * 40)
    run, app = launch(tmp_path, models, pre=pre)
    assert run.rc == 0, run.output()
    d = downloads(run)["hf_cache/campplus_cn_common.bin"]
    assert d["also_in"].startswith(str(home / "hub" / "models--funasr--campplus" / "blobs"))
    f = findings(run)["downloaded-twice"]
    assert f["evidence"]["cache"] == str(home / "hub") and f["evidence"]["reason"] == "old_cache"
    assert [x["name"] for x in f["evidence"]["files"]] == ["hf_cache/campplus_cn_common.bin"]
    assert "HF_HUB_CACHE = %s" % (home / "hub") in f["fix"]


def test_live_progress_names_percent_and_time_left(tmp_path, models):
    """A slow CAS (bandwidth cap): the live lines name the download by the file
    it becomes and give its percent of the expected size (IndexTTS2's known
    size, marked so; a Xet temp's highest offset is only a lower bound, see
    test_xet_offset_writes_never_said_as_the_total) and the time left at the
    current rate."""
    import re
    run, app = launch(tmp_path, models, world_args=("--knobs", 'cas={"bandwidth": 30000}'))
    assert run.timeline is not None, run.output()
    out = run.output()
    lines = re.findall(r"^tts-launch: downloading (\S+): [\d.]+ \S+ at [\d.]+ \S+/s, (\d+)% "
                       r"of (about )?[\d.]+ \S+( \(known size\))?(, \d+ (?:s|min) left)?$",
                       out, re.M)
    assert lines, out
    assert {n for n, *_ in lines} <= set(FLAT) | {"examples/voice_01.wav"}, lines
    # the flat layout's files before their highest offset is written: IndexTTS2's
    # known sizes, an estimate ("about ... (known size)"), with a time left
    known = [x for x in lines if x[2] and x[3]]
    assert known, lines
    assert [x for x in known if x[4]], lines
    assert "tts-launch: downloaded hf_cache/w2v-bert-2.0/model.safetensors: " in out
    # (the exit status is not this test's: a loaded machine may need SIGKILL at stop)
    assert run.timeline["marks"].get("ready") is not None, out


UNITS = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}


def fmt_bytes(n):
    """util.c's fmt_bytes: what a line says of n bytes"""
    i, units = 0, list(UNITS)
    while n >= 1024 and i < 4:
        n /= 1024
        i += 1
    return "%.1f %s" % (n, units[i]) if i else "%.0f %s" % (n, units[i])


def said(num, unit):
    """the bytes a line's "1.2 MiB" stands for, and its rounding (0.05 unit)"""
    return float(num) * UNITS[unit], (0.05 if unit != "B" else 0.5) * UNITS[unit]


def real_size(models, name):
    if name in FLAT:
        return size_of(models, *FLAT[name])
    return ck_size(models, name)


def test_xet_offset_writes_never_said_as_the_total(tmp_path, models):
    """Xet with four range GETs at once from a slow CAS: w2v-bert's 9 terms are
    written at offsets by four threads, its highest offset so far below its
    size until the last batch (and beyond what was written whenever a later
    term lands first: the demo's "38% of 5.2 MiB" for a 65.8 MiB file). That
    offset is a lower
    bound ("of at least N so far", no percent, no time left), never a total;
    IndexTTS2's known size (the real file's, far above the simulator's) is
    said as "about" only; a line never claims more of a file than the file
    holds; and "downloaded NAME: SIZE" gives the file's size. The timeline
    records the same: the kernel's size once renamed, the known size dropped
    for a file of another size."""
    import re
    run, app = launch(tmp_path, models, env={"HF_XET_NUM_CONCURRENT_RANGE_GETS": "4"},
                      world_args=("--knobs", 'cas={"bandwidth": 25000}'))
    assert run.timeline is not None, run.output()
    out = run.output()
    lines = re.findall(r"^tts-launch: downloading (\S+): ([\d.]+) (B|KiB|MiB|GiB) (?:at [^,\n]+"
                       r"|, stalled[^)]+\))(.*)$", out, re.M)
    lines = [x for x in lines if x[0] in FLAT]
    assert [x for x in lines if x[0] == "hf_cache/w2v-bert-2.0/model.safetensors"], out
    for name, num, unit, tail in lines:
        size = real_size(models, name)
        have, r = said(num, unit)
        # (a sample between the last bytes received and the last pwrite counts
        # the answer's framing too: a few hundred bytes per range request)
        assert have <= size * 1.02 + 4096 + r, (name, size, num, unit, tail)
        m = re.fullmatch(r", of at least ([\d.]+) (B|KiB|MiB|GiB) so far", tail)
        if m:
            low, r2 = said(*m.groups())
            assert low <= size + r2, (name, size, tail)
            continue
        m = re.fullmatch(r", (\d+)% of (about )?([\d.]+) (B|KiB|MiB|GiB)( \(known size\))?"
                         r"(, \d+ (?:s|min) left)?", tail)
        assert m or tail == "", (name, tail)
        if m:
            total, r2 = said(m.group(3), m.group(4))
            # never a total below the file's real size; in flight, only IndexTTS2's
            # known size gives one, said as an estimate
            assert total + r2 >= size, (name, size, tail)
            assert m.group(2) and m.group(5), (name, tail)
            assert int(m.group(1)) / 100 * total <= size * 1.02 + 4096 + r2, (name, tail)
    dl = downloads(run)
    for name in FLAT:
        size = real_size(models, name)
        assert "tts-launch: downloaded %s: %s\n" % (name, fmt_bytes(size)) in out, (name, out)
        d = dl[name]
        assert d["expected_from"] == "kernel" and d["expected_size"] == size, d
        assert d["percent"] == 100.0, d
        # the simulator's files are scaled down: every known size is wrong for them
        if d["known_size"]:
            assert d["known_dropped"] and d["known_size"] > size, d
    w2v = dl["hf_cache/w2v-bert-2.0/model.safetensors"]
    assert w2v["threads"] > 1 and w2v["known_size"] == 2300000000, w2v
    assert run.timeline["marks"].get("ready") is not None, out


def test_deleted_config_yaml_is_downloaded_again(tmp_path, models):
    """#701: a git pull deletes checkpoints/config.yaml from a warm app; the next
    start downloads it again (ensure_config_available: a local_dir download into
    model_dir, whose metadata from the first download is still there):
    downloaded-twice says so (reason deleted), naming the file; the first
    download of it was no such finding."""
    run, app = launch(tmp_path / "a", models, omit=("config.yaml",))
    assert run.rc == 0, run.output()
    assert downloads(run)["config.yaml"]["complete"], downloads(run)
    assert "downloaded-twice" not in findings(run)
    ck = app / "checkpoints"
    (ck / "config.yaml").unlink()
    run2 = WorldLaunch(tmp_path / "b", app)
    assert run2.rc == 0, run2.output()
    dl = downloads(run2)
    assert list(dl) == ["config.yaml"] and dl["config.yaml"]["complete"], dl
    f = findings(run2)["downloaded-twice"]
    ev = f["evidence"]
    assert ev["reason"] == "deleted" and ev["bytes"] == ck_size(models, "config.yaml")
    assert ev["files"] == [{"name": "config.yaml", "final": str(ck / "config.yaml"),
                            "metadata": str(ck / ".cache/huggingface/download/config.yaml.metadata"),
                            "bytes": ck_size(models, "config.yaml")}]
    assert f["message"].startswith("1 file (") and "downloaded again into the same place" in \
        f["message"] and "first: config.yaml" in f["message"]
    assert "#701" in f["fix"]
    # the only finding of that start
    assert set(findings(run2)) == {"downloaded-twice"}, findings(run2)


# A cold start per client mode, then a warm one with the same settings: the
# warm start downloads nothing and has no finding at all (network side's too)
# (the hf-mirror fallback: w2v-bert-2.0, a ModelScope snapshot without one, is there)
MODES = {
    "modelscope": ({"USE_MODELSCOPE": "true"}, ()),
    "mirror-fallback": ({"USE_MODELSCOPE": "true"}, ("--down", "modelscope")),
    "hf-endpoint-mirror": ({"HF_ENDPOINT": "https://hf-mirror.com"}, ()),
    "no-xet": ({"HF_HUB_DISABLE_XET": "1"}, ()),
}


def _w2v_there(models):
    def pre(app):
        w2v = app / "checkpoints" / "hf_cache" / "w2v-bert-2.0"
        w2v.mkdir(parents=True)
        for f in models["manifest"][W2V]["files"]:
            shutil.copy(os.path.join(models["dir"], "hub", *W2V.split("/"), f), w2v / f)
    return pre


@pytest.mark.parametrize("mode", sorted(MODES))
def test_warm_start_after_each_mode_has_no_finding(tmp_path, models, mode):
    """ModelScope (USE_MODELSCOPE=true), the hf-mirror fallback (ModelScope
    down), a mirror in HF_ENDPOINT, plain HTTP (HF_HUB_DISABLE_XET=1): after
    the cold start, the warm one downloads nothing and has no finding at all."""
    env, world_args = MODES[mode]
    run, app = launch(tmp_path / "a", models, env=env, world_args=world_args,
                      pre=_w2v_there(models) if mode == "mirror-fallback" else None)
    assert run.rc == 0, run.output()
    assert run.timeline["downloads"], run.output()  # the cold start downloaded
    run2 = WorldLaunch(tmp_path / "b", app, env=env, world_args=world_args)
    assert run2.rc == 0, run2.output()
    assert run2.timeline["downloads"] == [] and run2.timeline["copies"] == []
    assert findings(run2) == {}, findings(run2)


def test_classic_warm_start_has_no_finding(tmp_path, models):
    """The classic generation, its hub cache in model_dir/hf_cache: the warm
    start only asks the hub for the files' etags; nothing downloaded, no finding."""
    env = {"SIM_GENERATION": "classic"}
    run, app = launch(tmp_path / "a", models, env=env)
    assert run.rc == 0, run.output()
    assert run.timeline["downloads"], run.output()
    run2 = WorldLaunch(tmp_path / "b", app, env=env)
    assert run2.rc == 0, run2.output()
    assert run2.timeline["downloads"] == [] and run2.timeline["copies"] == []
    assert findings(run2) == {}, findings(run2)
