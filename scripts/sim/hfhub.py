#!/usr/bin/python3
"""huggingface_hub 0.35.0 + hf_xet 1.1.10 + filelock 3.19.1, as the 2026 IndexTTS2
uses them, for the simulator: what the kernel sees is what must match.

Sources (file:line at huggingface_hub v0.35.0, filelock 3.19.1; the golden
files under tests/sim-golden/ cite them per operation):
  - hf_hub_download(local_dir=...): file_download.py:1189-1318, _local_folder.py
  - hf_hub_download() to the hub cache: file_download.py:1080-1186
  - _download_to_tmp_and_move / _chmod_and_move: file_download.py:1668-1790
  - http_get (one streamed GET, 10 MiB reads, retry ConnectionError/ReadTimeout
    only): file_download.py:349-530
  - xet_get: file_download.py:532-620, utils/_xet.py; the transfer itself is
    xet-core's (token GET, reconstruction, parallel xorb ranges, chunk cache)
  - snapshot_download: _snapshot_download.py (repo_info, refs, thread_map of 8)
  - FileLock: filelock/_unix.py:39-64, filelock/_api.py:271-344 (poll 0.05 s)

Settings are read once, at import (huggingface_hub/constants.py). Timeouts
the user did not set are the real defaults times SIM_TIME_SCALE.
By hand: hfhub.py [--local-dir D] ORG/NAME FILE | hfhub.py --snapshot ORG/NAME D
"""
import base64
import errno
import fcntl
import hashlib
import os
import re
import shutil
import stat
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import requests

from simtime import scaled

__version__ = "0.35.0-sim"


def _is_true(value):
    return (value or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def _num(name, default):
    v = os.environ.get(name)
    if not v:
        return scaled(default)
    try:
        return float(v)  # the real one is int(); fractions allowed for tests
    except ValueError:
        return scaled(default)


# -- constants.py, read once -----------------------------------------------------------
HF_HOME = os.path.expanduser(os.environ.get(
    "HF_HOME", os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")))
HF_HUB_CACHE = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") \
    or os.path.join(HF_HOME, "hub")
ENDPOINT = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
HF_HUB_OFFLINE = _is_true(os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE"))
HF_HUB_ETAG_TIMEOUT = _num("HF_HUB_ETAG_TIMEOUT", 10)
HF_HUB_DOWNLOAD_TIMEOUT = _num("HF_HUB_DOWNLOAD_TIMEOUT", 10)
HF_XET_CACHE = os.environ.get("HF_XET_CACHE") or os.path.join(HF_HOME, "xet")
HF_HUB_DISABLE_XET = _is_true(os.environ.get("HF_HUB_DISABLE_XET"))
DOWNLOAD_CHUNK_SIZE = 10 * 1024 * 1024
FILELOCK_LOG_EVERY_SECONDS = 10
REGEX_COMMIT_HASH = re.compile(r"^[0-9a-f]{40}$")
REGEX_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# hf_xet: concurrent range GETs (HF_XET_NUM_CONCURRENT_RANGE_GETS), retries, back-off.
XET_CONCURRENCY = int(os.environ.get("HF_XET_NUM_CONCURRENT_RANGE_GETS") or 48)
XET_RETRIES = 5
XET_BACKOFF = (3, 360)  # first and largest wait, seconds


# -- errors ------------------------------------------------------------------------------
class HfHubHTTPError(requests.HTTPError):
    pass


class RepositoryNotFoundError(HfHubHTTPError):
    pass


class RevisionNotFoundError(HfHubHTTPError):
    pass


class EntryNotFoundError(HfHubHTTPError):
    pass


class LocalEntryNotFoundError(EntryNotFoundError, FileNotFoundError, ValueError):
    pass


class OfflineModeIsEnabled(requests.ConnectionError):
    pass


def _raise_for_status(r):
    try:
        r.raise_for_status()
    except requests.HTTPError as e:
        code = r.headers.get("X-Error-Code")
        msg = f"{r.status_code} {r.reason} for url: {r.url}"
        if code == "EntryNotFound":
            raise EntryNotFoundError(msg, response=r) from e
        if code == "RevisionNotFound":
            raise RevisionNotFoundError(msg, response=r) from e
        if code == "RepoNotFound" or r.status_code == 401:
            raise RepositoryNotFoundError(msg, response=r) from e
        raise HfHubHTTPError(msg, response=r) from e


def _log(msg):
    print(msg, file=sys.stderr, flush=True)


# -- utils/_http.py: one Session per thread -------------------------------------------------
_tls = threading.local()


def get_session():
    s = getattr(_tls, "session", None)
    if s is None:
        s = requests.Session()
        s.headers["User-Agent"] = f"huggingface_hub/{__version__}; python/{sys.version.split()[0]}"
        _tls.session = s
    return s


def reset_sessions():
    _tls.session = None


# -- filelock 3.19.1 -----------------------------------------------------------------------
class Timeout(TimeoutError):
    pass


class FileLock:
    """UnixFileLock: open(O_RDWR|O_TRUNC[|O_CREAT]), fchmod, flock(LOCK_EX|LOCK_NB);
    busy: close, sleep 0.05 s, again. Release: LOCK_UN, close; never unlinks."""

    def __init__(self, path, mode=0o644):
        self.path = str(path)
        self.mode = mode
        self.fd = None

    def acquire(self, timeout=-1, poll_interval=0.05):
        start = time.perf_counter()
        while True:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            flags = os.O_RDWR | os.O_TRUNC
            if not os.path.exists(self.path):
                flags |= os.O_CREAT
            fd = os.open(self.path, flags, self.mode)
            try:
                os.fchmod(fd, self.mode)
            except PermissionError:
                pass
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno == errno.ENOSYS:
                    raise NotImplementedError("use SoftFileLock instead") from e
            else:
                self.fd = fd
                return self
            if 0 <= timeout < time.perf_counter() - start:
                raise Timeout(self.path)
            time.sleep(poll_interval)

    def release(self):
        fd, self.fd = self.fd, None
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


class WeakFileLock:
    """utils/_fixes.py WeakFileLock: acquire in 10 s slices, log while waiting."""

    def __init__(self, path, timeout=None):
        self.lock = FileLock(path)
        self.timeout = timeout

    def __enter__(self):
        start = time.time()
        while True:
            elapsed = time.time() - start
            if self.timeout is not None and elapsed >= self.timeout:
                raise Timeout(self.lock.path)
            try:
                slice_ = min(FILELOCK_LOG_EVERY_SECONDS, self.timeout - elapsed) if self.timeout \
                    else FILELOCK_LOG_EVERY_SECONDS
                self.lock.acquire(timeout=slice_)
                return self.lock
            except Timeout:
                _log(f"Still waiting to acquire lock on {self.lock.path} "
                     f"(elapsed: {time.time() - start:.1f} seconds)")

    def __exit__(self, *exc):
        try:
            self.lock.release()
        except OSError:
            pass


# -- metadata (HEAD) ---------------------------------------------------------------------
class Meta:
    def __init__(self, url, etag, commit, size, xet_hash, xet_refresh):
        self.url, self.etag, self.commit, self.size = url, etag, commit, size
        self.xet_hash, self.xet_refresh = xet_hash, xet_refresh


def get_hf_file_metadata(url, timeout=None):
    """HEAD, no redirects followed (relative ones only): file_download.py get_hf_file_metadata."""
    s = get_session()
    r = s.head(url, headers={"Accept-Encoding": "identity"}, allow_redirects=False,
               timeout=HF_HUB_ETAG_TIMEOUT if timeout is None else timeout)
    while 300 <= r.status_code < 400 and r.headers.get("Location", "").startswith("/"):
        r = s.head(requests.compat.urljoin(url, r.headers["Location"]), allow_redirects=False,
                   headers={"Accept-Encoding": "identity"}, timeout=HF_HUB_ETAG_TIMEOUT)
    _raise_for_status(r)
    etag = (r.headers.get("X-Linked-Etag") or r.headers.get("ETag") or "")
    etag = re.sub(r"^W/", "", etag).strip('"') or None
    size = r.headers.get("X-Linked-Size") or r.headers.get("Content-Length")
    xet_hash = r.headers.get("X-Xet-Hash")
    refresh = r.links.get("xet-auth", {}).get("url") or r.headers.get("X-Xet-Refresh-Route")
    if refresh and refresh.startswith("https://huggingface.co"):
        refresh = refresh.replace("https://huggingface.co", ENDPOINT)
    return Meta(r.headers.get("Location") or url, etag, r.headers.get("X-Repo-Commit"),
                int(size) if size else None, xet_hash if refresh else None, refresh)


def _get_metadata_or_catch_error(repo_id, filename, revision, local_files_only):
    url = f"{ENDPOINT}/{repo_id}/resolve/{revision}/{filename}"
    if local_files_only or HF_HUB_OFFLINE:
        return None, OfflineModeIsEnabled("offline mode is enabled (HF_HUB_OFFLINE=1)")
    try:
        return get_hf_file_metadata(url), None
    except (EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError):
        raise
    except (requests.ConnectionError, requests.Timeout, HfHubHTTPError) as e:
        return None, e


def _raise_on_head_call_error(err):
    if isinstance(err, OfflineModeIsEnabled):
        raise LocalEntryNotFoundError(
            "Cannot find the requested files in the disk cache and outgoing traffic has been "
            "disabled. To enable hf.co look-ups and downloads online, set 'local_files_only' to "
            "False.") from err
    raise LocalEntryNotFoundError(
        "An error happened while trying to locate the file on the Hub and we cannot find the "
        "requested files in the local cache. Please check your connection and try again or make "
        "sure your Internet connection is on.") from err


# -- http_get ----------------------------------------------------------------------------
def http_get(url, f, resume_size=0, expected_size=None, _nb_retries=5):
    """One streamed GET (redirects followed), appended to f; only ConnectionError and
    ReadTimeout are retried (with Range). A body cut short raises ChunkedEncodingError
    as urllib3 2.x does (Debian's 1.26 would end the loop silently): not retried."""
    if expected_size is not None and resume_size == expected_size:
        return
    headers = {"Accept-Encoding": "identity"}
    if resume_size > 0:
        headers["Range"] = f"bytes={resume_size}-"
    r = get_session().get(url, headers=headers, stream=True, timeout=HF_HUB_DOWNLOAD_TIMEOUT)
    _raise_for_status(r)
    length = r.headers.get("Content-Length")
    new_resume = resume_size
    got = 0
    try:
        for chunk in r.iter_content(chunk_size=DOWNLOAD_CHUNK_SIZE):
            if chunk:
                f.write(chunk)
                new_resume += len(chunk)
                got += len(chunk)
                _nb_retries = 5
        if length is not None and got < int(length):
            raise requests.exceptions.ChunkedEncodingError(
                f"Connection broken: IncompleteRead({got} bytes read, {int(length) - got} more "
                "expected)")
    except (requests.ConnectionError, requests.ReadTimeout) as e:
        if _nb_retries <= 0:
            _log(f"Error while downloading from {url}: {e}\nMax retries exceeded.")
            raise
        _log(f"Error while downloading from {url}: {e}\nTrying to resume download...")
        time.sleep(1)
        reset_sessions()
        return http_get(url, f, new_resume, expected_size, _nb_retries - 1)
    if expected_size is not None and expected_size != f.tell():
        raise OSError(f"Consistency check failed: file should be of size {expected_size} but has "
                      f"size {f.tell()} ({os.path.basename(url)}).")


# -- Xet (hf_xet 1.1.10 / xet-core) ----------------------------------------------------------
def _xet_cache_dir(endpoint):
    # One cache per CAS endpoint: HF_XET_CACHE/<endpoint, non-alphanumerics as _>/...
    tag = re.sub(r"[^A-Za-z0-9]", "_", endpoint)
    return os.path.join(HF_XET_CACHE, tag)


def _backoff(attempt):
    return scaled(min(XET_BACKOFF[0] * (2 ** attempt), XET_BACKOFF[1]))


def _xet_request(method, url, **kw):
    """reqwest with xet-core's retry policy: 5 retries on connection errors and
    5xx, 3 s doubling up to 6 min; no read timeout (None)."""
    for attempt in range(XET_RETRIES + 1):
        try:
            r = get_session().request(method, url, timeout=None, **kw)
            if r.status_code < 500:
                _raise_for_status(r)
                return r
            err = HfHubHTTPError(f"{r.status_code} for url: {url}", response=r)
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as e:
            err = e
        if attempt == XET_RETRIES:
            raise err
        _log(f"xet: {method} {url}: {err}; retry {attempt + 1}/{XET_RETRIES} in "
             f"{_backoff(attempt):.1f}s")
        reset_sessions()
        time.sleep(_backoff(attempt))


def _parse_xorb(data, first, last):
    """Chunk headers (version, compressed len u24, scheme, uncompressed len u24)
    followed by the chunk; scheme 0 (none) is the only one served here."""
    out, pos = [], 0
    for _ in range(first, last):
        hdr = data[pos:pos + 8]
        if len(hdr) < 8 or hdr[0] != 0 or hdr[4] != 0:
            raise ValueError("bad xorb chunk header")
        clen = int.from_bytes(hdr[1:4], "little")
        out.append(data[pos + 8:pos + 8 + clen])
        pos += 8 + clen
    return b"".join(out)


def xet_get(incomplete_path, xet_hash, refresh_route, expected_size):
    """Token GET (no timeout), reconstruction, then up to XET_CONCURRENCY range GETs
    at once, each term written at its offset (pwrite) from its own thread; each
    range kept in the chunk cache. The .incomplete is rewritten from 0: no resume."""
    # token: utils/_xet.py _fetch_xet_connection_info_with_url (no timeout)
    r = get_session().get(refresh_route, timeout=None)
    _raise_for_status(r)
    cas = r.headers["X-Xet-Cas-Url"].rstrip("/")
    auth = {"Authorization": f"Bearer {r.headers['X-Xet-Access-Token']}"}
    cache = _xet_cache_dir(cas)
    chunk_cache = os.path.join(cache, "chunk-cache")
    for d in (chunk_cache, os.path.join(cache, "shard-cache"), os.path.join(cache, "staging")):
        os.makedirs(d, exist_ok=True)
    rec = _xet_request("GET", f"{cas}/v1/reconstructions/{xet_hash}", headers=auth).json()
    fetch = {}
    for xorb, infos in rec["fetch_info"].items():
        for fi in infos:
            fetch[(xorb, fi["range"]["start"])] = fi
    offsets, off = [], 0
    for term in rec["terms"]:
        offsets.append(off)
        off += term["unpacked_length"]
    fd = os.open(incomplete_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)

    def one(i):
        term = rec["terms"][i]
        first, last = term["range"]["start"], term["range"]["end"]
        fi = fetch[(term["hash"], first)]
        cpath = os.path.join(chunk_cache, term["hash"][:2], term["hash"], f"{first}-{last}")
        data = None
        try:
            with open(cpath, "rb") as cf:
                data = cf.read()
        except FileNotFoundError:
            pass
        if data is None:
            ur = fi["url_range"]
            data = _xet_request("GET", fi["url"], headers={
                "Range": f"bytes={ur['start']}-{ur['end']}"}).content
            os.makedirs(os.path.dirname(cpath), exist_ok=True)
            tmp = f"{cpath}.{uuid.uuid4().hex[:8]}.tmp"
            with open(tmp, "wb") as cf:
                cf.write(data)
            os.replace(tmp, cpath)
        body = _parse_xorb(data, first, last)
        os.pwrite(fd, body[rec["offset_into_first_range"] if i == 0 else 0:], offsets[i])
        return len(body)

    try:
        n = len(rec["terms"])
        with ThreadPoolExecutor(max_workers=max(1, min(XET_CONCURRENCY, n)),
                                thread_name_prefix="xet") as ex:
            list(ex.map(one, range(n)))
    finally:
        os.close(fd)
    size = os.path.getsize(incomplete_path)
    if expected_size is not None and size != expected_size:
        raise OSError(f"xet: {incomplete_path}: {size} bytes, expected {expected_size}")


# -- download to tmp and move ------------------------------------------------------------------
def _chmod_and_move(src, dst):
    tmp_file = os.path.join(os.path.dirname(os.path.dirname(dst)), f"tmp_{uuid.uuid4()}")
    try:
        fd = os.open(tmp_file, os.O_CREAT | os.O_WRONLY, 0o666)  # Path.touch()
        os.close(fd)
        os.chmod(src, stat.S_IMODE(os.stat(tmp_file).st_mode))
    except OSError as e:
        _log(f"Could not set the permissions on the file '{src}'. Error: {e}.")
    finally:
        try:
            os.unlink(tmp_file)
        except OSError:
            pass
    shutil.move(src, dst)


def _download_to_tmp_and_move(incomplete_path, destination_path, meta, filename):
    if os.path.exists(destination_path):
        return
    with open(incomplete_path, "ab") as f:
        resume_size = f.tell()
        msg = f"Downloading '{filename}' to '{incomplete_path}'"
        if resume_size > 0 and meta.size is not None:
            msg += f" (resume from {resume_size}/{meta.size})"
        _log(msg)
        if meta.size is not None:
            for d in (os.path.dirname(incomplete_path), os.path.dirname(destination_path)):
                shutil.disk_usage(d)  # _check_disk_space: statvfs
        if meta.xet_hash and not HF_HUB_DISABLE_XET:
            xet_get(incomplete_path, meta.xet_hash, meta.xet_refresh, meta.size)
        else:
            http_get(meta.url, f, resume_size, meta.size)
    _log(f"Download complete. Moving file to {destination_path}")
    _chmod_and_move(incomplete_path, destination_path)


# -- local_dir (_local_folder.py) ------------------------------------------------------------
def _short_hash(name):
    return base64.urlsafe_b64encode(hashlib.sha1(name.encode()).digest()).decode()


def _huggingface_dir(local_dir):
    path = os.path.join(local_dir, ".cache", "huggingface")
    os.makedirs(path, exist_ok=True)
    gitignore = os.path.join(path, ".gitignore")
    lock = os.path.join(path, ".gitignore.lock")
    if not os.path.exists(gitignore):
        try:
            with WeakFileLock(lock, timeout=0.1):
                with open(gitignore, "w") as f:
                    f.write("*")
        except (IndexError, OSError):
            pass
        try:
            os.unlink(lock)
        except OSError:
            pass
    return path


class LocalPaths:
    def __init__(self, local_dir, filename):
        rel = os.path.join(*filename.split("/"))
        self.file_path = os.path.join(local_dir, rel)
        self.metadata_path = os.path.join(_huggingface_dir(local_dir), "download", rel + ".metadata")
        self.lock_path = self.metadata_path[:-len(".metadata")] + ".lock"
        os.makedirs(os.path.dirname(self.file_path), exist_ok=True)
        os.makedirs(os.path.dirname(self.metadata_path), exist_ok=True)

    def incomplete_path(self, etag):
        return os.path.join(os.path.dirname(self.metadata_path),
                            f"{_short_hash(os.path.basename(self.metadata_path))}.{etag}.incomplete")


def read_download_metadata(local_dir, filename):
    paths = LocalPaths(local_dir, filename)
    with WeakFileLock(paths.lock_path):
        if os.path.exists(paths.metadata_path):
            try:
                with open(paths.metadata_path) as f:
                    commit, etag, ts = f.readline().strip(), f.readline().strip(), float(f.readline())
            except (OSError, ValueError):
                try:
                    os.unlink(paths.metadata_path)
                except OSError:
                    pass
                return None
            try:
                if os.stat(paths.file_path).st_mtime - 1 <= ts:
                    return {"commit": commit, "etag": etag}
            except FileNotFoundError:
                pass
    return None


def write_download_metadata(local_dir, filename, commit, etag):
    paths = LocalPaths(local_dir, filename)
    with WeakFileLock(paths.lock_path):
        with open(paths.metadata_path, "w") as f:
            f.write(f"{commit}\n{etag}\n{time.time()}\n")


def _sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def repo_folder_name(repo_id):
    return "models--" + repo_id.replace("/", "--")


def try_to_load_from_cache(repo_id, filename, cache_dir, revision):
    storage = os.path.join(cache_dir, repo_folder_name(repo_id))
    if not os.path.isdir(storage):
        return None
    p = os.path.join(storage, "snapshots", revision, filename)
    return p if os.path.isfile(p) else None


def _to_local_dir(repo_id, filename, revision, local_dir, cache_dir, local_files_only):
    paths = LocalPaths(local_dir, filename)
    local_meta = read_download_metadata(local_dir, filename)
    if REGEX_COMMIT_HASH.match(revision) and os.path.isfile(paths.file_path) \
            and local_meta and local_meta["commit"] == revision:
        return paths.file_path
    meta, err = _get_metadata_or_catch_error(repo_id, filename, revision, local_files_only)
    if err is not None:
        if os.path.isfile(paths.file_path):
            _log("Couldn't access the Hub to check for update but local file already exists. "
                 f"Defaulting to existing file. (error: {err})")
            return paths.file_path
        _raise_on_head_call_error(err)
    if os.path.isfile(paths.file_path):
        if local_meta and local_meta["etag"] == meta.etag:
            write_download_metadata(local_dir, filename, meta.commit, meta.etag)
            return paths.file_path
        if local_meta is None and REGEX_SHA256.match(meta.etag or ""):
            if _sha256_file(paths.file_path) == meta.etag:
                write_download_metadata(local_dir, filename, meta.commit, meta.etag)
                return paths.file_path
    cached = try_to_load_from_cache(repo_id, filename, cache_dir, meta.commit)
    if cached:
        with WeakFileLock(paths.lock_path):
            os.makedirs(os.path.dirname(paths.file_path), exist_ok=True)
            shutil.copyfile(cached, paths.file_path)
        write_download_metadata(local_dir, filename, meta.commit, meta.etag)
        return paths.file_path
    with WeakFileLock(paths.lock_path):
        try:
            os.unlink(paths.file_path)
        except FileNotFoundError:
            pass
        _download_to_tmp_and_move(paths.incomplete_path(meta.etag), paths.file_path, meta, filename)
    write_download_metadata(local_dir, filename, meta.commit, meta.etag)
    return paths.file_path


# -- the hub cache ------------------------------------------------------------------------------
def _to_cache_dir(repo_id, filename, revision, cache_dir, local_files_only):
    storage = os.path.join(cache_dir, repo_folder_name(repo_id))
    rel = os.path.join(*filename.split("/"))
    if REGEX_COMMIT_HASH.match(revision):
        pointer = os.path.join(storage, "snapshots", revision, rel)
        if os.path.exists(pointer):
            return pointer
    try:
        meta, err = _get_metadata_or_catch_error(repo_id, filename, revision, local_files_only)
    except EntryNotFoundError as e:
        commit = e.response.headers.get("X-Repo-Commit")
        if commit:
            no_exist = os.path.join(storage, ".no_exist", commit, rel)
            os.makedirs(os.path.dirname(no_exist), exist_ok=True)
            open(no_exist, "a").close()
        raise
    if err is not None:
        commit = revision if REGEX_COMMIT_HASH.match(revision) else None
        ref = os.path.join(storage, "refs", revision)
        if commit is None and os.path.isfile(ref):
            commit = open(ref).read().strip()
        if commit:
            pointer = os.path.join(storage, "snapshots", commit, rel)
            if os.path.exists(pointer):
                return pointer
        _raise_on_head_call_error(err)
    blob = os.path.join(storage, "blobs", meta.etag)
    pointer = os.path.join(storage, "snapshots", meta.commit, rel)
    os.makedirs(os.path.dirname(blob), exist_ok=True)
    os.makedirs(os.path.dirname(pointer), exist_ok=True)
    if revision != meta.commit:
        ref = os.path.join(storage, "refs", revision)
        os.makedirs(os.path.dirname(ref), exist_ok=True)
        if not os.path.exists(ref) or open(ref).read() != meta.commit:
            with open(ref, "w") as f:
                f.write(meta.commit)
    if os.path.exists(pointer):
        return pointer
    if os.path.exists(blob):
        _create_symlink(blob, pointer)
        return pointer
    lock_path = os.path.join(cache_dir, ".locks", repo_folder_name(repo_id), f"{meta.etag}.lock")
    os.makedirs(os.path.dirname(lock_path), exist_ok=True)
    with WeakFileLock(lock_path):
        _download_to_tmp_and_move(blob + ".incomplete", blob, meta, filename)
        if not os.path.exists(pointer):
            _create_symlink(blob, pointer)
    return pointer


def _create_symlink(src, dst):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    try:
        os.symlink(os.path.relpath(src, os.path.dirname(dst)), dst)
    except FileExistsError:
        pass


def hf_hub_download(repo_id, filename, revision="main", local_dir=None, cache_dir=None,
                    local_files_only=False):
    cache_dir = cache_dir or HF_HUB_CACHE
    if local_dir is not None:
        return _to_local_dir(repo_id, filename, revision, str(local_dir), cache_dir,
                             local_files_only)
    return _to_cache_dir(repo_id, filename, revision, cache_dir, local_files_only)


def snapshot_download(repo_id, local_dir=None, revision="main", cache_dir=None, max_workers=8,
                      local_files_only=False):
    """repo_info (GET /api/models/{repo}/revision/{rev}), refs/<rev> in the cache,
    then hf_hub_download of every sibling with revision=<commit>, 8 threads."""
    cache_dir = cache_dir or HF_HUB_CACHE
    storage = os.path.join(cache_dir, repo_folder_name(repo_id))
    info, err = None, None
    if not (local_files_only or HF_HUB_OFFLINE):
        try:
            r = get_session().get(f"{ENDPOINT}/api/models/{repo_id}/revision/{revision}",
                                  timeout=None)
            _raise_for_status(r)
            info = r.json()
        except RevisionNotFoundError:
            raise
        except (requests.ConnectionError, requests.Timeout, requests.HTTPError) as e:
            err = e
    else:
        err = OfflineModeIsEnabled("offline mode is enabled")
    if info is None:
        if local_dir is not None and os.path.isdir(local_dir) and os.listdir(local_dir):
            _log(f"Returning existing local_dir `{local_dir}` as remote repo cannot be accessed "
                 f"in `snapshot_download` ({err}).")
            return os.path.realpath(local_dir)
        raise LocalEntryNotFoundError(
            "An error happened while trying to locate the files on the Hub and we cannot find the "
            "appropriate snapshot folder for the specified revision on the local disk. Please check "
            "your internet connection and try again.") from err
    commit = info["sha"]
    files = [s["rfilename"] for s in info.get("siblings") or []]
    if revision != commit:
        ref = os.path.join(storage, "refs", revision)
        try:
            os.makedirs(os.path.dirname(ref), exist_ok=True)
            with open(ref, "w") as f:
                f.write(commit)
        except OSError as e:
            _log(f"Ignored error while writing commit hash to {ref}: {e}.")
    _log(f"Fetching {len(files)} files")
    with ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="snapshot") as ex:
        list(ex.map(lambda f: hf_hub_download(repo_id, f, revision=commit, local_dir=local_dir,
                                              cache_dir=cache_dir), files))
    if local_dir is not None:
        return os.path.realpath(local_dir)
    return os.path.join(storage, "snapshots", commit)


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description="huggingface_hub 0.35 download, simulated")
    ap.add_argument("--local-dir")
    ap.add_argument("--snapshot", action="store_true", help="snapshot_download REPO into --local-dir")
    ap.add_argument("repo")
    ap.add_argument("file", nargs="?")
    a = ap.parse_args(argv[1:])
    try:
        if a.snapshot:
            print(snapshot_download(a.repo, local_dir=a.local_dir))
        else:
            if not a.file:
                ap.error("FILE is required without --snapshot")
            print(hf_hub_download(a.repo, a.file, local_dir=a.local_dir))
    except (OSError, ValueError, requests.RequestException) as e:
        print(f"hfhub: {type(e).__name__}: {e}", file=sys.stderr)
        if e.__cause__ is not None:
            print(f"  caused by {type(e.__cause__).__name__}: {e.__cause__}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
    sys.exit(main(sys.argv))
