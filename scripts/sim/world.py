#!/usr/bin/python3
"""Run a command inside the simulator's private 2026 world.

  world.py [--dir D] [--size small] [faults...] -- CMD [ARGS...]

An own network and mount namespace (`unshare -mn`): its own loopback, its own
/etc/hosts and /etc/resolv.conf (bind-mounted) pointing at a small DNS server
on 127.0.0.1:53 (python3-dnslib), and a CA generated for this run (its
certificate is bind-mounted into the system bundle and named by SSL_CERT_FILE,
REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS). On port 443, HTTPS, by name:

  huggingface.co                                   127.0.0.2  hub.py --role hub (Xet)
  cas-bridge.xethub.hf.co, transfer.xethub.hf.co   127.0.0.3  hub.py --role cas
  modelscope.cn, www.modelscope.cn                 127.0.0.4  hub.py --role modelscope
  hf-mirror.com                                    127.0.0.5  hub.py --role hub (no Xet)

Two runs never collide (each has its own :443), and nothing leaves the
machine. CMD runs with cwd unchanged and these in its environment:
SIM_WORLD (the run's directory), SIM_CONTROL_{HUB,CAS,MODELSCOPE,MIRROR}
(each server's /_control URL, reachable from inside only). The exit status is
CMD's. Everything started here ends with CMD.

Faults (each server also takes its knobs at run time through /_control):
  --knobs NAME=JSON    initial knobs for server NAME (hub, cas, modelscope,
                       mirror), e.g. --knobs 'cas={"stall_after": 100000}'
  --down NAME          no server: connections are refused
  --unreachable NAME   SYNs dropped: a connect times out (a full accept queue)
  --no-xet             the hub does not advertise Xet (plain resolve downloads)
  --mirror-xet         hf-mirror.com passes the hub's Xet answers on (X-Xet-Cas-Url:
                       the CAS): Xet downloads then go around the mirror (xet-core #470)
"""
import argparse
import datetime
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"

SERVERS = {
    # name: (address, host names, hub.py role)
    "hub": ("127.0.0.2", ["huggingface.co"], "hub"),
    "cas": ("127.0.0.3", ["cas-bridge.xethub.hf.co", "transfer.xethub.hf.co"], "cas"),
    "modelscope": ("127.0.0.4", ["modelscope.cn", "www.modelscope.cn"], "modelscope"),
    "mirror": ("127.0.0.5", ["hf-mirror.com"], "hub"),
}
SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def _die_with_parent():
    """preexec_fn: SIGKILL when the process that started us ends (PR_SET_PDEATHSIG),
    so that nothing of a world outlives it, even when it is killed."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def names():
    return {n: addr for addr, hosts, _ in SERVERS.values() for n in hosts}


# -- certificates ------------------------------------------------------------------
def make_certs(d):
    """A CA and one certificate per server (its names as SANs), PEM files in d."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)
    later = now + datetime.timedelta(days=30)

    def pem_key(key, path):
        with open(path, "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tts-launch simulator CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(later)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    with open(os.path.join(d, "ca.pem"), "wb") as f:
        f.write(ca_pem)
    for name, (addr, hosts, _) in SERVERS.items():
        key = ec.generate_private_key(ec.SECP256R1())
        sans = [x509.DNSName(h) for h in hosts] + [x509.IPAddress(ipaddress.ip_address(addr))]
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
                .issuer_name(ca_name).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now).not_valid_after(later)
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                               critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                    ca_key.public_key()), critical=False)
                .sign(ca_key, hashes.SHA256()))
        with open(os.path.join(d, f"{name}.pem"), "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM) + ca_pem)
        pem_key(key, os.path.join(d, f"{name}.key"))
    bundle = os.path.join(d, "ca-bundle.crt")
    with open(bundle, "wb") as f:
        if os.path.exists(SYSTEM_BUNDLE):
            with open(SYSTEM_BUNDLE, "rb") as sysf:
                f.write(sysf.read())
        f.write(ca_pem)
    return bundle


# -- DNS -------------------------------------------------------------------------------
def start_dns(table, log_path):
    """A DNS server on 127.0.0.1:53 (UDP and TCP) answering A records for table."""
    from dnslib import QTYPE, RR, A
    from dnslib.server import BaseResolver, DNSLogger, DNSServer

    class Resolver(BaseResolver):
        def resolve(self, request, handler):
            reply = request.reply()
            qname = str(request.q.qname).rstrip(".").lower()
            with open(log_path, "a") as log:  # what was asked, for the tests
                log.write(f"{qname} {QTYPE[request.q.qtype]}\n")
            if qname in table:
                if request.q.qtype in (QTYPE.A, QTYPE.ANY):
                    reply.add_answer(RR(request.q.qname, QTYPE.A, rdata=A(table[qname]), ttl=60))
                # AAAA: an empty answer (NOERROR), as for an IPv4-only name
            else:
                reply.header.rcode = 3  # NXDOMAIN: nothing else exists in this world
            return reply

    class Logger(DNSLogger):
        def __init__(self):
            super().__init__(log="-request,-reply,-truncated,-error,-recv,-send,-data",
                             prefix=False)

    servers = [DNSServer(Resolver(), address="127.0.0.1", port=53, logger=Logger(), tcp=tcp)
               for tcp in (False, True)]
    for s in servers:
        s.start_thread()
    return servers


# -- the servers -----------------------------------------------------------------------
def start_servers(d, models, knobs, down, unreachable, xet, mirror_xet=False):
    procs, holds = [], []
    for name, (addr, hosts, role) in SERVERS.items():
        if name in down:
            continue
        if name in unreachable:
            # A listener that never accepts, its accept queue filled: further SYNs
            # are dropped, so a connect times out (as to a firewalled host).
            lst = socket.socket()
            lst.bind((addr, 443))
            lst.listen(0)
            for _ in range(2):
                c = socket.socket()
                c.setblocking(False)
                c.connect_ex((addr, 443))
                holds.append(c)
            holds.append(lst)
            continue
        port_file = os.path.join(d, f"{name}.port")
        if os.path.exists(port_file):
            os.unlink(port_file)  # a previous run's
        argv = [PY, os.path.join(HERE, "hub.py"), "--root", os.path.join(models, "hub"),
                "--host", addr, "--port", "443", "--port-file", port_file, "--verbose",
                "--role", role, "--public-url", f"https://{hosts[0]}",
                "--tls-cert", os.path.join(d, f"{name}.pem"),
                "--tls-key", os.path.join(d, f"{name}.key")]
        if (name == "hub" and xet) or (name == "mirror" and mirror_xet):
            argv += ["--cas-url", "https://cas-bridge.xethub.hf.co"]
        if name == "cas":
            argv += ["--transfer-url", "https://transfer.xethub.hf.co"]
        log = open(os.path.join(d, f"{name}.log"), "w")
        procs.append((name, subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True,
                                             preexec_fn=_die_with_parent), port_file))
    deadline = time.monotonic() + 60
    for name, p, port_file in procs:
        while not os.path.exists(port_file):
            if p.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"world: {name} server did not start; see {d}/{name}.log")
            time.sleep(0.02)
    for name, k in knobs.items():
        control(name, k, d)
    return [p for _, p, _ in procs], holds


def control(name, knobs, d=None):
    """POST knobs to a server's /_control (from inside the world)."""
    import ssl
    import urllib.request
    host = SERVERS[name][1][0]
    ctx = ssl.create_default_context(cafile=os.path.join(d or os.environ["SIM_WORLD"], "ca.pem"))
    req = urllib.request.Request(f"https://{host}/_control", data=json.dumps(knobs).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
        return json.load(r)


def inner(args):
    d = args.dir
    os.makedirs(d, exist_ok=True)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    bundle = make_certs(d)
    with open(os.path.join(d, "hosts"), "w") as f:
        f.write("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
    with open(os.path.join(d, "resolv.conf"), "w") as f:
        f.write("nameserver 127.0.0.1\noptions timeout:2 attempts:2\n")
    for src, dst in (("hosts", "/etc/hosts"), ("resolv.conf", "/etc/resolv.conf"),
                     ("ca-bundle.crt", SYSTEM_BUNDLE)):
        if os.path.exists(dst):
            subprocess.run(["mount", "--bind", os.path.join(d, src), dst], check=True)
    start_dns(names(), os.path.join(d, "dns.log"))
    knobs = {}
    for k in args.knobs:
        name, _, js = k.partition("=")
        if name not in SERVERS:
            sys.exit(f"world: --knobs {k!r}: unknown server {name!r} (one of {', '.join(SERVERS)})")
        knobs[name] = json.loads(js)
    procs, holds = start_servers(d, args.models, knobs, set(args.down), set(args.unreachable),
                                 not args.no_xet, args.mirror_xet)
    env = dict(os.environ, SIM_WORLD=d, SSL_CERT_FILE=bundle, REQUESTS_CA_BUNDLE=bundle,
               CURL_CA_BUNDLE=bundle, NODE_EXTRA_CA_CERTS=os.path.join(d, "ca.pem"))
    env.pop("SIM_WORLD_INNER", None)
    for name in SERVERS:
        env[f"SIM_CONTROL_{name.upper()}"] = f"https://{SERVERS[name][1][0]}/_control"
    child = subprocess.Popen(args.cmd, env=env, preexec_fn=_die_with_parent)

    def forward(sig, _frame):
        child.send_signal(sig)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    rc = child.wait()
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
    for h in holds:
        h.close()
    return rc if rc >= 0 else 128 - rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--dir", help="the run's directory (certificates, logs); default: a new "
                    "temporary one, removed at the end")
    ap.add_argument("--models", default=os.path.join(ROOT, "build", "sim", "small"),
                    help="genmodels.py output whose hub/ the servers serve")
    ap.add_argument("--knobs", action="append", default=[], metavar="NAME=JSON")
    ap.add_argument("--down", action="append", default=[], choices=list(SERVERS))
    ap.add_argument("--unreachable", action="append", default=[], choices=list(SERVERS))
    ap.add_argument("--no-xet", action="store_true")
    ap.add_argument("--mirror-xet", action="store_true")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    if args.cmd[:1] == ["--"]:
        args.cmd = args.cmd[1:]
    if not args.cmd:
        ap.error("no command given (world.py [options] -- CMD ...)")
    if not os.path.exists(os.path.join(args.models, "hub", "manifest.json")):
        ap.error(f"{args.models}/hub/manifest.json missing: run scripts/sim/genmodels.py first")
    if os.environ.get("SIM_WORLD_INNER") == "1":
        sys.exit(inner(args))
    if os.geteuid() != 0:
        sys.exit("world: needs root (unshare -mn, a port below 1024, bind mounts)")
    if shutil.which("unshare") is None:
        sys.exit("world: unshare (util-linux) not found: install util-linux")
    tmp = None
    if not args.dir:
        tmp = tempfile.mkdtemp(prefix="sim-world-")
        args.dir = tmp
    argv = [PY, os.path.realpath(__file__), "--dir", os.path.abspath(args.dir),
            "--models", os.path.abspath(args.models)]
    for k in args.knobs:
        argv += ["--knobs", k]
    for n in args.down:
        argv += ["--down", n]
    for n in args.unreachable:
        argv += ["--unreachable", n]
    if args.no_xet:
        argv.append("--no-xet")
    if args.mirror_xet:
        argv.append("--mirror-xet")
    argv += ["--", *args.cmd]
    env = dict(os.environ, SIM_WORLD_INNER="1")
    try:
        # --kill-child: nothing of the world outlives us.
        p = subprocess.Popen(["unshare", "-mn", "--propagation", "private", "--kill-child",
                              "--", *argv], env=env, preexec_fn=_die_with_parent)
        while True:
            try:
                rc = p.wait()
                break
            except KeyboardInterrupt:
                p.send_signal(signal.SIGINT)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(rc if rc >= 0 else 128 - rc)


if __name__ == "__main__":
    main()
