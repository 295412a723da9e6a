"""conf/tts-launch.service is a valid systemd unit (systemd-analyze verify),
with ExecStart pointed at the built binary."""
import subprocess

from conftest import ROOT, TTS


def test_unit_verifies(tmp_path):
    unit = (ROOT / "conf" / "tts-launch.service").read_text()
    assert "ExecStart=/usr/local/bin/tts-launch run" in unit
    ini = tmp_path / "tts-launch.ini"
    ini.write_text("[app]\ndir = %s\n" % tmp_path)
    local = tmp_path / "tts-launch.service"
    local.write_text(unit.replace("/usr/local/bin/tts-launch", str(TTS))
                     .replace("/etc/tts-launch.ini", str(ini)))
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(local)], capture_output=True, text=True)
    # verify prints problems in the unit; documentation links may be absent
    # (--man=no: the man page it names is installed by make install, not here)
    problems = [l for l in (r.stdout + r.stderr).splitlines()
                if "tts-launch.service" in l and "Documentation" not in l]
    assert r.returncode == 0 and not problems, r.stdout + r.stderr
    # the exit codes that restarting cannot fix are not restarted
    assert "RestartPreventExitStatus=2 3" in unit
