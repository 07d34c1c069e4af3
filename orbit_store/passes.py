"""Per-item isolation in engine passes (ORBIT.md §3 "Per-item isolation in loops").

Every background pass — the reaper, the scheduler, the webhook sender, the Weave inbox consumer
and timer loop — handles each item (a lease, a schedule, a delivery, an inbox row, an instance)
in its own transaction of one namespace. An item that raises is logged naming the loop, the
namespace and the item, counted in ``errors``, and skipped: the pass goes on with the others,
and — with an :class:`ItemBackoff` the loop keeps between passes — the item backs off alone: the
next passes leave it out of their windows until its retry time, so the items behind it move. The
engine loop turns ``errors`` into ``orbit_engine_item_errors_total{loop}``; an exception that
escapes a whole pass (the database is unreachable while finding the work) is
``orbit_engine_errors_total{loop}`` instead.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa

from orbit_store.db import run_transaction

log = logging.getLogger("orbit.passes")

T = TypeVar("T")

#: An item of a loop: what kind it is and its id (``("attempt", id)``).
ItemKey = tuple[str, str]


def in_turn(
    due: sa.Select[Any], namespace: sa.ColumnElement[str], due_at: sa.ColumnElement[Any], limit: int
) -> sa.Select[Any]:
    """The first ``limit`` rows of ``due`` taking every namespace's oldest in turn — each one's
    first (by ``due_at``), then each one's second, … — so a burst of due items in one namespace
    never holds back another's. Returns ``due``'s own columns."""
    turn = sa.func.row_number().over(partition_by=namespace, order_by=due_at)
    ranked = due.add_columns(due_at.label("turn_due_at"), turn.label("turn")).subquery("due")
    own = [column for column in ranked.c if column.name not in ("turn_due_at", "turn")]
    return sa.select(*own).order_by(ranked.c.turn, ranked.c.turn_due_at).limit(limit)


@dataclass(frozen=True)
class Failing:
    """An item that failed ``failures`` passes in a row; left alone until ``retry_at``."""

    failures: int
    retry_at: dt.datetime


class ItemBackoff:
    """Items of one loop that failed, each backing off alone on the database's clock.

    Kept in the memory of the process that runs the loop, not stored: a restart (or another
    replica's reaper) tries the item again at once, which is safe because every decision
    re-checks its item under lock. The delay doubles with each failure in a row, up to
    ``MAX_SECONDS``; a success forgets the item."""

    BASE_SECONDS, MAX_SECONDS = 2.0, 300.0

    def __init__(self) -> None:
        self._failing: dict[ItemKey, Failing] = {}
        self._lock = threading.Lock()

    def backing_off(self, now: dt.datetime, kind: str | None = None) -> frozenset[str]:
        """The ids (of ``kind``) to leave out of a window taken at ``now``. An item not retried
        for a whole maximum delay past its retry time is gone (decided elsewhere): forgotten."""
        forget_before = now - dt.timedelta(seconds=self.MAX_SECONDS)
        with self._lock:
            for key in [k for k, f in self._failing.items() if f.retry_at < forget_before]:
                del self._failing[key]
            return frozenset(
                item_id
                for (item_kind, item_id), f in self._failing.items()
                if f.retry_at > now and kind in (None, item_kind)
            )

    def failed(self, key: ItemKey, now: dt.datetime) -> Failing:
        with self._lock:
            failures = self._failing[key].failures + 1 if key in self._failing else 1
            delay = min(self.BASE_SECONDS * 2 ** min(failures - 1, 16), self.MAX_SECONDS)
            failing = Failing(failures, now + dt.timedelta(seconds=delay))
            self._failing[key] = failing
            return failing

    def succeeded(self, key: ItemKey) -> None:
        with self._lock:
            self._failing.pop(key, None)

    def retry_times(self) -> dict[ItemKey, dt.datetime]:
        """Each failing item's retry time (for tests and operations)."""
        with self._lock:
            return {key: failing.retry_at for key, failing in self._failing.items()}


class ItemPass:
    """The items of one pass of loop ``loop``; safe to share between the pass's threads. With
    ``backoff`` (and the pass's database time ``now``) an item run with a ``key`` that fails
    backs off alone, and one that succeeds is forgotten."""

    def __init__(
        self,
        engine: sa.Engine,
        loop: str,
        *,
        backoff: ItemBackoff | None = None,
        now: dt.datetime | None = None,
    ) -> None:
        self.engine, self.loop = engine, loop
        self.backoff, self.now = backoff, now
        self.errors = 0
        self._lock = threading.Lock()

    def call(
        self,
        work: Callable[[], T],
        *,
        namespace: str,
        item: str,
        key: ItemKey | None = None,
        on_error: Callable[[Exception], None] | None = None,
    ) -> T | None:
        """``work()`` (its own transactions); None when it raised — logged, counted, backed off
        (``key``) and, with ``on_error``, recorded against the item before the pass goes on."""
        try:
            result = work()
        except Exception as exc:
            self.failed(exc, namespace=namespace, item=item, key=key, on_error=on_error)
            return None
        if key is not None and self.backoff is not None:
            self.backoff.succeeded(key)
        return result

    def _back_off(self, key: ItemKey | None) -> str:
        """Record the failure of ``key``; what happens next, in words for the log."""
        if key is None or self.backoff is None or self.now is None:
            return "skipped, the pass goes on"
        failing = self.backoff.failed(key, self.now)
        return (
            f"it backs off until {failing.retry_at:%Y-%m-%d %H:%M:%S} UTC (failure "
            f"{failing.failures} in a row), the pass goes on"
        )

    def failed(
        self,
        exc: Exception,
        *,
        namespace: str,
        item: str,
        key: ItemKey | None = None,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        """Log and count ``exc`` against ``item`` — also for a batch that left one item out —
        and, with ``key``, back the item off."""
        with self._lock:
            self.errors += 1
        log.error(
            "%s: %s in namespace %s failed; %s",
            self.loop,
            item,
            namespace,
            self._back_off(key),
            exc_info=exc,
            extra={"loop": self.loop, "namespace": namespace, "item": item},
        )
        if on_error is not None:
            try:
                on_error(exc)
            except Exception:
                log.exception("%s: could not record the failure of %s", self.loop, item)

    def run(
        self,
        work: Callable[[sa.Connection], T],
        *,
        namespace: str,
        item: str,
        key: ItemKey | None = None,
        on_error: Callable[[Exception], None] | None = None,
    ) -> T | None:
        """One transaction ``work(conn)`` for one item (see :meth:`call`)."""
        return self.call(
            lambda: run_transaction(self.engine, work),
            namespace=namespace,
            item=item,
            key=key,
            on_error=on_error,
        )
