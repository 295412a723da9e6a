"""Live download progress, stall messages and the cache's file system, from
the trace alone: tts-launch starts the IndexTTS2 simulator against the local
hub with its fault knobs (bandwidth, blackhole) or with the cache on a tmpfs
mounted here. Needs root and BPF: skipped without, failed when CI is set.
No timed assertions: the waits are generous and only wait."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from simfix import (PY, SIM, WAIT, Launch, base_env, free_port, hub, hub_proc,  # noqa: F401
                    make_app, models, sim_app)

ROOT = Path(__file__).resolve().parents[2]
TTS = Path(os.environ.get("TTS_LAUNCH", ROOT / "build" / "tts-launch"))


LINE = re.compile(r"^tts-launch: downloading (\S+): ([\d.]+) (B|KiB|MiB|GiB) at ([\d.]+) "
                  r"(B|KiB|MiB|GiB)/s(?:, \d+% of [^\n]+)?$", re.M)


def test_progress_lines_for_a_slow_download(tracing_ok, models, hub, tmp_path):  # noqa: F811
    # ~7 s for the 1.1 MB model.safetensors: samples (every 1-3 s) see it grow
    hub.control(bandwidth=150000)
    app = sim_app(tmp_path, models)
    run = Launch(tmp_path / "run", app, {"HF_ENDPOINT": hub.url})
    run.wait(run.timeline.exists)
    tl = run.stop()
    assert tl["marks"].get("ready"), run.output()
    out = run.output()
    lines = LINE.findall(out)
    assert lines, out
    # named by repo and file, ORG/NAME:FILE (the snapshot path probed before
    # the blob opened: hfcache.c's rule, docs/timeline.md "downloads")
    names = {n for n, *_ in lines}
    repos = ("facebook/w2v-bert-2.0:", "amphion/MaskGCT:", "funasr/campplus:",
             "nvidia/bigvgan_v2_22khz_80band_256x:")
    assert names and all(n.startswith(repos) for n in names), names
    # (a file under 10 MiB grows only at its end: while it downloads, its
    # progress is the network bytes received, counted only when exactly one
    # download is in flight; under load a sample can miss that window, see
    # the note in docs/diagnose.md, so its "downloaded" line is the proof)
    # the rate is over the last 5 s (a sample after a pause can round to 0.0)
    assert any(float(rate) > 0 for *_, rate, _u in lines), lines
    # not a terminal: log lines, no carriage returns; the log file has them too
    assert "\r" not in out
    assert LINE.search(run.log.read_text())
    assert "tts-launch: downloaded facebook/w2v-bert-2.0:model.safetensors:" in out, out
    # nothing stalled: a slow download is progress
    assert tl["progress"]["stalls"] == [] and tl["progress"]["samples"] > 0


def test_progress_off(tracing_ok, models, hub, tmp_path):  # noqa: F811
    app = sim_app(tmp_path, models)
    hub.control(bandwidth=2000000)
    run = Launch(tmp_path / "run", app, {"HF_ENDPOINT": hub.url}, trace="progress = off")
    run.wait(run.timeline.exists)
    tl = run.stop()
    assert tl["marks"].get("ready")
    assert "tts-launch: download" not in run.output()


def test_stall_names_the_blackholed_hub(tracing_ok, models, hub, tmp_path):  # noqa: F811
    hub.control(blackhole=True)
    app = sim_app(tmp_path, models)
    run = Launch(tmp_path / "run", app, {"HF_ENDPOINT": hub.url, "HF_HUB_ETAG_TIMEOUT": "60"},
                 trace="stall = 2s")
    peer = "127.0.0.1:%d" % hub.port
    said = re.compile(r"tts-launch: no progress for \d+ s: waiting \d+ s for an answer from "
                      r"%s, 1st attempt \(it accepted the connection and sent nothing back; "
                      r"each metadata request waits HF_HUB_ETAG_TIMEOUT\)" % re.escape(peer))
    run.wait(lambda: said.search(run.output()))
    tl = run.stop()  # the service never became ready: interrupted
    out = run.output()
    assert said.search(out), out
    assert said.search(run.log.read_text())
    stalls = tl["progress"]["stalls"]
    assert stalls and any(w["kind"] == "peer-silent" and w["peer"] == peer and w["attempt"] == 1
                          for s in stalls for w in s["waiting_on"])


def test_cache_on_tmpfs_is_not_persistent(tracing_ok, models, hub, tmp_path):  # noqa: F811
    cache = tmp_path / "cache"
    cache.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(cache)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        app = sim_app(tmp_path, models)
        run = Launch(tmp_path / "run", app, {"HF_ENDPOINT": hub.url,
                                             "HF_HUB_CACHE": str(cache / "hub")})
        run.wait(run.timeline.exists)
        tl = run.stop()
        rc = subprocess.run([str(TTS), "diagnose", str(run.timeline), "--format", "json"],
                            capture_output=True, text=True, timeout=WAIT)
    finally:
        subprocess.run(["umount", str(cache)])
    assert tl["marks"].get("ready"), run.output()
    fs = {e["dir"]: e for e in tl["cache_fs"]}
    assert fs[str(cache / "hub")]["fs_type"] == "tmpfs"
    assert fs[str(cache / "hub")]["persistent"] is False
    assert fs[str(cache / "hub")]["read_only"] is False
    hits = [f for f in tl["findings"] if f["id"] == "cache-not-persistent"]
    assert len(hits) == 1, tl["findings"]
    ev = hits[0]["evidence"]
    assert ev["dir"] == str(cache / "hub") and ev["fs_type"] == "tmpfs"
    assert ev["role"] == "HF_HUB_CACHE" and ev["bytes_written"] > 0
    assert "HF_HUB_CACHE" in hits[0]["fix"]
    assert "[cache-not-persistent]" in run.output()
    # the same finding offline, from what was recorded (the tmpfs is gone now)
    off = json.loads(rc.stdout)
    assert [f["id"] for f in off["findings"]] == [f["id"] for f in tl["findings"]]
    assert rc.returncode == 1
