"""Peers by host name and role, and the network rules, on the 2026 world
(scripts/sim/world.py: huggingface.co 127.0.0.2, cas-bridge.xethub.hf.co
127.0.0.3, modelscope.cn 127.0.0.4, hf-mirror.com 127.0.0.5, all :443 HTTPS,
DNS on 127.0.0.1:53): tts-launch runs the 2026 webui.py inside the world and
the timeline names each peer (getaddrinfo, the TLS server name, DNS answers),
gives it its role, and the findings name peers by host. Needs root and BPF:
skipped without, failed when CI is set. No timed assertions."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from simfix import (FIXTURES, PY, SIM, TTS, WAIT, WorldLaunch, base_env, finding,  # noqa: F401
                    in_world, make_app, models, need, world_ok)

NET_RULES = {"dns-failure", "hub-probe-failed", "hub-unreachable", "xet-stalled",
             "mirror-bypassed", "fallback-download"}


pytestmark = pytest.mark.usefixtures("world_ok")


def app_of(tmp, models, omit=()):
    app = make_app(Path(tmp), models, omit=omit)
    os.symlink(os.path.join(SIM, "webui.py"), app / "webui.py")
    return app


def traced(run):
    assert run.timeline is not None, run.output()
    tr = run.timeline["tracing"]
    need(tr.get("enabled"), "tracing unavailable: %s" % tr.get("reason"))
    return run.timeline


def peer(tl, addr):
    hits = [n for n in tl["network"] if n["peer"] == addr]
    assert len(hits) == 1, json.dumps(tl["network"], indent=1)
    return hits[0]


def ids(tl):
    # an info finding (gpu-cpu-only: Debian's CPU torch never tried CUDA) changes nothing
    return [f["id"] for f in tl["findings"] if f["severity"] != "info"]


def diagnose_offline(path):
    p = subprocess.run([str(TTS), "diagnose", str(path), "--format", "json"],
                       capture_output=True, text=True, timeout=WAIT)
    return json.loads(p.stdout)["findings"]


def test_healthy_start_names_every_peer(tmp_path, models):
    """A cold 2026 start: the hub and the CAS by their TLS names, the ModelScope
    probe by the name asked for (no TLS: a bare connect), the name server as dns;
    the look-ups in names; no network finding (the probe is no failure); the
    summary says host:port."""
    run = WorldLaunch(tmp_path / "run", app_of(tmp_path, models))
    tl = traced(run)
    assert run.rc == 0, run.output()
    assert "getaddrinfo" in tl["tracing"]["probes"]
    hub, cas, ms = peer(tl, "127.0.0.2:443"), peer(tl, "127.0.0.3:443"), peer(tl, "127.0.0.4:443")
    assert (hub["host"], hub["host_source"], hub["role"]) == ("huggingface.co", "sni", "hub")
    assert (cas["host"], cas["host_source"], cas["role"]) == ("cas-bridge.xethub.hf.co", "sni",
                                                              "cas")
    assert (ms["host"], ms["host_source"], ms["role"]) == ("modelscope.cn", "getaddrinfo",
                                                           "modelscope")
    assert ms["bytes_in"] == ms["bytes_out"] == 0 and ms["connects"] >= 1  # need_proxy()
    assert cas["bytes_in"] > hub["bytes_in"] > 0
    dns = peer(tl, "127.0.0.1:53")
    assert dns["role"] == "dns" and dns["host"] is None
    assert not [n for n in tl["network"] if n["role"] == "client"]  # nobody called it
    looked = {(n["host"], n["source"]): n["addresses"] for n in tl["names"] if n["ok"]}
    assert looked[("huggingface.co", "getaddrinfo")] == ["127.0.0.2"]
    assert looked[("cas-bridge.xethub.hf.co", "getaddrinfo")] == ["127.0.0.3"]
    assert looked[("modelscope.cn", "getaddrinfo")] == ["127.0.0.4"]
    assert looked[("huggingface.co", "dns")] == ["127.0.0.2"]  # the answers, parsed
    hosts = {c["host"] for c in tl["connects"] if c["port"] == 443}
    assert {"huggingface.co", "cas-bridge.xethub.hf.co", "modelscope.cn"} <= hosts
    assert not NET_RULES & set(ids(tl)), tl["findings"]
    out = run.output()
    assert "cas-bridge.xethub.hf.co:443" in out and "127.0.0.3:443" not in out
    assert "huggingface.co:443" in out


def test_unreachable_hub_switch_to_modelscope(tmp_path, models):
    """huggingface.co's SYNs dropped: need_proxy()'s probe times out and IndexTTS2
    downloads from ModelScope: one hub-probe-failed finding naming the host and
    USE_MODELSCOPE, no hub-unreachable; ModelScope's peer carries the bytes."""
    run = WorldLaunch(tmp_path / "run", app_of(tmp_path, models),
                      world_args=("--unreachable", "hub"))
    tl = traced(run)
    assert run.rc == 0, run.output()
    hub, ms = peer(tl, "127.0.0.2:443"), peer(tl, "127.0.0.4:443")
    assert (hub["host"], hub["role"]) == ("huggingface.co", "hub")
    assert ms["role"] == "modelscope" and ms["host"] in ("modelscope.cn", "www.modelscope.cn")
    assert ms["bytes_in"] > 0
    f = finding(tl, "hub-probe-failed")
    assert f["message"].startswith("huggingface.co unreachable (ETIMEDOUT): IndexTTS2 switched "
                                   "to ModelScope; USE_MODELSCOPE=true skips the 3 s probe")
    assert "USE_MODELSCOPE = true" in f["fix"]
    assert f["evidence"]["host"] == "huggingface.co" and f["evidence"]["attempts"] >= 1
    assert "hub-unreachable" not in ids(tl)
    assert [g["id"] for g in diagnose_offline(tmp_path / "run" / "timeline.json")
            if g["id"] in NET_RULES] == ["hub-probe-failed"]
    # told the same way when USE_MODELSCOPE decides: no probe, no finding
    run2 = WorldLaunch(tmp_path / "run2", app_of(tmp_path / "b", models),
                       env={"USE_MODELSCOPE": "true"}, world_args=("--unreachable", "hub"))
    tl2 = traced(run2)
    assert run2.rc == 0, run2.output()
    assert not NET_RULES & set(ids(tl2)), tl2["findings"]


STALL_DRIVER = r"""
import json, os, ssl, subprocess, sys, time, urllib.request
tts, ini, tl, out, what = sys.argv[1:6]
ctx = ssl.create_default_context(cafile=os.environ["SIM_WORLD"] + "/ca.pem")
def xorbs():
    # the CAS's requests whose path has `what` in it (counted before any fault)
    with urllib.request.urlopen(os.environ["SIM_CONTROL_CAS"], context=ctx, timeout=10) as r:
        return sum(v for k, v in json.load(r)["counts"].items() if what in k)
with open(out, "w") as f:
    p = subprocess.Popen([tts, "run", "-c", ini, "--foreground"], stdout=f,
                         stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120  # for waiting only
    while p.poll() is None and time.monotonic() < deadline and not xorbs():
        time.sleep(0.1)
    # the stall lasts for ever: wait past the rule's 5 s of silence, then stop
    time.sleep(7)
    subprocess.run([tts, "stop", "-c", ini], capture_output=True, timeout=120)
    sys.exit(p.wait(120))
"""


def stalled_run(tmp, app, world_args, env=None, what="/xorbs/"):
    """tts-launch run of the 2026 webui in a world whose CAS stalls, stopped
    once the stall has lasted (7 s after the CAS's first request with `what`
    in its path); the timeline."""
    tmp = Path(tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    tl = tmp / "timeline.json"
    vars = {"HF_HOME": str(tmp / "hf_home"), "SIM_GENERATION": "2026", "SIM_TIME_SCALE": "0.1"}
    vars.update(env or {})
    ini = tmp / "tts-launch.ini"
    ini.write_text(
        "[app]\ndir = %s\npython = %s\nhost = 127.0.0.1\nport = 7860\n"
        "[env]\n%s\n[service]\npidfile = %s\nstop_grace = 3s\n"
        "[log]\nfile = %s\n[trace]\nsettle = 0.3s\ntimeline = %s\n"
        % (app, PY, "\n".join("%s = %s" % kv for kv in vars.items()), tmp / "pid",
           tmp / "webui.log", tl))
    p = in_world(tmp, [PY, "-c", STALL_DRIVER, str(TTS), str(ini), str(tl), str(tmp / "run.out"),
                       what], *world_args, env=base_env(), timeout=WAIT * 3)
    assert tl.exists(), p.stdout + p.stderr + (tmp / "run.out").read_text()
    return json.loads(tl.read_text())


def test_xet_stall_found_and_named(tmp_path, models):
    """The CAS stops mid-range and keeps the connection: the start hangs (Xet has
    no read timeout). xet-stalled names cas-bridge.xethub.hf.co:443 and the fix
    HF_HUB_DISABLE_XET=1; it is not called an unreachable hub."""
    tl = stalled_run(tmp_path / "run", app_of(tmp_path, models),
                     ("--knobs", 'cas={"stall_after": 1000}'))
    need(tl["tracing"].get("enabled"), "tracing unavailable")
    f = finding(tl, "xet-stalled")
    assert f["severity"] == "error"  # never ready
    assert f["message"].startswith("Xet transfer from cas-bridge.xethub.hf.co:443 stalled")
    assert "no timeout will end it" in f["message"]
    assert "HF_HUB_DISABLE_XET=1" in f["fix"]
    assert f["evidence"]["host"] == "cas-bridge.xethub.hf.co"
    assert f["evidence"]["downloads_in_flight"] >= 1 or tl["marks"].get("ready") is None
    assert "hub-unreachable" not in ids(tl)


def test_mirror_in_hf_endpoint_bypassed_by_xet(tmp_path, models):
    """HF_ENDPOINT=https://hf-mirror.com, and the mirror hands on the hub's Xet
    answers: the bytes come from the CAS, not the mirror: mirror-bypassed; the
    mirror's peer has the role mirror."""
    run = WorldLaunch(tmp_path / "run", app_of(tmp_path, models),
                      env={"HF_ENDPOINT": "https://hf-mirror.com"}, world_args=("--mirror-xet",))
    tl = traced(run)
    assert run.rc == 0, run.output()
    mirror, cas = peer(tl, "127.0.0.5:443"), peer(tl, "127.0.0.3:443")
    assert (mirror["host"], mirror["role"]) == ("hf-mirror.com", "mirror")
    assert cas["role"] == "cas" and cas["bytes_in"] > 0
    f = finding(tl, "mirror-bypassed")
    assert f["message"].startswith("HF_ENDPOINT=https://hf-mirror.com is a mirror, but ")
    assert "came from cas-bridge.xethub.hf.co:443" in f["message"]
    assert "HF_HUB_DISABLE_XET=1" in f["fix"]
    # without Xet the mirror moves the bytes itself: no finding
    run2 = WorldLaunch(tmp_path / "run2", app_of(tmp_path / "b", models),
                       env={"HF_ENDPOINT": "https://hf-mirror.com", "HF_HUB_DISABLE_XET": "1"},
                       world_args=("--mirror-xet",))
    tl2 = traced(run2)
    assert run2.rc == 0, run2.output()
    assert "mirror-bypassed" not in ids(tl2)
    assert peer(tl2, "127.0.0.5:443")["bytes_in"] > 0


def test_hf_mirror_fallback_failing(tmp_path, models):
    """USE_MODELSCOPE=true, ModelScope down, hf-mirror.com answering 500: the
    start fails; fallback-download names hf-mirror.com:443 (role mirror)."""
    app = app_of(tmp_path, models)
    w2v = app / "checkpoints" / "hf_cache" / "w2v-bert-2.0"
    w2v.mkdir(parents=True)
    for f in models["manifest"]["facebook/w2v-bert-2.0"]["files"]:
        shutil.copy(os.path.join(models["dir"], "hub", "facebook", "w2v-bert-2.0", f), w2v / f)
    run = WorldLaunch(tmp_path / "run", app, env={"USE_MODELSCOPE": "true"},
                      world_args=("--down", "modelscope", "--knobs",
                                  'mirror={"status": {"*": 500}}'))
    tl = traced(run)
    assert run.rc != 0
    assert peer(tl, "127.0.0.5:443")["role"] == "mirror"
    f = finding(tl, "fallback-download")
    assert f["message"].startswith("the start failed after downloads from hf-mirror.com:443 "
                                   "(mirror")
    assert f["severity"] == "error"


# -- the name sources one by one, and the service's own clients ---------------------------------
SOURCES = r"""
import socket, ssl, struct, threading, time
# a DNS query made by hand on a connected UDP socket (as glibc's resolver does):
# the answer names 127.0.0.5, no getaddrinfo for hf-mirror.com
q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0) + b"\x09hf-mirror\x03com\x00" + \
    struct.pack(">HH", 1, 1)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.connect(("127.0.0.1", 53))
u.send(q)
ip = socket.inet_ntoa(u.recv(512)[-4:])
socket.create_connection((ip, 443)).close()          # a literal: getaddrinfo names nothing
# TLS to an address with a server name: the ClientHello alone names the peer
t = ssl.create_default_context().wrap_socket(socket.create_connection(("127.0.0.3", 443)),
                                               server_hostname="transfer.xethub.hf.co")
t.close()
# a discard peer: takes a request, never answers (not a download server)
d = socket.socket(); d.bind(("127.0.0.1", 0)); d.listen(4)
def discard():
    while True:
        c, _ = d.accept()
        while c.recv(4096):
            pass
        c.close()
threading.Thread(target=discard, daemon=True).start()
for _ in range(2):
    s = socket.create_connection(d.getsockname())
    s.sendall(b"GET / HTTP/1.1\r\nHost: analytics\r\n\r\n")
    s.settimeout(0.6)
    try:
        s.recv(10)
    except OSError:
        pass
    s.close()
print(ip, flush=True)
"""


def test_name_sources_and_clients(tmp_path, models):
    """Each source alone: a DNS answer read (hf-mirror.com, source dns), a TLS
    server name sent to an address (transfer.xethub.hf.co, source sni); the
    service's own listener's clients are clients, not peers contacted; a silent
    peer that is no download server is no hub-unreachable."""
    tl_path = tmp_path / "timeline.json"
    p = in_world(tmp_path, [str(TTS), "run", "--timeline", str(tl_path), "--", PY, "-c", SOURCES],
                 env=base_env())
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[0] == "127.0.0.5"
    tl = json.loads(tl_path.read_text())
    need(tl["tracing"].get("enabled"), "tracing unavailable")
    m = peer(tl, "127.0.0.5:443")
    assert (m["host"], m["host_source"], m["role"]) == ("hf-mirror.com", "dns", "mirror")
    c = peer(tl, "127.0.0.3:443")
    assert (c["host"], c["host_source"], c["role"]) == ("transfer.xethub.hf.co", "sni", "cas")
    assert [n["host"] for n in tl["names"]] == ["hf-mirror.com"]  # literals are no names
    clients = [n for n in tl["network"] if n["inbound"]]
    assert len(clients) == 2 and {n["role"] for n in clients} == {"client"}
    contacted = [n for n in tl["network"] if n["peer"].startswith("127.0.0.1:") and
                 not n["inbound"] and n["port"] != 53]
    assert len(contacted) == 1 and contacted[0]["role"] == "other"
    assert contacted[0]["bytes_out"] > 0 and contacted[0]["bytes_in"] == 0
    assert "hub-unreachable" not in ids(tl)
    rep = subprocess.run([str(TTS), "report", str(tl_path), "--format", "text"],
                         capture_output=True, text=True, timeout=WAIT).stdout
    assert "hf-mirror.com:443" in rep and "transfer.xethub.hf.co:443" in rep
    assert "clients of the service: 2 peers" in rep


def test_doctor_resolves_the_hub_names(tmp_path, models):
    """doctor looks the hub, CAS and ModelScope names up (and HF_ENDPOINT's)."""
    p = in_world(tmp_path, [str(TTS), "doctor"],
                 env=base_env(HF_ENDPOINT="https://hf-mirror.com"))
    lines = [l for l in p.stdout.splitlines() if " name " in l]
    assert lines == [
        "OK    hub name               huggingface.co resolves to 127.0.0.2",
        "OK    CAS name               cas-bridge.xethub.hf.co resolves to 127.0.0.3",
        "OK    ModelScope name        modelscope.cn resolves to 127.0.0.4",
        "OK    HF_ENDPOINT name       hf-mirror.com resolves to 127.0.0.5",
    ], p.stdout


def test_cas_down_plain_http_advice(tmp_path, models):
    """HF_HUB_DISABLE_XET=1 and the CAS bridge refusing connections (the hub
    answers the metadata and redirects there): hub-unreachable names
    cas-bridge.xethub.hf.co:443, a download server; its advice is the download's
    timeout (HF_HUB_DOWNLOAD_TIMEOUT), not the ETag one, and not Xet's."""
    run = WorldLaunch(tmp_path / "run", app_of(tmp_path, models),
                      env={"HF_HUB_DISABLE_XET": "1"}, world_args=("--down", "cas"))
    tl = traced(run)
    f = finding(tl, "hub-unreachable")
    assert f["message"].startswith("cas-bridge.xethub.hf.co:443: ")
    assert "ECONNREFUSED" in f["message"]
    assert f["evidence"]["role"] == "cas" and f["evidence"]["host"] == "cas-bridge.xethub.hf.co"
    assert "HF_HUB_DOWNLOAD_TIMEOUT" in f["fix"] and "HF_HUB_ETAG_TIMEOUT" not in f["fix"]
    assert "Xet" not in f["fix"]
    assert "xet-stalled" not in ids(tl)
    assert peer(tl, "127.0.0.2:443")["bytes_in"] > 0  # the hub answered


def test_blackholed_cas_after_tls_handshake(tmp_path, models):
    """HF_HUB_DISABLE_XET=1 and a CAS bridge that completes the TLS handshake,
    takes the GET and never answers: its handshake is no answer (reply_max at
    most the session tickets): hub-unreachable names cas-bridge.xethub.hf.co:443,
    silently dropped; the advice is the download's timeout."""
    run = WorldLaunch(tmp_path / "run", app_of(tmp_path, models),
                      env={"HF_HUB_DISABLE_XET": "1", "HF_HUB_DOWNLOAD_TIMEOUT": "1"},
                      world_args=("--knobs", 'cas={"blackhole": true}'))
    tl = traced(run)
    cas = [c for c in tl["connects"] if c["peer"] == "127.0.0.3:443" and "reply_max" in c]
    assert cas and all(c["tls"] and c["bytes_in"] > 0 for c in cas)
    f = finding(tl, "hub-unreachable")
    assert f["message"].startswith("cas-bridge.xethub.hf.co:443: ")
    assert f["evidence"]["outcome"] == "silently dropped"
    assert "HF_HUB_DOWNLOAD_TIMEOUT" in f["fix"] and "HF_HUB_ETAG_TIMEOUT" not in f["fix"]
    hub = [c for c in tl["connects"] if c["peer"] == "127.0.0.2:443" and c.get("reply_max")]
    assert hub and max(c["reply_max"] for c in hub) > 640  # the hub's answers count



def test_blackholed_cas_with_xet_hangs_before_any_byte(tmp_path, models):
    """Xet on, a CAS that takes each request and never answers: the
    reconstruction call hangs before any byte of a file is written (Xet has
    no timeout): xet-stalled names cas-bridge.xethub.hf.co:443; the file left
    is named as one no byte of which arrived, its Xet transfer from the CAS."""
    tl = stalled_run(tmp_path / "run", app_of(tmp_path, models),
                     ("--knobs", 'cas={"blackhole": true}'), what="/v1/reconstructions/")
    need(tl["tracing"].get("enabled"), "tracing unavailable")
    f = finding(tl, "xet-stalled")
    assert f["severity"] == "error"  # never ready
    assert f["message"].startswith("Xet transfer from cas-bridge.xethub.hf.co:443 stalled")
    assert f["evidence"]["host"] == "cas-bridge.xethub.hf.co"
    assert "hub-unreachable" not in ids(tl)
    d = finding(tl, "download-interrupted")
    assert d["evidence"]["bytes_written"] == 0 and d["evidence"]["xet"]
    assert "its Xet transfer from cas-bridge.xethub.hf.co:443 failed or hung" in d["message"]
    assert "HTTP Range" not in d["fix"]


def test_cas_5xx_with_back_off_fails_the_start(tmp_path, models):
    """Xet on, every CAS request answered 500: xet-core retries with back-off
    (scaled down), then the start fails with nothing written: the finding names
    the CAS host and says no byte arrived (not a cut connection to resume)."""
    run = WorldLaunch(tmp_path / "run", app_of(tmp_path, models),
                      env={"SIM_TIME_SCALE": "0.02"},
                      world_args=("--knobs", 'cas={"status": {"*": 500}}'))
    tl = traced(run)
    assert run.rc != 0, run.output()
    assert "retry 5/5" in run.output()  # the back-off ran out
    f = finding(tl, "download-interrupted")
    assert f["severity"] == "error" and f["evidence"]["bytes_written"] == 0
    assert f["evidence"]["cas_host"] == "cas-bridge.xethub.hf.co" and f["evidence"]["xet"]
    assert f["message"].startswith("hf_cache/w2v-bert-2.0/model.safetensors: no byte of it "
                                   "arrived: its Xet transfer from cas-bridge.xethub.hf.co:443")
    assert "HF_HUB_DISABLE_XET=1" in f["fix"] and "HTTP Range" not in f["fix"]
    assert "download-interrupted" in finding(tl, "start-failed")["message"]
    assert "hub-unreachable" not in ids(tl)


def test_modelscope_slow(tmp_path, models):
    """huggingface.co unreachable, ModelScope at 100 kB/s: the slow downloads
    are ModelScope's, named so (fallback-download: www.modelscope.cn:443;
    download-slow: from ModelScope, not "the hub", its fix not HF_ENDPOINT)."""
    run = WorldLaunch(tmp_path / "run", app_of(tmp_path, models),
                      world_args=("--unreachable", "hub", "--knobs",
                                  'modelscope={"bandwidth": 100000}'))
    tl = traced(run)
    assert run.rc == 0, run.output()
    f = finding(tl, "fallback-download")
    assert f["severity"] == "warning" and f["evidence"]["role"] == "modelscope"
    assert f["message"].startswith("downloads from www.modelscope.cn:443 were slow")
    s = finding(tl, "download-slow")
    assert " from ModelScope: " in s["message"] and "USE_MODELSCOPE=false" in s["fix"]
    assert "HF_ENDPOINT" not in s["fix"]
    assert set(ids(tl)) == {"hub-probe-failed", "fallback-download", "download-slow"}


def test_modelscope_5xx(tmp_path, models):
    """USE_MODELSCOPE=true, ModelScope answering 500: snapshot_download of
    w2v-bert-2.0 has no fallback, the start fails: fallback-download names
    www.modelscope.cn:443; hf-mirror.com, which served the examples, is not
    blamed."""
    run = WorldLaunch(tmp_path / "run", app_of(tmp_path, models), env={"USE_MODELSCOPE": "true"},
                      world_args=("--knobs", 'modelscope={"status": {"*": 500}}'))
    tl = traced(run)
    assert run.rc != 0, run.output()
    fb = [f for f in tl["findings"] if f["id"] == "fallback-download"]
    assert len(fb) == 1, fb
    assert fb[0]["message"].startswith("the start failed after downloads from "
                                       "www.modelscope.cn:443 (modelscope")
    assert fb[0]["severity"] == "error"
    d = finding(tl, "download-interrupted")
    assert d["message"] == ("hf_cache/w2v-bert-2.0/config.json: no byte of it arrived from "
                            "ModelScope (%s)" % d["evidence"]["path"])
    assert "USE_MODELSCOPE=false" in d["fix"]
