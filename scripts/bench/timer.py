#!/usr/bin/python3
"""Run a command and append its wall time and CPU time (ms) to $BENCH_OUT.

    timer.py [--until-signal] -- COMMAND [ARG...]

The clock starts right before fork and stops when the command exits. With
--until-signal (a service that never exits by itself), timer.py writes its
pid to $BENCH_OUT.pid and waits for SIGUSR1 from the benchmark, which polls
the service's port from outside the traced tree and writes the CLOCK_MONOTONIC
time it first accepted (ns) to $BENCH_OUT.t1 before signalling: the clock
stops there, the command's CPU time so far (its threads' run time from
/proc/PID/task/*/schedstat) is taken, and the command is ended. Polling from inside would put a
connect(2) every 2 ms into the trace, which is the measuring instrument's
work, not the workload's. Used inside each tracer variant so every variant
measures the same window.
"""
import os
import signal
import subprocess
import sys
import time


def task_cpu_ms(pid):
    """Run time of every thread of pid, in ms (None when it is gone)."""
    total = 0
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return total / 1e6


def main():
    args = sys.argv[1:]
    until_signal = args[:1] == ["--until-signal"]
    if until_signal:
        args = args[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.exit("usage: timer.py [--until-signal] -- COMMAND [ARG...]")
    out = os.environ["BENCH_OUT"]
    if until_signal:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGCHLD})
        with open(out + ".pid.tmp", "w") as f:
            f.write("%d\n" % os.getpid())
        os.rename(out + ".pid.tmp", out + ".pid")
    t0 = time.monotonic_ns()
    child = subprocess.Popen(args, start_new_session=until_signal, stdout=subprocess.DEVNULL)
    cpu = None
    if not until_signal:
        # wait4: the child's CPU time too (user + system: BPF programs run
        # in the traced process's context, so tracing shows up there).
        _, status, ru = os.wait4(child.pid, 0)
        child.returncode = rc = os.waitstatus_to_exitcode(status)
        cpu = (ru.ru_utime + ru.ru_stime) * 1000
        elapsed = (time.monotonic_ns() - t0) / 1e6
    else:
        rc = 0
        while True:
            sig = signal.sigwait({signal.SIGUSR1, signal.SIGCHLD})
            if sig == signal.SIGUSR1:
                break
            if child.poll() is not None:
                sys.exit("timer: %s exited (%d) before listening" % (args[0], child.returncode))
        with open(out + ".t1") as f:
            elapsed = (int(f.read()) - t0) / 1e6
        cpu = task_cpu_ms(child.pid)
        os.killpg(child.pid, signal.SIGTERM)
        child.wait()
    with open(out, "a") as f:
        f.write("%.3f %s\n" % (elapsed, "%.3f" % cpu if cpu is not None else "-"))
    sys.exit(rc)


if __name__ == "__main__":
    main()
