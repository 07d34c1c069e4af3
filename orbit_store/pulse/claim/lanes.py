"""Which READY tasks a claim takes from one queue: handler routing without head-of-line blocking.

A worker session declares the handlers it runs; a claim must grant only those, without reading
the READY tasks of every other handler first. So each (queue, handler) is a lane with its own
range of the index ix_tasks_ready_by_handler (namespace, queue, wait_path, handler, priority,
available_at): a claim seeks straight into its lanes. With several handlers, one read-only
statement peeks at the head of each lane and merges them in priority order; then each lane that
contributes is claimed with ``FOR UPDATE SKIP LOCKED`` for exactly its share. A session that
declares no handlers (older clients) has one lane: the whole queue (ix_tasks_ready).

Cost: one index seek per declared handler for the peek plus one per contributing lane, never
a scan of tasks the session cannot run. Under contention a lane may yield fewer rows than its
share (others hold them); the claim then returns fewer tasks, never waits.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import sqlalchemy as sa

from orbit_store.db import force_index
from orbit_store.pulse.model import WaitPath
from orbit_store.schema import tasks

#: What a claim reads of a READY task under its lock: what ``claim`` and ``grant`` decide and
#: write from, never the results and errors of earlier attempts (every column read costs
#: PyMySQL a parse per row in Python, on the hot path). A task failed
#: at its claim (deadline passed) is read in full again first (``claim._fail_overdue``).
CLAIM_COLUMNS = (
    tasks.c.id,
    tasks.c.namespace,
    tasks.c.queue,
    tasks.c.handler,
    tasks.c.params,
    tasks.c.state_version,
    tasks.c.quota_counted,
    tasks.c.priority,
    tasks.c.available_at,
    tasks.c.deadline_at,
    tasks.c.lease_seconds,
    tasks.c.safety,
    tasks.c.concurrency_key,
    tasks.c.cancel_requested,
)


def _lane(namespace: Any, queue: Any, handler: Any) -> list[Any]:
    where = [
        tasks.c.namespace == namespace,
        tasks.c.queue == queue,
        tasks.c.wait_path == WaitPath.READY.value,
    ]
    if handler is not None:
        where.append(tasks.c.handler == handler)
    return where


def _index(handler: Any) -> str:
    return "ix_tasks_ready" if handler is None else "ix_tasks_ready_by_handler"


def lane_head(namespace: str, queue: str, handler: str | None) -> Any:
    """The id of the lane's first READY task in claim order, read-only: the first entry of its
    index range (the wake-up probe's change marker, ``readiness``)."""
    first = (
        sa.select(tasks.c.id)
        .where(*_lane(namespace, queue, handler))
        .order_by(tasks.c.priority, tasks.c.available_at)
        .limit(1)
    )
    return force_index(first, tasks, _index(handler))


def lock_ready(
    conn: sa.Connection, namespace: str, queue: str, handlers: list[str] | None, limit: int
) -> list[sa.Row[Any]]:
    """Up to ``limit`` READY tasks of ``queue`` with one of ``handlers`` (None: any), in
    priority then due order, locked (SKIP LOCKED)."""
    if handlers is None:
        return _lock_lane(conn, namespace, queue, None, limit)
    if not handlers:
        return []
    if len(handlers) == 1:
        return _lock_lane(conn, namespace, queue, handlers[0], limit)
    shares = Counter(_peek(conn, namespace, queue, handlers, limit))
    rows: list[sa.Row[Any]] = []
    for handler in sorted(shares):
        rows += _lock_lane(conn, namespace, queue, handler, shares[handler])
    return sorted(rows, key=lambda r: (r.priority, r.available_at))


def _lock_lane(
    conn: sa.Connection, namespace: str, queue: str, handler: str | None, limit: int
) -> list[sa.Row[Any]]:
    params = {"namespace": namespace, "queue": queue, "handler": handler, "limit": limit}
    return list(conn.execute(_LOCK_QUEUE if handler is None else _LOCK_LANE, params))


def _locking(handler: Any) -> Any:
    """A lane's locking read, built once (its construction and cache key cost a claim CPU)."""
    query = (
        sa.select(*CLAIM_COLUMNS)
        .where(*_lane(sa.bindparam("namespace"), sa.bindparam("queue"), handler))
        .order_by(tasks.c.priority, tasks.c.available_at)
        .limit(sa.bindparam("limit"))
        .with_for_update(skip_locked=True)
    )
    return force_index(query, tasks, _index(handler))


def _peek(
    conn: sa.Connection, namespace: str, queue: str, handlers: list[str], limit: int
) -> list[str]:
    """The handlers of the first ``limit`` READY tasks across the lanes (no locks)."""
    heads = [
        force_index(
            sa.select(tasks.c.handler, tasks.c.priority, tasks.c.available_at)
            .where(*_lane(namespace, queue, handler))
            .order_by(tasks.c.priority, tasks.c.available_at)
            .limit(limit),
            tasks,
            _index(handler),
        ).subquery(f"lane{n}")
        for n, handler in enumerate(sorted(handlers))
    ]
    merged = sa.union_all(*[sa.select(head) for head in heads]).subquery("heads")
    query = sa.select(merged.c.handler).order_by(merged.c.priority, merged.c.available_at)
    return list(conn.execute(query.limit(limit)).scalars())


_LOCK_QUEUE = _locking(None)
_LOCK_LANE = _locking(sa.bindparam("handler"))
