"""The simulator's time-scale knob: SIM_TIME_SCALE (default 1 = the real values).

Every timeout and back-off the 2026 clients have by default (the 3 s reachability
probes, huggingface_hub's 10 s, ModelScope's 60 s, Xet's 3 s - 6 min back-off)
is given in real seconds and passed through scaled(); tests set e.g.
SIM_TIME_SCALE=0.1. Values a user sets explicitly (HF_HUB_DOWNLOAD_TIMEOUT=5)
are taken as they are, like the real clients do. Polling intervals that are
part of a pattern (filelock's 50 ms) are not scaled.
"""
import os


def _scale():
    try:
        s = float(os.environ.get("SIM_TIME_SCALE") or 1)
    except ValueError:
        raise SystemExit(f"SIM_TIME_SCALE={os.environ['SIM_TIME_SCALE']!r}: not a number "
                         "(use e.g. 0.1 to run every default timeout 10 times faster)")
    if s <= 0:
        raise SystemExit(f"SIM_TIME_SCALE={s}: must be > 0")
    return s


SCALE = _scale()


def scaled(seconds):
    """A default duration of the real client, in this run's time."""
    return seconds * SCALE
