"""What a handler sees of its attempt: identity, fencing number, and the stop signals.

The worker's heartbeat thread flips ``cancel_requested`` and ``lease_lost``; handlers read them
(or block in ``wait_for_cancel``) from their own thread. Events, not plain booleans, so a waiting
handler wakes the moment a heartbeat brings the news.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import MutableMapping
from typing import Any

from .models import Lease

log = logging.getLogger("orbit_sdk.handler")


class TaskContext:
    """Passed to every handler as ``ctx``. Read-only for handlers."""

    def __init__(self, lease: Lease, worker_name: str = "") -> None:
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
        self._cancel = threading.Event()
        self._lost = threading.Event()
        self._stop = threading.Event()  # either of the two: what wait_for_cancel waits on
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
        return self._cancel.is_set()

    @property
    def lease_lost(self) -> bool:
        """The server no longer counts this attempt as current: another attempt may run (or
        have run) the task, and this attempt's report will only be kept as evidence. Stop side
        effects that the fencing ``generation`` does not protect."""
        return self._lost.is_set()

    @property
    def should_stop(self) -> bool:
        return self._stop.is_set()

    def wait_for_cancel(self, timeout: float | None = None) -> bool:
        """Block up to ``timeout`` s until a cancel request arrives or the lease is lost;
        True if one did. Handy as an interruptible sleep. (From async code:
        ``await asyncio.to_thread(ctx.wait_for_cancel, t)``.)"""
        return self._stop.wait(timeout)

    # --- set by the worker ------------------------------------------------------------------

    def _mark_cancel_requested(self) -> None:
        if not self._cancel.is_set():
            self.log.info("cancel requested for task %s", self.task_id)
        self._cancel.set()
        self._stop.set()

    def _mark_lease_lost(self, reason: str | None = None) -> None:
        if not self._lost.is_set():
            self.log.warning("lease lost for task %s: %s", self.task_id, reason or "unknown")
        self._lost.set()
        self._stop.set()

    def _extend(self, lease_expires_at: dt.datetime | None) -> None:
        if lease_expires_at is not None:
            self.lease_expires_at = lease_expires_at

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
