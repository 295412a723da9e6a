#!/usr/bin/python3
"""modelscope 1.27.0's download, as IndexTTS2 uses it (model_file_download and
snapshot_download with local_dir), for the simulator.

modelscope/hub at v1.27.0 (the golden file tests/sim-golden/modelscope.golden
cites each operation):
  - file_download.py:157-300 _repo_file_download: revisions, repo/files, then
    the file; file_download.py:345 the temp dir LOCAL/._____temp;
    file_download.py:488-585 http_get_model_file: LOCAL/._____temp/NAME,
    appended with Range: bytes=<have>-<size-1>, 60 s timeout (constants.py:24),
    5 retries (constants.py:23, urllib3 Retry backoff_factor=1), any error retried;
  - api.py: HubApi's requests.Session for the API calls (the file GET is a
    plain requests.get: a connection of its own);
  - utils/caching.py:316-335 put_file: moved to LOCAL/NAME; .msc (pickle, via
    mkstemp + move) and .mdl keep the cache index.
Endpoint: https://www.modelscope.cn (MODELSCOPE_DOMAIN overrides the host).

By hand: msclient.py MODEL_ID FILE LOCAL_DIR | msclient.py --snapshot MODEL_ID LOCAL_DIR
"""
import hashlib
import os
import pickle
import shutil
import sys
import tempfile
import time
import urllib.parse
import uuid

import requests

from simtime import scaled

TEMPORARY_FOLDER_NAME = "._____temp"
API_FILE_DOWNLOAD_RETRY_TIMES = 5
API_FILE_DOWNLOAD_TIMEOUT = scaled(60)
API_FILE_DOWNLOAD_CHUNK_SIZE = 1024 * 1024
ENDPOINT = "https://" + (os.environ.get("MODELSCOPE_DOMAIN") or "www.modelscope.cn")


class NotExistError(Exception):
    pass


def _log(msg):
    print(msg, file=sys.stderr, flush=True)


_session = requests.Session()  # HubApi's session: the API calls share a connection


def _api_get(url):
    r = _session.get(url, timeout=API_FILE_DOWNLOAD_TIMEOUT,
                     headers={"user-agent": "modelscope/1.27.0-sim"})
    r.raise_for_status()
    body = r.json()
    if body.get("Code") != 200:
        raise NotExistError(body.get("Message", url))
    return body["Data"]


class _Cache:
    """ModelFileSystemCache rooted at local_dir: .mdl (model id), .msc (index)."""

    def __init__(self, root, model_id):
        self.root = root
        self.files = []
        keys = os.path.join(root, ".msc")
        if os.path.exists(keys):
            with open(keys, "rb") as f:
                self.files = pickle.load(f)
        meta = os.path.join(root, ".mdl")
        if not os.path.exists(meta):
            with open(meta, "wb") as f:
                pickle.dump({"id": model_id}, f)

    def exists(self, info):
        key = {"Path": info["Path"], "Revision": info["Revision"]}
        return key in self.files and os.path.exists(os.path.join(self.root, info["Path"]))

    def put_file(self, info, location):
        dst = os.path.join(self.root, info["Path"])
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.move(location, dst)
        self.files.append({"Path": info["Path"], "Revision": info["Revision"]})
        fd, fn = tempfile.mkstemp()
        with os.fdopen(fd, "wb") as f:
            pickle.dump(self.files, f)
        shutil.move(fn, os.path.join(self.root, ".msc"))
        return dst


def http_get_model_file(url, local_dir, file_name, file_size):
    """Append to local_dir/file_name from what is there (Range), retrying any error."""
    headers = {"X-Request-ID": uuid.uuid4().hex}
    temp = os.path.join(local_dir, file_name)
    os.makedirs(os.path.dirname(temp), exist_ok=True)
    errors = 0
    while True:
        try:
            partial = 0
            if os.path.exists(temp):
                with open(temp, "rb") as f:
                    partial = f.seek(0, os.SEEK_END)
            if partial >= file_size:
                break
            headers["Range"] = f"bytes={partial}-{file_size - 1}"
            with open(temp, "ab+") as f:
                r = requests.get(url, stream=True, headers=headers,
                                 timeout=API_FILE_DOWNLOAD_TIMEOUT)
                r.raise_for_status()
                for chunk in r.iter_content(chunk_size=API_FILE_DOWNLOAD_CHUNK_SIZE):
                    if chunk:
                        f.write(chunk)
            if os.path.getsize(temp) < file_size:
                raise requests.ConnectionError(f"short read: {os.path.getsize(temp)}/{file_size}")
            break
        except Exception as e:  # modelscope retries whatever happened
            errors += 1
            if errors > API_FILE_DOWNLOAD_RETRY_TIMES:
                raise
            wait = scaled(0 if errors == 1 else 1 * 2 ** (errors - 1))
            _log(f"Downloading: {url} failed, reason: {e} will retry")
            time.sleep(wait)


def _files(model_id, revision):
    _api_get(f"{ENDPOINT}/api/v1/models/{model_id}/revisions")
    data = _api_get(f"{ENDPOINT}/api/v1/models/{model_id}/repo/files?Revision="
                    f"{revision}&Recursive=True")
    return data["Files"]


def _download(model_id, info, revision, local_dir, cache, temp_dir):
    if cache.exists(info):
        return os.path.join(local_dir, info["Path"])
    url = (f"{ENDPOINT}/api/v1/models/{model_id}/repo?Revision="
           f"{urllib.parse.quote_plus(revision)}&FilePath={urllib.parse.quote_plus(info['Path'])}")
    http_get_model_file(url, temp_dir, info["Path"], info["Size"])
    temp = os.path.join(temp_dir, info["Path"])
    h = hashlib.sha256()
    with open(temp, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    if info.get("Sha256") and h.hexdigest() != info["Sha256"]:
        os.unlink(temp)
        raise OSError(f"File {temp} integrity check failed, expected sha256 signature is "
                      f"{info['Sha256']}, actual is {h.hexdigest()}")
    return cache.put_file(info, temp)


def model_file_download(model_id, file_path, local_dir, revision="master"):
    temp_dir = os.path.join(local_dir, TEMPORARY_FOLDER_NAME)
    os.makedirs(temp_dir, exist_ok=True)
    cache = _Cache(local_dir, model_id)
    for info in _files(model_id, revision):
        if info["Type"] != "tree" and info["Path"] == file_path:
            return _download(model_id, info, revision, local_dir, cache, temp_dir)
    raise NotExistError(f"The file path: {file_path} not exist in: {model_id}")


def snapshot_download(model_id, local_dir, revision="master"):
    temp_dir = os.path.join(local_dir, TEMPORARY_FOLDER_NAME)
    os.makedirs(temp_dir, exist_ok=True)
    cache = _Cache(local_dir, model_id)
    for info in _files(model_id, revision):
        if info["Type"] != "tree":
            _download(model_id, info, revision, local_dir, cache, temp_dir)
    return local_dir


def main(argv):
    try:
        if argv[1:2] == ["--snapshot"] and len(argv) == 4:
            print(snapshot_download(argv[2], argv[3]))
        elif len(argv) == 4:
            print(model_file_download(argv[1], argv[2], argv[3]))
        else:
            print(f"usage: {argv[0]} MODEL_ID FILE LOCAL_DIR | --snapshot MODEL_ID LOCAL_DIR",
                  file=sys.stderr)
            return 2
    except (OSError, NotExistError, requests.RequestException) as e:
        print(f"msclient: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
