"""Files root writes (docs/security.md): the log, its rotation, the timeline
and `report -o` never follow a link another user planted, never write into
a hard link, another user's file or a device they replace, and tell the
truth when they could not write. Each attack is planted by an unprivileged
user (nobody, through setpriv) in an app directory that user owns, the
normal case of a checkout owned by the service user."""
import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import PY, TTS, free_port

NOBODY = 65534
AS_NOBODY = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]
CHATTY = r'''
import sys, time
for i in range(%d):
    sys.stdout.write("line %%06d %%s\n" %% (i, "x" * 90))
sys.stdout.flush()
'''


@pytest.fixture(autouse=True)
def as_root():
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("these tests plant attacks as another user: CI runs them as root")
        pytest.skip("needs root (to act as root and to plant as nobody)")


class Checkout:
    """An app dir owned by nobody (reachable by nobody: not under pytest's
    0700 tmp), with a root-only victim file elsewhere."""

    def __init__(self):
        self.top = Path(tempfile.mkdtemp(prefix="tts-sec-", dir="/tmp"))
        os.chmod(self.top, 0o755)
        self.dir = self.top / "app"
        self.dir.mkdir()
        (self.dir / "webui.py").write_text(CHATTY % 10)
        self.secret_dir = self.top / "root-only"
        self.secret_dir.mkdir(mode=0o700)
        self.victim = self.secret_dir / "victim"
        self.victim.write_text("precious\n")
        os.chmod(self.victim, 0o600)
        self.ini = self.top / "tts-launch.ini"  # root's, outside the checkout
        self.write_ini()
        os.chown(self.dir, NOBODY, NOBODY)
        os.chown(self.dir / "webui.py", NOBODY, NOBODY)

    def write_ini(self, extra=""):
        self.ini.write_text(
            "[app]\ndir = %s\npython = %s\nport = 0\n"
            "[service]\nuser = nobody\n[trace]\nenabled = false\n%s" % (self.dir, PY, extra))
        os.chmod(self.ini, 0o644)

    def plant(self, *argv):
        """Run argv as nobody in the checkout (the attacker's move)."""
        subprocess.run(AS_NOBODY + list(argv), cwd=self.dir, check=True)

    def run(self, *args, timeout=60):
        return subprocess.run([str(TTS), "run", "-c", str(self.ini), *args],
                              capture_output=True, text=True, timeout=timeout, cwd=self.top)

    def victim_intact(self):
        st = os.lstat(self.victim)
        return (self.victim.read_text() == "precious\n" and st.st_uid == 0
                and stat.S_IMODE(st.st_mode) == 0o600)


@pytest.fixture
def co():
    c = Checkout()
    yield c
    shutil.rmtree(c.top, ignore_errors=True)


def test_log_symlink_planted_by_the_service_user_is_refused(co):
    co.plant("ln", "-s", str(co.victim), "webui.log")
    r = co.run()
    assert r.returncode == 2, r.stderr
    assert "symbolic link owned by uid 65534" in r.stderr and "[log] file" in r.stderr
    assert "started pid" not in r.stderr
    assert co.victim_intact()


def test_log_link_at_a_parent_directory_is_refused(co):
    """O_NOFOLLOW guards the last component only: logs/ planted as a link to
    a root-only directory must not be followed either."""
    co.write_ini("[log]\nfile = logs/webui.log\n")
    co.plant("ln", "-s", str(co.secret_dir), "logs")
    r = co.run()
    assert r.returncode == 2, r.stderr
    assert "'logs' is a symbolic link owned by uid 65534" in r.stderr
    assert sorted(os.listdir(co.secret_dir)) == ["victim"]
    assert co.victim_intact()


def test_hard_link_to_a_root_file_is_refused(co):
    """protected_hardlinks=1 stops nobody from linking a root file: plant it
    as root, as the issue says, in the nobody-owned checkout."""
    os.link(co.victim, co.dir / "webui.log")
    r = co.run()
    assert r.returncode == 2, r.stderr
    assert "has 2 hard links" in r.stderr
    assert co.victim_intact()


def test_log_owned_by_a_stranger_is_refused(co):
    other = co.dir / "webui.log"
    other.write_text("someone else's\n")
    os.chown(other, 4242, 4242)  # neither root, nobody (service) nor the owner
    r = co.run()
    assert r.returncode == 2, r.stderr
    assert "owned by uid 4242" in r.stderr
    assert other.read_text() == "someone else's\n"


def test_log_of_the_service_user_is_the_normal_case(co):
    """A checkout and log owned by the service user: started, logged."""
    (co.dir / "webui.log").write_text("earlier run\n")
    os.chown(co.dir / "webui.log", NOBODY, NOBODY)
    r = co.run()
    assert r.returncode == 0, r.stderr
    text = (co.dir / "webui.log").read_text()
    assert text.startswith("earlier run\n") and "line 000009" in text


def test_rotation_moves_planted_links_and_never_writes_through_them(co):
    """Links planted at the rotated names before the rotation: renames move
    names, never follow them; the victim stays as it was."""
    (co.dir / "webui.py").write_text(CHATTY % 400)
    co.write_ini("[log]\nmax_size = 8K\nbackups = 2\n")
    co.plant("ln", "-s", str(co.victim), "webui.log.1")
    co.plant("ln", "-s", str(co.victim), "webui.log.2")
    r = co.run()
    assert r.returncode == 0, r.stderr
    assert co.victim_intact()
    for name in ("webui.log", "webui.log.1", "webui.log.2"):
        st = os.lstat(co.dir / name)
        assert stat.S_ISREG(st.st_mode) and st.st_size <= 8192, name
    assert "line 000399" in (co.dir / "webui.log").read_text()


def test_timeline_link_is_refused_and_the_summary_says_so(co):
    co.write_ini("timeline = t.json\n")
    co.plant("ln", "-s", str(co.victim), "t.json")
    r = co.run()
    assert r.returncode == 0, r.stderr
    assert "refusing to write through it" in r.stderr
    assert "NOT written" in r.stderr
    assert co.victim_intact()
    assert not [n for n in os.listdir(co.dir) if n.startswith(".t.json.")]


def test_timeline_belongs_to_the_checkout_owner(co):
    co.write_ini("timeline = t.json\n")
    r = co.run()
    assert r.returncode == 0, r.stderr
    st = os.stat(co.dir / "t.json")
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (NOBODY, NOBODY, 0o640)
    json.loads((co.dir / "t.json").read_text())


@pytest.fixture
def timeline(tmp_path):
    """A small real timeline to report on."""
    tl = tmp_path / "t.json"
    subprocess.run([str(TTS), "run", "--no-trace", "--timeline", str(tl), "--set", "app.port=0",
                    "--", "/bin/true"], cwd=tmp_path, capture_output=True, timeout=60, check=True)
    return tl


def test_report_o_through_a_planted_link_is_refused(co, timeline):
    co.plant("ln", "-s", str(co.victim), "report.svg")
    r = subprocess.run([str(TTS), "report", str(timeline), "--format", "svg", "-o",
                        str(co.dir / "report.svg")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "symbolic link owned by uid 65534" in r.stderr
    assert co.victim_intact()
    assert os.path.islink(co.dir / "report.svg")
    assert not [n for n in os.listdir(co.dir) if n.startswith(".report.svg.")]


def test_report_o_writes_into_a_device_instead_of_replacing_it(tmp_path, timeline):
    """-o /dev/null must leave the node in place: tried on a node of our own
    (same major/minor), not the system's."""
    node = tmp_path / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    r = subprocess.run([str(TTS), "report", str(timeline), "--format", "json", "-o", str(node)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    st = os.lstat(node)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".null.")]


def test_report_o_mode_is_set_on_the_descriptor(tmp_path, timeline):
    out = tmp_path / "r.prom"
    old = os.umask(0o077)
    try:
        r = subprocess.run([str(TTS), "report", str(timeline), "--format", "prom", "-o",
                            str(out)], capture_output=True, text=True, timeout=60)
    finally:
        os.umask(old)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o644
    assert "tts_launch" in out.read_text() or out.stat().st_size > 0


def test_report_o_refuses_a_directory(tmp_path, timeline):
    (tmp_path / "d").mkdir()
    r = subprocess.run([str(TTS), "report", str(timeline), "-o", str(tmp_path / "d")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "is a directory" in r.stderr, r.stderr


@pytest.fixture
def full_disk():
    """A 256 KiB tmpfs: a full disk for the log and the timeline."""
    top = Path(tempfile.mkdtemp(prefix="tts-full-", dir="/tmp"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(top)], check=True)
    yield top
    subprocess.run(["umount", "-l", str(top)])
    shutil.rmtree(top, ignore_errors=True)


def test_full_disk_warns_once_counts_lost_bytes_and_tells_the_truth(full_disk):
    app = full_disk / "app"
    app.mkdir()
    (app / "webui.py").write_text(CHATTY % 20000)  # ~2 MiB of output into 256 KiB
    ini = full_disk / "tts-launch.ini"
    ini.write_text("[app]\ndir = %s\npython = %s\nport = 0\n[log]\nmax_size = 0\n"
                   "[trace]\nenabled = false\ntimeline = t.json\n" % (app, PY))
    r = subprocess.run([str(TTS), "run", "-c", str(ini)], capture_output=True, text=True,
                       timeout=120, cwd=full_disk)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("cannot write the log") == 1, r.stderr
    assert "No space left on device" in r.stderr
    lost = [l for l in r.stderr.splitlines() if "bytes of output were not written" in l]
    assert len(lost) == 1
    n = int(lost[0].split("warning: ")[1].split()[0])
    written = (app / "webui.log").stat().st_size
    assert n > 0 and written + n >= 20000 * 102
    # the timeline could not be written either, and the summary says so
    assert "NOT written" in r.stderr
    assert not (app / "t.json").exists()
    assert not [x for x in os.listdir(app) if x.startswith(".t.json.")]
