"""The backlog as the monitoring gauges show it: tasks per queue and live state, the age of the
oldest due WAITING task per queue, and live worker sessions per namespace.

A read-only snapshot over every namespace (no row is written or locked, so invariant "one
namespace per transaction" — which is about writes — is not in play). It is a GROUP BY over the
live tasks, so it runs once per interval in each server's gauge loop (orbit/metrics/gauges.py),
never per scrape.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.pulse.model import TaskState
from orbit_store.pulse.workers.sessions import LIVE as LIVE_SESSION_STATES
from orbit_store.schema import tasks, worker_sessions

LIVE_TASK_STATES = (
    TaskState.WAITING,
    TaskState.LEASED,
    TaskState.RUNNING,
    TaskState.NEEDS_REVIEW,
)


@dataclass(frozen=True)
class QueueDepth:
    namespace: str
    queue: str
    state: str
    tasks: int


@dataclass(frozen=True)
class OldestWaiting:
    namespace: str
    queue: str
    age_seconds: float  # 0 when every WAITING task is due in the future


@dataclass(frozen=True)
class SessionCount:
    namespace: str
    state: str
    sessions: int


@dataclass(frozen=True)
class Backlog:
    depth: list[QueueDepth]
    oldest_waiting: list[OldestWaiting]
    sessions: list[SessionCount]


def read_backlog(conn: sa.Connection) -> Backlog:
    """Count live tasks by namespace, queue and state, and live sessions by namespace and state,
    measuring ages against database time (UTC_TIMESTAMP(6))."""
    now = db_now(conn)
    rows = conn.execute(
        sa.select(
            tasks.c.namespace,
            tasks.c.queue,
            tasks.c.state,
            sa.func.count(),
            sa.func.min(tasks.c.available_at),
        )
        .where(tasks.c.state.in_([s.value for s in LIVE_TASK_STATES]))
        .group_by(tasks.c.namespace, tasks.c.queue, tasks.c.state)
    ).all()
    depth, oldest = [], []
    for namespace, queue, state, count, first_due in rows:
        depth.append(QueueDepth(namespace, queue, state, int(count)))
        if state == TaskState.WAITING and first_due is not None:
            age = max((now - _datetime(first_due)).total_seconds(), 0.0)
            oldest.append(OldestWaiting(namespace, queue, age))
    sessions = conn.execute(
        sa.select(worker_sessions.c.namespace, worker_sessions.c.state, sa.func.count())
        .where(worker_sessions.c.state.in_(LIVE_SESSION_STATES))
        .group_by(worker_sessions.c.namespace, worker_sessions.c.state)
    ).all()
    return Backlog(
        depth=depth,
        oldest_waiting=oldest,
        sessions=[SessionCount(ns, state, int(n)) for ns, state, n in sessions],
    )


def _datetime(value: dt.datetime | str) -> dt.datetime:
    """SQLite hands back MIN() over a datetime column as text."""
    return dt.datetime.fromisoformat(value) if isinstance(value, str) else value
