"""The shared wake-up probe: which of the waiting workers' kinds of work a claim could serve now.

A server process runs this once per probe interval for each namespace that has waiting lease
requests (orbit/api/concurrency/ready_watch.py), instead of each request asking the database on its
own. It is what lets a task made ready anywhere else — another process or replica of the server, the
scheduler, Weave, a retry or backoff falling due, a permit or gate released — wake a waiting
worker within one probe interval. A *kind of work* is what a waiting request can run: a (queue,
handler) pair, or (queue, None) for a worker that runs any handler.

Cost does not grow with the backlog: each kind is one read of the ready index's first entry for
an equality prefix (the id of the task a claim would take first: its *head*), all of them and
the database time in one statement; due
SCHEDULED rows are read in a bounded slice; queue and quota rows only when something is ready.
Read-only, no locks; the answer is a hint (a claim decides), so reading it without a snapshot
is fine.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import as_db_time, utc_now
from orbit_store.db import force_index
from orbit_store.pulse.claim.claim import claimable_queues
from orbit_store.pulse.claim.lanes import lane_head
from orbit_store.pulse.claim.probe import full_queues
from orbit_store.pulse.model import WaitPath
from orbit_store.schema import tasks

#: Due SCHEDULED rows looked at per probe. The promoter and the next claim make them READY, so
#: normally only a handful exist; the bound keeps a probe cheap when nobody serves a queue with a
#: due backlog (a due task behind them is found once promoted, or by the request's own poll).
DUE_ROWS_READ = 256

WorkKind = tuple[str, str | None]  # (queue, handler); None: any handler


@dataclass(frozen=True)
class Readiness:
    #: The kinds with a READY task, or a SCHEDULED one already due, in an unpaused queue whose
    #: max-running quotas leave room.
    satisfied: frozenset[WorkKind]
    now: dt.datetime
    #: For each satisfied kind with a READY task, the id of the first one (its lane's head); a
    #: kind satisfied only by due SCHEDULED rows has none. A changed head is new work even when
    #: "something ready" never turned off between two probes.
    heads: Mapping[WorkKind, str] = field(default_factory=dict)


def readiness(conn: sa.Connection, namespace: str, kinds: Collection[WorkKind]) -> Readiness:
    """Which of ``kinds`` a claim in ``namespace`` could serve now.

    Two statements when nothing is ready (the common case: it runs every interval while any
    request waits, in every server process) — the ready flags with the time, then the due
    SCHEDULED rows; the queue and quota rows (paused, full) are read only for kinds that have
    work."""
    kinds = tuple(sorted(set(kinds), key=str))
    flags = conn.execute(_flags(namespace, kinds)).one()
    now = as_db_time(conn, flags[0])
    heads = {kind: head for kind, head in zip(kinds, flags[1:], strict=True) if head}
    satisfied = set(heads)
    due = _due_kinds(conn, namespace, sorted({q for q, _ in kinds}), now) if kinds else set()
    for queue, handler in kinds:
        if any(q == queue and (handler is None or h == handler) for q, h in due):
            satisfied.add((queue, handler))
    if not satisfied:
        return Readiness(frozenset(), now)
    claimable, _ = claimable_queues(conn, namespace, sorted({q for q, _ in satisfied}))
    open_queues = set(claimable) - (full_queues(conn, namespace, claimable) if claimable else set())
    served = frozenset(w for w in satisfied if w[0] in open_queues)
    return Readiness(served, now, {w: heads[w] for w in served if w in heads})


@functools.lru_cache(maxsize=1024)
def _flags(namespace: str, kinds: tuple[WorkKind, ...]) -> Any:
    """The database time and each kind's head, in one statement. Built once per namespace and
    set of kinds and kept: the probe runs it every interval in every server process, and
    building it (and its cache key) cost SQLAlchemy more CPU than running it."""
    return sa.select(
        utc_now().label("db_now"),
        *(_head(namespace, kind).label(f"w{i}") for i, kind in enumerate(kinds)),
    )


def _head(namespace: str, kind: WorkKind) -> Any:
    """The id of the first READY task of ``kind`` in claim order (NULL when none): the first
    entry of the ready index's equality prefix, as cheap as an EXISTS."""
    queue, handler = kind
    return lane_head(namespace, queue, handler).scalar_subquery()


def _due_kinds(
    conn: sa.Connection, namespace: str, queue_names: list[str], now: dt.datetime
) -> set[tuple[str, str]]:
    params = {"namespace": namespace, "now": now, "queue_names": queue_names}
    return {(row.queue, row.handler) for row in conn.execute(_DUE_KINDS, params)}


#: Built once (bound parameters): the probe runs it every interval.
_DUE_KINDS = (
    force_index(
        sa.select(tasks.c.queue, tasks.c.handler).where(
            tasks.c.namespace == sa.bindparam("namespace"),
            tasks.c.wait_path == WaitPath.SCHEDULED.value,
            tasks.c.available_at <= sa.bindparam("now"),
            tasks.c.queue.in_(sa.bindparam("queue_names", expanding=True)),
        ),
        tasks,
        "ix_tasks_due",
    )
    .order_by(tasks.c.available_at)
    .limit(DUE_ROWS_READ)
)
