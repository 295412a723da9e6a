"""Diagnosis rules, each triggered by a real scenario: tts-launch starts the
IndexTTS2 simulator (scripts/sim/webui.py) against the local model hub with
its fault knobs (blackhole, closed port, slow, interrupted, wrong cache path,
read-only cache, held lock, an unresolvable hub name) or a command that
retries a missing path; the finding and its evidence are checked in the
timeline, in what `run` printed, and in `tts-launch diagnose` on the saved
timeline. A healthy cold and warm start give no findings. Needs root and
BPF: skipped without, failed when CI is set. No timed assertions."""
import fcntl
import glob
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

import simfix
from simfix import (PY, SIM, WAIT, base_env, free_port, hub, hub_proc, make_app,  # noqa: F401
                    models, sim_app)

ROOT = Path(__file__).resolve().parents[2]
TTS = Path(os.environ.get("TTS_LAUNCH", ROOT / "build" / "tts-launch"))


Launch = simfix.HubLaunch  # HF_ENDPOINT given as endpoint, a 1 s ETag timeout
finding = simfix.finding


def diagnose(path, *args):
    p = subprocess.run([str(TTS), "diagnose", str(path), "--format", "json", *args],
                       capture_output=True, text=True, timeout=WAIT)
    return p.returncode, (json.loads(p.stdout) if p.stdout else None), p.stderr


def problems(findings):
    """The findings that are problems: not the info ones (a fact, such as
    gpu-cpu-only on the CPU-only torch of these machines, issue 18)."""
    return [f for f in findings if f["severity"] != "info"]


def same_offline(launch, tl):
    """diagnose on the saved timeline finds what the start-up found, and the
    start-up printed it; exit status by the worst severity."""
    rc, out, err = diagnose(launch.timeline)
    key = [(f["id"], f["severity"], f["message"]) for f in tl["findings"]]
    assert [(f["id"], f["severity"], f["message"]) for f in out["findings"]] == key, err
    worst = (2 if any(f["severity"] == "error" for f in tl["findings"])
             else 1 if problems(tl["findings"]) else 0)
    assert rc == worst
    printed = launch.output()
    for f in tl["findings"]:
        assert "[%s]" % f["id"] in printed, printed


@pytest.fixture(scope="module")
def warm(tracing_ok, models, hub_proc, tmp_path_factory):  # noqa: F811
    """One app whose cache is filled by a healthy cold start (which must give
    no findings), shared by the warm-start tests."""
    hub_proc.control(reset=True)
    tmp = tmp_path_factory.mktemp("warm")
    app = sim_app(tmp, models)
    run = Launch(tmp / "cold", app, endpoint=hub_proc.url)
    run.wait()
    tl = run.stop()
    assert tl["marks"].get("ready"), run.output()
    assert problems(tl["findings"]) == [], json.dumps(tl["findings"], indent=1)
    return {"app": app, "tmp": tmp}


def test_healthy_warm_start_has_no_findings(warm, hub):  # noqa: F811
    run = Launch(warm["tmp"] / "healthy", warm["app"], endpoint=hub.url)
    run.wait()
    tl = run.stop()
    assert tl["marks"].get("ready")
    assert problems(tl["findings"]) == []
    rc, out, _ = diagnose(run.timeline)
    assert rc == 0 and problems(out["findings"]) == []
    assert "warning[" not in run.output() and "error[" not in run.output()


def test_blackholed_hub_with_everything_cached(warm, hub):  # noqa: F811
    hub.control(blackhole=True)
    run = Launch(warm["tmp"] / "blackhole", warm["app"], endpoint=hub.url)
    run.wait()
    tl = run.stop()
    f = finding(tl, "hub-unreachable")
    ev = f["evidence"]
    assert ev["peer"] == "127.0.0.1:%d" % hub.port and ev["hub"]
    assert ev["outcome"] == "silently dropped"
    assert ev["attempts"] >= 2  # one per HEAD request, each waiting for its timeout
    assert ev["bytes_out"] > 0 and ev["bytes_in"] == 0
    assert ev["all_cached"] and "HF_HUB_OFFLINE=1" in f["fix"]
    assert f["seconds_lost"] > 0 and f["severity"] == "warning"
    same_offline(run, tl)


def test_hub_port_closed(warm, hub):  # noqa: F811
    port = free_port()  # nothing listens there: every connect is refused
    run = Launch(warm["tmp"] / "closed", warm["app"], endpoint="http://127.0.0.1:%d" % port)
    run.wait()
    tl = run.stop()
    ev = finding(tl, "hub-unreachable")["evidence"]
    assert ev["peer"] == "127.0.0.1:%d" % port and ev["outcome"] == "ECONNREFUSED"  # the trace resolves each connect's outcome
    assert ev["bytes_out"] == 0 and ev["attempts"] >= 2
    same_offline(run, tl)


def test_hub_name_does_not_resolve(warm, hub):  # noqa: F811
    run = Launch(warm["tmp"] / "dns", warm["app"], endpoint="http://hub.invalid:8999")
    run.wait()
    tl = run.stop()
    f = finding(tl, "dns-failure")
    assert f["evidence"]["host"] == "hub.invalid" and f["evidence"]["queries"] >= 1
    same_offline(run, tl)


def test_wrong_cache_path(tracing_ok, models, hub, tmp_path):  # noqa: F811
    app = sim_app(tmp_path, models)
    run = Launch(tmp_path / "run", app, endpoint=hub.url, env={"SIM_CACHE_BUG": "1"})
    run.wait()
    tl = run.stop()
    f = finding(tl, "wrong-cache")
    ev = f["evidence"]
    assert ev["written_to"] == str(tmp_path / "run" / "hf_home" / "hub")
    assert ev["configured_cache"] == str(app / "checkpoints" / "hf_cache")
    assert any(p.endswith("campplus_cn_common.bin") or "models--funasr--campplus" in p
               for p in ev["files"])
    assert str(app / "checkpoints" / "hf_cache") in f["fix"]
    same_offline(run, tl)


def test_slow_download(tracing_ok, models, hub, tmp_path):  # noqa: F811
    hub.control(bandwidth=300000)
    app = sim_app(tmp_path, models)
    run = Launch(tmp_path / "run", app, endpoint=hub.url)
    run.wait()
    tl = run.stop()
    f = finding(tl, "download-slow")
    ev = f["evidence"]
    assert ev["bytes"] > 0 and 0 < ev["rate_bps"] < 1024 * 1024
    assert any("models--facebook--w2v-bert-2.0" in x["path"] for x in ev["files"])
    assert "HF_ENDPOINT" in f["fix"]
    same_offline(run, tl)


def test_interrupted_download_left_behind(tracing_ok, models, hub, tmp_path):  # noqa: F811
    hub.control(bandwidth=100000)
    app = sim_app(tmp_path, models)
    blobs = app / "checkpoints" / "hf_cache" / "models--facebook--w2v-bert-2.0" / "blobs"
    run = Launch(tmp_path / "run", app, endpoint=hub.url)
    # the large blob's download has begun (the small config.json's passes quickly)
    run.wait(lambda: [p for p in glob.glob(str(blobs / "*.incomplete"))
                      if not p.startswith(str(blobs / "90532cc6"))])
    tl = run.stop()  # interrupted: SIGTERM mid-download
    left = glob.glob(str(blobs / "*.incomplete"))
    assert left
    f = finding(tl, "download-interrupted")
    assert f["evidence"]["path"] in left
    assert f["severity"] == "error"  # the service never became ready
    same_offline(run, tl)


def test_missing_path_retry_loop(tracing_ok, tmp_path):
    # a container entrypoint waiting for its cache mount, which never comes
    missing = tmp_path / "mnt" / "hf_cache"
    loop = ("import os, sys, time\n"
            "for _ in range(12):\n"
            "    if os.path.isdir(%r): sys.exit(0)\n"
            "    time.sleep(0.25)\n"
            "sys.exit(1)\n" % str(missing))
    run = Launch(tmp_path / "run", tmp_path, cmd=[PY, "-c", loop])
    run.wait(lambda: False)
    tl = run.stop()
    assert run.rc == 1
    f = finding(tl, "missing-path-retry")
    top = f["evidence"]["top"]
    assert top["path"] == str(missing) and top["attempts"] >= 12 and top["errno"] == "ENOENT"
    assert top["seconds"] > 0 and f["severity"] == "error"
    same_offline(run, tl)


def test_read_only_cache(tracing_ok, models, hub, tmp_path):  # noqa: F811
    # a cache mounted read-only (a container volume) holding the layout but
    # not the files: the first write into it fails with EROFS
    src, ro = tmp_path / "src", tmp_path / "ro"
    for repo, info in models["manifest"].items():
        top = src / "hub" / ("models--" + repo.replace("/", "--"))
        (top / "blobs").mkdir(parents=True)
        (top / "refs").mkdir()
        for name in info["files"]:
            (top / "snapshots" / info["commit"] / name).parent.mkdir(parents=True, exist_ok=True)
    ro.mkdir()
    if subprocess.run(["mount", "--bind", str(src), str(ro)]).returncode:
        pytest.skip("cannot bind-mount here")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)]).returncode:
            pytest.skip("cannot remount read-only here")
        app = sim_app(tmp_path, models)
        run = Launch(tmp_path / "run", app, endpoint=hub.url,
                     env={"HF_HUB_CACHE": str(ro / "hub")})
        run.wait(lambda: False)
        tl = run.stop()
    finally:
        subprocess.run(["umount", str(ro)])
    assert run.rc != 0  # the simulator cannot write its cache
    f = finding(tl, "cache-write-refused")
    assert f["evidence"]["errno"] == "EROFS" and f["severity"] == "error"
    assert any(p.startswith(str(ro)) for p in f["evidence"]["paths"])
    same_offline(run, tl)


def test_lock_held_by_another_process(tracing_ok, models, hub, tmp_path):  # noqa: F811
    app = sim_app(tmp_path, models)
    etag = models["manifest"]["funasr/campplus"]["files"]["campplus_cn_common.bin"]["sha256"]
    lock = (app / "checkpoints" / "hf_cache" / ".locks" / "models--funasr--campplus" /
            (etag + ".lock"))
    lock.parent.mkdir(parents=True)
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        run = Launch(tmp_path / "run", app, endpoint=hub.url)
        # campplus comes right after s2mel: hold the lock a while past that
        run.wait(lambda: "s2mel weights restored" in
                 (Path(tmp_path / "run" / "webui.log").read_text()
                  if (tmp_path / "run" / "webui.log").exists() else ""))
        time.sleep(1.5)
        fcntl.flock(held, fcntl.LOCK_UN)
    run.wait()
    tl = run.stop()
    f = finding(tl, "cache-lock-wait")
    assert f["evidence"]["lock"] == str(lock)
    assert f["evidence"]["seconds"] >= 1 and not f["evidence"]["still_waiting"]
    same_offline(run, tl)


def test_diagnose_bad_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for path in (bad, tmp_path / "missing.json"):
        p = subprocess.run([str(TTS), "diagnose", str(path)], capture_output=True, text=True)
        assert p.returncode == 2 and "failed to load timeline" in p.stderr
    p = subprocess.run([str(TTS), "diagnose", str(bad), "--format", "xml"], capture_output=True,
                       text=True)
    assert p.returncode == 2 and "--format" in p.stderr


def test_model_file_reread(tracing_ok, tmp_path):
    # a loader that reads the same weights four times over (torch.load in a
    # loop, a checksum pass then a load...)
    weights = tmp_path / "gpt.pth"
    weights.write_bytes(os.urandom(2 * 1024 * 1024))
    reread = ("import sys\n"
              "for _ in range(4):\n"
              "    with open(%r, 'rb') as f: f.read()\n" % str(weights))
    run = Launch(tmp_path / "run", tmp_path, cmd=[PY, "-c", reread])
    run.wait(lambda: False)
    tl = run.stop()
    f = finding(tl, "io-reread")
    assert f["evidence"]["path"] == str(weights)
    assert f["evidence"]["bytes_read"] >= 4 * 2 * 1024 * 1024
    assert not any(x["id"] == "io-small-reads" for x in tl["findings"])
    same_offline(run, tl)


def test_model_file_small_reads(tracing_ok, tmp_path):
    # unbuffered 4 KiB reads of a 2 MiB model file: 512 reads
    weights = tmp_path / "s2mel.pth"
    weights.write_bytes(os.urandom(2 * 1024 * 1024))
    small = ("import os\n"
             "fd = os.open(%r, os.O_RDONLY)\n"
             "while os.read(fd, 4096): pass\n" % str(weights))
    run = Launch(tmp_path / "run", tmp_path, cmd=[PY, "-c", small])
    run.wait(lambda: False)
    tl = run.stop()
    f = finding(tl, "io-small-reads")
    assert f["evidence"]["path"] == str(weights)
    assert f["evidence"]["reads"] >= 512
    assert not any(x["id"] == "io-reread" for x in tl["findings"])
    same_offline(run, tl)


def _page_out(pid):
    """process_madvise(MADV_PAGEOUT) over the process's file mappings, as
    reclaim on a loaded host would do, then the files' pages dropped from
    the page cache (POSIX_FADV_DONTNEED), so the next touch reads the disk:
    a major fault, not a minor one on a page still cached."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = libc.syscall(434, pid, 0)  # pidfd_open
    assert pidfd >= 0

    class Iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
    paths = set()
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].endswith(".safetensors"):
                a, b = (int(x, 16) for x in parts[0].split("-"))
                iov = Iovec(a, b - a)
                libc.syscall(440, pidfd, ctypes.byref(iov), 1, 21, 0)  # MADV_PAGEOUT
                paths.add(parts[5])
    os.close(pidfd)
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def test_warm_start_with_a_request_has_no_lazy_faults(warm, hub):  # noqa: F811
    """#16: the demo's warm start: a synthesis request maps model pages that
    are in memory (minor faults at most, nothing read from disk): no
    lazy-model-faults finding, here or offline."""
    import urllib.request
    # warm means in the page cache too: read the weights once (an earlier
    # test may have left them evicted; then a page read from disk is a
    # real finding, not this scenario)
    for d, _, names in os.walk(warm["app"], followlinks=True):  # model dirs are links
        for n in names:
            # every weight file a request may map (.safetensors, .pth, .pt, .bin, ...)
            if os.path.isfile(os.path.join(d, n)):
                Path(d, n).read_bytes()
    # the scenario needs a request that faulted nothing in from disk; the
    # kernel also counts as major a fault retried after it dropped the mmap
    # lock (async readahead on a cached page): rare, so another start
    for attempt in range(3):
        run = Launch(warm["tmp"] / ("warmreq%d" % attempt), warm["app"], endpoint=hub.url)
        run.wait()
        port = int(run.ini.read_text().split("port = ")[1].split("\n")[0])
        req = urllib.request.Request("http://127.0.0.1:%d/synthesize" % port, method="POST",
                                     data=b'{"text": "hello"}',
                                     headers={"Content-Type": "application/json"})
        assert urllib.request.urlopen(req, timeout=WAIT).read()[:4] == b"RIFF"
        tl = run.stop()
        assert tl["requests"], "the request was not traced"
        if sum(r.get("model_major_faults", 0) for r in tl["requests"]) == 0:
            break
    assert sum(r.get("model_major_faults", 0) for r in tl["requests"]) == 0, \
        [f for f in tl["files"] if f.get("major_faults")]
    assert "lazy-model-faults" not in [f["id"] for f in tl["findings"]], tl["findings"]
    rc, out, _ = diagnose(run.timeline)
    assert "lazy-model-faults" not in [f["id"] for f in out["findings"]]


def test_lazy_model_faults_during_requests(warm, hub):  # noqa: F811
    # the simulator's weights paged out under memory pressure, then a
    # synthesis request: it faults the model back in while computing
    import urllib.request
    run = Launch(warm["tmp"] / "lazy", warm["app"], endpoint=hub.url)
    run.wait()
    port = int(run.ini.read_text().split("port = ")[1].split("\n")[0])
    pid = json.loads(run.timeline.read_text())["process"]["pid"]  # python webui.py
    _page_out(pid)
    req = urllib.request.Request("http://127.0.0.1:%d/synthesize" % port, method="POST",
                                 data=b'{"text": "hello"}',
                                 headers={"Content-Type": "application/json"})
    assert urllib.request.urlopen(req, timeout=WAIT).read()[:4] == b"RIFF"
    tl = run.stop()
    f = finding(tl, "lazy-model-faults")
    assert f["evidence"]["faults"] > 0 and len(f["evidence"]["requests"]) >= 1
    assert f["evidence"]["major_faults"] >= 1  # read back from disk: time lost
    assert "--mlock" in f["fix"]
    same_offline(run, tl)


def test_weights_mapped_after_the_mlock_are_said_as_such(tracing_ok, tmp_path):
    """#16: --mlock (all, at listen) locks what is mapped at the listen
    (mlockall(MCL_CURRENT)); weights the service maps at its first request
    come later, and no lock covers them: the finding says so, and how to
    lock later, never that mlock failed."""
    import socket
    weights = tmp_path / "emo" / "model.safetensors"
    weights.parent.mkdir()
    weights.write_bytes(os.urandom(8 << 20))

    def evict():
        fd = os.open(str(weights), os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    evict()
    port_file = tmp_path / "port"
    code = ("import mmap, socket, sys\n"
            "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
            "open(%r, 'w').write(str(s.getsockname()[1]))\n"
            "while True:\n"
            "    c, _ = s.accept(); c.recv(100)\n"
            "    f = open(%r, 'rb'); m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n"
            "    n = sum(m[i] for i in range(0, len(m), 4096))\n"
            "    c.sendall(b'ok %%d' %% n); c.close()\n" % (str(port_file), str(weights)))
    # [mlock] as a section of its own after [trace]
    run = simfix.Launch(tmp_path / "run", tmp_path, {"HF_HUB_ETAG_TIMEOUT": "1"},
                        cmd=[PY, "-c", code], trace="[mlock]\nmode = all\n")
    run.wait(lambda: "mlock (all, at listen): locked" in run.output())
    assert "mlock (all, at listen): locked" in run.output(), run.output()
    run.wait()
    evict()  # what the locked start-up read is the only thing in memory
    with socket.create_connection(("127.0.0.1", int(port_file.read_text())), timeout=WAIT) as c:
        c.sendall(b"synthesize\n")
        assert c.recv(100).startswith(b"ok ")
    tl = run.stop()
    assert tl["memory"]["mlock"]["status"] == "locked"
    assert sum(r.get("model_major_faults", 0) for r in tl["requests"]) >= 1, tl["requests"]
    f = finding(tl, "lazy-model-faults")
    files = f["evidence"]["files"]
    assert [x["path"] for x in files] == [str(weights)]
    assert files[0]["mapped_after_lock"] is True
    assert f["evidence"]["mlock_status"] == "locked"
    assert "%s was mapped after it" % weights in f["fix"] and "trigger = signal" in f["fix"]
    assert "did not lock" not in f["fix"] and "failed" not in f["fix"]
    assert "%s was mapped after mlock locked" % weights in f["message"]
    same_offline(run, tl)
