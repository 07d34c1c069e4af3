"""Firing one schedule occurrence (seed §5 "调度触发"): the occurrence record, its task and the
schedule's progress commit in one transaction (invariant 5).

Lock order: the schedule row, then the new task's rows (inserts only). The schedule row is locked
and its ``next_fire_at`` compared with the instant being fired, so two scheduler replicas never
both fire it; the UNIQUE (schedule_id, scheduled_at) occurrence and the task's idempotency key are
the second and third lines of defence (invariant 6). If the task is refused (a quota, an
undeclared queue) the whole transaction rolls back: no occurrence, no progress — the next pass
tries the same instant again.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.ids import new_id
from orbit_store.pulse.submit import SubmitRequest, submit_task
from orbit_store.schema import schedule_occurrences, schedules


@dataclass(frozen=True)
class FireResult:
    fired: bool
    task_id: str | None = None
    reason: str = ""


def fire_occurrence(
    conn: sa.Connection,
    *,
    namespace: str,
    schedule_id: str,
    scheduled_at: dt.datetime,
    next_fire_at: dt.datetime | None,
) -> FireResult:
    """Fire ``scheduled_at`` (which must be the schedule's current ``next_fire_at``) and move
    the schedule on to ``next_fire_at``."""
    schedule = conn.execute(
        sa.select(schedules)
        .where(schedules.c.id == schedule_id, schedules.c.namespace == namespace)
        .with_for_update()
    ).one_or_none()
    if schedule is None:
        return FireResult(False, reason="schedule not found")
    if schedule.suspended:
        return FireResult(False, reason="schedule is suspended")
    if schedule.next_fire_at != scheduled_at:
        return FireResult(False, reason="instant already fired or not due")
    template = schedule.task_template
    key = f"schedule:{schedule_id}:{scheduled_at.isoformat()}"
    submitted = submit_task(
        conn,
        SubmitRequest(
            namespace=namespace,
            queue=template.get("queue", "default"),
            handler=template["handler"],
            params=template.get("params", {}),
            idempotency_key=key,
            schedule_id=schedule_id,
            submitted_by=f"schedule/{schedule.name}",
        ),
    )
    conn.execute(
        schedule_occurrences.insert().values(
            id=new_id(),
            schedule_id=schedule_id,
            namespace=namespace,
            scheduled_at=scheduled_at,
            fired_at=db_now(conn),
            schedule_version=schedule.version,
            outcome="FIRED",
            task_id=submitted.task_id,
        )
    )
    advanced = conn.execute(
        schedules.update()
        .where(schedules.c.id == schedule_id, schedules.c.next_fire_at == scheduled_at)
        .values(next_fire_at=next_fire_at, last_fire_at=scheduled_at)
    )
    if advanced.rowcount != 1:
        raise RuntimeError(f"schedule {schedule_id} moved under its own lock")
    return FireResult(True, task_id=submitted.task_id)
