"""Imported by phases.py before its first phase: its body spends about
0.2 s of CPU, as a heavy package's import does (torch's, transformers'), so
the attribution tests see CPU that is an import's ("import phases_import")
on every run, not only when a sample happens to land in a stdlib import."""
import time

_end = time.monotonic() + 0.2
_x = 0
while time.monotonic() < _end:
    for _i in range(10000):
        _x += _i * _i
