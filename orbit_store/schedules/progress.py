"""The one way a schedule row changes, and the one way an occurrence is written.

:func:`move` is the schedules' counterpart of Pulse's ``transition()``: a conditional UPDATE
guarded by the (version, next_fire_at) the caller read under lock, whose affected-row count is
checked. :func:`record` inserts the occurrence; UNIQUE (schedule_id, scheduled_at) refuses a
second decision about the same instant (invariants 5, 6). Callers do both in one transaction.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from orbit_store.ids import new_id
from orbit_store.schema import schedule_occurrences, schedules

from .model import OccurrenceStatus, Reason


class ScheduleMoved(Exception):
    """A guarded update matched no row: the schedule changed since it was read under lock."""


def lock_schedule(conn: sa.Connection, namespace: str, name: str) -> sa.Row[Any] | None:
    """SELECT … FOR UPDATE a schedule by name (the first lock of every schedule transaction)."""
    return conn.execute(
        sa.select(schedules)
        .where(schedules.c.namespace == namespace, schedules.c.name == name)
        .with_for_update()
    ).one_or_none()


def move(conn: sa.Connection, row: sa.Row[Any], **values: Any) -> None:
    """Set ``values`` on the schedule ``row`` was read as (under lock); ScheduleMoved if it
    is no longer at that version and progress."""
    guard = (
        schedules.c.next_fire_at.is_(None)
        if row.next_fire_at is None
        else schedules.c.next_fire_at == row.next_fire_at
    )
    updated = conn.execute(
        schedules.update()
        .where(schedules.c.id == row.id, schedules.c.version == row.version, guard)
        .values(**values)
    )
    if updated.rowcount != 1:
        raise ScheduleMoved(f"schedule {row.id} moved on from version {row.version}")


def record(
    conn: sa.Connection,
    row: sa.Row[Any],
    *,
    status: OccurrenceStatus,
    reason: Reason,
    message: str,
    first: dt.datetime,
    through: dt.datetime,
    instants: int,
    now: dt.datetime,
    task_id: str | None = None,
) -> None:
    """Append the occurrence deciding ``first`` .. ``through`` of ``row``'s schedule."""
    conn.execute(
        schedule_occurrences.insert().values(
            id=new_id(),
            schedule_id=row.id,
            namespace=row.namespace,
            scheduled_at=first,
            through_at=through,
            instants=instants,
            recorded_at=now,
            schedule_version=row.version,
            status=status.value,
            reason=reason.value,
            message=message[:1024],
            task_id=task_id,
        )
    )
