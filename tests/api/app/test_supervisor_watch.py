"""An HTTP process of `orbit server --workers N` stops when its supervisor is gone — including
one that loaded the app only after the supervisor died (its parent is then already init, so
getppid() cannot name the supervisor)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from orbit.api.process_app import SUPERVISOR_ENV

WATCH = (
    "from orbit.api.process_app import watch_supervisor; import time; watch_supervisor(); "
    "time.sleep(30)"
)


def test_a_process_whose_supervisor_died_before_it_started_watching_stops() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that is nobody's parent any more
    process = subprocess.run(
        [sys.executable, "-c", WATCH],
        env={**os.environ, SUPERVISOR_ENV: str(gone.pid)},
        timeout=20,
        check=False,
    )
    assert process.returncode == -signal.SIGTERM
