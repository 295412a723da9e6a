"""Issue 17: `[trace] syscalls = cheap` counts the read/write family exactly
from libc: a uprobe/uretprobe pair on each of libc's read, write, pread64,
pwrite64, readv, writev, preadv(2), pwritev(2) (bpf/libcio.bpf.c), opened as
tracefs uprobe perf events bound to the traced tree (pid = the root child,
inherit), so no process outside the tree gets a breakpoint
(launcher/tracer_libcio.c). Mechanism, not timing: call counts, a failed
write's errno, a keep-alive request's end at its last write, the TLS name of
a first write, which memory has the breakpoint, which process holds the
links. Skipped without BPF, failed when CI is set (test_trace.tracing_ok)."""
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

from conftest import fd_count, keepers, run_links, wait_for
from test_costs import finish, keeper_of, light_of, prog_names, work  # noqa: F401
from test_trace import FILEOPS, TTS, file_entry, tracing_ok, validate  # noqa: F401
from test_trace_cheap import launch_cheap
from test_trace_ops import NETOPS

PAIR = {"libc_io"}


def run_mode(tmp, mode, *cmd, name="timeline.json"):
    tl_path = tmp / name
    p = subprocess.run([str(TTS), "run", "--timeline", str(tl_path), "--set", "app.dir=%s" % tmp,
                        "--set", "app.port=0", "--set", "trace.syscalls=" + mode, "--",
                        *map(str, cmd)],
                       cwd=tmp, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return validate(json.loads(tl_path.read_text()))


def libc_probe(tl):
    return [p for p in tl["tracing"]["probes"] if p.startswith("libc_io:")]


# many calls per open: the close-time estimate would say one read and one write
IO = r'''
import os, sys
d = sys.argv[1]
fd = os.open(os.path.join(d, "w.dat"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for i in range(7):
    os.write(fd, b"w" * 100)
os.pwrite(fd, b"p" * 50, 2000)        # at an offset: the position stays at 700
os.writev(fd, [b"a" * 10, b"b" * 20])
os.close(fd)
fd = os.open(os.path.join(d, "r.dat"), os.O_RDONLY)
for i in range(5):
    assert len(os.read(fd, 1000)) == 1000
assert len(os.pread(fd, 300, 0)) == 300
os.close(fd)
'''


def test_cheap_counts_each_libc_call(work):
    (work / "io.py").write_text(IO)
    (work / "r.dat").write_bytes(os.urandom(8000))
    tl = run_mode(work, "cheap", sys.executable, work / "io.py", work)
    tr = tl["tracing"]
    assert tr["syscalls"] == "cheap" and tr["events_lost"] == 0
    assert libc_probe(tl) and tr["approximate"] == [], tr
    assert not {"sys_enter", "sys_exit"} & set(tr["probes"])
    w, r = file_entry(tl, work / "w.dat"), file_entry(tl, work / "r.dat")
    assert (w["writes"], w["bytes_written"], w["write_errors"]) == (9, 780, 0)
    assert (r["reads"], r["bytes_read"]) == (6, 5300)
    # the same figures as every syscall traced
    ex = run_mode(work, "exact", sys.executable, work / "io.py", work, name="exact.json")
    for path in (work / "w.dat", work / "r.dat"):
        a, b = file_entry(ex, path), file_entry(tl, path)
        keys = ("opens", "reads", "writes", "bytes_read", "bytes_written", "write_errors")
        assert [a[k] for k in keys] == [b[k] for k in keys], (path, a, b)


# the root runs a child (subprocess: vfork + exec), which runs a grandchild
TREE = r'''
import os, subprocess, sys
d, depth = sys.argv[1], int(sys.argv[2])
fd = os.open(os.path.join(d, "level%d.dat" % depth), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
for i in range(3 + depth):
    os.write(fd, b"x" * 10)
os.close(fd)
if depth < 2:
    subprocess.run([sys.executable, __file__, d, str(depth + 1)], check=True)
'''


def test_cheap_children_and_grandchildren_are_probed(work):
    """The perf events are inherited: a child and a grandchild, each exec'd,
    have the breakpoints too (each call counted, nothing approximate)."""
    (work / "tree.py").write_text(TREE)
    tl = run_mode(work, "cheap", sys.executable, work / "tree.py", work, 0)
    assert libc_probe(tl) and tl["tracing"]["approximate"] == [], tl["tracing"]
    pids = set()
    for depth in range(3):
        f = file_entry(tl, work / ("level%d.dat" % depth))
        assert (f["writes"], f["bytes_written"]) == (3 + depth, 10 * (3 + depth)), f
        pids.add(f["pid"])
    assert len(pids) == 3


# the root's calls after a child's exit, and a second child's, forked after
# the first exited
AFTER_CHILD = r'''
import os, subprocess, sys
d = sys.argv[1]
subprocess.run(["/bin/true"], check=True)
fd = os.open(os.path.join(d, "after.dat"), os.O_RDONLY)
n = 0
while True:
    b = os.pread(fd, 4096, n)
    if not b:
        break
    n += len(b)
os.close(fd)
subprocess.run([sys.executable, "-c", "import os, sys\n"
                "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
                "for i in range(4):\n    os.write(fd, b'y' * 25)\n",
                os.path.join(d, "second.dat")], check=True)
'''


def test_cheap_counts_after_a_child_exited(work):
    """A child's exit takes nothing away from the tree: the program is on a
    perf event that is not inherited, the inherited one has none
    (tracer_libcio.c). Attached to the inherited event, the first child's
    exit took the program out for everyone: the root's reads after it and
    a later child's writes counted 0."""
    (work / "after.py").write_text(AFTER_CHILD)
    size = 3 * 4096 + 123
    (work / "after.dat").write_bytes(os.urandom(size))
    tl = run_mode(work, "cheap", sys.executable, work / "after.py", work)
    assert libc_probe(tl) and tl["tracing"]["approximate"] == [], tl["tracing"]
    f = file_entry(tl, work / "after.dat")
    assert f["bytes_read"] == size and f["reads"] >= 4, f  # 3 full, 1 short (+ 1 empty)
    s = file_entry(tl, work / "second.dat")
    assert (s["writes"], s["bytes_written"]) == (4, 100), s
    ex = run_mode(work, "exact", sys.executable, work / "after.py", work, name="exact.json")
    assert file_entry(ex, work / "after.dat")["reads"] == f["reads"]


def perf_fds(pid):
    """How many perf event fds pid holds (the keeper: libc_io's followers;
    its links are bpf_link fds)."""
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            n += os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "anon_inode:[perf_event]"
        except OSError:
            continue
    return n


def test_cheap_fileops_counts(work):
    readf = work / "read.dat"
    readf.write_bytes(os.urandom(50000))
    tl = run_mode(work, "cheap", FILEOPS, "read:%s:12345" % readf,
                  "write:%s:4321" % (work / "written.dat"), "echo:100000")
    assert libc_probe(tl) and tl["tracing"]["approximate"] == []
    f = file_entry(tl, readf)
    assert (f["opens"], f["reads"], f["bytes_read"]) == (1, 1, 12345)
    f = file_entry(tl, work / "written.dat")
    assert (f["writes"], f["bytes_written"]) == (1, 4321)
    # TCP from the calls (send/recv are the syscall tracepoints'): each side once
    assert any(n["bytes_out"] == 100000 and n["sends"] == 2 for n in tl["network"])
    assert any(n["bytes_in"] == 100000 and n["recvs"] == 2 for n in tl["network"])


def test_cheap_write_errors_enospc(work):
    full = work / "small"
    full.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(full)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    try:
        blob = full / "blob.incomplete"
        tl = run_mode(work, "cheap", NETOPS, "fill:%s" % blob)
    finally:
        subprocess.run(["umount", "-l", str(full)])
    assert libc_probe(tl) and tl["tracing"]["approximate"] == []
    f = file_entry(tl, blob)
    # the errno libc stored (its TLS), as sys_exit's -ENOSPC
    assert (f["write_errors"], f["write_errno"]) == (1, "ENOSPC")
    assert f["bytes_written"] == 256 * 1024 and f["writes"] == 4
    [op] = [o for o in tl["failed_ops"] if o["op"] == "write"]
    assert (op["path"], op["count"], op["errno"]) == (str(blob), 1, "ENOSPC")


KEEPALIVE = r'''
import os, socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
open(sys.argv[1] + ".tmp", "w").write("%d\n" % s.getsockname()[1])
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
c, _ = s.accept()
for n in (1500, 2500):                  # two requests on one connection
    assert c.recv(100) == b"GET\n"
    os.write(c.fileno(), b"x" * n)      # the answer: one write each
assert c.recv(100) == b""               # the client closes (after a pause)
c.close()
'''


def test_cheap_keepalive_request_ends_at_its_last_write(work):
    portfile = work / "port"
    (work / "ka.py").write_text(KEEPALIVE)
    tl_path = work / "timeline.json"
    p = subprocess.Popen([str(TTS), "run", "--timeline", str(tl_path), "--set",
                          "app.dir=%s" % work, "--set", "app.port=0", "--set",
                          "trace.syscalls=cheap", "--", sys.executable, str(work / "ka.py"),
                          str(portfile)],
                         cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: portfile.exists() or None, timeout=60, what="the server's port")
        with socket.create_connection(("127.0.0.1", int(portfile.read_text())), timeout=30) as c:
            for n in (1500, 2500):
                c.sendall(b"GET\n")
                got = 0
                while got < n:
                    got += len(c.recv(65536))
            time.sleep(0.5)  # keep-alive: open, idle, then closed by the client
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    tl = validate(json.loads(tl_path.read_text()))
    assert libc_probe(tl) and "requests.end_ms" not in tl["tracing"]["approximate"]
    [r] = tl["requests"]
    assert (r["bytes_out"], r["bytes_in"], r["writes"]) == (4000, 8, 2), r
    # the end is the last write, before the client's pause (not the close)
    assert r["start_ms"] <= r["end_ms"] and r["close_ms"] - r["end_ms"] >= 400, r


TLS = r'''
import socket, ssl, sys
ctx = ssl.create_default_context()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
try:
    ctx.wrap_socket(s, server_hostname="models.example.test")   # OpenSSL writes the hello
except (OSError, ssl.SSLError):
    pass
'''


def test_cheap_tls_name_from_the_first_write(work):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]

    def answer():
        c, _ = srv.accept()
        c.settimeout(30)
        c.recv(65536)  # the ClientHello; then no handshake
        c.close()
    t = threading.Thread(target=answer, daemon=True)
    t.start()
    (work / "tls.py").write_text(TLS)
    try:
        tl = run_mode(work, "cheap", sys.executable, work / "tls.py", port)
    finally:
        t.join(30)
        srv.close()
    assert libc_probe(tl) and "peers.tls_name" not in tl["tracing"]["approximate"]
    [n] = [n for n in tl["network"] if n["peer"] == "127.0.0.1:%d" % port]
    assert (n["host"], n["host_source"]) == ("models.example.test", "sni"), n
    [c] = [c for c in tl["connects"] if c["peer"] == "127.0.0.1:%d" % port]
    assert c["tls"] is True and c["writes"] >= 1, c


OUTSIDE = r'''
import ctypes, os, sys, time
libc = ctypes.CDLL("libc.so.6")
print(ctypes.cast(libc.write, ctypes.c_void_p).value, flush=True)
gai = ctypes.cast(libc.getaddrinfo, ctypes.c_void_p).value
ctypes.string_at(gai, 1)                # its page present, as the file has it
print(gai, flush=True)
while not os.path.exists(sys.argv[1]):
    os.write(2, b"")                    # libc's write, again and again
    time.sleep(0.001)
'''


def libc_base(pid):
    for line in open("/proc/%d/maps" % pid):
        f = line.split()
        if len(f) >= 6 and os.path.basename(f[5]) == "libc.so.6" and int(f[2], 16) == 0:
            return int(f[0].split("-")[0], 16)
    return None


def page_is_file(pid, addr):
    """pagemap: is the page at addr present and still the file's (no
    breakpoint written into a private copy)? None when not present."""
    with open("/proc/%d/pagemap" % pid, "rb") as f:
        f.seek(addr // 4096 * 8)
        (e,) = struct.unpack("<Q", f.read(8))
    if not e >> 63 & 1:
        return None
    return bool(e >> 61 & 1)


def tree_python(ttspid):
    """The service (test_costs' app.py): tts-launch's python child."""
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and open("/proc/%s/stat" % d).read().split(") ")[1].split()[1] == \
                    str(ttspid) and "app.py" in open("/proc/%s/cmdline" % d).read():
                return int(d)
        except (OSError, IndexError):
            continue
    return None


@pytest.mark.serial
def test_cheap_libc_breakpoints_only_in_the_tree(work):
    """The tree's libc page of write has the breakpoint (a private copy of
    the page), an outside process's does not, though it maps the same libc
    and calls write all along; the same for getaddrinfo's page; the keeper holds the links' copies, and both
    copies go when the window ends."""
    stop = work / "stop-outside"
    (work / "outside.py").write_text(OUTSIDE)
    out = subprocess.Popen([sys.executable, str(work / "outside.py"), str(stop)],
                           stdout=subprocess.PIPE, text=True)
    write_at = int(out.stdout.readline())
    gai_at = int(out.stdout.readline())
    p, tl_path = launch_cheap(work)
    try:
        wait_for(lambda: tl_path.exists() or None, timeout=60, what="the first timeline")
        assert PAIR <= set(prog_names(p.pid))
        keeper = keeper_of(p.pid)
        assert keeper and PAIR <= set(prog_names(keeper))  # the last references: its
        assert perf_fds(keeper) >= 10  # and the followers, one a site at least
        svc = wait_for(lambda: tree_python(p.pid), timeout=30, what="the service")
        off = write_at - libc_base(out.pid)
        assert page_is_file(out.pid, write_at) is True  # present, no breakpoint
        assert page_is_file(svc, libc_base(svc) + off) is False  # the breakpoint's copy
        # getaddrinfo's pair is bound to the tree too (not a uprobe of every
        # process mapping libc, as before 2026-12)
        goff = gai_at - libc_base(out.pid)
        assert page_is_file(out.pid, gai_at) is True
        assert page_is_file(svc, libc_base(svc) + goff) is False
        light = wait_for(lambda: light_of(tl_path), timeout=60, what="the window's timeline")
        assert "libc_io" in light["detached"], light
        assert not PAIR & set(prog_names(p.pid))
        wait_for(lambda: not PAIR & set(prog_names(keeper)), timeout=60,
                 what="the keeper's libc links closed")
        # the followers went with them (closed one after the other, each
        # waiting for a grace period)
        wait_for(lambda: perf_fds(keeper) == 0 or None, timeout=60,
                 what="the keeper's followers closed")
    finally:
        stop.touch()
        out.wait(30)
        tl = finish(p, work)
    assert libc_probe(tl)
    # the outside process's writes reached no program of the tree's
    assert not [pr for pr in tl["processes"] if pr["pid"] == out.pid]
    # the keeper, its links closed, removes the tracefs definitions no run holds
    wait_for(lambda: not os.path.exists("/proc/%d" % keeper) or None, timeout=120,
             what="the keeper's exit")
    wait_for(lambda: not keepers() or None, timeout=120, what="every keeper's exit")
    assert not definitions()


OUTSIDE_IMPORTS = r'''
import os, sys, time
print(os.getpid(), flush=True)
while not os.path.exists(sys.argv[1]):
    sys.modules.pop("colorsys", None)
    import colorsys  # noqa: F401  the import statement passes the import probes' code
    time.sleep(0.005)
'''


def import_definitions():
    """The import probes' shared definitions: [(file, offset, semaphore offset)]"""
    out = []
    for line in open("/sys/kernel/tracing/uprobe_events").read().splitlines():
        f = line.split()
        if f[0].startswith("p:ttsio/pyimport"):
            path, at = f[1].rsplit(":", 1)
            off, sema = at.rstrip(")").split("(")
            out.append((path, int(off, 16), int(sema, 16)))
    return out


def file_addr(pid, path, off):
    """The address file offset off of path has in process pid, or None."""
    for line in open("/proc/%d/maps" % pid):
        f = line.split()
        if len(f) >= 6 and f[5] == path:
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            base = int(f[2], 16)
            if base <= off < base + hi - lo:
                return lo + off - base
    return None


def semaphore(pid, path, off):
    """A USDT semaphore's value (unsigned short) in process pid."""
    with open("/proc/%d/mem" % pid, "rb") as m:
        m.seek(file_addr(pid, path, off))
        return struct.unpack("<H", m.read(2))[0]


@pytest.mark.serial
def test_import_probes_only_in_the_tree(work):
    """Python's import probes (USDT import__find__load__start/done) are
    uprobes bound to the tree with their semaphores (ref_ctr_offset): the
    tree's python has the breakpoints and the semaphores counted up, so it
    calls the probes; a python outside the tree, the same binary importing
    all along, has neither (libbpf's USDT attach, before 2026-12, trapped
    every python of the host)."""
    stop = work / "stop-outside"
    (work / "outside.py").write_text(OUTSIDE_IMPORTS)
    out = subprocess.Popen([sys.executable, str(work / "outside.py"), str(stop)],
                           stdout=subprocess.PIPE, text=True)
    assert int(out.stdout.readline()) == out.pid
    p, tl_path = launch_cheap(work)
    try:
        wait_for(lambda: tl_path.exists() or None, timeout=60, what="the first timeline")
        svc = wait_for(lambda: tree_python(p.pid), timeout=30, what="the service")
        defs = import_definitions()
        assert len(defs) == 2, defs
        for path, off, sema in defs:
            assert path == os.path.realpath(sys.executable) == os.path.realpath("/usr/bin/python3")
            assert page_is_file(out.pid, file_addr(out.pid, path, off)) is True
            assert page_is_file(svc, file_addr(svc, path, off)) is False
            assert semaphore(out.pid, path, sema) == 0
            assert semaphore(svc, path, sema) >= 1
    finally:
        stop.touch()
        out.wait(30)
        tl = finish(p, work)
    py = tl["python"]
    assert py["usdt"] is True and py["imports_from"] == "usdt"
    assert [i for i in py["imports"] if i["name"] == "socket" and i["found"]], py["imports"][:5]
    assert not [pr for pr in tl["processes"] if pr["pid"] == out.pid]


def definitions():
    """The shared libc definitions in tracefs: {name: tracepoint id}"""
    names = [l.split()[0].split("/", 1)[1]
             for l in open("/sys/kernel/tracing/uprobe_events").read().splitlines()
             if l.startswith("p:ttsio/")]
    out = {}
    for n in names:
        try:
            out[n] = int(open("/sys/kernel/tracing/events/ttsio/%s/id" % n).read())
        except OSError:
            continue  # removed meanwhile
    return out


@pytest.mark.serial
def test_cheap_definitions_outlive_a_run_for_the_next(work):
    """The libc sites' tracefs definitions are shared by the runs, and the
    keeper holds them past its run: after tts-launch's exit it closes the
    links (no libc_io program left with it) but keeps the followers (perf
    events, no program) a while, and a holder on each syscall tracepoint; the next run opens the same definitions
    (the same tracepoint ids: not removed and defined again in between)
    and counts exactly; once no keeper is left, none is left either. (Why:
    the close of a definition's last event holds the kernel's event_mutex
    through two grace periods, which the next run's attach waited for.)"""
    wait_for(lambda: not keepers() or None, timeout=120, what="earlier keepers' exit")
    (work / "io.py").write_text(IO)
    (work / "r.dat").write_bytes(os.urandom(8000))
    a = subprocess.Popen([str(TTS), "run", "--timeline", str(work / "a.json"), "--set",
                          "app.dir=%s" % work, "--set", "app.port=0", "--set",
                          "trace.syscalls=cheap", "--", sys.executable, str(work / "io.py"),
                          str(work)], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    keeper = wait_for(lambda: keeper_of(a.pid), what="the first run's keeper")
    out, err = a.communicate(timeout=120)
    assert a.returncode == 0, err
    defs = definitions()
    assert len(defs) >= 10, defs  # a site of each function at least
    # tts-launch gone: its keeper holds the followers (one a site) and the
    # holders (a disabled event, no program, on each syscall tracepoint of
    # cheap: 40 at least), not the links (its own holders' left out: a link
    # of a program that does nothing on each rare raw tracepoint, tphold.c)
    wait_for(lambda: run_links(keeper) == 0 or None, what="the links closed")
    assert os.path.exists("/proc/%d" % keeper) and perf_fds(keeper) >= len(defs) + 40
    assert definitions() == defs
    # the next run, within the linger: the same definitions, exact figures
    tl = run_mode(work, "cheap", sys.executable, work / "io.py", work, name="b.json")
    assert libc_probe(tl) and tl["tracing"]["approximate"] == [], tl["tracing"]
    w = file_entry(tl, work / "w.dat")
    assert (w["writes"], w["bytes_written"]) == (9, 780)
    assert {n: i for n, i in definitions().items() if n in defs} == defs
    wait_for(lambda: not keepers() or None, timeout=120, what="the keepers' exit")
    assert not definitions()


STATIC = r'''
#include <fcntl.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);

	for (int i = 0; i < 6; i++)
		if (write(fd, "0123456789", 10) != 10)
			return 1;
	return close(fd);
}
'''


def test_cheap_static_binary_is_said_approximate(work):
    """A static binary has no libc.so.6 to probe: its six writes are one
    estimate at close, and the timeline says so (approximate figures, a
    libc_io fallback) instead of passing them off as exact."""
    (work / "static.c").write_text(STATIC)
    r = subprocess.run(["cc", "-static", "-O1", "-o", str(work / "static"), str(work / "static.c")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr  # glibc's libc.a (libc6-dev)
    tl = run_mode(work, "cheap", work / "static", work / "out.dat")
    tr = tl["tracing"]
    assert libc_probe(tl)  # attached: the static binary bypasses it
    assert {"files.writes", "files.bytes_written", "requests.end_ms"} <= set(tr["approximate"])
    assert any(f["probe"] == "libc_io" and "not reached by the libc probes" in f["reason"]
               for f in tr["fallbacks"]), tr["fallbacks"]
    f = file_entry(tl, work / "out.dat")
    assert (f["writes"], f["bytes_written"]) == (1, 60)  # the estimate at close


# A TCP exchange whose order is fixed, by a static binary (read/write on the
# sockets: neither libc's probed calls nor per-syscall tracepoints in cheap,
# so the figures come from the sockets' own counters at their end): the
# client writes 3000 bytes, the server reads them, writes 5000 and closes
# first; the client reads to the end (the server's FIN received), then closes.
STATIC_TCP = r"""
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
int main(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	static char buf[8192];
	int l = socket(AF_INET, SOCK_STREAM, 0), c, s;
	long got = 0, n;

	if (l < 0 || bind(l, (void *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (void *)&a, &al))
		return 1;
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (void *)&a, sizeof(a)) || (s = accept(l, 0, 0)) < 0)
		return 1;
	if (write(c, buf, 3000) != 3000)
		return 1;
	while (got < 3000 && (n = read(s, buf, sizeof(buf))) > 0)
		got += n;
	if (write(s, buf, 5000) != 5000 || close(s))
		return 1;
	got = 0;
	while ((n = read(c, buf, sizeof(buf))) > 0)
		got += n;
	close(c);
	close(l);
	return got == 5000 ? 0 : 1;
}
"""


def test_cheap_socket_counters_count_data_not_the_fin(work):
    """Where the bytes come from a socket's counters at its end, they are
    what the application moved: the peer's FIN steps the kernel's
    bytes_received by one, and retransmitted copies are in bytes_sent
    (net.bpf.c, tcp_data_bytes)."""
    (work / "tcp.c").write_text(STATIC_TCP)
    r = subprocess.run(["cc", "-static", "-O1", "-o", str(work / "tcp"), str(work / "tcp.c")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    tl = run_mode(work, "cheap", work / "tcp")
    assert tl["process"]["exit"]["code"] == 0
    out = [n for n in tl["network"] if not n["inbound"] and n["connects"] == 1]
    inn = [n for n in tl["network"] if n["inbound"]]
    assert len(out) == 1 and len(inn) == 1, tl["network"]
    # the client had the server's FIN before it closed: 5000, not 5001
    assert (out[0]["bytes_out"], out[0]["bytes_in"]) == (3000, 5000), out
    assert (inn[0]["bytes_in"], inn[0]["bytes_out"]) == (3000, 5000), inn
