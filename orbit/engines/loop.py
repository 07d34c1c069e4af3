"""A background engine loop: runs one pass every interval in its own thread until stopped.

Passes are safe to run in every server replica at once (all coordination is in MySQL); an error
is logged and counted, and the loop carries on. :meth:`EngineLoop.wake` cuts the wait short when
this process knows there is work (a workflow task's outcome landed): the interval is only the
poll for what other replicas and processes wrote. A loop given ``next_wait`` also waits less when
its pass knows when the next work falls due (the scheduler's next instant, the next Weave
timer), so that work is picked up at its moment rather than up to an interval later.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("orbit.engines")


class EngineLoop:
    def __init__(
        self,
        name: str,
        run_pass: Callable[[], Any],
        interval: float,
        on_error: Callable[[str], None] | None = None,
        *,
        next_wait: Callable[[Any], float | None] | None = None,
    ) -> None:
        """``next_wait`` maps a pass's result to the seconds until its next work is due (None:
        not known); the loop then waits that long if it is shorter than ``interval``."""
        self.name, self.run_pass, self.interval = name, run_pass, interval
        self.on_error, self.next_wait = on_error, next_wait
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
            wait = self.interval
            try:
                wait = self._wait_after(self.run_pass())
            except Exception:
                log.exception("engine loop pass failed", extra={"loop": self.name})
                if self.on_error is not None:
                    self.on_error(self.name)
            self._wake.wait(wait)

    def _wait_after(self, result: Any) -> float:
        due_in = None if self.next_wait is None else self.next_wait(result)
        return self.interval if due_in is None else max(0.0, min(self.interval, due_in))
