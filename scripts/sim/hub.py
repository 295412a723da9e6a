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
  stall_after  send N body bytes of a response, then nothing (connection kept open)

The 2026 world (scripts/sim/world.py runs three of these, HTTPS on :443):
  --role hub        also the API the real clients call: repo info with siblings
                    (GET /api/models/{repo}/revision/{rev}), tree (GET
                    .../tree/{rev}[/path]), paths-info (POST .../paths-info/{rev}),
                    the Xet read token (GET .../xet-read-token/{rev}), and, with
                    --cas-url, Xet for LFS files: the resolve answers 302 to the
                    CAS bridge with X-Xet-Hash and Link rel="xet-auth"; a
                    "spaces/IndexTeam/IndexTTS-2-Demo" repo with examples/*.wav.
  --role cas        the Xet CAS (xet-core 1.1.10's protocol): GET
                    /v1/reconstructions/{hash} (Bearer token), xorb ranges
                    (GET /xorbs/default/{xorb}, chunk headers, uncompressed
                    chunks) and the bridge (GET /xet-bridge-us/{hash}, Range).
  --role modelscope the ModelScope API modelscope 1.27 calls (revisions,
                    repo/files, repo?FilePath= with Range), its repo names.
(the hf-mirror is a second --role hub without --cas-url.)
"""
import argparse
import fnmatch
import hashlib
import io
import json
import os
import re
import select
import socket
import ssl
import struct
import sys
import urllib.parse
import wave
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RESOLVE = re.compile(r"^/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$")
RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")
CHUNK = 64 * 1024

DEFAULT_KNOBS = {"latency": 0.0, "bandwidth": 0, "blackhole": False, "refuse": False,
                 "drop_after": 0, "drop_times": 0, "status": {}, "stall_after": 0}

API = re.compile(r"^/api/models/([^/]+)/([^/]+)/(revision|tree|paths-info|xet-read-token)/([^/]+)(/.*)?$")
SPACE_RESOLVE = re.compile(r"^/spaces/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$")
MS_API = re.compile(r"^/api/v1/models/([^/]+)/([^/]+)/(revisions|repo/files|repo)$")
# Xet: a chunk is at most 64 KiB (xet-core's target); a reconstruction term
# covers XET_TERM_CHUNKS chunks, each term one range request.
XET_CHUNK = 64 * 1024
XET_TERM_CHUNKS = 2
XET_TOKEN = "sim-xet-read-token"
# IndexTTS2's model_download.py HF_TO_MODELSCOPE_REPO_MAP (ModelScope's names).
MS_NAMES = {"iic/speech_campplus_sv_zh-cn_16k-common": "funasr/campplus",
            "AI-ModelScope/w2v-bert-2.0": "facebook/w2v-bert-2.0"}
# --version 2.5's repo: the same files as IndexTTS-2 here, its own commit.
ALIASES = {"IndexTeam/IndexTTS-2.5": "IndexTeam/IndexTTS-2"}
DEMO_SPACE = "IndexTeam/IndexTTS-2-Demo"


def example_wav(name):
    """A short WAV for the demo space's examples/NAME (fixed content per name)."""
    seed = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)
    frames = bytes((seed >> (i % 24) ^ i * 7) & 0xFF for i in range(22050))
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(1)
        w.setframerate(22050)
        w.writeframes(frames)
    return buf.getvalue()


def xet_hash(entry):
    """The file's Xet hash (opaque to the clients: derived from its sha256)."""
    return hashlib.sha256(b"xet-file:" + entry["sha256"].encode()).hexdigest()


def xorb_hash(entry):
    return hashlib.sha256(b"xet-xorb:" + entry["sha256"].encode()).hexdigest()


def chunk_header(n):
    """xet-core's CASChunkHeader: version 0, compressed length (u24 LE),
    compression scheme 0 = none, uncompressed length (u24 LE)."""
    return bytes([0]) + n.to_bytes(3, "little") + bytes([0]) + n.to_bytes(3, "little")


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
        self.by_xet, self.by_xorb = {}, {}
        for rid, repo in self.repos.items():
            for fpath, entry in repo["files"].items():
                if entry["lfs"]:
                    self.by_xet[xet_hash(entry)] = (rid, fpath, entry)
                    self.by_xorb[xorb_hash(entry)] = (rid, fpath, entry)
        self.role, self.public_url, self.cas_url = "hub", "", ""

    def repo(self, rid):
        """(repo, commit) for a repo id, aliases included; (None, None) if unknown."""
        if rid in ALIASES and ALIASES[rid] in self.repos:
            base = self.repos[ALIASES[rid]]
            return base, hashlib.sha1((rid + base["commit"]).encode()).hexdigest()
        repo = self.repos.get(rid)
        return repo, (repo["commit"] if repo else None)

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

    # -- faults ------------------------------------------------------------------
    def _hang(self):
        """Blackhole: say nothing until the client gives up or the hub stops."""
        self.close_connection = True
        while not self.server.hub.stopping.is_set():
            r, _, _ = select.select([self.connection], [], [], 0.2)
            if r:
                try:
                    data = self.connection.recv(4096, socket.MSG_PEEK)
                except ValueError:  # TLS: no MSG_PEEK; what is read is not needed
                    try:
                        data = self.connection.recv(4096)
                    except (OSError, ssl.SSLError):
                        return
                except OSError:
                    return
                if not data:
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

    # -- dispatch ----------------------------------------------------------------
    def do_HEAD(self):
        self._serve(body=False)

    def do_GET(self):
        self._serve(body=True)

    def do_POST(self):
        if self.path.split("?")[0] == "/_control":
            return self._control()
        if self.server.hub.role == "hub" and API.match(self.path.split("?")[0]):
            return self._serve(body=True)
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
        path, _, query = self.path.partition("?")
        if path == "/_control":
            return self._control()
        hub = self.server.hub
        hub.count(self.command, path, self.headers.get("Range"))
        if self._faults():
            return
        if hub.role == "cas":
            return self._cas(path, body)
        if hub.role == "modelscope":
            return self._modelscope(path, urllib.parse.parse_qs(query), body)
        m = API.match(path)
        if m:
            return self._api(*m.groups(), urllib.parse.parse_qs(query))
        m = SPACE_RESOLVE.match(path)
        if m:
            return self._space(*m.groups(), body)
        m = RESOLVE.match(path)
        if not m:
            return self._error(404, message="not a resolve URL")
        org, name, rev, fpath = m.groups()
        fpath = urllib.parse.unquote(fpath)
        repo, commit = hub.repo(f"{org}/{name}")
        if repo is None:
            return self._error(404, "RepoNotFound", message=f"Repository {org}/{name} not found")
        if rev not in ("main", commit):
            return self._error(404, "RevisionNotFound", message=f"Invalid rev id: {rev}")
        forced = self._forced(f"{org}/{name}/{fpath}")
        entry = repo["files"].get(fpath)
        if forced == 404 or (entry is None and forced is None):
            return self._error(404, "EntryNotFound", commit,
                               f"{fpath} does not exist on \"{rev}\"")
        if forced:
            return self._error(forced, message=f"simulated status {forced}")
        if entry["lfs"] and hub.cas_url:
            if "application/vnd.xet-fileinfo+json" in (self.headers.get("Accept") or ""):
                return self._xet_fileinfo(f"{org}/{name}", commit, entry)
            return self._xet_redirect(f"{org}/{name}", commit, entry, body)
        rid = ALIASES.get(f"{org}/{name}", f"{org}/{name}")
        self._serve_entry(entry, os.path.join(hub.root, *rid.split("/"), fpath), body,
                          {"X-Repo-Commit": commit})

    def _forced(self, key):
        return next((int(code) for pat, code in self.server.hub.snapshot()["knobs"]["status"].items()
                     if fnmatch.fnmatch(key, pat)), None)

    def _serve_entry(self, entry, fpath, body, extra, reader=None, size=None):
        """200/206 (Range: bytes=N- or N-M) of a file, or of reader (seek/read)."""
        size = entry["size"] if size is None else size
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
        for k, v in extra.items():
            self.send_header(k, v)
        if entry is not None and entry.get("lfs"):
            # LFS files: huggingface_hub prefers X-Linked-Etag/-Size (the real
            # hub sends them with a redirect to its CDN; without --cas-url the
            # file is served directly, which the client handles the same way).
            self.send_header("ETag", f'"{entry["sha256"]}"')
            self.send_header("X-Linked-Etag", f'"{entry["sha256"]}"')
            self.send_header("X-Linked-Size", str(size))
        elif entry is not None:
            self.send_header("ETag", f'"{entry["git_sha1"]}"')
        self.send_header("Accept-Ranges", "bytes")
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if body:
            if reader is not None:
                self._send_stream(reader, start, end - start + 1)
            else:
                with open(fpath, "rb") as f:
                    self._send_stream(f, start, end - start + 1)

    # -- the hub's API ---------------------------------------------------------------
    def _entry_info(self, fpath, entry, expand=True):
        info = {"type": "file", "oid": entry["git_sha1"], "size": entry["size"], "path": fpath}
        if entry["lfs"]:
            info["lfs"] = {"oid": entry["sha256"], "size": entry["size"], "pointerSize": 134}
            if self.server.hub.cas_url:
                info["xetHash"] = xet_hash(entry)
        return info

    def _api(self, org, name, kind, rev, rest, query):
        hub = self.server.hub
        rid = f"{org}/{name}"
        repo, commit = hub.repo(rid)
        if repo is None:
            return self._error(404, "RepoNotFound", message=f"Repository {rid} not found")
        if urllib.parse.unquote(rev) not in ("main", commit):
            return self._error(404, "RevisionNotFound", message=f"Invalid rev id: {rev}")
        files = repo["files"]
        if kind == "xet-read-token":
            if not hub.cas_url:
                return self._error(404, message="this repo is not Xet-backed here")
            exp = int(time.time()) + 3600
            return self._send_json(200, {"casUrl": hub.cas_url, "accessToken": XET_TOKEN, "exp": exp},
                                   {"X-Xet-Cas-Url": hub.cas_url, "X-Xet-Access-Token": XET_TOKEN,
                                    "X-Xet-Token-Expiration": str(exp)})
        if kind == "revision":
            blobs = query.get("blobs", [""])[0].lower() in ("1", "true")
            sib = []
            for p, e in files.items():
                s = {"rfilename": p}
                if blobs:
                    s.update({"blobId": e["git_sha1"], "size": e["size"]})
                    if e["lfs"]:
                        s["lfs"] = {"sha256": e["sha256"], "size": e["size"], "pointerSize": 134}
                sib.append(s)
            return self._send_json(200, {
                "_id": hashlib.sha1(rid.encode()).hexdigest()[:24], "id": rid, "modelId": rid,
                "sha": commit, "private": False, "gated": False, "disabled": False,
                "downloads": 0, "likes": 0, "tags": [], "library_name": None,
                "lastModified": "2025-09-08T00:00:00.000Z", "createdAt": "2025-09-01T00:00:00.000Z",
                "siblings": sib}, {"X-Repo-Commit": commit})
        if kind == "tree":
            base = urllib.parse.unquote((rest or "").strip("/"))
            recursive = query.get("recursive", [""])[0].lower() in ("1", "true")
            out, dirs = [], set()
            for p in sorted(files):
                if base and not p.startswith(base + "/"):
                    continue
                sub = p[len(base) + 1:] if base else p
                parts = sub.split("/")
                for i in range(1, len(parts)):
                    d = "/".join(([base] if base else []) + parts[:i])
                    if d not in dirs and (recursive or i == 1):
                        dirs.add(d)
                        out.append({"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(),
                                    "size": 0, "path": d})
                if recursive or len(parts) == 1:
                    out.append(self._entry_info(p, files[p]))
            if base and not out:
                return self._error(404, "EntryNotFound", commit, f"{base} does not exist")
            return self._send_json(200, out, {"X-Repo-Commit": commit})
        # paths-info (POST): form (huggingface_hub) or JSON (@huggingface/hub)
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if "json" in (self.headers.get("Content-Type") or ""):
            req = json.loads(raw or b"{}")
            paths = req.get("paths", [])
        else:
            paths = urllib.parse.parse_qs(raw.decode()).get("paths", [])
        paths = [paths] if isinstance(paths, str) else paths
        out = []
        for p in paths:
            p = p.strip("/")
            if p in files:
                out.append(self._entry_info(p, files[p]))
            elif any(f.startswith(p + "/") for f in files):
                out.append({"type": "directory", "oid": hashlib.sha1(p.encode()).hexdigest(),
                            "size": 0, "path": p})
        return self._send_json(200, out, {"X-Repo-Commit": commit})

    def _send_json(self, code, obj, extra=None):
        body = json.dumps(obj).encode()
        self.send_response(code)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _xet_headers(self, rid, commit, entry):
        hub = self.server.hub
        h = xet_hash(entry)
        return {"X-Repo-Commit": commit, "ETag": f'"{entry["sha256"]}"',
                "X-Linked-Etag": f'"{entry["sha256"]}"', "X-Linked-Size": str(entry["size"]),
                "X-Xet-Hash": h,
                "Link": f'<{hub.public_url}/api/models/{rid}/xet-read-token/{commit}>; '
                        f'rel="xet-auth", <{hub.cas_url}/v1/reconstructions/{h}>; '
                        'rel="xet-reconstruction-info"'}

    def _xet_fileinfo(self, rid, commit, entry):
        """What the hub answers a client that accepts application/vnd.xet-fileinfo+json
        (@huggingface/hub): the Xet headers and a JSON body, no redirect."""
        hub = self.server.hub
        h = xet_hash(entry)
        body = json.dumps({"hash": h, "file_size": entry["size"],
                           "refresh_url": f"{hub.public_url}/api/models/{rid}/xet-read-token/{commit}",
                           "reconstruction_url": f"{hub.cas_url}/v1/reconstructions/{h}",
                           "etag": entry["sha256"]}).encode()
        self.send_response(200)
        for k, v in self._xet_headers(rid, commit, entry).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/vnd.xet-fileinfo+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _xet_redirect(self, rid, commit, entry, body):
        """A Xet-backed LFS file: 302 to the CAS bridge, with the Xet headers."""
        hub = self.server.hub
        h = xet_hash(entry)
        msg = b"Found. Redirecting to the CAS bridge"
        self.send_response(302)
        for k, v in self._xet_headers(rid, commit, entry).items():
            self.send_header(k, v)
        self.send_header("Location", f"{hub.cas_url}/xet-bridge-us/{h}?X-Xet-Signed-Range=bytes%3D0-"
                         f"{entry['size'] - 1}&Expires=9999999999")
        self.send_header("Content-Length", str(len(msg)))
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        if body:
            self.wfile.write(msg)

    def _space(self, org, name, rev, fpath, body):
        if f"{org}/{name}" != DEMO_SPACE or not fpath.startswith("examples/") \
                or not fpath.endswith(".wav") or self._forced(f"spaces/{org}/{name}/{fpath}") == 404:
            return self._error(404, "EntryNotFound", message=f"{fpath} not found")
        forced = self._forced(f"spaces/{org}/{name}/{fpath}")
        if forced:
            return self._error(forced, message=f"simulated status {forced}")
        data = example_wav(fpath)
        self.send_response(200)
        self.send_header("Content-Type", "audio/wav")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("ETag", '"%s"' % hashlib.sha1(data).hexdigest())
        self.end_headers()
        if body:
            self._send_stream(io.BytesIO(data), 0, len(data))

    # -- the Xet CAS -------------------------------------------------------------------
    def _cas(self, path, body):
        hub = self.server.hub
        parts = path.strip("/").split("/")
        forced = self._forced(path.strip("/"))
        if forced:
            return self._error(forced, message=f"simulated status {forced}")
        if parts[0] in ("v1", "v2") and parts[1:2] == ["reconstructions"] and len(parts) == 3:
            if self.headers.get("Authorization") != f"Bearer {XET_TOKEN}":
                return self._error(401, message="missing or bad CAS token")
            found = hub.by_xet.get(parts[2])
            if not found:
                return self._error(404, message="unknown file hash")
            return self._send_json(200, self._reconstruction(found[2], parts[0]))
        if parts[:2] == ["xorbs", "default"] and len(parts) == 3:
            found = hub.by_xorb.get(parts[2])
            if not found:
                return self._error(404, message="unknown xorb")
            rid, fpath, entry = found
            reader = XorbReader(os.path.join(hub.root, *rid.split("/"), fpath), entry["size"])
            with reader:
                return self._serve_entry(None, None, body, {}, reader=reader, size=reader.length)
        if parts[:1] == ["xet-bridge-us"] and len(parts) == 2:
            found = hub.by_xet.get(parts[1])
            if not found:
                return self._error(404, message="unknown file hash")
            rid, fpath, entry = found
            return self._serve_entry(entry, os.path.join(hub.root, *rid.split("/"), fpath), body, {})
        return self._error(404, message="not a CAS URL")

    def _reconstruction(self, entry, version="v1"):
        """QueryReconstructionResponse: one xorb per file, a term per XET_TERM_CHUNKS
        chunks. v1 (xet-core 1.1.10): fetch_info with one url_range per term; v2
        (@huggingface/hub): xorbs with ranges (one per URL here). A Range header
        (bytes=A-B of the file) limits the terms, offset_into_first_range set."""
        size, xorb = entry["size"], xorb_hash(entry)
        nchunks = max(1, -(-size // XET_CHUNK))
        transfer = self.server.hub.transfer_url or self.server.hub.public_url
        lo, hi = 0, size - 1
        rm = RANGE.match((self.headers.get("Range") or "").strip())
        if rm:
            lo = min(int(rm.group(1)), size - 1)
            hi = min(int(rm.group(2)), size - 1) if rm.group(2) else size - 1
        span = XET_TERM_CHUNKS * XET_CHUNK
        terms, fetch, xorbs = [], [], []
        for first in range(0, nchunks, XET_TERM_CHUNKS):
            if (first // XET_TERM_CHUNKS + 1) * span <= lo or first * XET_CHUNK > hi:
                continue
            last = min(first + XET_TERM_CHUNKS, nchunks)
            length = min(last * XET_CHUNK, size) - first * XET_CHUNK
            start = first * (8 + XET_CHUNK)
            end = start + length + 8 * (last - first) - 1
            url = f"{transfer}/xorbs/default/{xorb}?X-Amz-Signature=sim&term={first}"
            terms.append({"hash": xorb, "unpacked_length": length,
                          "range": {"start": first, "end": last}})
            fetch.append({"range": {"start": first, "end": last}, "url": url,
                          "url_range": {"start": start, "end": end}})
            xorbs.append({"url": url, "ranges": [{"chunks": {"start": first, "end": last},
                                                  "bytes": {"start": start, "end": end}}]})
        offset = lo - (lo // span) * span
        if version == "v2":
            return {"offset_into_first_range": offset, "terms": terms, "xorbs": {xorb: xorbs}}
        return {"offset_into_first_range": offset, "terms": terms, "fetch_info": {xorb: fetch}}

    # -- ModelScope --------------------------------------------------------------------
    def _modelscope(self, path, query, body):
        hub = self.server.hub
        m = MS_API.match(path)
        if not m:
            return self._error(404, message="not a ModelScope API URL")
        org, name, kind = m.groups()
        msid = f"{org}/{name}"
        repo, commit = hub.repo(MS_NAMES.get(msid, msid))
        if repo is None:
            return self._send_json(404, {"Code": 10010201, "Message": f"model {msid} not found",
                                         "Success": False})
        files = repo["files"]
        if kind == "revisions":
            return self._send_json(200, {"Code": 200, "Success": True, "Data": {"RevisionMap": {
                "Branches": [{"Revision": "master", "CommitId": commit, "CreatedAt": 1757289600}],
                "Tags": []}}})
        if kind == "repo/files":
            out = [{"Name": os.path.basename(p), "Path": p, "Type": "blob", "Size": e["size"],
                    "Sha256": e["sha256"], "Revision": commit} for p, e in files.items()]
            return self._send_json(200, {"Code": 200, "Success": True, "Data": {"Files": out}})
        fpath = query.get("FilePath", [""])[0]
        forced = self._forced(f"{msid}/{fpath}")
        if forced:
            return self._error(forced, message=f"simulated status {forced}")
        entry = files.get(fpath)
        if entry is None:
            return self._send_json(404, {"Code": 10010205, "Message": f"{fpath} not found",
                                         "Success": False})
        rid = ALIASES.get(MS_NAMES.get(msid, msid), MS_NAMES.get(msid, msid))
        self._serve_entry(entry, os.path.join(hub.root, *rid.split("/"), fpath), body, {})

    def _send_stream(self, f, start, length):
        hub = self.server.hub
        drop = hub.take_drop()
        stall = int(hub.snapshot()["knobs"]["stall_after"])
        sent = 0
        began = time.monotonic()
        f.seek(start)
        while sent < length:
            bw = int(hub.snapshot()["knobs"]["bandwidth"])
            n = min(CHUNK, length - sent, max(1024, bw // 20) if bw else CHUNK)
            if drop:
                n = min(n, drop - sent)
            if stall:
                n = min(n, max(1, stall - sent))
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
            if stall and sent >= stall:
                # Stalled mid-range: the connection stays open, nothing more comes.
                self.wfile.flush()
                self._hang()
                return
            if bw:
                ahead = sent / bw - (time.monotonic() - began)
                if ahead > 0:
                    time.sleep(ahead)


class XorbReader:
    """A file's xorb (chunk header + uncompressed chunk, for each chunk), computed
    on the fly: seek/read like a file."""

    def __init__(self, path, size):
        self.f = open(path, "rb")
        self.size = size
        self.nchunks = max(1, -(-size // XET_CHUNK))
        self.length = size + 8 * self.nchunks
        self.pos = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def seek(self, pos):
        self.pos = pos

    def read(self, n):
        if self.pos >= self.length:
            return b""
        rec = 8 + XET_CHUNK
        i, within = divmod(self.pos, rec)
        clen = min(XET_CHUNK, self.size - i * XET_CHUNK)
        record = chunk_header(clen)
        if within < 8:
            out = record[within:8]
        else:
            self.f.seek(i * XET_CHUNK + within - 8)
            out = self.f.read(min(n, clen - (within - 8)))
        out = out[:n]
        self.pos += len(out)
        return out


class Server(ThreadingHTTPServer):
    daemon_threads = True  # a hung (blackholed) client never blocks shutdown
    allow_reuse_address = True
    request_queue_size = 128  # 8 downloads + 48 Xet ranges at once
    ssl_ctx = None

    def finish_request(self, request, client_address):
        # TLS handshake in the handler's thread, so one slow client blocks nobody.
        if self.ssl_ctx is not None:
            try:
                request = self.ssl_ctx.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError):
                return
        super().finish_request(request, client_address)

    def shutdown_request(self, request):
        try:
            request.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        request.close()


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
    ap.add_argument("--stall-after", type=int, default=0)
    ap.add_argument("--role", choices=("hub", "cas", "modelscope"), default="hub")
    ap.add_argument("--public-url", default="", help="this server's own URL (https://huggingface.co)")
    ap.add_argument("--cas-url", default="", help="hub: advertise Xet with this CAS URL")
    ap.add_argument("--transfer-url", default="", help="cas: base URL of the xorb ranges")
    ap.add_argument("--tls-cert", help="serve HTTPS with this certificate chain (PEM)")
    ap.add_argument("--tls-key", help="... and this key")
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
                              "status": status, "stall_after": args.stall_after})
    except (OSError, ValueError) as e:
        sys.exit(f"hub: cannot load {args.root}/manifest.json: {e} (run genmodels.py first)")
    try:
        srv = Server((args.host, args.port), Handler)
    except OSError as e:
        sys.exit(f"hub: cannot listen on {args.host}:{args.port}: {e.strerror}")
    srv.hub, srv.verbose = hub, args.verbose
    hub.role, hub.public_url = args.role, args.public_url.rstrip("/")
    hub.cas_url, hub.transfer_url = args.cas_url.rstrip("/"), args.transfer_url.rstrip("/")
    scheme = "http"
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        srv.ssl_ctx, scheme = ctx, "https"
    port = srv.server_address[1]
    if args.port_file:
        # Written via rename so a reader never sees a partial number.
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.port_file)
    print(f"hub: {args.role} serving {args.root} on {scheme}://{args.host}:{port}", flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        hub.stopping.set()
        srv.server_close()


if __name__ == "__main__":
    main()
