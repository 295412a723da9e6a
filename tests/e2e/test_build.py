"""The build itself: in a fresh copy of the tree, a second `make` does
nothing, a touched launcher source rebuilds its one object and relinks, and a
touched BPF source rebuilds the BPF object, the skeleton and only the objects
that include it (-MMD), not every object.

The copy holds what a clone would (the files git tracks or would track, not
build/), so the first make there builds everything once (~10 s on 2 cores)."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT

STEP = re.compile(r"^  (\S+)\s+(\S+)$")  # "  CC       build/launcher/util.o"


def source_files():
    out = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT,
                         check=True, capture_output=True).stdout
    return [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]


def make(tree, *args):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "V", "BUILD", "CFLAGS", "SANFLAGS")}
    r = subprocess.run(["make", "--no-print-directory", "-j2", *args], cwd=tree, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    steps = [m.groups() for m in map(STEP.match, r.stdout.splitlines()) if m]
    return steps, r.stdout


def skeleton_users(tree):
    """The objects whose recorded dependencies (-MMD) name a generated BPF header."""
    users = set()
    for d in (tree / "build" / "launcher").glob("*.d"):
        text = d.read_text()
        if "trace.skel.h" in text or "trace.minbtf.h" in text:
            users.add("build/launcher/" + d.name[:-2] + ".o")
    return users


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    t = tmp_path_factory.mktemp("clone")
    for p in source_files():
        (t / p).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / p, t / p)
    steps, _ = make(t, "all")
    kinds = {k for k, _ in steps}
    assert {"BPF", "BPFLINK", "SKEL", "CC", "LD"} <= kinds, steps
    return t


def test_second_make_rebuilds_nothing(tree):
    steps, out = make(tree, "all")
    assert steps == [], out
    # the generated BPF artefacts are kept, not deleted as intermediates
    for f in ("trace.bpf.o", "trace.skel.h", "trace.min.btf", "trace.minbtf.h"):
        assert (tree / "build" / f).is_file(), f


def test_touched_source_rebuilds_one_object(tree):
    os.utime(tree / "launcher" / "util.c")
    steps, out = make(tree, "all")
    assert steps == [("CC", "build/launcher/util.o"), ("LD", "build/tts-launch")], out


def test_touched_bpf_source_rebuilds_only_skeleton_users(tree):
    users = skeleton_users(tree)
    assert users and len(users) < len(list((tree / "launcher").glob("*.c"))), users
    os.utime(tree / "bpf" / "block.bpf.c")
    steps, out = make(tree, "all")
    assert ("BPF", "build/bpf/block.bpf.o") in steps, out
    assert ("BPFLINK", "build/trace.bpf.o") in steps, out
    assert ("SKEL", "build/trace.skel.h") in steps, out
    # one BPF domain file recompiled, the others kept
    assert [s for s in steps if s[0] == "BPF"] == [("BPF", "build/bpf/block.bpf.o")], out
    assert {o for k, o in steps if k == "CC"} == users, out
    assert steps[-1] == ("LD", "build/tts-launch"), out
    steps, out = make(tree, "all")
    assert steps == [], out
