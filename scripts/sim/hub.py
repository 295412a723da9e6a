#!/usr/bin/python3
"""Local model hub: the part of the Hugging Face resolve protocol huggingface_hub uses.

  HEAD|GET /{org}/{repo}/resolve/{rev}/{path}   a file of a repo in ROOT/manifest.json
  GET  /_control                  knobs, request counts, Range headers received
  POST /_control  {"latency": 0.5, ...}   change knobs at run time (JSON merge;
                                  {"reset": true} restores defaults, clears counts)

Responses carry what huggingface_hub reads: X-Repo-Commit, ETag (git blob id,
or the sha256 for LFS files, which also get X-Linked-Etag and X-Linked-Size),
Content-Length, Accept-Ranges; `Range: bytes=N-` gives 206. Unknown files in a
known repo: 404 with X-Error-Code: EntryNotFound and X-Repo-Commit (the client
records them in .no_exist/); unknown repos: 404 RepoNotFound.

Fault knobs (flags and /_control keys; faults never apply to /_control):
  latency    seconds added before answering each request
  bandwidth  bytes/s cap on each response body (0 = unlimited)
  blackhole  accept and read the request, never answer (client times out)
  refuse     reset the connection (RST) instead of answering
  drop_after close the connection after N body bytes (0 = off) ...
  drop_times ... only for the next K responses (0 = every time)
  status     {"org/repo/path-glob": 404|500, ...}
"""
import argparse
import fnmatch
import json
import os
import re
import select
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RESOLVE = re.compile(r"^/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$")
RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")
CHUNK = 64 * 1024

DEFAULT_KNOBS = {"latency": 0.0, "bandwidth": 0, "blackhole": False, "refuse": False,
                 "drop_after": 0, "drop_times": 0, "status": {}}


class Hub:
    """Manifest, knobs and counters shared by all handler threads."""

    def __init__(self, root, knobs):
        self.root = root
        with open(os.path.join(root, "manifest.json")) as f:
            self.repos = json.load(f)["repos"]
        self.lock = threading.Lock()
        self.knobs = dict(DEFAULT_KNOBS, **knobs)
        self.counts = {}  # "METHOD /path" -> number of requests
        self.ranges = {}  # "/path" -> Range headers received, in order (resume proofs)
        self.stopping = threading.Event()

    def update(self, changes):
        with self.lock:
            unknown = set(changes) - set(DEFAULT_KNOBS) - {"reset"}
            if unknown:
                raise ValueError(f"unknown knob(s): {', '.join(sorted(unknown))}")
            if changes.get("reset"):
                self.knobs = dict(DEFAULT_KNOBS)
                self.counts, self.ranges = {}, {}
            self.knobs.update({k: v for k, v in changes.items() if k != "reset"})
            return dict(self.knobs)

    def snapshot(self):
        with self.lock:
            return {"knobs": dict(self.knobs), "counts": dict(self.counts),
                    "ranges": {k: list(v) for k, v in self.ranges.items()}}

    def count(self, method, path, rng):
        with self.lock:
            key = f"{method} {path}"
            self.counts[key] = self.counts.get(key, 0) + 1
            if rng:
                self.ranges.setdefault(path, []).append(rng)

    def take_drop(self):
        """Bytes after which to drop this response, or 0; consumes one of drop_times."""
        with self.lock:
            n, times = self.knobs["drop_after"], self.knobs["drop_times"]
            if not n:
                return 0
            if times:
                self.knobs["drop_times"] = times - 1
                if times == 1:  # that was the last one
                    self.knobs["drop_after"] = 0
            return n


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as huggingface_hub's session uses
    server_version = "sim-hub/1"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("hub: %s %s\n" % (self.address_string(), fmt % args))

    # -- control endpoint ------------------------------------------------------
    def _control(self):
        hub = self.server.hub
        if self.command == "POST":
            n = int(self.headers.get("Content-Length") or 0)
            try:
                changes = json.loads(self.rfile.read(n) or b"{}")
                hub.update(changes)
            except ValueError as e:
                return self._send_json(400, {"error": str(e)})
        self._send_json(200, hub.snapshot())

    def _send_json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    # -- faults ------------------------------------------------------------------
    def _hang(self):
        """Blackhole: say nothing until the client gives up or the hub stops."""
        self.close_connection = True
        while not self.server.hub.stopping.is_set():
            r, _, _ = select.select([self.connection], [], [], 0.2)
            if r and not self.connection.recv(4096, socket.MSG_PEEK):
                return  # peer closed

    def _reset(self):
        # SO_LINGER with a zero timeout turns close() into a TCP RST.
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def _faults(self):
        """Apply the request-level faults; True if the request was consumed."""
        k = self.server.hub.snapshot()["knobs"]
        if k["latency"]:
            time.sleep(float(k["latency"]))
        if k["blackhole"]:
            self._hang()
            return True
        if k["refuse"]:
            self._reset()
            return True
        return False

    # -- resolve -----------------------------------------------------------------
    def do_HEAD(self):
        self._serve(body=False)

    def do_GET(self):
        self._serve(body=True)

    def do_POST(self):
        if self.path.split("?")[0] == "/_control":
            return self._control()
        self.send_error(405)

    def _error(self, code, error_code=None, commit=None, message=""):
        body = json.dumps({"error": message}).encode() if self.command != "HEAD" else b""
        self.send_response(code)
        if error_code:
            self.send_header("X-Error-Code", error_code)
            self.send_header("X-Error-Message", message)
        if commit:
            self.send_header("X-Repo-Commit", commit)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body) if body else 0))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _serve(self, body):
        path = self.path.split("?")[0]
        if path == "/_control":
            return self._control()
        hub = self.server.hub
        hub.count(self.command, path, self.headers.get("Range"))
        if self._faults():
            return
        m = RESOLVE.match(path)
        if not m:
            return self._error(404, message="not a resolve URL")
        org, name, rev, fpath = m.groups()
        repo = hub.repos.get(f"{org}/{name}")
        if repo is None:
            return self._error(404, "RepoNotFound", message=f"Repository {org}/{name} not found")
        if rev not in ("main", repo["commit"]):
            return self._error(404, "RevisionNotFound", message=f"Invalid rev id: {rev}")
        commit = repo["commit"]
        forced = next((int(code) for pat, code in hub.snapshot()["knobs"]["status"].items()
                       if fnmatch.fnmatch(f"{org}/{name}/{fpath}", pat)), None)
        entry = repo["files"].get(fpath)
        if forced == 404 or (entry is None and forced is None):
            return self._error(404, "EntryNotFound", commit,
                               f"{fpath} does not exist on \"{rev}\"")
        if forced:
            return self._error(forced, message=f"simulated status {forced}")

        size = entry["size"]
        start, end = 0, size - 1
        rng = self.headers.get("Range")
        if rng:
            rm = RANGE.match(rng.strip())
            if not rm or int(rm.group(1)) >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start = int(rm.group(1))
            end = min(int(rm.group(2)), size - 1) if rm.group(2) else size - 1
        self.send_response(206 if rng else 200)
        self.send_header("X-Repo-Commit", commit)
        if entry["lfs"]:
            # LFS files: huggingface_hub prefers X-Linked-Etag/-Size (the real
            # hub sends them with a redirect to its CDN; here the file is served
            # directly, which the client handles the same way).
            self.send_header("ETag", f'"{entry["sha256"]}"')
            self.send_header("X-Linked-Etag", f'"{entry["sha256"]}"')
            self.send_header("X-Linked-Size", str(size))
        else:
            self.send_header("ETag", f'"{entry["git_sha1"]}"')
        self.send_header("Accept-Ranges", "bytes")
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if body:
            self._send_file(os.path.join(hub.root, org, name, fpath), start, end - start + 1)

    def _send_file(self, fpath, start, length):
        hub = self.server.hub
        drop = hub.take_drop()
        sent = 0
        began = time.monotonic()
        with open(fpath, "rb") as f:
            f.seek(start)
            while sent < length:
                bw = int(hub.snapshot()["knobs"]["bandwidth"])
                n = min(CHUNK, length - sent, max(1024, bw // 20) if bw else CHUNK)
                if drop:
                    n = min(n, drop - sent)
                data = f.read(n)
                if not data:
                    break
                self.wfile.write(data)
                sent += len(data)
                if drop and sent >= drop:
                    # Mid-stream drop: the client got fewer bytes than Content-Length.
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if bw:
                    ahead = sent / bw - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)


class Server(ThreadingHTTPServer):
    daemon_threads = True  # a hung (blackholed) client never blocks shutdown
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--root", required=True, help="hub directory made by genmodels.py (OUT/hub)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    ap.add_argument("--port-file", help="write the port number here once listening")
    ap.add_argument("--verbose", action="store_true", help="log every request to stderr")
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--bandwidth", type=int, default=0)
    ap.add_argument("--blackhole", action="store_true")
    ap.add_argument("--refuse", action="store_true")
    ap.add_argument("--drop-after", type=int, default=0)
    ap.add_argument("--drop-times", type=int, default=0)
    ap.add_argument("--status", action="append", default=[], metavar="CODE:ORG/REPO/GLOB",
                    help="answer CODE (404, 500, ...) for matching files; repeatable")
    args = ap.parse_args()

    status = {}
    for s in args.status:
        code, _, pat = s.partition(":")
        if not code.isdigit() or not pat:
            ap.error(f"--status {s!r}: expected CODE:ORG/REPO/GLOB")
        status[pat] = int(code)
    try:
        hub = Hub(args.root, {"latency": args.latency, "bandwidth": args.bandwidth,
                              "blackhole": args.blackhole, "refuse": args.refuse,
                              "drop_after": args.drop_after, "drop_times": args.drop_times,
                              "status": status})
    except (OSError, ValueError) as e:
        sys.exit(f"hub: cannot load {args.root}/manifest.json: {e} (run genmodels.py first)")
    try:
        srv = Server((args.host, args.port), Handler)
    except OSError as e:
        sys.exit(f"hub: cannot listen on {args.host}:{args.port}: {e.strerror}")
    srv.hub, srv.verbose = hub, args.verbose
    port = srv.server_address[1]
    if args.port_file:
        # Written via rename so a reader never sees a partial number.
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.port_file)
    print(f"hub: serving {args.root} on http://{args.host}:{port}", flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        hub.stopping.set()
        srv.server_close()


if __name__ == "__main__":
    main()
