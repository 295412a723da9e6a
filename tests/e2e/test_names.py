"""Downloads named by the file they become in every output (issue 16): a cold
start's timeline on the simulator's world, of both generations (2026:
local_dir temp names <b64>.<etag>.incomplete, Xet; classic: hub cache
blobs/<sha>.incomplete), rendered as text, SVG, HTML, Perfetto and Prometheus,
compared with itself, diagnosed: no temp name and no blob hash anywhere, each
download's name (downloads[].name) where the download is shown.

Needs root (the world: unshare -mn, port 443) and BPF; CI runs as root.
"""
import json
import os
import re
import subprocess

import pytest

from simfix import SIM, TTS, WorldLaunch, make_app, models, world_ok  # noqa: F401

MAIN = ("gpt.pth", "s2mel.pth", "bpe.model", "feat1.pt", "feat2.pt", "wav2vec2bert_stats.pt",
        "qwen0.6bemo4-merge")


pytestmark = pytest.mark.usefixtures("world_ok")


def tts(*args):
    r = subprocess.run([str(TTS), *args], capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 1), r.stderr  # diagnose: 1 for warnings
    return r.stdout


def forbidden(tl):
    """What must not be shown: each download's temp file name, the hashes
    in it (a local_dir etag, a blob's sha), and the blob it became."""
    out = {".incomplete"}
    for d in tl["downloads"]:
        base = os.path.basename(d["path"])
        out.add(base)
        out.update(re.findall(r"[0-9a-f]{40,64}", base))
        if d.get("link"):  # a hub cache blob: its name is its hash
            out.add(os.path.basename(d["final_path"]))
    return out


@pytest.mark.parametrize("generation", ["2026", "classic"])
def test_every_output_names_downloads_by_file(tmp_path, models, generation):  # noqa: F811
    env = {"SIM_GENERATION": generation}
    if generation == "classic":  # into the hub cache (model_dir/hf_cache)
        app = make_app(tmp_path, models)
        env["HF_HUB_CACHE"] = str(app / "checkpoints" / "hf_cache")
    else:  # snapshot_download of the main repo too: 8 at once, Xet
        app = make_app(tmp_path, models, omit=MAIN)
    os.symlink(os.path.join(SIM, "webui.py"), app / "webui.py")
    run = WorldLaunch(tmp_path / "run", app, env=env)
    assert run.rc == 0 and run.timeline, run.output()
    tl = run.timeline
    names = [d["name"] for d in tl["downloads"]]
    if generation == "classic":
        assert "facebook/w2v-bert-2.0:model.safetensors" in names, names
        assert all(d["writer"] == "hub_cache" for d in tl["downloads"])
    else:
        assert {"gpt.pth", "hf_cache/w2v-bert-2.0/model.safetensors",
                "examples/voice_01.wav"} <= set(names), names
    bad = forbidden(tl)
    assert len(bad) > len(names)  # the temp names and hashes are there to be found
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps(tl))

    # the phases the run wrote: download:NAME, one per download
    phases = [p["name"] for p in tl["phases"] if p["name"].startswith("download:")]
    assert sorted(phases) == sorted("download:" + n for n in names)

    out = {f: tts("report", str(path), "--format", f)
           for f in ("text", "svg", "html", "perfetto", "prom")}
    out["compare"] = tts("compare", str(path), str(path))
    out["compare-json"] = tts("compare", str(path), str(path), "--format", "json")
    out["diagnose"] = tts("diagnose", str(path))
    diag = json.loads(tts("diagnose", str(path), "--format", "json"))
    # findings' words (their evidence keeps the paths, beside each name)
    out["findings"] = json.dumps([{k: f.get(k) for k in ("title", "message", "fix")}
                                  for f in diag["findings"]])
    for fmt, text in out.items():
        hits = sorted(b for b in bad if b in text)
        assert not hits, (fmt, hits)

    # and the names are there: every download in each view of the downloads
    for n in names:
        assert re.search(r"complete +%s$" % re.escape(n), out["text"], re.M), (n, out["text"])
        assert "download %s (" % n in out["svg"], n
        assert 'data-phase="download:%s"' % n in out["svg"], n
        assert "<td>%s</td>" % n in out["html"], n
        assert 'indextts2_download_bytes_total{file="%s"}' % n in out["prom"], n
        assert 'indextts2_phase_seconds{phase="download:%s"}' % n in out["prom"], n
    spans = {e["name"] for e in json.loads(out["perfetto"])["traceEvents"]
             if e.get("cat") == "download"}
    assert spans == set(names)
    rows = {p["name"] for p in json.loads(out["compare-json"])["phases"]}
    assert {"download:" + n for n in names} <= rows
    for f in diag["findings"]:  # a download finding's files carry their names
        for e in f["evidence"].get("files", []) if f["check"] == "download" else []:
            if isinstance(e, dict) and "path" in e and e["path"].endswith(".incomplete"):
                assert e.get("name") in names, f
