#!/usr/bin/python3
"""hf_hub_download as huggingface_hub 0.35 does it, for the simulator.

Settings are read ONCE, when this module is imported (as huggingface_hub's
constants are): changing HF_HUB_CACHE afterwards has no effect, which is the
root of IndexTTS2's cache-path bug. Cache layout under HF_HUB_CACHE:

  models--ORG--NAME/blobs/ETAG[.incomplete]
  models--ORG--NAME/snapshots/COMMIT/PATH -> ../../blobs/ETAG   (relative link)
  models--ORG--NAME/refs/main                                    (commit id)
  models--ORG--NAME/.no_exist/COMMIT/PATH                        (hub said 404)
  .locks/models--ORG--NAME/ETAG.lock                             (flock)

By hand: hfclient.py ORG/NAME PATH   prints the cached file's path.
"""
import fcntl
import os
import re
import sys
import time

import requests

__version__ = "0.35.0-sim"


def _is_true(value):
    return (value or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


# -- settings, read once (huggingface_hub/constants.py) ------------------------
HF_HOME = os.path.expanduser(os.environ.get(
    "HF_HOME", os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")))
HF_HUB_CACHE = os.environ.get("HF_HUB_CACHE", os.path.join(HF_HOME, "hub"))
ENDPOINT = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
HF_HUB_OFFLINE = _is_true(os.environ.get("HF_HUB_OFFLINE"))
# The real ones are integers; floats are accepted so tests can use sub-second values.
HF_HUB_ETAG_TIMEOUT = float(os.environ.get("HF_HUB_ETAG_TIMEOUT") or 10)
HF_HUB_DOWNLOAD_TIMEOUT = float(os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT") or 10)

DOWNLOAD_CHUNK_SIZE = 10 * 1024 * 1024
DOWNLOAD_RETRIES = 5
REGEX_COMMIT_HASH = re.compile(r"^[0-9a-f]{40}$")

# One keep-alive session per process, as huggingface_hub's get_session().
_session = requests.Session()
_session.headers["User-Agent"] = f"huggingface_hub/{__version__}; python/{sys.version.split()[0]}"


# -- errors (huggingface_hub/errors.py) ----------------------------------------
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
    """hf_raise_for_status: map the hub's X-Error-Code to an exception."""
    try:
        r.raise_for_status()
    except requests.HTTPError as e:
        code = r.headers.get("X-Error-Code")
        msg = f"{r.status_code} {r.reason} for url: {r.url}"
        if code == "EntryNotFound":
            raise EntryNotFoundError(f"{msg} (entry not found)", response=r) from e
        if code == "RevisionNotFound":
            raise RevisionNotFoundError(f"{msg} (revision not found)", response=r) from e
        if code == "RepoNotFound" or r.status_code == 401:
            raise RepositoryNotFoundError(f"{msg} (repository not found)", response=r) from e
        raise HfHubHTTPError(msg, response=r) from e


def _log(msg):
    print(msg, file=sys.stderr, flush=True)


def _human(n):
    for unit in ("", "k", "M", "G"):
        if n < 1000 or unit == "G":
            return f"{n:.1f}{unit}" if unit else f"{n}"
        n /= 1000


def repo_folder_name(repo_id):
    return "models--" + repo_id.replace("/", "--")


def get_hf_file_metadata(url):
    """HEAD the resolve URL: (commit, etag, size, location)."""
    r = _session.head(url, headers={"Accept-Encoding": "identity"},
                      allow_redirects=False, timeout=HF_HUB_ETAG_TIMEOUT)
    _raise_for_status(r)
    etag = r.headers.get("X-Linked-Etag") or r.headers.get("ETag")
    # Normalise like huggingface_hub: drop a weak prefix and the quotes.
    etag = re.sub(r'^W/', "", etag or "").strip('"') or None
    size = r.headers.get("X-Linked-Size") or r.headers.get("Content-Length")
    return (r.headers.get("X-Repo-Commit"), etag, int(size) if size else None,
            r.headers.get("Location") or url)


def _cache_commit_hash(storage, revision, commit):
    """Write refs/<revision> when it changed (the ref a later offline start reads)."""
    if revision == commit:
        return
    ref = os.path.join(storage, "refs", revision)
    os.makedirs(os.path.dirname(ref), exist_ok=True)
    if not os.path.exists(ref) or open(ref).read() != commit:
        with open(ref, "w") as f:
            f.write(commit)


def _create_symlink(src, dst):
    """Relative link, so the cache folder can be moved as a whole."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    rel = os.path.relpath(src, os.path.dirname(dst))
    try:
        os.symlink(rel, dst)
    except FileExistsError:
        pass  # another process linked it meanwhile


def _http_get(url, f, resume, expected_size, filename):
    """Append the body to f from byte `resume` on; resume a broken stream."""
    retries = DOWNLOAD_RETRIES
    last_note = 0.0
    while True:
        headers = {"Accept-Encoding": "identity"}
        if resume:
            headers["Range"] = f"bytes={resume}-"
        try:
            r = _session.get(url, headers=headers, stream=True, timeout=HF_HUB_DOWNLOAD_TIMEOUT)
            _raise_for_status(r)
            for chunk in r.iter_content(chunk_size=DOWNLOAD_CHUNK_SIZE):
                f.write(chunk)
                resume += len(chunk)
                retries = DOWNLOAD_RETRIES  # progress resets the retry budget
                now = time.monotonic()
                if now - last_note > 1.0:
                    _log(f"{filename}: {_human(resume)}/{_human(expected_size or 0)}")
                    last_note = now
            # urllib3 1.26 (Debian 12) does not enforce Content-Length: a
            # connection closed mid-body ends the loop silently. Count it
            # as a broken stream rather than failing the size check below.
            if expected_size is not None and resume < expected_size:
                raise requests.ConnectionError(
                    f"connection closed after {resume} of {expected_size} bytes")
            break
        except (requests.ConnectionError, requests.Timeout,
                requests.exceptions.ChunkedEncodingError) as e:
            if retries <= 0:
                raise
            retries -= 1
            f.flush()
            _log(f"Error while downloading from {url}: {e}\nTrying to resume download...")
            time.sleep(1)
    f.flush()
    if expected_size is not None and f.tell() != expected_size:
        raise OSError(f"Consistency check failed: file should be of size {expected_size} but "
                      f"has size {f.tell()} ({filename}).")
    _log(f"{filename}: 100% {_human(resume)}/{_human(expected_size or resume)}")


def hf_hub_download(repo_id, filename, revision="main", cache_dir=None, local_files_only=False):
    """Return the path of filename in the cache, downloading it if needed."""
    cache_dir = cache_dir or HF_HUB_CACHE
    storage = os.path.join(cache_dir, repo_folder_name(repo_id))
    url = f"{ENDPOINT}/{repo_id}/resolve/{revision}/{filename}"
    rel = filename.replace("/", os.sep)

    if REGEX_COMMIT_HASH.match(revision):
        pointer = os.path.join(storage, "snapshots", revision, rel)
        if os.path.exists(pointer):
            return pointer

    # 1. metadata, or the reason we could not get it
    head_error = None
    commit = etag = size = None
    if local_files_only or HF_HUB_OFFLINE:
        head_error = OfflineModeIsEnabled("Cannot reach the hub: offline mode is enabled "
                                          "(HF_HUB_OFFLINE=1).")
    else:
        try:
            commit, etag, size, url = get_hf_file_metadata(url)
        except EntryNotFoundError as e:
            commit = e.response.headers.get("X-Repo-Commit")
            if commit:
                no_exist = os.path.join(storage, ".no_exist", commit, rel)
                os.makedirs(os.path.dirname(no_exist), exist_ok=True)
                open(no_exist, "a").close()
                _cache_commit_hash(storage, revision, commit)
            raise
        except (RepositoryNotFoundError, RevisionNotFoundError):
            raise
        except (requests.ConnectionError, requests.Timeout, HfHubHTTPError) as e:
            # Unreachable, timed out or 5xx: maybe the cache has it.
            head_error = e

    # 2. no metadata: serve from the cache if the file is there
    if head_error is not None:
        ref = os.path.join(storage, "refs", revision)
        cached = revision if REGEX_COMMIT_HASH.match(revision) else None
        if cached is None and os.path.isfile(ref):
            cached = open(ref).read().strip()
        if cached:
            pointer = os.path.join(storage, "snapshots", cached, rel)
            if os.path.exists(pointer):
                return pointer
        if isinstance(head_error, OfflineModeIsEnabled):
            raise LocalEntryNotFoundError(
                "Cannot find the requested files in the disk cache and outgoing traffic has "
                "been disabled. To enable hf.co look-ups and downloads online, set "
                "'local_files_only' to False.") from head_error
        raise LocalEntryNotFoundError(
            "An error happened while trying to locate the file on the Hub and we cannot find "
            "the requested files in the local cache. Please check your connection and try "
            "again or make sure your Internet connection is on.") from head_error

    if not etag or not commit:
        raise OSError(f"Distant resource does not have an ETag or a commit id: {url}")

    # 3. cache layout, ref and lock
    blob = os.path.join(storage, "blobs", etag)
    pointer = os.path.join(storage, "snapshots", commit, rel)
    os.makedirs(os.path.dirname(blob), exist_ok=True)
    os.makedirs(os.path.dirname(pointer), exist_ok=True)
    _cache_commit_hash(storage, revision, commit)

    # 4. warm: the snapshot link (or at least the blob) is there
    if os.path.exists(pointer):
        return pointer
    if os.path.exists(blob):
        _create_symlink(blob, pointer)
        return pointer

    lock_path = os.path.join(cache_dir, ".locks", repo_folder_name(repo_id), f"{etag}.lock")
    os.makedirs(os.path.dirname(lock_path), exist_ok=True)
    with open(lock_path, "a") as lock:
        # Another process may be downloading the same blob: wait for it.
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            # 5. download to .incomplete (append = resume), then rename and link
            if not os.path.exists(blob):
                incomplete = blob + ".incomplete"
                with open(incomplete, "ab") as f:
                    resume = f.tell()
                    msg = f"Downloading '{filename}' to '{incomplete}'"
                    if resume:
                        msg += f" (resume from {resume}/{size})"
                    # Killed after the last byte, before the rename: nothing
                    # left to fetch (a Range past the end gets 416).
                    if not (size and resume == size):
                        _log(msg)
                        _http_get(url, f, resume, size, filename)
                os.replace(incomplete, blob)
            if not os.path.exists(pointer):
                _create_symlink(blob, pointer)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return pointer


def main(argv):
    if len(argv) != 3 or "/" not in argv[1]:
        print(f"usage: {argv[0]} ORG/NAME PATH   (env: HF_ENDPOINT, HF_HUB_CACHE, ...)",
              file=sys.stderr)
        return 2
    try:
        print(hf_hub_download(argv[1], argv[2]))
    except (OSError, ValueError, requests.RequestException) as e:
        print(f"hfclient: {type(e).__name__}: {e}", file=sys.stderr)
        if e.__cause__ is not None:
            print(f"  caused by {type(e.__cause__).__name__}: {e.__cause__}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
