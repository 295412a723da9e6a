"""`tts-launch report --format perfetto|prom|svg|html` on saved timelines
(tests/fixtures/timelines/): each output checked against its format's rules
and against the figures of the timeline it came from. The SVG is also
rendered by headless Chromium (Debian's chromium): once to a PNG whose
pixels are checked, once with a script that measures every label."""
import json
import math
import os
import re
import shutil
import struct
import subprocess
import tempfile
import xml.etree.ElementTree as ET
import zlib
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import TTS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "timelines"
TIMELINES = sorted(FIXTURES.glob("*.json"))
SVG_NS = "{http://www.w3.org/2000/svg}"
CHROMIUM = shutil.which("chromium")


def report(path, fmt, *extra, check=True):
    r = subprocess.run([str(TTS), "report", str(path), "--format", fmt, *extra],
                       capture_output=True, text=True, timeout=60)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def load(path):
    with open(path) as f:
        return json.load(f)


def variant(tmp_path, src, change, name="variant.json"):
    """A copy of a fixture with change(dict) applied."""
    d = load(src)
    change(d)
    p = tmp_path / name
    p.write_text(json.dumps(d))
    return p, d


@pytest.fixture(params=TIMELINES, ids=lambda p: p.stem)
def timeline(request):
    return request.param


COLD = FIXTURES / "cold.json"


# --- Perfetto / Chrome trace-event JSON -------------------------------------

def check_trace_rules(doc):
    """The Trace Event Format's rules, as far as tts-launch uses it."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    assert doc["displayTimeUnit"] in ("ms", "ns")
    evs = doc["traceEvents"]
    last_ts = -1
    open_be = defaultdict(list)
    asyncs = {}
    for e in evs:
        ph = e["ph"]
        assert ph in {"X", "B", "E", "b", "e", "i", "C", "M"}, e
        assert isinstance(e["name"], str) and e["name"], e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        if ph == "M":
            assert e["name"] in {"process_name", "thread_name", "process_sort_index",
                                 "thread_sort_index"}, e
            assert isinstance(e["args"], dict) and e["args"], e
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        # one order for the whole file: viewers accept unsorted input, but
        # sorted input keeps B/E and b/e pairs in order
        assert e["ts"] >= last_ts, ("ts goes back", e)
        last_ts = e["ts"]
        if ph == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
        elif ph in "BE":
            key = (e["pid"], e["tid"])
            if ph == "B":
                open_be[key].append(e)
            else:
                assert open_be[key], ("E without B", e)
                open_be[key].pop()
        elif ph in "be":
            assert "id" in e and isinstance(e.get("cat"), str) and e["cat"], e
            key = (e["cat"], str(e["id"]))
            if ph == "b":
                assert key not in asyncs, ("id reused while open", e)
                asyncs[key] = e
            else:
                assert key in asyncs, ("e without b", e)
                b = asyncs.pop(key)
                assert b["name"] == e["name"] and e["ts"] >= b["ts"], (b, e)
        elif ph == "i":
            assert e.get("s", "t") in ("g", "p", "t"), e
        elif ph == "C":
            assert isinstance(e["args"], dict) and e["args"], e
            assert all(isinstance(v, (int, float)) and math.isfinite(v)
                       for v in e["args"].values()), e
    assert not any(open_be.values()), "B without E"
    assert not asyncs, ("b without e", list(asyncs))


def check_x_nesting(evs):
    """Complete events on one thread either nest or follow each other."""
    by_track = defaultdict(list)
    for e in evs:
        if e["ph"] == "X":
            by_track[(e["pid"], e["tid"])].append(e)
    for track, xs in by_track.items():
        xs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in xs:
            while stack and stack[-1] <= e["ts"]:
                stack.pop()
            end = e["ts"] + e["dur"]
            assert not stack or end <= stack[-1], ("partial overlap on", track, e)
            stack.append(end)
    return by_track


def test_perfetto_follows_the_format(timeline):
    doc = json.loads(report(timeline, "perfetto").stdout)
    check_trace_rules(doc)
    check_x_nesting(doc["traceEvents"])


def test_perfetto_has_every_phase_mark_download_and_request():
    tl = load(COLD)
    evs = json.loads(report(COLD, "perfetto").stdout)["traceEvents"]
    us = lambda ms: round(ms * 1000)
    phases = sorted((e["name"], e["ts"], e["dur"]) for e in evs
                    if e["ph"] == "X" and e["cat"] == "phase")
    assert phases == sorted((p["name"], us(p["start_ms"]), us(p["end_ms"]) - us(p["start_ms"]))
                            for p in tl["phases"])
    marks = {e["name"]: e["ts"] for e in evs if e["ph"] == "i" and e["cat"] == "mark"}
    assert marks == {k: us(v) for k, v in tl["marks"].items()}
    assert all(e["s"] == "g" for e in evs if e["ph"] == "i" and e["cat"] == "mark")
    dl = [e for e in evs if e["ph"] == "b" and e["cat"] == "download"]
    assert sorted(e["args"]["path"] for e in dl) == sorted(d["path"] for d in tl["downloads"])
    assert "facebook/w2v-bert-2.0" in " ".join(e["name"] for e in dl)
    req = [e for e in evs if e["ph"] == "b" and e["cat"] == "request"]
    assert sorted(e["ts"] for e in req) == sorted(us(r["start_ms"]) for r in tl["requests"])
    mlock = [e for e in evs if e["ph"] == "i" and e["cat"] == "mlock"]
    assert len(mlock) == len(tl["memory"]["mlock_calls"]) and all(e["s"] == "p" for e in mlock)
    # counters: one point per fault-rate bucket plus the closing zero
    pf = [e for e in evs if e["ph"] == "C" and e["name"] == "page faults/s"]
    counts = tl["memory"]["fault_rate"]["counts"]
    assert [e["args"]["faults/s"] for e in pf] == [c * 10.0 for c in counts] + [0.0]
    rate = [e for e in evs if e["ph"] == "C" and e["name"] == "download MB/s"]
    assert rate and max(e["args"]["MB/s"] for e in rate) > 1
    assert any(e["ph"] == "C" and e["name"] == "off-CPU ms" for e in evs)
    # a named track for each traced process and for the launcher
    names = {e["pid"]: e["args"]["name"] for e in evs
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert names[tl["processes"][0]["ppid"]] == "tts-launch"
    for p in tl["processes"]:
        assert names[p["pid"]].startswith("python3 (")
    # every thread an event lands on is named
    threads = {(e["pid"], e["tid"]) for e in evs
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in evs if e["ph"] == "X"} <= threads


def test_perfetto_moves_partially_overlapping_phases_to_another_lane(tmp_path):
    def overlap(d):
        # starts inside model_load and ends after it: cannot nest with it
        m = next(p for p in d["phases"] if p["name"] == "model_load")
        d["phases"].append({"name": "overlapping", "start_ms": m["start_ms"] + 100,
                            "end_ms": m["end_ms"] + 500, "source": "test"})
        d["phases"].append({"name": "overlapping2", "start_ms": m["start_ms"] + 200,
                            "end_ms": m["end_ms"] + 600, "source": "test"})
    path, d = variant(tmp_path, COLD, overlap)
    evs = json.loads(report(path, "perfetto").stdout)["traceEvents"]
    check_trace_rules({"traceEvents": evs, "displayTimeUnit": "ms"})
    tracks = check_x_nesting(evs)
    tid = {e["name"]: e["tid"] for e in evs if e["ph"] == "X" and e["cat"] == "phase"}
    assert len({tid["model_load"], tid["overlapping"], tid["overlapping2"]}) == 3
    assert sum(1 for (pid, t) in tracks if pid == d["processes"][0]["ppid"]) == 3


# --- Prometheus text format ---------------------------------------------------

NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


def check_exposition(text):
    """Text format 0.0.4 as node_exporter's textfile collector reads it:
    HELP and TYPE once per family, before its samples; valid names and
    labels; each label set once; no timestamps."""
    assert text.endswith("\n")
    families, seen, current = {}, set(), None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            assert NAME.match(name) and name not in families, line
            families[name] = None
            current = name
        elif line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ")
            assert name == current and typ in {"counter", "gauge", "histogram", "summary",
                                               "untyped"}, line
            families[name] = typ
        else:
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
            assert m, ("bad sample line (or a timestamp)", line)
            name, labels = m.group(1), m.group(3) or ""
            base = re.sub(r"_(bucket|sum|count)$", "", name) if families.get(current) == \
                "histogram" else name
            assert base == current, ("sample outside its family", line)
            if families[current] == "counter":
                assert name.endswith("_total"), line
            if labels:
                assert LABEL.sub("", labels).replace(",", "") == "", ("bad labels", line)
            float(m.group(4).replace("+Inf", "inf"))
            assert (name, labels) not in seen, ("label set repeated", line)
            seen.add((name, labels))
    return families


def prom(path):
    text = report(path, "prom").stdout
    check_exposition(text)
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_prom_is_valid_exposition(timeline):
    check_exposition(report(timeline, "prom").stdout)


def test_prom_values_match_the_timeline():
    tl = load(COLD)
    m = prom(COLD)
    g = lambda name, **labels: m[(name, tuple(sorted(labels.items())))]
    assert g("indextts2_ready") == 1
    assert g("indextts2_startup_seconds") == pytest.approx(tl["marks"]["ready"] / 1e3)
    for p in tl["phases"]:
        assert g("indextts2_phase_seconds", phase=p["name"]) == pytest.approx(
            (p["end_ms"] - p["start_ms"]) / 1e3)
    assert g("indextts2_page_faults_total") == tl["memory"]["page_faults"]
    assert g("indextts2_major_page_faults_total") == tl["memory"]["major_faults"]
    assert g("indextts2_missing_path_attempts_total") == sum(
        x["attempts"] for x in tl["missing_paths"])
    for d in tl["downloads"]:
        f = d["path"][:-len(".incomplete")]
        assert g("indextts2_download_bytes_total", file=f) == d["bytes"]
    assert g("tts_launch_events_lost_total") == tl["tracing"]["events_lost"]
    # locked: the shim said so, or an mlockall worked (a library's 16 KiB
    # mlock in this cold start is not the model)
    shim = tl["memory"]["mlock"]
    locked = (shim or {}).get("status") == "locked" if shim else any(
        c["call"] == "mlockall" and c["result"] == 0 for c in tl["memory"]["mlock_calls"])
    assert g("indextts2_mlock_locked") == (1 if locked else 0)
    # the histogram: cumulative buckets, +Inf = count, sum of durations
    durs = [r["dur_ms"] / 1e3 for r in tl["requests"]]
    buckets = sorted(((float(dict(k[1])["le"]), v) for k, v in m.items()
                      if k[0] == "indextts2_request_duration_seconds_bucket"))
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)
    for le, v in buckets:
        assert v == sum(1 for x in durs if x <= le), le
    assert buckets[-1] == (math.inf, len(durs))
    assert g("indextts2_request_duration_seconds_count") == len(durs)
    assert g("indextts2_request_duration_seconds_sum") == pytest.approx(sum(durs))
    assert g("indextts2_request_page_faults_total") == sum(
        r["page_faults"] for r in tl["requests"])


def test_prom_escapes_label_values(tmp_path):
    odd = 'a "quoted" \\ back\nslash'

    def change(d):
        d["phases"].append({"name": odd, "start_ms": 1, "end_ms": 2.5, "source": "test"})
        d["phases"].append({"name": "launch", "start_ms": 1, "end_ms": 2, "source": "test"})
    path, _ = variant(tmp_path, COLD, change)
    m = prom(path)
    assert m[("indextts2_phase_seconds", (("phase", odd),))] == pytest.approx(0.0015)


def test_prom_untraced_timeline_has_no_startup_figure():
    m = prom(FIXTURES / "untraced.json")
    assert m[("indextts2_ready", ())] == 0
    assert ("indextts2_startup_seconds", ()) not in m
    assert m[("tts_launch_tracing_enabled", ())] == 0


def test_output_file_is_written_atomically(tmp_path):
    out = tmp_path / "tts.prom"
    r = report(COLD, "prom", "-o", str(out))
    assert r.stdout == ""
    assert out.read_text() == report(COLD, "prom").stdout
    assert oct(out.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in tmp_path.iterdir()] == ["tts.prom"]
    r = report(COLD, "prom", "-o", str(tmp_path / "nodir" / "x.prom"), check=False)
    assert r.returncode == 1 and "nodir" in r.stderr


# --- errors -------------------------------------------------------------------

def test_unknown_format_lists_the_formats():
    r = report(COLD, "pdf", check=False)
    assert r.returncode == 2
    assert "pdf" in r.stderr and "perfetto, svg, html, prom, folded or flamegraph" in r.stderr


def test_extra_argument_is_refused():
    r = subprocess.run([str(TTS), "report", str(COLD), "other.json"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "unexpected argument 'other.json'" in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("content,why", [
    (None, "No such file"),
    ("{not json", "line 1"),
    ('{"schema": "something-else/9"}', "schema"),
])
def test_bad_timeline_is_named_with_the_problem(tmp_path, content, why):
    p = tmp_path / "bad.json"
    if content is not None:
        p.write_text(content)
    for fmt in ("perfetto", "prom", "svg"):
        r = report(p, fmt, check=False)
        assert r.returncode == 2 and r.stdout == ""
        assert str(p) in r.stderr and why in r.stderr, r.stderr


# --- SVG and HTML -------------------------------------------------------------

def svg_root(path):
    return ET.fromstring(report(path, "svg").stdout)


def test_svg_has_one_bar_per_phase(timeline):
    tl = load(timeline)
    root = svg_root(timeline)
    bars = [r for r in root.iter(SVG_NS + "rect") if "phase" in r.get("class", "").split()]
    assert [b.get("data-phase") for b in bars] == [p["name"] for p in tl["phases"]]
    width = float(root.get("width"))
    for b in bars:
        assert 0 <= float(b.get("x")) and float(b.get("x")) + float(b.get("width")) <= width
        assert float(b.get("width")) >= 1
    downloads = [b for b in bars if "download" in b.get("class").split()]
    assert len(downloads) == len(tl["downloads"])
    ready = [ln for ln in root.iter(SVG_NS + "line") if ln.get("class") == "ready"]
    assert len(ready) == (1 if "ready" in tl["marks"] else 0)
    assert root.find(SVG_NS + "path[@class='faults']") is not None or \
        not tl["memory"]["fault_rate"]["counts"]


def test_svg_escapes_names(tmp_path):
    def change(d):
        d["phases"].append({"name": "<b>&\"x'", "start_ms": 1, "end_ms": 2, "source": "t"})
    path, _ = variant(tmp_path, COLD, change)
    root = svg_root(path)
    assert "<b>&\"x'" in [r.get("data-phase") for r in root.iter(SVG_NS + "rect")]


class Tables(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows = defaultdict(int)
        self.table = None
        self.text = []
        self.svg = 0

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.table = dict(attrs).get("class")
        elif tag == "tr" and self.table:
            self.rows[self.table] += 1
        elif tag == "svg":
            self.svg += 1

    def handle_data(self, data):
        self.text.append(data)


def test_html_has_the_plot_and_tables():
    tl = load(COLD)
    t = Tables()
    t.feed(report(COLD, "html").stdout)
    assert t.svg == 1
    # a header row plus one per item
    assert t.rows["files"] == 1 + len(tl["files"])
    assert t.rows["findings"] == 1 + len(tl["findings"])
    assert t.rows["phases"] == 1 + len(tl["phases"])
    assert t.rows["downloads"] == 1 + len(tl["downloads"])
    assert t.rows["missing"] == 1 + len(tl["missing_paths"])
    assert tl["findings"][0]["message"] in "".join(t.text)


def chromium(*args, timeout=120):
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--user-data-dir=" + profile, *args],
            capture_output=True, text=True, timeout=timeout)


def read_png(path):
    """width, height, rows of (r, g, b) for an 8-bit RGB/RGBA PNG (no PIL here)."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    assert depth == 8 and ctype in (2, 6) and interlace == 0
    bpp = 3 if ctype == 2 else 4
    raw, stride, prev, rows = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


def hexrgb(s):
    return tuple(int(s[i:i + 2], 16) for i in (1, 3, 5))


@pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (scripts/setup)")
def test_svg_renders_in_chromium(tmp_path):
    tl = load(COLD)
    svg = tmp_path / "plot.svg"
    svg.write_text(report(COLD, "svg").stdout)
    png = tmp_path / "plot.png"
    r = chromium("--screenshot=" + str(png), "--window-size=1400,900", svg.as_uri())
    assert png.exists(), r.stderr
    w, h, rows = read_png(png)
    assert (w, h) == (1400, 900)
    colours = defaultdict(int)
    for row in rows:
        for px in row:
            colours[px] += 1
    assert len(colours) > 50, "blank or nearly blank"
    assert colours[(255, 255, 255)] < 0.95 * w * h
    # the bars' fills: each category present in the timeline is drawn
    root = ET.fromstring(svg.read_text())
    fills = {r.get("fill") for r in root.iter(SVG_NS + "rect")
             if "phase" in r.get("class", "").split()}
    assert len(fills) >= 5
    for fill in fills:
        assert colours[hexrgb(fill)] > 20, ("no pixels of bar colour", fill)
    # the ready line (#d62728) crosses the plot
    assert colours[hexrgb("#d62728")] > 200
    assert "ready" in tl["marks"]


MEASURE = """
<script>
const out = [];
const texts = [...document.querySelectorAll('svg text')];
const svg = document.querySelector('svg');
const W = svg.width.baseVal.value;
const boxes = texts.map(t => { const b = t.getBBox();
  return {s: t.textContent, x: b.x, y: b.y, w: b.width, h: b.height}; });
for (const b of boxes) if (b.x < -0.5 || b.x + b.w > W + 0.5) out.push(['outside', b]);
for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
  const a = boxes[i], b = boxes[j];
  if (a.x < b.x + b.w - 0.5 && b.x < a.x + a.w - 0.5 && a.y < b.y + b.h - 0.5 && b.y < a.y + a.h - 0.5)
    out.push(['overlap', a, b]);
}
document.body.insertAdjacentHTML('beforeend',
  '<pre id="res' + 'ult">' + JSON.stringify({n: boxes.length, problems: out})
  .replace(/&/g, '&amp;').replace(/</g, '&lt;') + '</pre>');
</script>
"""


@pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (scripts/setup)")
@pytest.mark.parametrize("name", ["cold.json", "untraced.json", "exec-at-ready"])
def test_svg_labels_do_not_overlap(tmp_path, name):
    """Chromium lays the labels out with its real fonts; none may overlap
    another or leave the picture. exec-at-ready: net.json with its exec
    mark moved to ready, where its plot ends: the mark's line is at the
    right edge, and its label ends at the line instead of running out."""
    path = FIXTURES / name
    if name == "exec-at-ready":
        tl = json.loads((FIXTURES.parent / "views" / "net.json").read_text())
        tl["marks"]["exec"] = tl["marks"]["ready"]
        path = tmp_path / "exec-at-ready.json"
        path.write_text(json.dumps(tl))
    page = tmp_path / "measure.html"
    page.write_text("<!DOCTYPE html><html><body style='margin:0'>" +
                    report(path, "svg").stdout + MEASURE + "</body></html>")
    r = chromium("--dump-dom", page.as_uri())
    m = re.search(r'<pre id="result">(.*?)</pre>', r.stdout, re.S)
    assert m, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(m.group(1).replace("&lt;", "<").replace("&amp;", "&"))
    assert res["n"] > 10
    assert res["problems"] == []


VIEWS = FIXTURES.parent / "views"


@pytest.mark.parametrize("name,fmt", [("requests", "perfetto"), ("requests", "html"),
                                      ("net", "perfetto"), ("net", "html")])
def test_outputs_of_traced_timelines_are_byte_identical(name, fmt):
    """Timelines a traced run wrote (tests/fixtures/views/NAME.json): the
    Perfetto and HTML outputs are byte for byte those stored from the build
    that rendered them from the raw JSON tree with jansson (issue 13: the
    renderers moved onto the typed views and a JSON writer of their own)."""
    r = subprocess.run([str(TTS), "report", str(VIEWS / ("%s.json" % name)), "--format", fmt],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (VIEWS / ("%s.%s" % (name, fmt))).read_bytes()


def test_html_of_the_cold_fixture_is_byte_identical():
    assert report(COLD, "html").stdout == (VIEWS / "cold.html").read_text()


def test_the_view_resolves_the_older_names():
    """The typed view owns the fallbacks between names (timeline_view.h):
    cold.json's requests carry only the older dur_ms/page_faults, the
    compare fixture's only latency_ms/faults, and every output reads the
    same figures from either (the text summary read 0 ms and 0 faults from
    the older names, /metrics 0 faults from the newer)."""
    out = report(COLD, "text").stdout
    assert "latency p50 180.2ms, p90 612.5ms, p99 612.5ms; per request 8589 faults" in out
    prom = report(FIXTURES.parent / "compare" / "after.json", "prom").stdout
    assert "indextts2_request_page_faults_total 4\n" in prom
    evs = json.loads(report(COLD, "perfetto").stdout)["traceEvents"]
    req = [e for e in evs if e.get("cat") == "request" and e["ph"] == "b"]
    assert req and all(e["args"]["latency_ms"] == e["args"]["dur_ms"] for e in req)


def test_text_of_an_armed_mlock_says_no_outcome_yet(tmp_path):
    """A timeline taken while the shim is armed but not yet triggered (the
    ready snapshot of a start whose trigger is later) has no outcome: the
    summary says so, not '0.0 MiB locked in 0.0ms'."""
    tl = json.loads(COLD.read_text())
    tl["memory"]["mlock"] = {"status": "armed", "mode": "all", "trigger": "signal",
                             "shim": None, "loaded": True, "events": [{"event": "armed"}],
                             "bytes_locked": None, "fix": None}
    path = tmp_path / "armed.json"
    path.write_text(json.dumps(tl))
    r = subprocess.run([str(TTS), "report", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    (line,) = [x for x in r.stdout.splitlines() if "mlock shim" in x]
    assert "armed, not yet triggered" in line and "locked in" not in line, line
    tl["memory"]["mlock"].update(status="locked", bytes_locked=3 << 20, dur_ms=12.5)
    path.write_text(json.dumps(tl))
    r = subprocess.run([str(TTS), "report", str(path)], capture_output=True, text=True)
    (line,) = [x for x in r.stdout.splitlines() if "mlock shim" in x]
    assert "locked, 3.0 MiB locked in 12.5ms" in line, line
