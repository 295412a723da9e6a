"""The BPF object's stack, read from its code: every program's deepest call
chain (its own frame plus the frames of the functions it calls, BPF to BPF)
fits the verifier's 512 bytes. On 6.18.44 the kernel rejected the whole
object ("combined stack size of 2 calls is 528. Too large": sys_exit's 96
bytes and sx_copy's 432), and every run went untraced; this says so at
build time, on any machine, naming the chain.

Frames are the deepest `r10 - N` each function touches, rounded up to 32
bytes (the verifier rounds to 16 with a JIT, 32 without: the stricter of
the two), from `llvm-objdump -d -r` of build/trace.bpf.o; a call's target
is its relocation's symbol."""
import re
import shutil
import subprocess

import pytest

from conftest import ROOT

OBJ = ROOT / "build" / "trace.bpf.o"
LIMIT = 512
FUNC = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")
SECTION = re.compile(r"^Disassembly of section (\S+):$")
CALL_RELOC = re.compile(r"R_BPF_64_32\s+(\S+)$")


def objdump():
    tool = shutil.which("llvm-objdump-14") or shutil.which("llvm-objdump")
    if not tool:
        pytest.fail("llvm-objdump is missing: scripts/setup installs llvm")
    if not OBJ.exists():
        pytest.fail("%s is missing: run make first" % OBJ)
    return subprocess.run([tool, "-d", "-r", "--no-show-raw-insn", str(OBJ)], check=True,
                          capture_output=True, text=True).stdout


def functions(text):
    """{name: (section, frame bytes, set of called names)}"""
    funcs, cur, section, last_call = {}, None, None, False
    for line in text.splitlines():
        m = SECTION.match(line)
        if m:
            section = m.group(1)
            continue
        m = FUNC.match(line)
        if m:
            if not m.group(1).startswith("LBB"):
                cur = m.group(1)
                funcs[cur] = [section, 0, set()]
            continue
        if cur is None:
            continue
        for off in re.findall(r"r10 - (\d+)", line):
            funcs[cur][1] = max(funcs[cur][1], int(off))
        m = CALL_RELOC.search(line)
        if m and last_call:
            funcs[cur][2].add(m.group(1))
        last_call = bool(re.search(r"\tcall -1$", line))
    return {n: (s, -(-f // 32) * 32, c) for n, (s, f, c) in funcs.items()}


def deepest(funcs, name, seen=()):
    """(bytes, chain) of the deepest call chain from name"""
    _, frame, calls = funcs[name]
    best = (0, [])
    for c in calls:
        if c in funcs and c not in seen:
            best = max(best, deepest(funcs, c, seen + (name,)))
    return frame + best[0], [name] + best[1]


def test_the_object_is_parsed():
    """The reading itself: the known programs and handlers are there, and the
    exit program calls its handlers (else the next test proves nothing)."""
    funcs = functions(objdump())
    assert {"sys_exit", "syscall_exit", "sx_copy", "sx_path"} <= set(funcs)
    assert funcs["sys_exit"][0] != ".text" and funcs["sx_copy"][0] == ".text"
    assert {"sx_copy", "sx_path", "sx_io"} <= funcs["sys_exit"][2]
    assert funcs["sx_path"][1] >= 128


def test_every_program_fits_the_stack():
    funcs = functions(objdump())
    over = []
    for name, (section, _, _) in funcs.items():
        if section == ".text":
            continue
        depth, chain = deepest(funcs, name)
        if depth > LIMIT:
            over.append("%s: %d bytes (%s)" % (
                name, depth, " -> ".join("%s %d" % (n, funcs[n][1]) for n in chain)))
    assert not over, "over the verifier's %d bytes:\n%s" % (LIMIT, "\n".join(over))
