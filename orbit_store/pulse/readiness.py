"""The shared wake-up probe: which kinds of work a claim would take now, in one namespace.

A server process runs this once per probe interval for each namespace that has waiting lease
requests, for the union of their queues (orbit/api/ready_watch.py), instead of each request
asking the database on its own. It is what lets a task made READY anywhere else — another
process or replica of the server, the scheduler, Weave, a retry or backoff falling due, a permit
or gate released — wake a waiting worker within one probe interval. Read-only, no locks, index
seeks only; the answer is a hint (a claim decides), so reading it without a snapshot is fine.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import sqlalchemy as sa

from orbit_store.db import force_index
from orbit_store.schema import tasks

from .claim import claimable_queues
from .model import WaitPath
from .probe import full_queues

#: Due SCHEDULED rows looked at per probe. They are promoted by the next claim, so normally only
#: a handful exist; the bound keeps a probe cheap when nobody serves a queue with a due backlog.
DUE_ROWS_READ = 256

Kind = tuple[str, str]  # (queue, handler)


@dataclass(frozen=True)
class Readiness:
    #: (queue, handler) pairs with a READY task, or a SCHEDULED one already due (the next claim
    #: promotes it), in an unpaused queue whose max-running quotas leave room.
    kinds: frozenset[Kind]
    now: dt.datetime


def readiness(conn: sa.Connection, namespace: str, queue_names: list[str]) -> Readiness:
    """What a claim on ``queue_names`` of ``namespace`` could take now, by (queue, handler)."""
    claimable, now = claimable_queues(conn, namespace, queue_names)
    full = full_queues(conn, namespace, claimable) if claimable else set()
    open_queues = [queue for queue in claimable if queue not in full]
    if not open_queues:
        return Readiness(frozenset(), now)
    # DISTINCT over a prefix of the index: a loose index scan, not a read of the backlog.
    ready = force_index(
        sa.select(tasks.c.queue, tasks.c.handler)
        .where(
            tasks.c.namespace == namespace,
            tasks.c.queue.in_(open_queues),
            tasks.c.wait_path == WaitPath.READY.value,
        )
        .distinct(),
        tasks,
        "ix_tasks_ready_by_handler",
    )
    due_rows = (
        force_index(
            sa.select(tasks.c.queue, tasks.c.handler).where(
                tasks.c.namespace == namespace,
                tasks.c.wait_path == WaitPath.SCHEDULED.value,
                tasks.c.available_at <= now,
                tasks.c.queue.in_(open_queues),
            ),
            tasks,
            "ix_tasks_due",
        )
        .order_by(tasks.c.available_at)
        .limit(DUE_ROWS_READ)
        .subquery("due")
    )
    due = sa.select(due_rows.c.queue, due_rows.c.handler).distinct()
    kinds = {(row.queue, row.handler) for row in conn.execute(ready)}
    kinds.update((row.queue, row.handler) for row in conn.execute(due))
    return Readiness(frozenset(kinds), now)
