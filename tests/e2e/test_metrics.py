"""Live metrics: `[metrics] listen` serves /metrics while the service runs;
scraped over HTTP and parsed with Debian's python3-prometheus-client."""
import os
import socket
import time
import subprocess
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import PY, TTS, free_port, port_open, wait_for
from test_report import check_exposition

# listens on a port (ready), touches some memory, then waits to be stopped
SERVICE = ("import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
           "b = bytearray(8 << 20); time.sleep(60)")


def scrape(port, path="/metrics"):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode()


def values(text):
    check_exposition(text)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


@pytest.fixture
def launched(tmp_path):
    procs = []

    def start(*sets, trace=True):
        cmd = [str(TTS), "run", "--set", "app.dir=%s" % tmp_path, "--set", "log.file=",
               "--set", "service.pidfile=%s" % (tmp_path / "pid"),
               "--timeline", str(tmp_path / "timeline.json")]
        for s in sets:
            cmd += ["--set", s]
        if not trace:
            cmd.append("--no-trace")
        p = subprocess.Popen(cmd + ["--", PY, "-c", SERVICE], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.terminate()
        try:
            p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()


def test_metrics_served_while_the_service_runs(launched):
    port = free_port()
    p = launched("metrics.listen=127.0.0.1:%d" % port)
    wait_for(lambda: port_open(port), 30, "/metrics port")
    first = wait_for(lambda: (lambda v: v if v[("indextts2_ready", ())] == 1 else None)(
        values(scrape(port))), 30, "ready in /metrics")
    assert first[("indextts2_running", ())] == 1
    assert first[("tts_launch_tracing_enabled", ())] == 1
    assert first[("tts_launch_events_lost_total", ())] == 0
    assert first[("indextts2_page_faults_total", ())] > 0
    assert ("indextts2_major_page_faults_total", ()) in first
    assert ("indextts2_mlock_locked", ()) in first
    assert first[("indextts2_request_duration_seconds_count", ())] >= 0
    second = values(scrape(port))
    assert second[("tts_launch_scrapes_total", ())] == first[("tts_launch_scrapes_total", ())] + 1
    assert second[("indextts2_page_faults_total", ())] >= first[("indextts2_page_faults_total", ())]
    with pytest.raises(urllib.error.HTTPError) as e:
        scrape(port, "/other")
    assert e.value.code == 404
    p.terminate()
    out, _ = p.communicate(timeout=30)
    assert "metrics: http://127.0.0.1:%d/metrics" % port in out
    assert not port_open(port)


def test_metrics_untraced_still_served(launched):
    port = free_port()
    launched("metrics.listen=127.0.0.1:%d" % port, trace=False)
    wait_for(lambda: port_open(port), 30, "/metrics port")
    v = values(scrape(port))
    assert v[("indextts2_running", ())] == 1
    assert v[("tts_launch_tracing_enabled", ())] == 0


def test_port_taken_warns_and_the_service_still_runs(launched, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = launched("metrics.listen=127.0.0.1:%d" % port, trace=False)
        wait_for(lambda: (tmp_path / "pid").exists(), 30, "pidfile")
        p.terminate()
        out, _ = p.communicate(timeout=30)
    assert "warning: failed to serve /metrics on 127.0.0.1:%d" % port in out
    assert "started pid" in out


@pytest.mark.parametrize("listen,why", [
    ("9435", "expected HOST:PORT"),
    ("127.0.0.1:99999", "port must be 1-65535"),
    ("example.org:9435", "not an IPv4 address"),
])
def test_bad_listen_is_a_config_error(tmp_path, listen, why):
    r = subprocess.run([str(TTS), "run", "--set", "app.dir=%s" % tmp_path,
                        "--set", "metrics.listen=" + listen, "--", "/bin/true"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "[metrics] listen" in r.stderr and why in r.stderr, r.stderr


# ---- clients that misbehave (issue 12): bounded connections, a cached snapshot ----

def idle(port, src="127.0.0.1"):
    """A TCP connection to /metrics's port that never sends a request."""
    s = socket.socket()
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def still_open(s):
    """The server has not closed s (nothing to read, no EOF, no reset)."""
    s.setblocking(False)
    try:
        return s.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except ConnectionError:
        return False
    finally:
        s.setblocking(True)


def closed_by_server(s, limit=30):
    s.settimeout(limit)
    try:
        return s.recv(1) == b""
    except ConnectionError:
        return True


def test_idle_connections_do_not_starve_a_scrape(launched):
    port = free_port()
    launched("metrics.listen=127.0.0.1:%d" % port, trace=False)
    wait_for(lambda: port_open(port), 30, "/metrics port")
    conns = [idle(port) for _ in range(16)]
    try:
        v = values(scrape(port))
        assert v[("indextts2_running", ())] == 1
        # served while all 16 were held: none had to time out first (the old
        # limit of 16 connections queued the scrape until one did)
        assert all(still_open(c) for c in conns)
    finally:
        for c in conns:
            c.close()


def test_one_address_gets_at_most_32_connections(launched):
    port = free_port()
    launched("metrics.listen=127.0.0.1:%d" % port, trace=False)
    wait_for(lambda: port_open(port), 30, "/metrics port")
    conns = [idle(port, "127.0.0.2") for _ in range(32)]
    extra = idle(port, "127.0.0.2")
    try:
        assert closed_by_server(extra)
        # closed for the per-address limit, not as idle: the 32 older ones,
        # idle longer, are still open
        assert all(still_open(c) for c in conns)
        assert values(scrape(port))[("indextts2_running", ())] == 1
    finally:
        for c in conns + [extra]:
            c.close()


def test_an_idle_connection_is_closed(launched):
    port = free_port()
    launched("metrics.listen=127.0.0.1:%d" % port, trace=False)
    wait_for(lambda: port_open(port), 30, "/metrics port")
    with idle(port) as c:
        assert closed_by_server(c, limit=60)


def test_scrapes_share_one_snapshot_a_second(launched):
    port = free_port()
    launched("metrics.listen=127.0.0.1:%d" % port)
    wait_for(lambda: port_open(port), 30, "/metrics port")
    before = values(scrape(port))[("tts_launch_metrics_snapshots_total", ())]
    t0 = time.monotonic()
    for _ in range(10):
        after = values(scrape(port))
    elapsed = time.monotonic() - t0
    took = after[("tts_launch_metrics_snapshots_total", ())] - before
    assert after[("tts_launch_scrapes_total", ())] == 11
    # at most one snapshot per second of the window the scrapes took, plus
    # the one at its start; however slow the machine, 10 scrapes never take
    # 10 snapshots unless they took 9 s
    assert took <= int(elapsed) + 1
    assert took < 10 or elapsed >= 9


def mapped_libraries(pid):
    with open("/proc/%d/maps" % pid) as f:
        return {line.split()[-1].rsplit("/", 1)[-1] for line in f if "/" in line}


def test_libmicrohttpd_is_loaded_only_for_an_endpoint(launched, tmp_path):
    """libmicrohttpd (and gnutls, which it brings) is dlopen'd when [metrics]
    listen starts an endpoint; a run without one never maps it (its RSS)."""
    def libs_once_ready(p):
        wait_for(lambda: (tmp_path / "pid").exists() or p.poll() is not None, 30, "pidfile")
        assert p.poll() is None
        return mapped_libraries(p.pid)

    plain = launched()
    libs = libs_once_ready(plain)
    # the listing works: libc is mapped (libbpf and the rest are linked in)
    assert any(n.startswith("libc.so") for n in libs), libs
    assert not any(n.startswith(("libmicrohttpd", "libgnutls")) for n in libs), libs
    plain.terminate()
    plain.communicate(timeout=30)
    (tmp_path / "pid").unlink(missing_ok=True)
    port = free_port()
    served = launched("metrics.listen=127.0.0.1:%d" % port)
    wait_for(lambda: port_open(port), 30, "/metrics port")
    assert any(n.startswith("libmicrohttpd.so") for n in mapped_libraries(served.pid))
    assert "indextts2_running 1" in scrape(port)


def test_a_broken_libmicrohttpd_is_a_warning_naming_it(tmp_path):
    """The endpoint's library is opened at its start: when it cannot be
    loaded the warning names it and the fix, and the service still starts."""
    libdir = tmp_path / "lib"
    libdir.mkdir()
    (libdir / "libmicrohttpd.so.12").write_bytes(b"not an ELF file\n")
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir))
    r = subprocess.run([str(TTS), "run", "--set", "app.dir=%s" % tmp_path, "--set", "log.file=",
                        "--set", "metrics.listen=127.0.0.1:%d" % free_port(), "--no-trace",
                        "--", "/bin/true"], capture_output=True, text=True, timeout=60, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "warning: [metrics] listen needs libmicrohttpd.so.12" in out, out
    assert "libmicrohttpd12" in out
