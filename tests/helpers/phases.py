#!/usr/bin/python3
"""A program with known phases, for the attribution tests (issue 15).

  phases.py PEER_PORT COLD_FILE [SECONDS [OUT]]

Runs five phases of SECONDS each (default 1.0) and prints, on stdout (or
into the file OUT), one JSON line per phase with its own boundaries
(CLOCK_MONOTONIC, ms):
  burn   CPU in burn()
  nap    time.sleep in nap()
  peer   a request to a slow TCP peer on 127.0.0.1:PEER_PORT (blocked in recv)
  child  waits for a child `sleep`
  cold   reads COLD_FILE, dropped from the page cache (fadvise DONTNEED), in
         16 MiB pieces at random offsets with O_DIRECT, so each read waits
         for the disk: on these VMs the virtual disk is fast enough that a
         buffered cold read spends most of its time on CPU (filling the page
         cache, copying), which is cpu, not disk
Everything is imported before the first phase starts; phases_import's body
spends 0.2 s of CPU there, so some CPU is always an import's.
"""
import json
import mmap
import os
import random
import socket
import subprocess
import sys
import time

import phases_import  # noqa: F401  (0.2 s of CPU that is an import's)


CHUNK = int(os.environ.get("PHASES_CHUNK", 16 << 20))


def now_ms():
    return time.clock_gettime(time.CLOCK_MONOTONIC) * 1000


def burn(sec):
    end = time.monotonic() + sec
    x = 0
    while time.monotonic() < end:
        for i in range(10000):
            x += i * i
    return x


def nap(sec):
    time.sleep(sec)


def peer(port, sec):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"%.3f\n" % sec)
        s.recv(16)


def child(sec):
    subprocess.run(["sleep", "%.3f" % sec], check=True)


def cold(path, sec):
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    pieces = os.fstat(fd).st_size // CHUNK
    buf = mmap.mmap(-1, CHUNK)  # page-aligned, as O_DIRECT needs
    rnd = random.Random(1)
    end = time.monotonic() + sec
    while time.monotonic() < end:
        os.preadv(fd, [buf], rnd.randrange(pieces) * CHUNK)
    os.close(fd)


def main(argv):
    port, path = int(argv[1]), argv[2]
    sec = float(argv[3]) if len(argv) > 3 else 1.0
    out = open(argv[4], "w") if len(argv) > 4 else sys.stdout
    phases = [("burn", lambda: burn(sec)), ("nap", lambda: nap(sec)),
              ("peer", lambda: peer(port, sec)), ("child", lambda: child(sec)),
              ("cold", lambda: cold(path, sec))]
    for name, fn in phases:
        a = now_ms()
        fn()
        b = now_ms()
        print(json.dumps({"phase": name, "start": a, "end": b}), file=out, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
