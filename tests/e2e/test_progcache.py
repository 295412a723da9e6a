"""[trace] keep_loaded (issue 17): the tracer's programs and maps kept
loaded between runs (launcher/progcache.c). Each scenario runs in a private
mount namespace with a fresh BPF filesystem on /sys/fs/bpf
(progcache_ns.py), so the entries are the test's own. What is checked is
the mechanism and that nothing of one run reaches the next: a run of the
same settings takes the entry (no verification), and its figures are its
own and exact; a run that finds it held takes or makes the key's second
one; a run that cannot take one (both held, not reset: its keeper killed
or without a grace period, another user's directory) loads afresh; a
killed launcher's unread records never reach
the next run; keep_loaded = false leaves nothing; at most PROGCACHE_KEEP
entries stay; doctor says what is kept. Skipped without BPF, failed when CI is set
(test_trace.tracing_ok)."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from test_trace import FILEOPS, TTS, file_entry, missing_entry, tracing_ok, validate  # noqa: F401

DRIVER = Path(__file__).with_name("progcache_ns.py")
KEPT = "programs kept loaded since an earlier run"


def scenario(work, name):
    p = subprocess.run(["unshare", "--mount", "--propagation", "private",
                        "/usr/bin/python3", str(DRIVER), name, str(work)],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "TTS": str(TTS), "FILEOPS": str(FILEOPS)})
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads((work / "result.json").read_text())
    runs = {r["name"]: r for r in out["runs"]}
    for r in runs.values():
        assert r["rc"] == 0, r["stderr"]
        validate(r["timeline"])
        assert r["timeline"]["tracing"]["enabled"], r["timeline"]["tracing"]
        assert r["timeline"]["tracing"]["events_lost"] == 0
    return runs, out["seen"]


def programs(run):
    return run["timeline"]["tracing"]["programs"]


def paths(tl):
    return {f["path"] for f in tl["files"]} | {m["path"] for m in tl.get("missing", [])}


def test_a_run_of_the_same_settings_takes_the_programs_and_sees_only_its_own(
        tmp_path, tracing_ok):
    runs, seen = scenario(tmp_path, "twice")
    first, second = runs["first"], runs["second"]
    assert programs(first) == "loaded" and KEPT not in first["stderr"]
    assert "programs kept loaded for the next run" in first["stderr"], first["stderr"]
    assert seen["reset"] and len(seen["entries"]) == 1, seen
    # the second run verified nothing: every program came from the entry
    assert programs(second) == "kept", second["stderr"]
    assert KEPT in second["stderr"] and "programs verified" not in second["stderr"]
    tl = second["timeline"]
    # its own files, exact; nothing of the first run's (the maps were reset)
    f = file_entry(tl, tmp_path / "b.dat")
    assert (f["opens"], f["bytes_read"]) == (1, 20000), f
    f = file_entry(tl, tmp_path / "w.dat")
    assert (f["opens"], f["bytes_written"]) == (1, 777), f
    assert missing_entry(tl, tmp_path / "gone" / "else")["attempts"] == 2
    leaked = {str(tmp_path / "a.dat"), str(tmp_path / "no" / "such")} & paths(tl)
    assert not leaked, leaked
    assert not tl.get("peers"), tl.get("peers")  # the first run's echo
    # and the first run's own figures were exact too
    tl = first["timeline"]
    assert file_entry(tl, tmp_path / "a.dat")["bytes_read"] == 30000
    assert missing_entry(tl, tmp_path / "no" / "such")["attempts"] == 3


def test_an_entry_its_keeper_never_reset_is_not_used(tmp_path, tracing_ok):
    runs, seen = scenario(tmp_path, "keeper_killed")
    assert seen["keepers_killed"] >= 1, seen
    assert programs(runs["killed"]) == "kept"
    after = runs["after"]
    assert programs(after) == "loaded", after["stderr"]
    assert "not reset after its last run: removed, loaded afresh" in after["stderr"]
    f = file_entry(after["timeline"], tmp_path / "a.dat")
    assert (f["opens"], f["bytes_read"]) == (1, 4096), f


def test_an_entry_in_use_is_left_alone_and_a_second_slot_kept(tmp_path, tracing_ok):
    runs, seen = scenario(tmp_path, "in_use")
    key = seen["held"][0]
    assert len(seen["held"]) == 1 and "-" not in key, seen
    # the entry held: loaded afresh, kept in the key's second slot
    second = runs["second"]
    assert programs(second) == "loaded"
    assert "in use by another run" in second["stderr"], second["stderr"]
    assert "programs kept loaded for the next run" in second["stderr"], second["stderr"]
    assert seen["reset2"] and seen["entries2"] == [key, key + "-2"], seen
    assert file_entry(second["timeline"], tmp_path / "a.dat")["bytes_read"] == 1000
    # the first still held: the next run takes the second slot, and sees
    # only its own
    third = runs["third"]
    assert programs(third) == "kept", third["stderr"]
    assert KEPT in third["stderr"] and "programs verified" not in third["stderr"]
    f = file_entry(third["timeline"], tmp_path / "c.dat")
    assert (f["opens"], f["bytes_read"]) == (1, 3000), f
    assert str(tmp_path / "a.dat") not in paths(third["timeline"])
    # both held: loaded afresh, nothing kept, both left alone
    fourth = runs["fourth"]
    assert programs(fourth) == "loaded"
    assert "all 2 kept are in use by other runs" in fourth["stderr"], fourth["stderr"]
    assert "programs kept loaded for the next run" not in fourth["stderr"]
    assert seen["entries"] == [key, key + "-2"], seen
    assert file_entry(fourth["timeline"], tmp_path / "b.dat")["bytes_read"] == 2000
    # the first removed: the second is taken all the same
    fifth = runs["fifth"]
    assert seen["reset4"] and programs(fifth) == "kept", fifth["stderr"]
    assert file_entry(fifth["timeline"], tmp_path / "d.dat")["bytes_read"] == 1000


def test_an_entry_whose_keeper_had_no_grace_period_is_not_used(tmp_path, tracing_ok):
    runs, seen = scenario(tmp_path, "no_membarrier")
    first, after = runs["first"], runs["after"]
    assert "programs kept loaded for the next run" in first["stderr"], first["stderr"]
    # let go (its lock free) but not reset: the next run removes it
    assert seen["reset"] and len(seen["entries"]) == 1, seen
    assert programs(after) == "loaded", after["stderr"]
    assert "not reset after its last run: removed, loaded afresh" in after["stderr"]
    f = file_entry(after["timeline"], tmp_path / "b.dat")
    assert (f["opens"], f["bytes_read"]) == (1, 3000), f
    assert str(tmp_path / "a.dat") not in paths(after["timeline"])
    # and keeps its own load in its place
    assert seen["reset2"] and seen["entries2"] == seen["entries"], seen


def test_another_users_directory_is_never_used(tmp_path, tracing_ok):
    runs, seen = scenario(tmp_path, "hostile")
    first = runs["first"]
    assert programs(first) == "loaded"
    assert "is owned by uid 65534 or open to others" in first["stderr"], first["stderr"]
    assert seen["entries"] == [], seen  # nothing pinned in it
    assert file_entry(first["timeline"], tmp_path / "a.dat")["bytes_read"] == 1000


def test_keep_loaded_false_keeps_nothing(tmp_path, tracing_ok):
    runs, seen = scenario(tmp_path, "forget")
    assert len(seen["before"]) == 1, seen
    assert programs(runs["second"]) == "loaded"
    assert seen["entries"] == [], seen


def test_the_least_recently_used_entry_goes(tmp_path, tracing_ok):
    runs, seen = scenario(tmp_path, "evict")
    assert all(seen["reset%d" % i] for i in range(3)), seen
    assert [len(seen["entries%d" % i]) for i in range(3)] == [1, 2, 2], seen
    first = seen["entries0"][0]
    assert first in seen["entries1"] and first not in seen["entries2"], seen
    # a store's leftover directory (made after the first run's reset) is gone
    # with the second run's eviction
    assert "new-4194300" not in seen["all1"] + seen["all2"], seen


def test_a_second_entry_counts_with_its_settings_and_goes_when_idle(tmp_path, tracing_ok):
    runs, seen = scenario(tmp_path, "slots_evict")
    a = seen["a"]
    assert all(seen["reset%d" % i] for i in range(1, 6)), seen
    assert programs(runs["a2"]) == "loaded" and programs(runs["b"]) == "loaded"
    # two settings: the first one's two entries and the second's all stay
    e3 = seen["entries3"]
    assert len(e3) == 3 and a in e3 and a + "-2" in e3, seen
    b = [e for e in e3 if not e.startswith(a)][0]
    # the second entry, idle two minutes, goes at the next run's end
    assert programs(runs["b2"]) == "kept", runs["b2"]["stderr"]
    assert seen["entries4"] == sorted([a, b]), seen
    # a third setting: the least recently used one (a) goes
    assert programs(runs["c"]) == "loaded"
    e5 = seen["entries5"]
    assert len(e5) == 2 and b in e5 and a not in e5, seen


def test_a_run_mounts_the_bpf_filesystem_when_there_is_none(tmp_path, tracing_ok):
    runs, seen = scenario(tmp_path, "unmounted")
    assert seen["before"] != "bpf_fs" and seen["after"] == "bpf_fs", seen
    assert seen["mode"] == "0o700", seen
    [line] = seen["doctor"]
    assert line.startswith("OK") and "a run mounts one" in line, line
    refused = runs["refused"]
    assert programs(refused) == "loaded" and seen["after_refused"] != "bpf_fs", seen
    assert ("no BPF filesystem on /sys/fs/bpf, and mounting one failed: Function not "
            "implemented (mount -t bpf bpf /sys/fs/bpf)") in refused["stderr"], refused["stderr"]
    # two runs at once: one of them mounted it, once
    first, other, second = runs["first"], runs["other"], runs["second"]
    assert seen["bpf_mounts"] == 1, seen
    said = ["mounted a BPF filesystem on /sys/fs/bpf" in r["stderr"] for r in (first, other)]
    assert said.count(True) == 1, (first["stderr"], other["stderr"])
    assert any("programs kept loaded for the next run" in r["stderr"] for r in (first, other))
    assert programs(second) == "kept", second["stderr"]
    assert "mounted a BPF filesystem" not in second["stderr"]
    f = file_entry(second["timeline"], tmp_path / "b.dat")
    assert (f["opens"], f["bytes_read"]) == (1, 2000), f


def test_a_killed_launchers_unread_records_never_reach_the_next_run(tmp_path, tracing_ok):
    runs, seen = scenario(tmp_path, "launcher_killed")
    assert seen["forked"], seen
    rc, err = seen["killed"]
    assert rc == -9 and KEPT in err, err
    after = runs["after"]
    # its keeper reset the entry though the ring was full of unread records
    assert seen["reset"] and len(seen["entries"]) == 1, seen
    assert programs(after) == "kept", after["stderr"]
    tl = after["timeline"]
    # nothing lost (a ring left full would refuse every record), nothing of
    # the killed run's 4000 processes: the run's own process and exact bytes
    assert not any(tl["tracing"]["lost"].values()), tl["tracing"]["lost"]
    assert [p["command"] for p in tl["processes"]] == [str(FILEOPS)], tl["processes"]
    f = file_entry(tl, tmp_path / "a.dat")
    assert (f["opens"], f["bytes_read"]) == (1, 4096), f
    assert tl["process"]["exit"]["code"] == 0


def test_doctor_says_what_is_kept(tmp_path, tracing_ok):
    runs, seen = scenario(tmp_path, "doctor")
    [none], [one], [hostile] = seen["none"], seen["one"], seen["hostile"]
    assert none.startswith("OK") and "none yet" in none, none
    key = seen["entries"][0]
    assert one.startswith("OK") and "1 entry in /sys/fs/bpf/tts-launch" in one, one
    m = re.search(re.escape(key) + r" \(clean, idle \d+s, (\d+) programs, (\d+) maps, "
                  r"([\d.]+) MiB\)", one)
    assert m and int(m.group(1)) > 10 and int(m.group(2)) > 10 and float(m.group(3)) > 0.5, one
    assert hostile.startswith("WARN") and "owned by uid 65534" in hostile, hostile
    assert "rm -r /sys/fs/bpf/tts-launch" in hostile
