"""Declaring a schedule: create or update its row; an edit bumps its version."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.ids import new_id
from orbit_store.pulse.queues import ensure_namespace
from orbit_store.schema import schedules


@dataclass(frozen=True)
class ScheduleSpec:
    name: str
    cron: str
    time_zone: str
    task_template: dict[str, Any] = field(default_factory=dict)  # queue, handler, params
    suspended: bool = False
    concurrency_policy: str = "Allow"
    starting_deadline_seconds: int | None = None
    misfire_policy: str = "Skip"
    catch_up_limit: int = 1
    start_at: dt.datetime | None = None
    end_at: dt.datetime | None = None


def put_schedule(
    conn: sa.Connection,
    namespace: str,
    spec: ScheduleSpec,
    *,
    next_fire_at: dt.datetime | None,
    source: str = "api",
) -> str:
    """Create or update; returns the schedule id. Any change bumps ``version``."""
    now = db_now(conn)
    ensure_namespace(conn, namespace, now)
    values = {
        "cron": spec.cron,
        "time_zone": spec.time_zone,
        "task_template": spec.task_template,
        "suspended": spec.suspended,
        "concurrency_policy": spec.concurrency_policy,
        "starting_deadline_seconds": spec.starting_deadline_seconds,
        "misfire_policy": spec.misfire_policy,
        "catch_up_limit": spec.catch_up_limit,
        "start_at": spec.start_at,
        "end_at": spec.end_at,
        "source": source,
    }
    row = conn.execute(
        sa.select(schedules)
        .where(schedules.c.namespace == namespace, schedules.c.name == spec.name)
        .with_for_update()
    ).one_or_none()
    if row is None:
        schedule_id = new_id()
        conn.execute(
            schedules.insert().values(
                id=schedule_id,
                namespace=namespace,
                name=spec.name,
                version=1,
                next_fire_at=next_fire_at,
                created_at=now,
                updated_at=now,
                **values,
            )
        )
        return schedule_id
    if any(getattr(row, k) != v for k, v in values.items()) or row.next_fire_at != next_fire_at:
        conn.execute(
            schedules.update()
            .where(schedules.c.id == row.id)
            .values(version=row.version + 1, next_fire_at=next_fire_at, updated_at=now, **values)
        )
    return str(row.id)
