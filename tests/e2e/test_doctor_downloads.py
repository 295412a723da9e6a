"""doctor's downloads section (issue 14): what the clients read from the
environment (HF_HUB_DISABLE_XET, USE_MODELSCOPE), each cache's file system
(tmpfs/overlay: WARN) and the free space where the known IndexTTS2 model
files still missing would go. Only WARN/INFO lines: nothing here fails the
doctor."""
import os
import subprocess
from pathlib import Path

from conftest import TTS


def doctor(tmp_path, env_lines, files=()):
    app = tmp_path / "app"
    (app / "checkpoints").mkdir(parents=True, exist_ok=True)
    (app / "webui.py").write_text("")
    for f in files:
        p = app / "checkpoints" / f
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
    ini = tmp_path / "tts-launch.ini"
    ini.write_text("[app]\ndir = %s\npython = /usr/bin/python3\n[env]\n%s\n" % (app, env_lines))
    r = subprocess.run([str(TTS), "doctor", "-c", str(ini)], capture_output=True, text=True,
                       timeout=120)
    lines = {}
    for line in r.stdout.splitlines()[1:-1]:
        status, rest = line[:4].strip(), line[6:]
        what, _, msg = rest.partition("  ")
        lines[what.strip()] = (status, msg.strip())
    return lines, app


def test_doctor_shows_the_download_settings_and_caches_on_tmpfs(tmp_path):
    shm = Path("/dev/shm") / ("tts-doctor-%d" % os.getpid())
    lines, app = doctor(tmp_path, "HF_HOME = %s\nUSE_MODELSCOPE = true" % shm)
    assert lines["USE_MODELSCOPE"] == ("INFO", "true")
    assert lines["HF_HUB_DISABLE_XET"][0] == "INFO" and "Xet" in lines["HF_HUB_DISABLE_XET"][1]
    if os.path.ismount("/dev/shm"):
        st, msg = lines["cache HF_HOME/hub"]
        assert st == "WARN" and str(shm / "hub") in msg and "tmpfs" in msg
        st, msg = lines["xet chunk-cache"]
        assert st == "WARN" and str(shm / "xet") in msg
    st, msg = lines["free space"]
    assert str(app / "checkpoints") in msg and "need about 7.3 GiB" in msg


def test_doctor_without_xet_and_with_every_model_file(tmp_path):
    files = ("gpt.pth", "s2mel.pth", "hf_cache/w2v-bert-2.0/model.safetensors",
             "hf_cache/semantic_codec/model.safetensors",
             "hf_cache/semantic_codec_model.safetensors", "hf_cache/campplus_cn_common.bin",
             "hf_cache/bigvgan/bigvgan_generator.pt")
    lines, app = doctor(tmp_path, "HF_HOME = %s\nHF_HUB_DISABLE_XET = 1" % (tmp_path / "h"),
                        files)
    assert lines["HF_HUB_DISABLE_XET"] == ("INFO", "1")
    assert "xet chunk-cache" not in lines  # plain HTTP: no chunk cache
    assert lines["cache HF_HOME/hub"][0] == "OK"
    assert lines["model files"][0] == "OK" and str(app / "checkpoints") in lines["model files"][1]
