"""The worker's graceful drain: no new grants, let running handlers finish (up to the drain
timeout), then close the session -- whatever is still held lapses and the server's rules take
over (retry if the task is safe to run again, NEEDS_REVIEW if not).

Handlers still running after the timeout are told their lease is lost only once the session is
closed, because only then is it true; until then they may still finish and report.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from .._wire import calls
from .._wire.transport import Call
from ..errors import NotFound
from ..models import Session
from .attempt import AttemptRunner
from .heartbeat import Heartbeater
from .live import LiveAttempt, LiveSet

log = logging.getLogger("orbit_sdk.worker")


@dataclass(frozen=True)
class Drain:
    """One worker's drain. ``given_up`` is true once waiting should end early (a second
    signal); ``abandon`` is set when the drain stops waiting, so report retries end too."""

    name: str
    send: Callable[[Call], httpx.Response]
    runner: AttemptRunner
    live: LiveSet
    abandon: threading.Event
    timeout: float
    given_up: Callable[[], bool]

    def run(self, session: Session | None, leaser: threading.Thread, beats: Heartbeater) -> None:
        self._announce(session)
        remaining = self._wait(leaser)
        self.abandon.set()
        beats.stop()
        self._close(session)
        for attempt in remaining:  # only now is it true; tell handlers to stop side effects
            attempt.ctx._mark_lease_lost("worker shut down before the handler finished")
        log.info("worker %s stopped", self.name)

    def _announce(self, session: Session | None) -> None:
        """Send what waits at once and tell the server to grant this session nothing more."""
        for batcher in (self.runner.starts, self.runner.reports):
            if batcher is not None:
                batcher.flush_now()  # draining: no report waits for company
        if session is not None:
            try:
                self.send(calls.drain_session(session.id))
            except Exception as exc:
                log.warning("worker %s: drain failed: %s", self.name, exc)

    def _wait(self, leaser: threading.Thread) -> list[LiveAttempt]:
        """Wait for held attempts up to the timeout; the ones still held are abandoned."""
        deadline = time.monotonic() + self.timeout
        held = len(self.live)
        if held:
            log.info("worker %s: draining %d attempts", self.name, held)
        self.live.wait_empty(deadline, give_up=self.given_up)
        leaser.join(max(0.0, min(deadline - time.monotonic(), 1.0)))
        remaining = self.live.snapshot()
        for attempt in remaining:
            attempt.abandoned = True
        if remaining:
            log.warning(
                "worker %s: abandoning %d attempts still running after drain; their leases "
                "lapse when the session closes",
                self.name,
                len(remaining),
            )
        return remaining

    def _close(self, session: Session | None) -> None:
        if session is None:
            return
        try:
            self.send(calls.close_session(session.id))
        except NotFound:
            pass
        except Exception as exc:
            log.warning("worker %s: closing session failed: %s", self.name, exc)
