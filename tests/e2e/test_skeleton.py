"""The timeline's structure, pinned: the key/type skeleton (the union of
keys per array element, the set of types per key) of timelines from fixed,
deterministic scenarios (the exact-count helpers, not a demo run whose keys
vary with timing) must match tests/fixtures/skeleton/NAME.json: the same
keys everywhere, types among the pinned ones. A renamed, moved, removed or
retyped key fails here; a change on purpose regenerates the files
(TTS_SKELETON_UPDATE=new, then =1 a few times to add up runs whose arrays
were empty) and lists the change in its commit message.

Objects keyed by data rather than by schema (marks, environment variables,
per-reason counters, ...) are folded to one "*" key: their names depend on
the machine, not on the format."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, TTS

FILEOPS = ROOT / "build" / "tests" / "helpers" / "fileops"
NETOPS = ROOT / "build" / "tests" / "helpers" / "netops"
FIXTURES = ROOT / "tests" / "fixtures" / "skeleton"

# paths (dotted, arrays as []) whose object keys are data, not schema
DATA_KEYED = {
    "marks", "launcher.config.env.vars", "host.capabilities", "sched", "sched.*",
    "tracing.fallbacks", "tracing.probes", "memory.mlock.reports", "cache_fs",
    "launcher.config", "launcher.config.*",
    # [env]'s vars, under the folded section and key: the client settings
    # run inherits from whoever starts it are data
    "launcher.config.*.*",
}


def typename(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def merge(a, b):
    """Union of two skeletons: types as a set, object keys and array
    elements merged."""
    out = {"types": sorted(set(a["types"]) | set(b["types"]))}
    if "keys" in a or "keys" in b:
        ka, kb = a.get("keys", {}), b.get("keys", {})
        out["keys"] = {k: merge(ka[k], kb[k]) if k in ka and k in kb else (ka.get(k) or kb[k])
                       for k in sorted(set(ka) | set(kb))}
    if "items" in a or "items" in b:
        if "items" in a and "items" in b:
            out["items"] = merge(a["items"], b["items"])
        else:
            out["items"] = a.get("items") or b["items"]
    return out


def skeleton(v, path=""):
    s = {"types": [typename(v)]}
    if isinstance(v, dict):
        if path in DATA_KEYED:
            folded = None
            for k, x in v.items():
                sk = skeleton(x, path + ".*")
                folded = sk if folded is None else merge(folded, sk)
            s["keys"] = {"*": folded} if folded else {}
        else:
            s["keys"] = {k: skeleton(x, (path + "." if path else "") + k)
                         for k, x in sorted(v.items())}
    elif isinstance(v, list):
        items = None
        for x in v:
            sk = skeleton(x, path + "[]")
            items = sk if items is None else merge(items, sk)
        if items:
            s["items"] = items
    return s


def run(tmp, *cmd):
    tl = tmp / "timeline.json"
    p = subprocess.run([str(TTS), "run", "--timeline", str(tl), "--set", "app.port=0", "--",
                        *map(str, cmd)], cwd=tmp, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(tl.read_text())


def scenario(name, tmp):
    if name == "files":
        data = tmp / "data.bin"
        data.write_bytes(b"x" * 65536)
        return run(tmp, FILEOPS, "open:%s:3" % data, "stat:%s/missing.yaml:4" % tmp,
                   "read:%s:65536" % data, "dread:%s:65536" % data, "write:%s/out.bin:4096" % tmp, "mmap:%s" % data,
                   "threads:2:100",
                   # 60 ms on the CPU: the attribution's CPU samples (one per
                   # ~10 ms of the tree's run time) always have elements, where
                   # a run as short as the rest had them only on a slow machine
                   "spin:60")
    if name == "net":
        return run(tmp, NETOPS, "refused", "silent:100:50", "mkdir:/proc/nope:2")
    if name == "untraced":
        tl = tmp / "timeline.json"
        p = subprocess.run([str(TTS), "run", "--no-trace", "--timeline", str(tl), "--set",
                            "app.port=0", "--", "/bin/true"], cwd=tmp, capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        return json.loads(tl.read_text())
    raise ValueError(name)


def differences(got, want, alt=None, path="$"):
    """Where got leaves the pinned skeleton: a key added or gone, a type not
    pinned. An empty array (no items this run, e.g. no block I/O because the
    file was cached) fits any pinned element skeleton; elements where this
    scenario's pinned array had none are checked against the same array in
    the other scenarios (alt), which saw them."""
    out = []
    extra = set(got["types"]) - set(want["types"])
    if extra:
        out.append("%s: type %s not in %s" % (path, sorted(extra), want["types"]))
    gk, wk = got.get("keys"), want.get("keys")
    ak = (alt or {}).get("keys", {})
    if gk is not None and wk is not None:
        for k in sorted(set(gk) - set(wk)):
            out.append("%s.%s: new key" % (path, k))
        for k in sorted(set(wk) - set(gk)):
            out.append("%s.%s: key gone" % (path, k))
        for k in sorted(set(gk) & set(wk)):
            out += differences(gk[k], wk[k], ak.get(k), "%s.%s" % (path, k))
    if "items" in got:
        items = want.get("items") or (alt or {}).get("items")
        if not items:
            out.append("%s[]: elements where the pinned array had none" % path)
        else:
            out += differences(got["items"], items, (alt or {}).get("items"), path + "[]")
    return out


def all_pinned():
    pinned = None
    for f in sorted(FIXTURES.glob("*.json")):
        sk = json.loads(f.read_text())
        pinned = sk if pinned is None else merge(pinned, sk)
    return pinned


@pytest.mark.parametrize("name", ["files", "net", "untraced"])
def test_timeline_skeleton_is_pinned(name, tmp_path, request):
    if name != "untraced":
        request.getfixturevalue("tracing_ok")
    got = skeleton(scenario(name, tmp_path))
    path = FIXTURES / ("%s.json" % name)
    if os.environ.get("TTS_SKELETON_UPDATE"):
        # =new starts over; else runs add up (arrays empty in one run)
        if path.exists() and os.environ["TTS_SKELETON_UPDATE"] != "new":
            got = merge(json.loads(path.read_text()), got)
        FIXTURES.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(path.read_text())
    diff = differences(got, want, all_pinned())
    assert not diff, ("timeline structure changed for %s (regenerate with "
                      "TTS_SKELETON_UPDATE=new, then =1 a few times, and explain the change in "
                      "the commit):\n  %s" % (name, "\n  ".join(diff)))
