"""A namespace at a glance, as the console's Overview page and ``GET …/overview`` show it: live
tasks per queue and state with the oldest due wait, each queue's paused/draining flags, outcomes
per minute for the last quarter hour, and what Orbit itself knows is wrong without Prometheus
(tasks waiting for review, parked deliveries, leases that lapsed in the last hour).

Read-only and in one namespace. Every count is an index range scan: live tasks on
``ix_tasks_queue_state``, outcomes on ``ix_result_events_by_namespace`` (ids are time-ordered, so
a time window is an id range), lapsed leases on ``ix_task_attempts_lease_reaper`` (a lease that
lapsed in the last hour expired in it).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import sqlalchemy as sa

from orbit_store.pulse.model import AttemptOutcome, TaskState
from orbit_store.pulse.views.backlog import LIVE_TASK_STATES

from .clock import db_now
from .ids import id_floor
from .schema import event_deliveries, queues, result_events, task_attempts, tasks

#: Outcomes per minute over this many minutes, oldest first (the sparkline).
THROUGHPUT_MINUTES = 15
LAPSED_WINDOW = dt.timedelta(hours=1)


@dataclass(frozen=True)
class QueueOverview:
    name: str
    declared: bool  # a Queue resource exists (tasks may name an undeclared queue: the default)
    paused: bool
    draining: bool
    tasks: dict[str, int]  # live state -> count; every live state present
    oldest_waiting_seconds: float | None  # the oldest due WAITING task's age; None: none due


@dataclass(frozen=True)
class Overview:
    namespace: str
    at: dt.datetime
    queues: list[QueueOverview] = field(default_factory=list)
    outcomes_per_minute: list[int] = field(default_factory=list)  # oldest minute first
    needs_review: int = 0
    parked_deliveries: int = 0
    lapsed_leases_last_hour: int = 0


def namespace_overview(conn: sa.Connection, namespace: str) -> Overview:
    """The overview of ``namespace`` against database time (a handful of statements, no locks)."""
    now = db_now(conn)
    by_queue = _live_tasks(conn, namespace, now)
    declared = {
        row.name: row
        for row in conn.execute(
            sa.select(queues.c.name, queues.c.paused, queues.c.draining_since).where(
                queues.c.namespace == namespace
            )
        )
    }
    rows = []
    for name in sorted(set(by_queue) | set(declared)):
        counts, oldest = by_queue.get(name, ({}, None))
        queue = declared.get(name)
        rows.append(
            QueueOverview(
                name=name,
                declared=queue is not None,
                paused=bool(queue is not None and queue.paused),
                draining=queue is not None and queue.draining_since is not None,
                tasks={s.value: counts.get(s.value, 0) for s in LIVE_TASK_STATES},
                oldest_waiting_seconds=oldest,
            )
        )
    return Overview(
        namespace=namespace,
        at=now,
        queues=rows,
        outcomes_per_minute=_outcomes_per_minute(conn, namespace, now),
        needs_review=sum(q.tasks[TaskState.NEEDS_REVIEW.value] for q in rows),
        parked_deliveries=_count(
            conn,
            event_deliveries,
            event_deliveries.c.namespace == namespace,
            event_deliveries.c.state == "PARKED",
        ),
        lapsed_leases_last_hour=_count(
            conn,
            task_attempts,
            task_attempts.c.state == "FINISHED",
            task_attempts.c.lease_expires_at >= now - LAPSED_WINDOW,
            task_attempts.c.namespace == namespace,
            task_attempts.c.outcome == AttemptOutcome.LAPSED.value,
        ),
    )


def _live_tasks(
    conn: sa.Connection, namespace: str, now: dt.datetime
) -> dict[str, tuple[dict[str, int], float | None]]:
    """queue -> (live state -> count, age of the oldest due WAITING task)."""
    due = sa.case((tasks.c.available_at <= now, tasks.c.available_at), else_=None)
    rows = conn.execute(
        sa.select(tasks.c.queue, tasks.c.state, sa.func.count(), sa.func.min(due))
        .where(
            tasks.c.namespace == namespace,
            tasks.c.state.in_([s.value for s in LIVE_TASK_STATES]),
        )
        .group_by(tasks.c.queue, tasks.c.state)
    ).all()
    found: dict[str, tuple[dict[str, int], float | None]] = {}
    for queue, state, count, first_due in rows:
        counts, oldest = found.get(queue, ({}, None))
        counts[state] = int(count)
        if state == TaskState.WAITING.value and first_due is not None:
            oldest = max((now - _datetime(first_due)).total_seconds(), 0.0)
        found[queue] = (counts, oldest)
    return found


def _outcomes_per_minute(conn: sa.Connection, namespace: str, now: dt.datetime) -> list[int]:
    """Result events (one per finished task and per task sent to review) in each of the last
    ``THROUGHPUT_MINUTES`` minutes, oldest first; one range scan over the namespace's ids."""
    end_ms = int(now.replace(tzinfo=dt.UTC).timestamp() * 1000)
    floors = [
        id_floor(end_ms - (THROUGHPUT_MINUTES - i) * 60_000) for i in range(THROUGHPUT_MINUTES)
    ]
    column = result_events.c.id
    buckets = [
        sa.func.sum(sa.case((sa.and_(column >= low, column < high), 1), else_=0))
        for low, high in zip(floors, [*floors[1:], id_floor(end_ms + 1)], strict=True)
    ]
    row = conn.execute(
        sa.select(*buckets).where(result_events.c.namespace == namespace, column >= floors[0])
    ).one()
    return [int(n or 0) for n in row]


def _count(conn: sa.Connection, table: sa.Table, *where: sa.ColumnElement[bool]) -> int:
    return int(
        conn.execute(sa.select(sa.func.count()).select_from(table).where(*where)).scalar_one()
    )


def _datetime(value: dt.datetime | str) -> dt.datetime:
    """SQLite hands back MIN() over a datetime column as text."""
    return dt.datetime.fromisoformat(value) if isinstance(value, str) else value
