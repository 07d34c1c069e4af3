"""The worker's bookkeeping of attempts it holds, shared by the lease, attempt and heartbeat
threads, plus the small interruptible backoff the worker's outer loops use."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..context import TaskContext
from ..models import HeartbeatResult, HeartbeatStatus, Lease


@dataclass
class LiveAttempt:
    lease: Lease
    ctx: TaskContext
    started: bool = False
    #: Set at shutdown when the drain timed out: the worker no longer reports for it.
    abandoned: bool = False
    #: The handler returned and its outcome is being reported: the report's answer decides.
    reporting: bool = False
    #: Seconds the handler ran (set when it returned), for the attempt's one outcome record.
    ran_seconds: float | None = None
    received_at: float = field(default_factory=time.monotonic)


class LiveSet:
    """Attempts this worker holds, from grant until the server has a definitive report.

    They stay here while the report is being retried so heartbeats keep their leases alive:
    an attempt whose result we already know must not lapse into a retry or a review.

    A slot is an attempt whose handler may still run (granted, starting or running). One whose
    outcome is being reported holds no slot — its handler is done — so the worker leases the
    next task while the report is on its way instead of a round trip later (with short
    tasks the slot otherwise idles through the report's call and the next lease's). At
    most ``capacity`` such reports wait at once: when the server cannot take reports, leasing
    stops rather than piling up outcomes.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()  # RLock-based: safe to re-enter
        self._items: dict[str, LiveAttempt] = {}

    def add(self, attempt: LiveAttempt) -> None:
        with self._cond:
            self._items[attempt.lease.attempt_id] = attempt

    def remove(self, attempt_id: str) -> None:
        with self._cond:
            self._items.pop(attempt_id, None)
            self._cond.notify_all()

    def mark_reporting(self, attempt: LiveAttempt) -> None:
        """The handler returned and its outcome is being reported: its slot is free."""
        with self._cond:
            attempt.reporting = True
            self._cond.notify_all()

    def free(self, capacity: int) -> int:
        """Slots free for new grants (see the class): ``capacity`` less the attempts whose
        handler may still run, and no more than the room left for reports in flight."""
        with self._cond:
            running = sum(1 for a in self._items.values() if not a.reporting)
            return max(min(capacity - running, 2 * capacity - len(self._items)), 0)

    def snapshot(self) -> list[LiveAttempt]:
        with self._cond:
            return list(self._items.values())

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    def notify(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def wait_for_free(
        self,
        capacity: int,
        done: Callable[[], bool],
        poll: float = 0.5,
        *,
        want: int = 1,
        linger: float = 0.0,
    ) -> int:
        """Block until a slot is free (:meth:`free`, or ``done()``); how many are. Then, while
        fewer than ``want`` are free, wait up to ``linger`` seconds more for them: under load
        slots free one by one, and a lease request per slot costs a claim transaction each.
        With nothing held it returns at once (an idle worker asks now)."""
        with self._cond:
            while self.free(capacity) == 0 and not done():
                self._cond.wait(poll)
            until = time.monotonic() + linger
            while self.free(capacity) < want and self._items and not done():
                left = until - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return self.free(capacity)

    def wait_empty(self, deadline: float, give_up: Callable[[], bool], poll: float = 0.2) -> bool:
        """Block until nothing is held, ``deadline`` (monotonic) passes or ``give_up()``."""
        with self._cond:
            while self._items and not give_up():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(min(poll, remaining))
            return not self._items

    def apply_heartbeat(
        self,
        results: list[HeartbeatResult],
        sent_at: float | None = None,
        progress_sent: dict[str, int] | None = None,
    ) -> None:
        """Tell each handler what the server said about its attempt (``sent_at``: monotonic
        time the heartbeat was sent, from which the renewed lease's deadline counts;
        ``progress_sent``: attempt id → the version of its progress the heartbeat carried)."""
        with self._cond:
            items = dict(self._items)
        for result in results:
            attempt = items.get(result.attempt_id)
            if attempt is None:
                continue  # finished meanwhile
            if result.status == HeartbeatStatus.LOST:
                if not attempt.reporting:  # a beat racing our own completion is no news
                    attempt.ctx._mark_lease_lost(result.reason)
                continue
            attempt.ctx._extend(result.lease_expires_at, result.lease_remaining_seconds, sent_at)
            if progress_sent and result.attempt_id in progress_sent:
                attempt.ctx._progress_delivered(
                    progress_sent[result.attempt_id], result.progress_refused
                )
            if result.status == HeartbeatStatus.CANCEL_REQUESTED:
                attempt.ctx._mark_cancel_requested()


#: One generator for every backoff: seeding a ``random.Random`` costs ~13 µs, and a worker makes
#: a Backoff for every report (most never sleep). Its methods are safe across threads.
_JITTER = random.Random()


class Backoff:
    """Capped exponential backoff with jitter whose sleep ends early when ``event`` is set, so
    a stop request never waits out a retry delay."""

    def __init__(self, initial: float = 0.5, maximum: float = 15.0) -> None:
        self.initial, self.maximum = initial, maximum
        self.failures = 0

    def reset(self) -> None:
        self.failures = 0

    def sleep(self, event: threading.Event) -> bool:
        """Wait the next delay; True if ``event`` was set meanwhile."""
        ceiling = min(self.maximum, self.initial * 2**self.failures)
        self.failures += 1
        return event.wait(_JITTER.uniform(ceiling / 2, ceiling))
