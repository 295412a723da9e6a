"""Views of the attribution (issue 15, "Views" and "compare"): the
critical thread's state strip in the SVG/HTML plot (coloured by kind, a
legend of the kinds' shares, no label crossed or overlapping, no
horizontal scroll at 1400 px), the thread-state track and the CPU samples
in the Perfetto export, and `compare` diffing two attributions by kind and
cause with the noise rows left out. On hand-made sections added to the cold
fixture (the figures known exactly); test_attribution.py renders a traced
one, and the samples are checked here on a traced run of
tests/helpers/phases.py too (needs root and BPF: skipped without, failed
when CI is set)."""
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import pytest

from simfix import need
from test_attribution import PHASES, SlowPeer
from test_report import (CHROMIUM, MEASURE, SVG_NS, check_trace_rules, check_x_nesting,
                         chromium, hexrgb, read_png)

ROOT = Path(__file__).resolve().parents[2]
TTS = ROOT / "build" / "tts-launch"
COLD = ROOT / "tests" / "fixtures" / "timelines" / "cold.json"
KINDS = ["cpu", "disk", "fault", "net", "sleep", "lock", "child", "gpu", "runqueue", "other"]


def section(runs, start=48.36, end=5991.097):
    """An attribution section whose strip is runs [(kind, ms, what)] from
    start on (the last run ends at end), causes summed from them."""
    strip, causes, t = [], defaultdict(float), start
    for i, (kind, ms, what) in enumerate(runs):
        e = end if i == len(runs) - 1 else round(t + ms, 3)
        strip.append({"start_ms": t, "end_ms": e, "kind": kind, "what": what})
        causes[(kind, what)] += e - t
        t = e
    cs = sorted(({"kind": k, "what": w, "ms": round(ms, 3), "pieces": 1}
                 for (k, w), ms in causes.items()), key=lambda c: -c["ms"])
    other = sum(c["ms"] for c in cs if c["kind"] == "other")
    return {"start_ms": start, "end_ms": end, "window_ms": round(end - start, 3),
            "explained_ms": round(end - start - other, 3), "complete": True, "records": 10,
            "samples": 5, "lost": 0, "causes": cs, "strip": strip, "strip_cut": False}


RUNS = [("cpu", 900, "import torch"), ("disk", 400, "checkpoints/gpt.pth"),
        ("fault", 100, "checkpoints/s2mel.pth"), ("net", 3200, "hf.co:443 (w2v-bert-2.0)"),
        ("sleep", 200, "_backoff (hf/utils.py:88)"), ("lock", 150, "checkpoints/.lock"),
        ("child", 300, "git"), ("gpu", 50, "cudaMalloc"), ("runqueue", 120, "cpu contention"),
        ("cpu", 400, "build_ui (webui.py:40)"), ("other", 0, "process exited")]


def timeline(tmp_path, runs=RUNS, name="t.json", **kw):
    d = json.loads(COLD.read_text())
    d["attribution"] = section(runs, **kw)
    p = tmp_path / name
    p.write_text(json.dumps(d))
    return p, d


def report(path, fmt):
    r = subprocess.run([str(TTS), "report", str(path), "--format", fmt], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


FILLS = {}  # kind -> fill, from the legend


def test_svg_strip_follows_the_section(tmp_path):
    path, d = timeline(tmp_path)
    root = ET.fromstring(report(path, "svg"))
    strip = d["attribution"]["strip"]
    runs = [r for r in root.iter(SVG_NS + "rect") if r.get("class") == "state"]
    assert [r.get("data-kind") for r in runs] == [s["kind"] for s in strip]
    # along the time axis, in order, inside the plot, each run's tooltip
    # naming its kind and cause
    xs = [(float(r.get("x")), float(r.get("width"))) for r in runs]
    assert all(x >= 20 and x + w <= 1380.5 for x, w in xs), xs
    assert all(a[0] <= b[0] for a, b in zip(xs, xs[1:]))
    for r, s in zip(runs, strip):
        title = r.find(SVG_NS + "title").text
        assert title.startswith(s["kind"] + " ") and s["what"] in title, title
    # a colour per kind, the same for each run of it, told apart
    fill = {}
    for r in runs:
        assert fill.setdefault(r.get("data-kind"), r.get("fill")) == r.get("fill")
    assert len(set(fill.values())) == len(fill) == len(KINDS)
    # the legend: every kind present, with its share of the window
    legend = [r for r in root.iter(SVG_NS + "rect") if r.get("class") == "kind-legend"]
    assert {r.get("data-kind"): r.get("fill") for r in legend} == fill
    texts = [t.text for t in root.iter(SVG_NS + "text")]
    net = sum(c["ms"] for c in d["attribution"]["causes"] if c["kind"] == "net")
    assert "net %.1f%%" % (100 * net / d["attribution"]["window_ms"]) in texts, texts
    assert any(t and t.startswith("critical thread: where the time went") for t in texts)
    # the ready line runs through the strip
    strip_y = float(runs[0].get("y"))
    ready = [ln for ln in root.iter(SVG_NS + "line") if ln.get("class") == "ready"]
    assert max(float(ln.get("y2")) for ln in ready) >= strip_y + float(runs[0].get("height"))
    FILLS.update(fill)


def test_a_span_past_ready_is_faded_after_it(tmp_path):
    """The cold fixture's imports span runs on 28 ms past ready: with the
    strip under it, its bar is solid up to ready and faded after, and
    says how much came after ready; phases inside the window are whole."""
    path, d = timeline(tmp_path)
    root = ET.fromstring(report(path, "svg"))
    rx = float(next(ln for ln in root.iter(SVG_NS + "line") if ln.get("class") == "ready")
               .get("x1"))
    bars = {r.get("data-phase"): r for r in root.iter(SVG_NS + "rect")
            if "phase" in r.get("class", "").split()}
    imp = bars["imports"]
    assert abs(float(imp.get("x")) + float(imp.get("width")) - rx) < 0.2
    assert "(28 ms after ready)" in imp.find(SVG_NS + "title").text
    past = [r for r in root.iter(SVG_NS + "rect") if r.get("class") == "past-ready"]
    assert len(past) == 1 and abs(float(past[0].get("x")) - rx) < 0.2
    assert past[0].get("fill") == imp.get("fill") and float(past[0].get("width")) > 0
    ready = d["marks"]["ready"]
    assert all(p["end_ms"] <= ready or p["name"] == "imports" or p["start_ms"] >= ready
               for p in d["phases"])
    # without the section the bars are as they were (whole spans)
    plain = ET.fromstring(report(COLD, "svg"))
    assert not [r for r in plain.iter(SVG_NS + "rect") if r.get("class") == "past-ready"]


def test_no_strip_without_the_section():
    root = ET.fromstring(report(COLD, "svg"))
    assert not [r for r in root.iter(SVG_NS + "rect") if r.get("class") in ("state",
                                                                            "kind-legend")]


@pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (scripts/setup)")
def test_strip_labels_and_colours_in_chromium(tmp_path):
    """Chromium's layout: no label overlaps another or leaves the picture
    (the strip's caption, the kinds' legend), and each kind's colour is on
    the screen."""
    path, _ = timeline(tmp_path)
    svg = report(path, "svg")
    page = tmp_path / "measure.html"
    page.write_text("<!DOCTYPE html><html><body style='margin:0'>" + svg + MEASURE +
                    "</body></html>")
    r = chromium("--dump-dom", page.as_uri())
    m = re.search(r'<pre id="result">(.*?)</pre>', r.stdout, re.S)
    assert m, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(m.group(1).replace("&lt;", "<").replace("&amp;", "&"))
    assert res["n"] > 20 and res["problems"] == []
    (tmp_path / "t.svg").write_text(svg)
    png = tmp_path / "t.png"
    height = int(ET.fromstring(svg).get("height"))
    chromium("--screenshot=" + str(png), "--window-size=1400,%d" % height,
             (tmp_path / "t.svg").as_uri())
    w, h, rows = read_png(png)
    colours = defaultdict(int)
    for row in rows:
        for px in row:
            colours[px] += 1
    root = ET.fromstring(svg)
    for r in root.iter(SVG_NS + "rect"):
        if r.get("class") == "kind-legend":
            assert colours[hexrgb(r.get("fill"))] >= 100, r.get("data-kind")


SCROLL = """
<script>
const d = document.documentElement;
document.body.insertAdjacentHTML('beforeend', '<pre id="scr' + 'oll">' +
  JSON.stringify({scroll: d.scrollWidth, client: d.clientWidth}) + '</pre>');
</script>
"""


@pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (scripts/setup)")
def test_html_has_the_strip_and_table_without_horizontal_scroll(tmp_path):
    path, d = timeline(tmp_path)
    html = report(path, "html")
    assert html.count('class="state"') == len(d["attribution"]["strip"])
    # the causes' table, largest first
    table = html[html.index('<table class="attribution">'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td>", table)
    assert [(k, w) for k, w in rows] == [(c["kind"], c["what"])
                                        for c in d["attribution"]["causes"]]
    page = tmp_path / "p.html"
    page.write_text(html.replace("</body>", SCROLL + "</body>"))
    r = chromium("--window-size=1400,900", "--dump-dom", page.as_uri())
    m = re.search(r'<pre id="scroll">(.*?)</pre>', r.stdout, re.S)
    assert m, r.stdout[-2000:] + r.stderr[-2000:]
    s = json.loads(m.group(1))
    assert s["client"] > 1000 and s["scroll"] <= s["client"], s


def test_perfetto_thread_state_track(tmp_path):
    path, d = timeline(tmp_path)
    doc = json.loads(report(path, "perfetto"))
    check_trace_rules(doc)
    check_x_nesting(doc["traceEvents"])
    evs = doc["traceEvents"]
    names = [e for e in evs if e["ph"] == "M" and e["name"] == "thread_name" and
             e["args"]["name"] == "critical thread state"]
    assert len(names) == 1
    track = (names[0]["pid"], names[0]["tid"])
    state = [e for e in evs if e.get("cat") == "state"]
    assert {(e["pid"], e["tid"]) for e in state} == {track}
    # a thread of its own (no real thread's id), on the service's process
    assert track[0] == d["process"]["pid"] and track[1] >= 1 << 22
    strip = [s for s in d["attribution"]["strip"] if s["end_ms"] >= s["start_ms"]]
    assert [(e["name"], e["args"]["what"]) for e in state] == [(s["kind"], s["what"])
                                                              for s in strip]
    for e, s in zip(state, strip):
        assert e["ph"] == "X" and abs(e["ts"] - s["start_ms"] * 1000) <= 1
        assert abs(e["ts"] + e["dur"] - s["end_ms"] * 1000) <= 1
    # the runs tile the window: each starts where the last ended
    assert all(a["ts"] + a["dur"] == b["ts"] for a, b in zip(state, state[1:]))


SAMPLES = {"frames": ["burn (helpers/p.py:3)", "libc.so.6", "import torch"],
           "threads": [{"pid": 14660, "tid": 14660}, {"pid": 14660, "tid": 14671}],
           "t_ms": [100.0, 110.0, 110.0004, 120.5, 130.0, 135.0, 140.25],
           "thread": [0, 1, 1, 0, 0, 5, 0],
           "frame": [0, 1, 1, 2, 9, 0, 0]}


def test_perfetto_samples_on_their_threads(tmp_path):
    """Hand-made samples: one thread-scoped instant each on its (pid, tid),
    named by its frame; two in one microsecond of a thread are one; entries
    with no such frame or thread are left out (a time out of range makes
    the file no timeline: docs/timeline.md, "Limits"); a thread other than
    a main one is named."""
    d = json.loads(COLD.read_text())
    d["attribution"] = section(RUNS)
    d["attribution"]["cpu_samples"] = SAMPLES
    d["attribution"]["samples_dropped"] = 0
    path = tmp_path / "s.json"
    path.write_text(json.dumps(d))
    doc = json.loads(report(path, "perfetto"))
    check_trace_rules(doc)
    check_x_nesting(doc["traceEvents"])
    got = [(e["ts"], e["pid"], e["tid"], e["name"], e["args"]["frame"])
           for e in doc["traceEvents"] if e.get("cat") == "sample"]
    p = 14660
    assert got == [(100000, p, p, "burn (helpers/p.py:3)", "burn (helpers/p.py:3)"),
                   (110000, p, p + 1 + 10, "libc.so.6", "libc.so.6"),
                   (120500, p, p, "import torch", "import torch"),
                   (140250, p, p, "burn (helpers/p.py:3)", "burn (helpers/p.py:3)")], got
    assert all(e["ph"] == "i" and e["s"] == "t" for e in doc["traceEvents"]
               if e.get("cat") == "sample")
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names[(p, p + 11)] == "thread %d" % (p + 11)
    # without samples (older timelines), no sample events
    doc = json.loads(report(timeline(tmp_path)[0], "perfetto"))
    assert not [e for e in doc["traceEvents"] if e.get("cat") == "sample"]


@pytest.fixture(scope="module")
def traced_phases(tracing_ok, tmp_path_factory):
    """tests/helpers/phases.py run traced, its own phase boundaries in the
    timeline's time (ms since tts-launch started)."""
    tmp = tmp_path_factory.mktemp("samples")
    cold = tmp / "cold.bin"
    cold.write_bytes(os.urandom(32 << 20))
    peer = SlowPeer()
    out, tl = tmp / "phases.jsonl", tmp / "t.json"
    r = subprocess.run([str(TTS), "run", "--timeline", str(tl), "--set", "app.port=0", "--",
                        "/usr/bin/python3", str(PHASES), str(peer.port), str(cold), "1.0",
                        str(out)], cwd=tmp, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(tl.read_text())
    base = d["launcher"]["start"]["monotonic_ns"] / 1e6
    phases = {}
    for line in out.read_text().splitlines():
        p = json.loads(line)
        phases[p["phase"]] = (p["start"] - base, p["end"] - base)
    return {"tl": d, "path": tl, "phases": phases}


def test_traced_samples_in_the_timeline_and_perfetto(traced_phases):
    """burn()'s frame, many times, in its phase, on the python process's
    main thread: in the timeline's attribution.cpu_samples and as instants
    on that thread's track in the Perfetto export, which still follows the
    format."""
    d, (b0, b1) = traced_phases["tl"], traced_phases["phases"]["burn"]
    need(not any(f["probe"] == "python_frames" for f in d["tracing"]["fallbacks"]),
         "python frames unavailable here: %s" % d["tracing"]["fallbacks"])
    a = d["attribution"]
    cs = a["cpu_samples"]
    n = len(cs["t_ms"])
    assert len(cs["thread"]) == len(cs["frame"]) == n and a["samples_dropped"] == 0
    assert 0 < n <= a["samples"]
    assert cs["t_ms"] == sorted(cs["t_ms"])
    assert all(a["start_ms"] <= t <= a["end_ms"] for t in cs["t_ms"])
    assert len(set(cs["frames"])) == len(cs["frames"])
    line = {t: i + 1 for i, t in enumerate(PHASES.read_text().splitlines())}
    burn = "burn (helpers/phases.py:%d)" % line["def burn(sec):"]
    pid = d["process"]["pid"]
    samples = [(t, cs["threads"][th], cs["frames"][f])
               for t, th, f in zip(cs["t_ms"], cs["thread"], cs["frame"])]
    inside = [s for s in samples if b0 <= s[0] <= b1]
    burns = [s for s in inside if s[2] == burn]
    # ~99 a CPU second; a loaded machine gives burn() less of its second
    assert len(burns) >= 10, inside
    assert len(burns) >= 0.9 * len(inside), inside
    assert all(th == {"pid": pid, "tid": pid} for _, th, _ in burns)
    # burn()'s samples are in its phase (a sample is stamped on a CPU tick)
    assert all(b0 - 20 <= t <= b1 + 20 for t, _, f in samples if f == burn), (b0, b1)
    doc = json.loads(report(traced_phases["path"], "perfetto"))
    check_trace_rules(doc)
    check_x_nesting(doc["traceEvents"])
    evs = [e for e in doc["traceEvents"] if e.get("cat") == "sample"]
    assert len(evs) == n
    pb = [e for e in evs if e["name"] == burn and b0 * 1000 <= e["ts"] <= b1 * 1000]
    assert len(pb) == len(burns)
    assert all((e["pid"], e["tid"], e["ph"], e["s"]) == (pid, pid, "i", "t") for e in pb)
    # on the python process's own track: its process_name is there
    procs = {e["pid"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert pid in procs


def compare(a, b, *extra):
    r = subprocess.run([str(TTS), "compare", str(a), str(b), *extra], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_compare_diffs_the_attribution(tmp_path):
    before, _ = timeline(tmp_path, name="a.json")
    runs = [list(r) for r in RUNS]
    runs[3][1] = 800     # net: 3200 -> 800 ms
    runs[0][1] = 902     # cpu import torch: +2 ms, noise
    runs.insert(4, ("disk", 600, "checkpoints/bigvgan.pt"))  # only after
    after, _ = timeline(tmp_path, [tuple(r) for r in runs], name="b.json", end=4191.097)
    out = compare(before, after)
    assert "where the time went (attribution)" in out

    def row(label):
        for ln in out.splitlines():
            if ln.strip().startswith(label + " "):
                return ln.strip()[len(label):].split()
        raise AssertionError("no row %r in\n%s" % (label, out))
    net = row("net hf.co:443 (w2v-bert-2.0)")
    assert net[:6] == ["3200.0", "ms", "800.0", "ms", "-2400.0", "ms"], net
    assert net[7:] == ["%.1f%%" % (3200 / 5942.737 * 100), "->", "%.1f%%" % (800 / 4142.737 *
                                                                            100)], net
    assert row("disk checkpoints/bigvgan.pt")[:6] == ["0.0", "ms", "600.0", "ms", "+600.0",
                                                      "ms"]
    # the noise: a 2 ms difference of a 900 ms cause, rows the same on both sides
    assert "import torch" not in out and "git" not in out
    m = re.search(r"\((\d+) rows? left out as noise", out)
    assert m and int(m.group(1)) >= 8, out
    j = json.loads(compare(before, after, "--format", "json"))["attribution"]
    assert j["window_ms"]["before"] == 5942.737 and j["window_ms"]["after"] == 4142.737
    c = {(x["kind"], x["what"]): x for x in j["causes"]}
    n = c[("net", "hf.co:443 (w2v-bert-2.0)")]
    assert n["before"] == 3200 and n["after"] == 800 and n["diff"] == -2400 and not n["noise"]
    assert abs(n["share_before"] - 3200 / 5942.737 * 100) < 1e-6
    assert c[("cpu", "import torch")]["noise"] is True
    assert c[("disk", "checkpoints/bigvgan.pt")]["before"] == 0
    k = {x["kind"]: x for x in j["kinds"]}
    assert k["disk"]["before"] == 400 and k["disk"]["after"] == 1000


def test_compare_with_one_side_without_the_section(tmp_path):
    after, _ = timeline(tmp_path)
    out = compare(COLD, after)
    assert "where the time went (attribution)" in out
    j = json.loads(compare(COLD, after, "--format", "json"))["attribution"]
    assert j["window_ms"]["before"] is None and all(x["before"] is None for x in j["causes"])
    # neither: no section in the table, null in JSON
    assert "where the time went" not in compare(COLD, COLD)
    assert json.loads(compare(COLD, COLD, "--format", "json"))["attribution"] is None


FLAME = """
<script>
const res = {frames: [], texts_out: 0};
for (const g of document.querySelectorAll('g.frame')) {
  const r = g.querySelector('rect').getBBox(), t = g.querySelector('text');
  if (t) { const b = t.getBBox(); if (b.x < r.x - 0.5 || b.x + b.width > r.x + r.width + 0.5)
    res.texts_out++; }
}
res.kind = ttsSearch('^(disk|checkpoints/gpt)');
res.matched = ttsSearch('^hf[.]co');
res.highlit = [...document.querySelectorAll('g.frame')].filter(g =>
  g.querySelector('rect').getAttribute('fill') === '#e03ce0').map(g => g.dataset.name);
res.label = document.getElementById('matched').textContent;
document.body.insertAdjacentHTML('beforeend', '<pre id="fla' + 'me">' +
  JSON.stringify(res).replace(/&/g, '&amp;').replace(/</g, '&lt;') + '</pre>');
</script>
"""


def test_flamegraph_frames_and_search(tmp_path):
    """`--format flamegraph`: the window at the bottom, a frame per kind,
    a frame per cause above it, widths in proportion; Chromium runs its
    search (the frames that match highlighted, their share said) and no
    label leaves its frame."""
    path, d = timeline(tmp_path)
    svg = report(path, "flamegraph")
    root = ET.fromstring(svg)
    frames = [g for g in root.iter(SVG_NS + "g") if g.get("class") == "frame"]
    a = d["attribution"]
    by = defaultdict(list)
    for g in frames:
        by[g.get("data-level")].append(g)
    assert [g.get("data-name") for g in by["0"]] == ["all"]
    width0 = float(by["0"][0].find(SVG_NS + "rect").get("width"))
    kinds = defaultdict(float)
    for c in a["causes"]:
        kinds[c["kind"]] += c["ms"]
    assert {g.get("data-name") for g in by["1"]} == set(kinds)
    assert sorted(g.get("data-name") for g in by["2"]) == sorted(c["what"] for c in a["causes"])
    for g in by["1"] + by["2"]:
        w = float(g.find(SVG_NS + "rect").get("width"))
        share = int(g.get("data-us")) / 1000 / a["window_ms"]
        assert abs(w - share * width0) < 0.5, (g.get("data-name"), w, share * width0)
    net = next(g for g in by["2"] if g.get("data-name").startswith("hf.co"))
    assert net.find(SVG_NS + "title").text.startswith("net;hf.co:443 (w2v-bert-2.0) (")
    if not CHROMIUM:
        pytest.fail("chromium is not installed (scripts/setup)")
    page = tmp_path / "f.html"
    page.write_text("<!DOCTYPE html><html><body style='margin:0'>" + svg + FLAME +
                    "</body></html>")
    r = chromium("--dump-dom", page.as_uri())
    m = re.search(r'<pre id="flame">(.*?)</pre>', r.stdout, re.S)
    assert m, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(m.group(1).replace("&lt;", "<").replace("&amp;", "&"))
    assert res["texts_out"] == 0, res
    assert res["highlit"] == ["hf.co:443 (w2v-bert-2.0)"], res
    want = "%.1f%%" % (100 * 3200 / a["window_ms"])
    assert res["matched"] == want and res["label"] == "Matched: " + want, res
    # a kind and one of its causes: the kind's time, counted once
    assert res["kind"] == "%.1f%%" % (100 * kinds["disk"] / a["window_ms"]), res


def test_flamegraph_without_the_section_says_so():
    r = subprocess.run([str(TTS), "report", str(COLD), "--format", "flamegraph"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "" and "no attribution section" in r.stderr
