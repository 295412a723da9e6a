"""Run a command and append its wall time and CPU time (ms) to $BENCH_OUT.

    timer.py [--until-port PORT] -- COMMAND [ARG...]

The clock starts right before fork and stops when the command exits, or,
with --until-port, when something accepts on 127.0.0.1:PORT (the simulator
binds only once its models are loaded); the command is then ended. Used
inside each tracer variant so every variant measures the same window.
"""
import os
import signal
import socket
import subprocess
import sys
import time


def main():
    args = sys.argv[1:]
    port = None
    if args[:1] == ["--until-port"]:
        port = int(args[1])
        args = args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.exit("usage: timer.py [--until-port PORT] -- COMMAND [ARG...]")
    t0 = time.monotonic_ns()
    child = subprocess.Popen(args, start_new_session=port is not None,
                             stdout=subprocess.DEVNULL)
    cpu = None
    if port is None:
        # wait4: the child's CPU time too (user + system: BPF programs run
        # in the traced process's context, so tracing shows up there).
        _, status, ru = os.wait4(child.pid, 0)
        child.returncode = rc = os.waitstatus_to_exitcode(status)
        cpu = (ru.ru_utime + ru.ru_stime) * 1000
    else:
        rc = 0
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if child.poll() is not None:
                sys.exit("timer: %s exited (%d) before listening" % (args[0], child.returncode))
            time.sleep(0.002)
    elapsed = (time.monotonic_ns() - t0) / 1e6
    if port is not None:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait()
    with open(os.environ["BENCH_OUT"], "a") as f:
        f.write("%.3f %s\n" % (elapsed, "%.3f" % cpu if cpu is not None else "-"))
    sys.exit(rc)


if __name__ == "__main__":
    main()
