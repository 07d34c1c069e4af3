"""/metrics when one pod runs several server processes (`orbit server --workers N`).

A scrape reaches one process of the pod, chosen by the kernel, so each process serving only its
own registry would report a random fraction of the pod's counters. Orbit uses
prometheus-client's multiprocess mode instead: every process (the HTTP processes and the
supervising process that runs the engine loops) writes its counters and histograms to
memory-mapped files in one directory (``PROMETHEUS_MULTIPROC_DIR``), and whichever process
answers the scrape sums them all — the pod reports one consistent set, exactly as a single
process would. The directory is emptied when the server starts (stale files of an earlier run
would be added in); files of a process that died stay, which is what counters need (their counts
happened). Orbit has no prometheus ``Gauge`` objects: its gauges come from MySQL and each HTTP
process serves its own gauge-loop snapshot (the same authoritative numbers in every process), so
no ``multiprocess_mode`` or ``mark_process_dead`` bookkeeping is needed.

The mode is chosen when prometheus_client is first imported, so the directory must be set in the
environment before that (orbit/cli/processes/server_processes.py does it first thing).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess() -> bool:
    """Whether this process counts into a directory shared with its sibling processes."""
    return bool(os.environ.get(ENV))


def prepare_directory() -> tuple[Path, bool]:
    """The directory of the pod's metric files, emptied, exported in ``PROMETHEUS_MULTIPROC_DIR``
    for this process and the ones it starts; ``(path, created)`` — created: a temporary one this
    process should remove when it exits (when the variable was not already set)."""
    given = os.environ.get(ENV)
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink()
        return path, False
    path = Path(tempfile.mkdtemp(prefix="orbit-metrics-"))
    os.environ[ENV] = str(path)
    return path, True


def remove_directory(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
