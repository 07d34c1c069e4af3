"""The worker's heartbeat thread: one batched call renews every held lease and the session.

Batched because a worker with many slots would otherwise send one request per attempt per
interval; and the session rides along so a busy worker never needs a separate renewal call, as
does each handler's latest progress (``ctx.progress``), so reporting it costs no request.
Each beat gets a retry budget shorter than the interval, and no try waits longer than the
interval for its answer, so a slow server delays the next beat instead of stacking them up or
holding the thread while the leases it should renew lapse.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

import httpx

from .._wire import calls
from .._wire.transport import Call, RetryPolicy
from ..errors import Conflict, Forbidden, NotFound, Unauthorized
from ..models import HeartbeatResponse, Session
from .live import LiveSet

log = logging.getLogger("orbit_sdk.heartbeat")

#: The server accepts at most this many items per heartbeat.
MAX_ITEMS = 500
LIVE_SESSION_STATES = ("ACTIVE", "DRAINING")


class BeatingWorker(Protocol):
    """What the heartbeat needs of the worker that starts it (``worker.Worker`` is one), named
    here so that this module does not import the worker module back."""

    name: str

    @property
    def session(self) -> Session | None: ...

    @property
    def live(self) -> LiveSet: ...

    def send(self, call: Call) -> httpx.Response: ...

    def session_ended(self, state: str) -> None: ...

    def effective_heartbeat_interval(self) -> float: ...


class Heartbeater:
    def __init__(self, worker: BeatingWorker) -> None:
        self.worker = worker
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"orbit-heartbeat-{worker.name}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.worker.effective_heartbeat_interval()):
            try:
                self.beat()
            except Exception:
                log.exception("worker %s: heartbeat failed unexpectedly", self.worker.name)

    def beat(self) -> None:
        """Renew the session and every held lease; pass the per-attempt answers to handlers."""
        worker = self.worker
        session = worker.session
        session_id = session.id if session is not None else None
        held = worker.live.snapshot()
        pairs = [(a.lease.attempt_id, a.lease.token) for a in held]
        news = {a.lease.attempt_id: n for a in held if (n := a.ctx._progress_to_send())}
        chunks = [pairs[i : i + MAX_ITEMS] for i in range(0, len(pairs), MAX_ITEMS)] or [[]]
        interval = worker.effective_heartbeat_interval()
        retry = RetryPolicy(max_attempts=3, max_backoff=1.0, max_elapsed=max(interval / 2, 1.0))
        budget = max(interval, 1.0)
        for index, chunk in enumerate(chunks):
            progress = {a: news[a][1] for a, _ in chunk if a in news}
            call = calls.heartbeat(
                session_id if index == 0 else None, chunk, retry, budget, progress
            )
            sent_at = time.monotonic()
            try:
                answer = HeartbeatResponse.model_validate(worker.send(call).json())
            except (Conflict, NotFound) as exc:
                if call.json.get("session_id") is None:
                    log.warning("worker %s: heartbeat refused: %s", worker.name, exc)
                    return
                # The session is no longer accepted. Its leases lapsed with it; beat once more
                # without it so each handler hears that from the per-item answers.
                log.warning("worker %s: session refused on heartbeat: %s", worker.name, exc)
                worker.session_ended("UNKNOWN")
                session_id = None
                call = calls.heartbeat(None, chunk, retry, budget, progress)
                try:
                    answer = HeartbeatResponse.model_validate(worker.send(call).json())
                except Exception as again:
                    log.warning("worker %s: heartbeat failed: %s", worker.name, again)
                    return
            except (Unauthorized, Forbidden) as exc:
                log.error("worker %s: heartbeat not allowed: %s", worker.name, exc)
                return
            except Exception as exc:
                log.warning("worker %s: heartbeat failed: %s", worker.name, exc)
                return
            worker.live.apply_heartbeat(answer.results, sent_at, {a: news[a][0] for a in progress})
            if answer.session is not None and answer.session.state not in LIVE_SESSION_STATES:
                worker.session_ended(answer.session.state)
