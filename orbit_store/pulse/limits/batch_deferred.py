"""Permits and quota counters of a whole batch, settled once at its end, in lock order.

A batch of starts or completions moves many tasks; each move may give back a concurrency permit
(key rows, lock order 6) and change quota counters (quota rows, lock order 9). Taken item by
item, a later item's key would be locked after an earlier item's quota rows — against the order
a single completion keeps (key, then quota) — and two such transactions could wait on each other.
Inside :func:`deferred`, ``transitions.transition`` and the set path record what they would
release and count instead; at the end of the batch the permits are released key by key in key
order, then the counters of every quota row concerned are updated in id order. The result is
the same (one transaction either way); only the order of the locks changes.

A savepoint rolled back must forget what was recorded inside it (:meth:`Deferred.mark`,
:meth:`Deferred.reset`).
"""

from __future__ import annotations

import copy
import datetime as dt
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import sqlalchemy as sa

from orbit_store.pulse.limits import quota, semaphores

_INFO_KEY = "orbit_batch_deferred"


@dataclass
class Deferred:
    """What the batch's moves have to settle: permits by key, counter deltas by queue."""

    releases: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    counts: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    now: dt.datetime | None = None

    def mark(self) -> Deferred:
        return copy.deepcopy(self)

    def reset(self, mark: Deferred) -> None:
        self.releases, self.counts, self.now = mark.releases, mark.counts, mark.now

    def locks_keys_or_quotas(self) -> bool:
        """Whether settling takes key rows or quota rows (lock orders 6, 9)."""
        return bool(self.releases) or any(w or r for w, r in self.counts.values())


def pending(conn: sa.Connection) -> Deferred | None:
    found = conn.info.get(_INFO_KEY)
    return found if isinstance(found, Deferred) else None


@contextmanager
def deferred(conn: sa.Connection, namespace: str) -> Iterator[Deferred]:
    """Record permits and counters while the body runs; settle them when it returns. Inside
    another ``deferred`` of the same connection, the outer one records and settles."""
    outer = pending(conn)
    if outer is not None:
        yield outer
        return
    record = Deferred()
    conn.info[_INFO_KEY] = record
    try:
        yield record
    finally:
        # A connection lost mid-batch is invalidated: touching ``info`` would raise
        # PendingRollbackError and hide the connection-lost error ``run_transaction`` retries
        # on. Its ``info`` dies with it, so there is nothing to clean up then.
        if not conn.invalidated:
            conn.info.pop(_INFO_KEY, None)
    _settle(conn, namespace, record)


def release_permits(
    conn: sa.Connection, namespace: str, key: str, task_ids: list[str], now: dt.datetime
) -> None:
    """``semaphores.release``, or recorded for the end of the batch."""
    record = pending(conn)
    if record is None:
        semaphores.release(conn, namespace, key, task_ids, now)
        return
    record.releases[key].extend(task_ids)
    record.now = now if record.now is None else max(record.now, now)


def count_quota(
    conn: sa.Connection, namespace: str, queue: str, *, waiting: int = 0, running: int = 0
) -> None:
    """``quota.count``, or recorded for the end of the batch."""
    record = pending(conn)
    if record is None:
        quota.count(conn, namespace, queue, waiting=waiting, running=running)
        return
    record.counts[queue][0] += waiting
    record.counts[queue][1] += running


def _settle(conn: sa.Connection, namespace: str, record: Deferred) -> None:
    for key in sorted(record.releases):  # key rows in key order (lock order 6)
        assert record.now is not None
        semaphores.release(conn, namespace, key, sorted(record.releases[key]), record.now)
    deltas = {q: (w, r) for q, (w, r) in record.counts.items() if w or r}
    quota.count_queues(conn, namespace, deltas)  # quota rows in id order (lock order 9)
