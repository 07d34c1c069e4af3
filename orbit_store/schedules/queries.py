"""Reading schedules: one with its recent occurrences, a page of them, and the scheduler's scan
for due ones. Plain reads (no locks); every one but the scan is scoped to one namespace."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.schema import schedule_occurrences, schedules, tasks

from .declare import spec_of
from .fire import UNFINISHED
from .model import OccurrenceStatus, OccurrenceView, ScheduleView

RECENT_OCCURRENCES = 10


def get_schedule(
    conn: sa.Connection, namespace: str, name: str, *, occurrences: int = RECENT_OCCURRENCES
) -> ScheduleView | None:
    """The schedule with its ``occurrences`` latest occurrences and its unfinished task count."""
    row = conn.execute(
        sa.select(schedules).where(schedules.c.namespace == namespace, schedules.c.name == name)
    ).one_or_none()
    if row is None:
        return None
    return _view(row, _occurrences(conn, row, occurrences), _unfinished(conn, row))


def list_schedules(
    conn: sa.Connection, namespace: str, *, limit: int = 100, after_name: str | None = None
) -> list[ScheduleView]:
    """Schedules by name (pass the last name back as ``after_name`` for the next page)."""
    query = sa.select(schedules).where(schedules.c.namespace == namespace)
    if after_name is not None:
        query = query.where(schedules.c.name > after_name)
    rows = conn.execute(query.order_by(schedules.c.name).limit(limit)).all()
    return [_view(row, [], 0) for row in rows]


def declared_schedules(conn: sa.Connection, namespace: str) -> list[tuple[str, str, str]]:
    """(namespace, name, source) of the namespace's schedules, for `orbit apply --prune`."""
    query = sa.select(schedules.c.namespace, schedules.c.name, schedules.c.source).where(
        schedules.c.namespace == namespace
    )
    return [(r.namespace, r.name, r.source) for r in conn.execute(query)]


@dataclass(frozen=True)
class DueScan:
    """The scheduler's candidates, and the database time they were read at."""

    at: dt.datetime
    candidates: list[tuple[str, str]]


def find_due(conn: sa.Connection, *, limit: int, namespace: str | None = None) -> DueScan:
    """(namespace, schedule id) of schedules with an instant due now, oldest first — the
    scheduler's candidates (ix_schedules_due); each is then claimed in its own transaction."""
    now = db_now(conn)
    query = sa.select(schedules.c.namespace, schedules.c.id).where(schedules.c.next_fire_at <= now)
    if namespace is not None:
        query = query.where(schedules.c.namespace == namespace)
    rows = conn.execute(query.order_by(schedules.c.next_fire_at).limit(limit))
    return DueScan(now, [(r.namespace, r.id) for r in rows])


def seconds_to_next_instant(
    conn: sa.Connection, *, after: dt.datetime, namespace: str | None = None
) -> float | None:
    """Seconds from now (database time) to the earliest instant later than ``after`` (the
    last scan's time), None if there is none: the scheduler wakes for it instead of finding it
    up to a poll interval late. An instant that fell due since the scan gives a wait of zero or
    less; one that was already due at the scan (left undecided: it cannot be, or another replica
    holds it) is left out, so it never makes the loop spin."""
    now = db_now(conn)
    query = sa.select(sa.func.min(schedules.c.next_fire_at)).where(schedules.c.next_fire_at > after)
    if namespace is not None:
        query = query.where(schedules.c.namespace == namespace)
    earliest = conn.execute(query).scalar_one_or_none()
    return None if earliest is None else (earliest - now).total_seconds()


def _occurrences(conn: sa.Connection, row: sa.Row[Any], limit: int) -> list[OccurrenceView]:
    if limit <= 0:
        return []
    occ = schedule_occurrences
    query = (
        sa.select(occ, tasks.c.state.label("task_state"))
        .outerjoin(
            tasks, sa.and_(tasks.c.id == occ.c.task_id, tasks.c.namespace == occ.c.namespace)
        )
        .where(occ.c.schedule_id == row.id, occ.c.namespace == row.namespace)
        .order_by(occ.c.scheduled_at.desc())
        .limit(limit)
    )
    return [
        OccurrenceView(
            scheduled_at=o.scheduled_at,
            through_at=o.through_at,
            instants=o.instants,
            recorded_at=o.recorded_at,
            status=OccurrenceStatus(o.status),
            reason=o.reason,
            message=o.message,
            schedule_version=o.schedule_version,
            task_id=o.task_id,
            task_state=o.task_state,
        )
        for o in conn.execute(query)
    ]


def _unfinished(conn: sa.Connection, row: sa.Row[Any]) -> int:
    query = sa.select(sa.func.count()).where(
        tasks.c.schedule_id == row.id,
        tasks.c.namespace == row.namespace,
        tasks.c.state.in_([s.value for s in UNFINISHED]),
    )
    return int(conn.execute(query).scalar_one())


def _view(row: sa.Row[Any], occurrences: list[OccurrenceView], active: int) -> ScheduleView:
    return ScheduleView(
        id=row.id,
        namespace=row.namespace,
        name=row.name,
        spec=spec_of(row),
        version=row.version,
        next_fire_at=row.next_fire_at,
        last_fire_at=row.last_fire_at,
        source=row.source,
        created_at=row.created_at,
        updated_at=row.updated_at,
        active_tasks=active,
        occurrences=occurrences,
    )
