"""`make demo` (scripts/demo, issue 14): the 2026 generation by default, in the
simulator's world (a cold start in the foreground, a warm one, diagnose), and
`--generation classic` the 2025 one; both name downloads by the file they
become, never by a temp name or a blob hash.

Needs root (the 2026 world: unshare -mn, port 443) and BPF; CI runs as root.
"""
import json
import os
import re
import subprocess

import pytest

from conftest import free_port
from simfix import ROOT, TTS, WAIT, need

# the demo's state is shared (build/sim/demo, build/demo, the repository root):
# one demo at a time under pytest-xdist (test_habits' demo runs in this group too)
pytestmark = pytest.mark.xdist_group("demo")

DEMO = ["sh", os.path.join(ROOT, "scripts", "demo")]


def demo(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEMO_", "HF_", "SIM_"))}
    env["DEMO_PORT"] = str(free_port())
    # one stream, in the order said (tts-launch in the foreground writes to stderr)
    d = subprocess.run(DEMO + list(args), cwd=ROOT, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=WAIT * 5)
    assert d.returncode == 0, d.stdout
    return d.stdout


def tts_lines(out):
    """What tts-launch and the demo said: not the service's own output (the
    simulated clients print their temp names, as the real ones do)."""
    return "\n".join(l for l in out.splitlines()
                     if l.startswith(("tts-launch:", "  ", "demo:")))


def no_temp_names(out):
    said = tts_lines(out)
    assert ".incomplete" not in said, said
    assert not re.search(r"download:\S*[0-9a-f]{40}", said), said


@pytest.fixture(autouse=True)
def _ok(tracing_ok):
    need(TTS.exists(), "build/tts-launch missing: run make")


def test_demo_runs_the_2026_generation_cold_then_warm():
    need(os.geteuid() == 0, "the 2026 demo needs root (its world: unshare -mn, port 443)")
    out = demo()
    assert "demo: IndexTTS2 as of 2026" in out
    cold, warm = out.split("demo: warm start", 1)
    # the cold start in the foreground: its summary names each download by file
    for name in ("hf_cache/w2v-bert-2.0/model.safetensors", "hf_cache/campplus_cn_common.bin",
                 "hf_cache/bigvgan/bigvgan_generator.pt"):
        assert re.search(r"complete +%s$" % re.escape(name), cold, re.M), cold
    # the longest phases: downloads among them, by name
    assert re.search(r"^ +\S+ +download:(hf_cache|examples)/\S+ @", cold, re.M), cold
    # live progress, by name
    assert re.search(r"^tts-launch: download(ed|ing) (hf_cache|examples)/", cold, re.M), cold
    no_temp_names(out)
    # what the run left: the cold start's timeline names them; the warm one
    # downloaded nothing, and diagnose is pointed at it
    tl = json.load(open(os.path.join(ROOT, "build", "demo", "cold.json")))
    names = {d["name"] for d in tl["downloads"]}
    assert {"hf_cache/w2v-bert-2.0/model.safetensors", "examples/voice_01.wav"} <= names
    warm_tl = json.load(open(os.path.join(ROOT, "build", "demo", "timeline.json")))
    assert warm_tl["downloads"] == [] and warm_tl["process"]["exit"]["code"] == 0
    assert re.search(r"diagnose -c (conf|build/demo)/demo\.ini", warm)
    assert "demo: diagnose exit status" in warm
    # the progress lines: each download's `downloaded NAME: SIZE` (always
    # said, from the rename), in the cold start, in the order of the renames;
    # the periodic `downloading NAME: SIZE at RATE` lines, when a sample
    # fell inside a download (timing), well formed
    said = [l for l in cold.splitlines() if l.startswith("tts-launch: download")]
    for d in tl["downloads"]:
        assert any(re.match(r"tts-launch: downloaded %s: [\d.]+ [KMG]?i?B$" % re.escape(d["name"]), l)
                   for l in said), (d["name"], said)
    for l in said:
        assert re.match(r"tts-launch: downloaded \S+: [\d.]+ [KMG]?i?B$", l) or \
            re.match(r"tts-launch: downloading \S+: [\d.]+ [KMG]?i?B(, stalled| at [\d.]+ [KMG]?i?B/s)",
                     l), l
    # what the cold start read back of its own downloads is no re-read (the
    # file's size is what the download ended as, not its size when first seen)
    assert not [f for f in tl["findings"] if f["id"] in ("io-reread", "io-small-reads")], \
        tl["findings"]
    # a healthy warm start: nothing to fix, but for a request that really
    # read model pages from disk (pages of the mapped weights that no one
    # touched since they were written are not all resident: fincore), which
    # names the files; never minor faults alone
    for f in warm_tl["findings"]:
        assert f["severity"] == "info" or f["id"] == "lazy-model-faults", f
        if f["id"] == "lazy-model-faults":
            assert f["evidence"]["major_faults"] > 0 and f["evidence"]["files"], f
    # diagnose without arguments, in the checkout the demo ran in: the last
    # timeline a run started here wrote (the warm start's), said on stderr
    d = subprocess.run([str(TTS), "diagnose", "--format", "json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=WAIT)
    problems = [f for f in warm_tl["findings"] if f["severity"] != "info"]
    assert d.returncode == (1 if problems else 0), d.stdout + d.stderr
    assert "the last timeline a run started here wrote, %s" % os.path.join(
        ROOT, "build", "demo", "timeline.json") in d.stderr, d.stderr
    assert json.loads(d.stdout)["timeline"] == os.path.join(ROOT, "build", "demo", "timeline.json")


def test_demo_classic_generation_names_hub_cache_downloads_by_repo_and_file():
    out = demo("--generation", "classic", "--fresh")
    assert "demo: IndexTTS2 as of 2025" in out and "cold start" in out
    for name in ("facebook/w2v-bert-2.0:model.safetensors", "funasr/campplus:campplus_cn_common.bin"):
        assert re.search(r"complete +%s$" % re.escape(name), out, re.M), out
    assert re.search(r"^ +\S+ +download:[\w.-]+/[\w.-]+:\S+ @", out, re.M), out
    no_temp_names(out)
    assert re.search(r"diagnose -c (conf|build/demo-classic)/demo-classic\.ini", out)


def test_demo_refuses_an_unknown_generation():
    d = subprocess.run(DEMO + ["--generation", "2024"], cwd=ROOT, capture_output=True, text=True,
                       timeout=WAIT)
    assert d.returncode == 2 and "usage: scripts/demo [--generation 2026|classic]" in d.stderr
