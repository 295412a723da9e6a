"""Runs one scenario of test_progcache.py inside a private mount namespace
whose /sys/fs/bpf is a fresh BPF filesystem (the caller runs it under
`unshare --mount --propagation private`), so the entries it makes and
checks are its own: parallel tests keep theirs on the host's.

    progcache_ns.py SCENARIO WORKDIR     (env: TTS, FILEOPS)

Writes WORKDIR/result.json: each run's return code, stderr and timeline,
and what the scenario saw of PROGCACHE_ROOT between runs."""
import fcntl
import json
import os
import signal
import subprocess
import sys
import time

from conftest import keepers_of  # this file's directory is sys.path[0]

ROOT = "/sys/fs/bpf/tts-launch"
TTS, FILEOPS = os.environ["TTS"], os.environ["FILEOPS"]
NOSYSCALL = os.path.join(os.path.dirname(FILEOPS), "nosyscall")


def entries():
    try:
        return sorted(e for e in os.listdir(ROOT) if not e.startswith("new-"))
    except FileNotFoundError:
        return []


def lock_free(entry):
    fd = os.open(os.path.join(ROOT, entry), os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def wait_reset(timeout=60, held=()):
    """Until no entry is locked (the keepers reset them) but those the
    scenario holds itself: the next run may take it."""
    end = time.time() + timeout
    while time.time() < end:
        if all(lock_free(e) for e in entries() if e not in held):
            return True
        time.sleep(0.05)
    return False


def hold(entry):
    """The entry's lock, as a run holds it: the fd (close it to let go)."""
    fd = os.open(os.path.join(ROOT, entry), os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


class Runs:
    def __init__(self, work):
        self.work, self.out = work, {"runs": [], "seen": {}}

    def argv(self, name, ops, *sets, prefix=()):
        argv = list(prefix) + [TTS, "run", "-v", "--timeline",
                               os.path.join(self.work, name + ".json"), "--set", "app.port=0"]
        for s in sets:
            argv += ["--set", s]
        return argv + ["--", FILEOPS] + list(ops)

    def done(self, name, p, err):
        tl = os.path.join(self.work, name + ".json")
        self.out["runs"].append({
            "name": name, "rc": p.returncode, "stderr": err,
            "timeline": json.load(open(tl)) if os.path.exists(tl) else None})

    def run(self, name, ops, *sets, prefix=()):
        p = subprocess.run(self.argv(name, ops, *sets, prefix=prefix), capture_output=True,
                           text=True, cwd=self.work, timeout=120)
        self.done(name, p, p.stderr)

    def saw(self, what, value):
        self.out["seen"][what] = value

    def write(self):
        with open(os.path.join(self.work, "result.json"), "w") as f:
            json.dump(self.out, f)


def data(work, name, size):
    path = os.path.join(work, name)
    with open(path, "wb") as f:
        f.write(os.urandom(size))
    return path


def twice(r, w):
    """A run, its reset, then a run of the same settings on other files."""
    a, b = data(w, "a.dat", 30000), data(w, "b.dat", 20000)
    r.run("first", ["read:%s:30000" % a, "stat:%s/no/such:3" % w, "echo:5000",
                    "threads:2:64"])
    r.saw("reset", wait_reset())
    r.saw("entries", entries())
    r.run("second", ["read:%s:20000" % b, "write:%s/w.dat:777" % w,
                     "stat:%s/gone/else:2" % w])


def keeper_killed(r, w):
    """The keeper dies before it resets the entry it holds."""
    r.run("first", ["sleep:1"])
    r.saw("reset", wait_reset())
    a = data(w, "a.dat", 4096)
    p = subprocess.Popen(r.argv("killed", ["read:%s:4096" % a, "sleep:4000"]), cwd=w,
                         stderr=subprocess.PIPE, text=True)
    end, keepers = time.time() + 30, []
    while time.time() < end and not keepers:
        time.sleep(0.05)
        keepers = keepers_of(p.pid)
    for k in keepers:
        os.kill(k, signal.SIGKILL)
    r.saw("keepers_killed", len(keepers))
    _, err = p.communicate(timeout=60)
    r.done("killed", p, err)
    r.saw("reset", wait_reset())
    r.run("after", ["read:%s:4096" % a])


def in_use(r, w):
    """Another run holds the entry (its lock): this one loads afresh and
    keeps its load in the key's second slot; the next run takes that one;
    with both held, a run loads afresh and keeps nothing."""
    r.run("first", ["sleep:1"])
    r.saw("reset", wait_reset())
    held = entries()
    one = hold(held[0])
    r.run("second", ["read:%s:1000" % data(w, "a.dat", 1000)])
    r.saw("reset2", wait_reset(held=held))
    r.saw("entries2", entries())
    r.run("third", ["read:%s:3000" % data(w, "c.dat", 3000)])
    r.saw("reset3", wait_reset(held=held))
    two = hold(held[0] + "-2")
    r.run("fourth", ["read:%s:2000" % data(w, "b.dat", 2000)])
    os.close(one)
    os.close(two)
    r.saw("held", held)
    r.saw("entries", entries())
    # the first gone (removed, or evicted): the second is still taken
    r.saw("reset4", wait_reset())
    subprocess.run(["rm", "-r", os.path.join(ROOT, held[0])], check=True)
    r.run("fifth", ["read:%s:1000" % data(w, "d.dat", 1000)])


def no_membarrier(r, w):
    """The keeper cannot wait for a grace period (membarrier fails, as on a
    kernel without it): the entry is let go without its reset, and the next
    run removes it and loads afresh."""
    r.run("first", ["read:%s:5000" % data(w, "a.dat", 5000)],
          prefix=[NOSYSCALL, "membarrier"])
    r.saw("reset", wait_reset())
    r.saw("entries", entries())
    r.run("after", ["read:%s:3000" % data(w, "b.dat", 3000)])
    r.saw("reset2", wait_reset())
    r.saw("entries2", entries())


def hostile(r, w):
    """The cache's directory made beforehand by another user."""
    os.mkdir(ROOT, 0o700)
    os.chown(ROOT, 65534, 65534)
    r.run("first", ["read:%s:1000" % data(w, "a.dat", 1000)])
    r.saw("reset", wait_reset())
    r.saw("entries", entries())


def forget(r, w):
    """keep_loaded = false removes what earlier runs kept, and keeps nothing."""
    r.run("first", ["sleep:1"])
    r.saw("reset", wait_reset())
    r.saw("before", entries())
    r.run("second", ["sleep:1"], "trace.keep_loaded=false")
    r.saw("reset2", wait_reset())
    r.saw("entries", entries())


def evict(r, w):
    """Three settings, one after another: the least recently used goes."""
    for port in (0, 1, 2):
        r.run("port%d" % port, ["sleep:1"], "app.port=%d" % (40000 + port) if port else
              "app.port=0")
        if port == 0:
            # what a store killed half-way leaves (progcache_store's new-PID):
            # no lock on it, so the next eviction removes it
            os.mkdir(os.path.join(ROOT, "new-4194300"), 0o700)
        r.saw("reset%d" % port, wait_reset())
        r.saw("entries%d" % port, entries())
        r.saw("all%d" % port, sorted(os.listdir(ROOT)))


def set_used(entry, seconds_ago):
    """The entry's state (clean, last use: two u64, the use in realtime ns)
    says it was last used seconds_ago, through bpftool."""
    used = time.time_ns() - int(seconds_ago * 1e9)
    value = (1).to_bytes(8, "little") + used.to_bytes(8, "little")
    subprocess.run(["bpftool", "map", "update", "pinned", os.path.join(ROOT, entry, "state"),
                    "key", "0", "0", "0", "0", "value"] + [str(b) for b in value], check=True)


def slots_evict(r, w):
    """A setting's second entry counts with its first: two settings stay
    with both of the first's entries; a second entry idle a minute goes;
    a third setting takes the place of the least recently used one, with
    all of its entries."""
    r.run("a1", ["sleep:1"])
    r.saw("reset1", wait_reset())
    a = entries()[0]
    one = hold(a)
    r.run("a2", ["sleep:1"])
    r.saw("reset2", wait_reset(held=[a]))
    os.close(one)
    r.run("b", ["sleep:1"], "app.port=40001")
    r.saw("reset3", wait_reset())
    r.saw("entries3", entries())
    set_used(a + "-2", 120)
    r.run("b2", ["sleep:1"], "app.port=40001")
    r.saw("reset4", wait_reset())
    r.saw("entries4", entries())
    r.run("c", ["sleep:1"], "app.port=40002")
    r.saw("reset5", wait_reset())
    r.saw("entries5", entries())
    r.saw("a", a)


def fs_type(path):
    return subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True,
                          check=True).stdout.strip()


def unmounted(r, w):
    """No BPF filesystem on /sys/fs/bpf (a boot without systemd): doctor
    says a run mounts one, the first run mounts it (closed to others) and
    keeps its programs there, the next takes them."""
    for _ in range(4):  # the driver's, and the host's if it had one
        if fs_type("/sys/fs/bpf") != "bpf_fs":
            break
        subprocess.run(["umount", "/sys/fs/bpf"], check=True)
    r.saw("before", fs_type("/sys/fs/bpf"))
    p = subprocess.run([TTS, "doctor"], capture_output=True, text=True, cwd=w, timeout=120)
    r.saw("doctor", [ln for ln in p.stdout.splitlines() if "kept programs" in ln])
    # a mount refused (ENOSYS here): said, the run traced all the same
    r.run("refused", ["sleep:1"], prefix=[NOSYSCALL, "mount"])
    r.saw("after_refused", fs_type("/sys/fs/bpf"))
    # two at once: one mount between them (bpffs_mount's lock)
    a = data(w, "a.dat", 1000)
    both = [subprocess.Popen(r.argv(name, ["read:%s:1000" % a]), cwd=w,
                             stderr=subprocess.PIPE, text=True) for name in ("first", "other")]
    for name, p in zip(("first", "other"), both):
        _, err = p.communicate(timeout=120)
        r.done(name, p, err)
    r.saw("bpf_mounts", sum(1 for ln in open("/proc/self/mountinfo")
                            if ln.split()[4] == "/sys/fs/bpf" and " - bpf " in ln))
    r.saw("after", fs_type("/sys/fs/bpf"))
    r.saw("mode", oct(os.stat("/sys/fs/bpf").st_mode & 0o777))
    r.saw("reset", wait_reset())
    r.run("second", ["read:%s:2000" % data(w, "b.dat", 2000)])


def launcher_killed(r, w):
    """tts-launch is stopped while its tree fills the ring buffer with
    records it never reads (4000 short processes: fork, exec, exit each),
    then killed: its keeper resets the entry all the same (the ring skipped
    to its end), and the next run takes it, losing nothing of its own."""
    r.run("first", ["sleep:1"])
    r.saw("reset", wait_reset())
    done = os.path.join(w, "forked")
    argv = [TTS, "run", "-v", "--timeline", os.path.join(w, "killed.json"), "--set",
            "app.port=0", "--", "/bin/sh", "-c",
            "i=0; while [ $i -lt 4000 ]; do /bin/true; i=$((i+1)); done; : > %s; sleep 60"
            % done]
    p = subprocess.Popen(argv, cwd=w, stderr=subprocess.PIPE, text=True)
    end, keepers = time.time() + 30, []
    while time.time() < end and not keepers:  # released: the tree runs
        time.sleep(0.02)
        keepers = keepers_of(p.pid)
    os.kill(p.pid, signal.SIGSTOP)
    end = time.time() + 180
    while time.time() < end and not os.path.exists(done):
        time.sleep(0.1)
    r.saw("forked", os.path.exists(done))
    os.kill(p.pid, signal.SIGKILL)
    _, err = p.communicate(timeout=60)
    r.saw("killed", [p.returncode, err])
    r.saw("reset", wait_reset())
    r.saw("entries", entries())
    a = data(w, "a.dat", 4096)
    r.run("after", ["read:%s:4096" % a, "threads:3:16"])


def doctor(r, w):
    """doctor's line on what is kept: nothing yet, then the entry a run
    made, then a directory another user owns."""
    def ask(name):
        p = subprocess.run([TTS, "doctor"], capture_output=True, text=True, cwd=w, timeout=120)
        r.saw(name, [ln for ln in p.stdout.splitlines() if "kept programs" in ln])
    ask("none")
    r.run("first", ["sleep:1"])
    r.saw("reset", wait_reset())
    r.saw("entries", entries())
    ask("one")
    subprocess.run(["rm", "-r", ROOT], check=True)
    os.mkdir(ROOT, 0o700)
    os.chown(ROOT, 65534, 65534)
    ask("hostile")


SCENARIOS = {f.__name__: f for f in (twice, keeper_killed, in_use, no_membarrier, hostile,
                                     forget, evict, slots_evict, unmounted, launcher_killed,
                                     doctor)}

if __name__ == "__main__":
    scenario, work = sys.argv[1], sys.argv[2]
    subprocess.run(["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"], check=True)
    runs = Runs(work)
    try:
        SCENARIOS[scenario](runs, work)
    finally:
        runs.write()
