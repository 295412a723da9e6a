"""`tts-launch compare`: the hand-made fixtures (figures known exactly, see
tests/fixtures/compare/README.md), bad input, and two real timelines."""
import json
import subprocess

from conftest import ROOT, TTS

FIX = ROOT / "tests" / "fixtures" / "compare"


def compare(*args):
    return subprocess.run([str(TTS), "compare", *map(str, args)], capture_output=True, text=True,
                          timeout=30)


def line(out, label):
    """The table row whose label is `label`, split into its columns."""
    for ln in out.splitlines():
        cols = ln.split()
        words = label.split()
        if cols[:len(words)] == words:
            return cols[len(words):]
    raise AssertionError("no row %r in:\n%s" % (label, out))


def test_text_table():
    r = compare(FIX / "before.json", FIX / "after.json")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert line(out, "model_load") == ["2000.0", "ms", "500.0", "ms", "-1500.0", "ms", "0.25x"]
    assert line(out, "spawn") == ["40.0", "ms", "30.0", "ms", "-10.0", "ms", "0.75x"]
    assert line(out, "download:gpt.pth.incomplete") == ["300.0", "ms", "-", "-", "-"]
    assert line(out, "mlock") == ["-", "250.0", "ms", "-", "-"]
    assert line(out, "start-up (to ready)") == ["4000.0", "ms", "3000.0", "ms", "-1000.0", "ms",
                                                "0.75x"]
    assert line(out, "page faults (start-up)") == ["50000", "40000", "-10000", "0.80x"]
    assert line(out, "major faults (start-up)") == ["200", "0", "-200", "0.00x"]
    assert line(out, "count") == ["10", "10", "+0", "1.00x"]
    assert line(out, "latency p50") == ["50.0", "ms", "40.0", "ms", "-10.0", "ms", "0.80x"]
    assert line(out, "latency p99") == ["100.0", "ms", "44.0", "ms", "-56.0", "ms", "0.44x"]
    assert line(out, "spread (p99/p50)") == ["2.00", "1.10", "-0.90", "0.55x"]
    assert line(out, "mode") == ["off", "all"]
    assert line(out, "result") == ["off", "locked"]
    assert line(out, "locked") == ["-", "500.0", "MiB", "-", "-"]
    # columns line up: every value row is as wide as the header
    rows = [ln for ln in out.splitlines() if ln.endswith("x") or ln.endswith(" -")]
    assert len({len(ln) for ln in rows}) == 1, rows


def test_json_same_figures():
    r = compare("--format", "json", FIX / "before.json", FIX / "after.json")
    assert r.returncode == 0, r.stderr
    c = json.loads(r.stdout)
    assert c["schema"] == "tts-launch.compare/1"
    ph = {p["name"]: p for p in c["phases"]}
    assert ph["model_load"] == {"name": "model_load", "before": 2000, "after": 500, "diff": -1500,
                                "ratio": 0.25, "noise": False}
    assert ph["launch"]["noise"] is True  # 10 ms on both sides
    assert ph["mlock"]["before"] is None and ph["mlock"]["ratio"] is None
    assert c["startup_ms"]["diff"] == -1000 and c["startup_ms"]["after_mark"] == "ready"
    assert c["requests"]["p50_ms"] == {"before": 50, "after": 40, "diff": -10, "ratio": 0.8}
    assert c["requests"]["p99_ms"]["after"] == 44
    assert abs(c["requests"]["spread"]["after"] - 1.1) < 1e-12
    assert c["requests"]["first_ms"]["after"] == 44
    assert c["mlock"]["after"] == {"mode": "all", "status": "locked", "bytes_locked": 524288000,
                                   "calls": 1}
    # --format=json and options after the files work too
    r2 = compare(FIX / "before.json", FIX / "after.json", "--format=json")
    assert json.loads(r2.stdout) == c


def test_missing_sides_show_dash():
    r = compare(FIX / "minimal.json", FIX / "before.json")
    assert r.returncode == 0, r.stderr
    assert line(r.stdout, "start-up (exit / ready)")[:2] == ["68.2", "ms"]
    assert line(r.stdout, "latency p50") == ["-", "50.0", "ms", "-", "-"]


def test_bad_input_exit_2(tmp_path):
    cases = [
        ((tmp_path / "nope.json", FIX / "after.json"), "nope.json"),
        ((FIX / "before.json", FIX / "notjson.txt"), "notjson.txt"),
        ((FIX / "badschema.json", FIX / "after.json"), "badschema.json"),
    ]
    for args, name in cases:
        r = compare(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert name in r.stderr and r.stdout == ""
    assert "schema" in compare(FIX / "badschema.json", FIX / "after.json").stderr
    for args in [(FIX / "before.json",), (FIX / "before.json", FIX / "after.json", "--format", "svg"),
                 (FIX / "before.json", FIX / "after.json", FIX / "after.json"),
                 (FIX / "before.json", FIX / "after.json", "--bogus")]:
        r = compare(*args)
        assert r.returncode == 2 and "compare" in r.stderr, (args, r.stderr)
    assert "compare" in subprocess.run([str(TTS), "--help"], capture_output=True,
                                       text=True).stdout


def test_two_real_timelines(tmp_path):
    tls = []
    for i in range(2):
        tl = tmp_path / ("t%d.json" % i)
        r = subprocess.run([str(TTS), "run", "--set", "app.dir=%s" % tmp_path,
                            "--set", "log.file=", "--set", "service.pidfile=",
                            "--timeline", str(tl), "--", "/usr/bin/python3", "-c", "import json"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        tls.append(tl)
    r = compare(*tls)
    assert r.returncode == 0, r.stderr
    assert line(r.stdout, "start-up (to exit)")[-1].endswith("x")
    c = json.loads(compare(*tls, "--format", "json").stdout)
    # every phase is a row of the table, or one the noise rule left out
    for p in c["phases"]:
        assert (p["name"] in r.stdout) != p["noise"], p
    assert "interpreter_start" in {p["name"] for p in c["phases"]}
    both = json.loads(tls[0].read_text()), json.loads(tls[1].read_text())
    st = c["startup_ms"]
    assert st["before"] == both[0]["marks"]["exit"] and st["after"] == both[1]["marks"]["exit"]
    assert abs(st["diff"] - (st["after"] - st["before"])) < 1e-9
    assert c["page_faults"]["before"] == both[0]["memory"]["page_faults"]
    names = {p["name"] for p in c["phases"]}
    assert names == {p["name"] for p in both[0]["phases"] + both[1]["phases"]}


def test_mlock_verdict_probe_and_noise():
    """#16: compare before/after --mlock ends with a verdict line, shows
    model-file faults per request, leaves the readiness probe (a connection
    that sent nothing) out of the requests and the rows whose difference is
    noise out of the table (tests/fixtures/compare/README.md)."""
    off, on = FIX / "mlock-off.json", FIX / "mlock-on.json"
    r = compare(off, on)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.rstrip("\n").splitlines()[-1] == (
        "with --mlock: request p99 50.9 -> 25.4 ms, model-file faults per request 499 -> 0")
    assert line(out, "model-file faults per request") == ["499.0", "0.0", "-499.0", "0.00x"]
    # the 900 ms probe counted would make it p99 and the first request
    assert line(out, "count") == ["4", "4", "+0", "1.00x"]
    assert line(out, "readiness probes (left out)") == ["1", "1", "+0", "1.00x"]
    assert line(out, "latency p99") == ["50.9", "ms", "25.4", "ms", "-25.5", "ms", "0.50x"]
    assert line(out, "first latency")[:2] == ["20.0", "ms"]
    # launch 1.4 -> 4.9 ms (3.50x) and model_load 1700 -> 1700 ms are noise
    assert "launch" not in out and "model_load" not in out and "3.50x" not in out
    assert "2 phases left out as noise" in out
    c = json.loads(compare("--format", "json", off, on).stdout)
    assert c["verdict"] == out.rstrip("\n").splitlines()[-1]
    assert c["requests"]["model_faults_per_request"] == {"before": 499, "after": 0, "diff": -499,
                                                         "ratio": 0}
    assert c["requests"]["probes_excluded"]["before"] == 1
    assert c["requests"]["count"]["before"] == 4
    # JSON keeps every row, marked
    assert {p["name"]: p["noise"] for p in c["phases"]} == {"launch": True, "model_load": True}
    # a start-up without the probe has none to leave out, and no such row
    r = compare(FIX / "before.json", FIX / "after.json")
    assert "readiness probes" not in r.stdout


def test_compare_across_versions(tmp_path):
    """issue 13: the format is versioned and older timelines still load: a
    tts-launch.timeline/1 fixture compared with a timeline this build writes
    (tts-launch.timeline/2), both ways, in text and JSON."""
    new = tmp_path / "new.json"
    r = subprocess.run([str(TTS), "run", "--set", "app.dir=%s" % tmp_path, "--set", "log.file=",
                        "--set", "service.pidfile=", "--no-trace", "--timeline", str(new), "--",
                        "/bin/true"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(new.read_text())["schema"] == "tts-launch.timeline/2"
    old = FIX / "before.json"
    assert json.loads(old.read_text())["schema"] == "tts-launch.timeline/1"
    for a, b in ((old, new), (new, old)):
        r = compare(a, b)
        assert r.returncode == 0, r.stderr
        c = json.loads(compare("--format", "json", a, b).stdout)
        side = "before" if a == old else "after"
        # the /1 side's figures are read as before the bump
        assert c["startup_ms"][side] == 4000 and c["requests"]["p99_ms"][side] == 100
        assert c["requests"]["count"][side] == 10
        assert line(r.stdout, "start-up (ready / exit)" if a == old else "start-up (exit / ready)")
