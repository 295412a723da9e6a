#!/usr/bin/python3
"""What a raw tracepoint's attach costs beside 0, 1 or 2 registrations
already on the tracepoint (launcher/tphold.c: why the keeper holds the run's
raw tracepoints through its linger): BPF_RAW_TRACEPOINT_OPEN of a program
that does nothing on four tracepoints nothing of this host fires often,
each round with

  0: nothing else registered there,
  1: a disabled perf event without a program (a holder, tphold_events),
  2: that and another raw tracepoint link (tphold_programs),

median and minimum microseconds an attach over the rounds.

    scripts/bench/rawtp_attach.py [--rounds N]

Needs root (BPF, perf events on tracepoints) and no other tracer on those
four tracepoints (a lingering tts-launch keeper holds them: wait 15 s after
the last run). Not a test: the figures are this VM's (the text patches'
IPIs to the other CPUs).
"""
import argparse
import ctypes
import os
import statistics
import struct
import time

libc = ctypes.CDLL(None, use_errno=True)
NR_BPF, NR_PERF_EVENT_OPEN = 321, 298  # x86-64
BPF_PROG_LOAD, BPF_RAW_TRACEPOINT_OPEN = 5, 17
BPF_PROG_TYPE_RAW_TRACEPOINT = 17
PERF_TYPE_TRACEPOINT, PERF_FLAG_FD_CLOEXEC = 2, 8
TRACEPOINTS = [("sched", "sched_process_fork"), ("block", "block_rq_issue"),
               ("sock", "inet_sock_set_state"), ("sched", "sched_process_exec")]


def load_nothing():
    """A raw tracepoint program: r0 = 0; exit."""
    insns = struct.pack("<BBhi", 0xb7, 0, 0, 0) + struct.pack("<BBhi", 0x95, 0, 0, 0)
    ib, lic = ctypes.create_string_buffer(insns), ctypes.create_string_buffer(b"GPL")
    attr = bytearray(128)
    struct.pack_into("IIQQ", attr, 0, BPF_PROG_TYPE_RAW_TRACEPOINT, 2, ctypes.addressof(ib),
                     ctypes.addressof(lic))
    fd = libc.syscall(NR_BPF, BPF_PROG_LOAD, ctypes.create_string_buffer(bytes(attr), 128), 128)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "BPF_PROG_LOAD")
    return fd


def raw_tp(prog, name):
    nb = ctypes.create_string_buffer(name.encode())
    attr = bytearray(16)
    struct.pack_into("QI", attr, 0, ctypes.addressof(nb), prog)
    fd = libc.syscall(NR_BPF, BPF_RAW_TRACEPOINT_OPEN, ctypes.create_string_buffer(bytes(attr),
                                                                                  16), 16)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "BPF_RAW_TRACEPOINT_OPEN " + name)
    return fd


def holder(system, event):
    """A disabled perf event without a program on system:event, of this process."""
    tid = int(open("/sys/kernel/tracing/events/%s/%s/id" % (system, event)).read())
    attr = bytearray(128)
    struct.pack_into("IIQ", attr, 0, PERF_TYPE_TRACEPOINT, 128, tid)
    struct.pack_into("Q", attr, 40, 1)  # disabled
    fd = libc.syscall(NR_PERF_EVENT_OPEN, ctypes.create_string_buffer(bytes(attr), 128), 0, -1,
                      -1, PERF_FLAG_FD_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "perf_event_open %s:%s" % (system, event))
    return fd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    a = ap.parse_args()
    prog = load_nothing()
    res = {0: [], 1: [], 2: []}
    for _ in range(a.rounds):
        for regs in res:
            extra = []
            for system, event in TRACEPOINTS:
                if regs >= 1:
                    extra.append(holder(system, event))
                if regs >= 2:
                    extra.append(raw_tp(prog, event))
            time.sleep(0.3)  # the registrations' grace periods over
            t = time.perf_counter()
            fds = [raw_tp(prog, event) for _, event in TRACEPOINTS]
            res[regs].append((time.perf_counter() - t) * 1e6 / len(TRACEPOINTS))
            for fd in fds + extra:
                os.close(fd)
            time.sleep(0.3)
    print("registrations before  attach (us, median)  min")
    for regs, v in res.items():
        print("%13d  %22.0f  %4.0f" % (regs, statistics.median(v), min(v)))


if __name__ == "__main__":
    main()
