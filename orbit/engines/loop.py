"""A background engine loop: runs one pass every interval in its own thread until stopped.

Passes are safe to run in every server replica at once (all coordination is in MySQL); an error
is logged and counted, and the loop carries on. :meth:`EngineLoop.wake` cuts the wait short when
this process knows there is work (a workflow task's outcome landed): the interval is only the
poll for what other replicas and processes wrote.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("orbit.engines")


class EngineLoop:
    def __init__(
        self,
        name: str,
        run_pass: Callable[[], object],
        interval: float,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.name, self.run_pass, self.interval = name, run_pass, interval
        self.on_error = on_error
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"orbit-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """Run the next pass now (or right after the one running). Thread-safe and cheap."""
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        log.info("engine loop started", extra={"loop": self.name, "interval": self.interval})
        while not self._stop.is_set():
            self._wake.clear()  # what lands from here on is for the pass below or the next
            try:
                self.run_pass()
            except Exception:
                log.exception("engine loop pass failed", extra={"loop": self.name})
                if self.on_error is not None:
                    self.on_error(self.name)
            self._wake.wait(self.interval)
