#!/usr/bin/python3
"""What creating a BPF map costs, by kind and size: the maps tts-launch
creates before the service's exec (BENCHMARKS.md, "Launch -> exec"). Each
shape is created and closed --runs times (bpf(BPF_MAP_CREATE) straight
from ctypes, nothing else timed); the median in ms.

    scripts/bench/map_create.py [--runs N]

Needs root (BPF). Not a test: the figures depend on the machine.
"""
import argparse
import ctypes
import os
import statistics
import struct
import time

HASH, ARRAY, PERCPU_ARRAY, LRU_HASH, RINGBUF = 1, 2, 6, 9, 27
NO_PREALLOC = 1
BPF_MAP_CREATE = 0
SYS_BPF = 321  # x86-64

# (label, type, key size, value size, entries, flags)
SHAPES = [
    ("hash 1024, not preallocated", HASH, 16, 192, 1024, NO_PREALLOC),
    ("hash 2048, not preallocated", HASH, 16, 192, 2048, NO_PREALLOC),
    ("hash 4096, not preallocated", HASH, 16, 192, 4096, NO_PREALLOC),
    ("hash 16384, not preallocated (files, paths)", HASH, 16, 192, 16384, NO_PREALLOC),
    ("hash 16384, preallocated", HASH, 16, 192, 16384, 0),
    ("LRU hash 4096 (blockstart)", LRU_HASH, 8, 8, 4096, 0),
    ("LRU hash 16384 (pyseen before)", LRU_HASH, 16, 1, 16384, 0),
    ("LRU hash 8192 (pyseen now)", LRU_HASH, 16, 1, 8192, 0),
    ("per-CPU array 6000 x 8 B (faultrate before)", PERCPU_ARRAY, 4, 8, 6000, 0),
    ("per-CPU array 47 x 1 KiB (faultrate now)", PERCPU_ARRAY, 4, 1024, 47, 0),
    ("array 65536 x 8 B (treebits)", ARRAY, 4, 8, 65536, 0),
    ("ring buffer 1 MiB (events)", RINGBUF, 0, 0, 1 << 20, 0),
]


def create(libc, kind, key, value, entries, flags):
    attr = struct.pack("IIIII", kind, key, value, entries, flags) + b"\0" * (128 - 20)
    buf = ctypes.create_string_buffer(attr, 128)
    t0 = time.perf_counter()
    fd = libc.syscall(SYS_BPF, BPF_MAP_CREATE, buf, 128)
    dt = time.perf_counter() - t0
    if fd < 0:
        raise SystemExit("BPF_MAP_CREATE failed: %s" % os.strerror(ctypes.get_errno()))
    os.close(fd)
    return dt * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    for label, *shape in SHAPES:
        ms = [create(libc, *shape) for _ in range(args.runs)]
        print("%-48s %7.3f ms  (range %.3f-%.3f)" % (label, statistics.median(ms), min(ms),
                                                     max(ms)))


if __name__ == "__main__":
    main()
