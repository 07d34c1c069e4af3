"""What a handler sees of its attempt: identity, fencing number, and the stop signals.

The worker's heartbeat thread flips ``cancel_requested`` and ``lease_lost``; handlers read them
(or block in ``wait_for_cancel``) from their own thread. Each flag is set before the one event
both share, so a waiting handler wakes the moment a heartbeat brings either news (one event per
attempt, not three: a worker creates a context for every task it runs). The other way round,
``progress`` leaves the handler's latest word for the next heartbeat to carry.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import threading
import time
from collections.abc import Mapping, MutableMapping
from typing import Any

from ._lease_deadline import LOCAL_EXPIRY_REASON, LeaseDeadline
from .errors import LeaseLost
from .models import Lease

log = logging.getLogger("orbit_sdk.handler")

#: The server's bounds for progress (it refuses more, and renews the lease all the same).
PROGRESS_MESSAGE_MAX = 500
PROGRESS_DETAILS_MAX_BYTES = 4096


class TaskContext:
    """Passed to every handler as ``ctx``. Read-only for handlers."""

    def __init__(
        self, lease: Lease, worker_name: str = "", *, granted_at: float | None = None
    ) -> None:
        self.task_id = lease.task_id
        self.attempt_id = lease.attempt_id
        #: Fencing number: strictly increases with each attempt of a task. Pass it to downstream
        #: systems that can reject writes from an older generation.
        self.generation = lease.generation
        #: The restore epoch the attempt was granted under (see ``fencing_token``).
        self.epoch = lease.epoch
        self.namespace = lease.namespace
        self.queue = lease.queue
        self.handler = lease.handler
        self.safety = lease.safety
        self.deadline_at: dt.datetime | None = lease.deadline_at
        self.lease_expires_at: dt.datetime | None = lease.lease_expires_at
        self.worker_name = worker_name
        self._cancelled = False
        self._lost = False
        self._stop = threading.Event()  # set after either flag: what wait_for_cancel waits on
        #: The lease's end on this process's monotonic clock (``_lease_deadline``); a grant is
        #: measured from ``granted_at`` (``LeaseBatch.measured_from``; default: now), starts
        #: and heartbeats from when they were sent.
        self._deadline = LeaseDeadline()
        measured_from = time.monotonic() if granted_at is None else granted_at
        self._deadline.update(measured_from, lease.lease_remaining_seconds)
        self._expired_locally = False
        self._progress_lock = threading.Lock()
        self._progress: dict[str, Any] | None = None
        self._progress_version = 0  # bumped by each progress() call
        self._progress_sent = 0  # the version a heartbeat answer confirmed
        #: Adds the task and attempt ids to every record a handler logs through it.
        self.log = _TaskLogger(
            log, {"orbit_task_id": self.task_id, "orbit_attempt_id": self.attempt_id}
        )

    def __repr__(self) -> str:
        return (
            f"TaskContext(task_id={self.task_id!r}, attempt_id={self.attempt_id!r}, "
            f"generation={self.generation}, handler={self.handler!r})"
        )

    @property
    def fencing_token(self) -> tuple[int, int]:
        """``(epoch, generation)``: compare it as a pair (tuples compare that way). A restore
        of Orbit's database from a backup repeats generations; the restore fence bumps the
        epoch, so this token keeps increasing where the generation alone would not. Downstream
        systems that fence writers should store and compare the pair, keyed by ``task_id``."""
        return (self.epoch, self.generation)

    @property
    def cancel_requested(self) -> bool:
        """Someone asked to cancel this task: stop soon and raise ``orbit_sdk.Cancelled``."""
        return self._cancelled

    @property
    def lease_lost(self) -> bool:
        """The server no longer counts this attempt as current, or its lease's deadline passed
        here without a renewal (the process was paused, or the server unreachable): another
        attempt may run (or have run) the task. Stop side effects that the fencing
        ``generation`` does not protect."""
        if not self._lost and self._deadline.passed():
            self._expired_locally = True
            self._mark_lease_lost(LOCAL_EXPIRY_REASON)
        return self._lost

    @property
    def lease_seconds_left(self) -> float | None:
        """Seconds until the lease ends unless renewed, on this process's clock (None: the
        server did not say)."""
        return self._deadline.seconds_left()

    def check(self) -> None:
        """Call right before each side effect: raises ``LeaseLost`` once the lease is lost or
        its deadline passed here. Let it propagate: nothing is reported for this attempt and
        the server's lease rules decide (a safe task runs again, an unsafe one goes to review).
        Pass ``generation`` along with the side effect so the downstream system can refuse a
        writer that was paused between this check and its write."""
        if self.lease_lost:
            raise LeaseLost.from_detail(
                f"attempt {self.attempt_id} (generation {self.generation}) no longer holds its "
                "lease; stop before the next side effect",
                title="Lease lost",
            )

    def progress(
        self, value: float | str | None = None, details: Mapping[str, Any] | None = None
    ) -> None:
        """Say how far the handler is: a fraction done (``0.4``) or a message (``"uploading"``),
        with optional ``details`` (a JSON object of up to 4 KiB, e.g. ``{"rows": 400}``).

        It is sent with the worker's next heartbeat, never as a request of its own, so call it
        as often as you like: only the latest is sent and kept (on the attempt, shown by
        ``orbit task get`` and ``task watch`` and in the task's ``progress``). Raises
        ValueError for a fraction outside 0..1, a message over 500 characters, or details that
        are not a JSON object of finite numbers within the size."""
        fraction, message = (None, value) if isinstance(value, str) else (value, None)
        if fraction is not None and (
            isinstance(fraction, bool)
            or not isinstance(fraction, int | float)
            or not (math.isfinite(fraction) and 0 <= fraction <= 1)
        ):
            raise ValueError(f"progress: the fraction must be a number from 0 to 1, not {value!r}")
        if message is not None and len(message) > PROGRESS_MESSAGE_MAX:
            raise ValueError(f"progress: the message is longer than {PROGRESS_MESSAGE_MAX} chars")
        payload: dict[str, Any] = {"fraction": fraction, "message": message}
        if details is not None:
            if not isinstance(details, Mapping):
                raise ValueError("progress: details must be a mapping (a JSON object)")
            try:
                size = len(json.dumps(dict(details), allow_nan=False).encode())
            except (TypeError, ValueError) as exc:
                raise ValueError(f"progress: details are not JSON: {exc}") from exc
            if size > PROGRESS_DETAILS_MAX_BYTES:
                raise ValueError(
                    f"progress: details take {size} bytes as JSON, more than "
                    f"{PROGRESS_DETAILS_MAX_BYTES}"
                )
            payload["details"] = dict(details)
        with self._progress_lock:
            self._progress = payload
            self._progress_version += 1

    @property
    def should_stop(self) -> bool:
        return self._stop.is_set()

    def wait_for_cancel(self, timeout: float | None = None) -> bool:
        """Block up to ``timeout`` s until a cancel request arrives or the lease is lost;
        True if one did. Handy as an interruptible sleep. (From async code:
        ``await asyncio.to_thread(ctx.wait_for_cancel, t)``.)"""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.lease_lost or self._stop.is_set():
                return True
            waits = [self._deadline.seconds_left(), None if end is None else end - time.monotonic()]
            bounded = [w for w in waits if w is not None]
            wait = max(min(bounded), 0.0) if bounded else None
            if self._stop.wait(wait):
                return True
            if end is not None and time.monotonic() >= end:
                return bool(self.lease_lost)

    # --- set by the worker ------------------------------------------------------------------

    def _mark_cancel_requested(self) -> None:
        if not self._cancelled:
            self.log.info("cancel requested for task %s", self.task_id)
        self._cancelled = True
        self._stop.set()

    def _mark_lease_lost(self, reason: str | None = None) -> None:
        if not self._lost:
            self.log.warning("lease lost for task %s: %s", self.task_id, reason or "unknown")
        self._lost = True
        self._stop.set()

    def _extend(
        self,
        lease_expires_at: dt.datetime | None,
        remaining_seconds: float | None = None,
        sent_at: float | None = None,
    ) -> None:
        """A server renewed the lease; ``sent_at``: monotonic time its request was sent."""
        if self._lost:
            return  # lost is final: a handler told to stop is not told to go on
        if lease_expires_at is not None:
            self.lease_expires_at = lease_expires_at
        if sent_at is not None:
            self._deadline.update(sent_at, remaining_seconds)

    def _progress_to_send(self) -> tuple[int, dict[str, Any]] | None:
        """The latest progress no heartbeat answer has confirmed yet, with its version."""
        with self._progress_lock:
            if self._progress is None or self._progress_version == self._progress_sent:
                return None
            return self._progress_version, self._progress

    def _progress_delivered(self, version: int, refused: str | None) -> None:
        """A heartbeat answer covered ``version``: kept, or refused (said once, in the log)."""
        with self._progress_lock:
            self._progress_sent = max(self._progress_sent, version)
        if refused:
            self.log.warning("progress of task %s not kept: %s", self.task_id, refused)

    def _outlived_lease(self) -> bool:
        """The handler is returning after its lease's local deadline: its report would claim
        a lease this worker could not show it held, so it is not sent as valid."""
        return self._expired_locally or self._deadline.passed()

    def _as_log_extra(self) -> dict[str, Any]:
        return {
            "orbit_task_id": self.task_id,
            "orbit_attempt_id": self.attempt_id,
            "orbit_handler": self.handler,
            "orbit_generation": self.generation,
        }


class _TaskLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Adds the task and attempt ids and keeps the caller's own ``extra=`` fields too."""

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs
