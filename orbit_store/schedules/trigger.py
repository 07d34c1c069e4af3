"""Trigger now: a schedule fires once, at this instant, because a person asked (the console's
and the API's "trigger now", as ``kubectl create job --from=cronjob/…`` is for a CronJob).

One transaction, like a scheduled fire (invariant 5): the schedule row is locked first, then
Pulse's own order inside the submission, then the tasks a Replace cancels (``fire.apply_fire``);
the occurrence (status FIRED or SKIPPED, reason ``Manual`` or the refusal's) is unique per
schedule and instant (invariant 6) and the audit entry names who and why (invariant 8). The
schedule's concurrencyPolicy applies as to any fire. Its version and next_fire_at do not move:
the cron instants go on as before. A suspended schedule can be triggered: suspending stops the
cron, not a person.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import sqlalchemy as sa

from orbit_store.audit import record_audit
from orbit_store.clock import db_now
from orbit_store.errors import NotFound

from .declare import RESOURCE_KIND
from .fire import apply_fire
from .model import OccurrenceStatus, Reason
from .plan import Fire
from .progress import lock_schedule, record


@dataclass(frozen=True)
class Triggered:
    status: OccurrenceStatus
    reason: Reason
    message: str
    scheduled_at: dt.datetime
    task_id: str | None


def trigger_schedule(
    conn: sa.Connection, *, namespace: str, name: str, actor: str, reason: str
) -> Triggered:
    """Fire schedule ``name`` now, recorded and audited; NotFound when there is no such one."""
    row = lock_schedule(conn, namespace, name)
    if row is None:
        raise NotFound(f"schedule {name!r} not found in namespace {namespace!r}")
    now = db_now(conn)
    status, why, message, task_id = apply_fire(conn, row, Fire(now, Reason.MANUAL), now)
    if status is OccurrenceStatus.FIRED:
        message = f"triggered now by {actor}" + message.partition(" after its instant")[2]
    record(
        conn,
        row,
        status=status,
        reason=why,
        message=message,
        first=now,
        through=now,
        instants=1,
        now=now,
        task_id=task_id,
    )
    record_audit(
        conn,
        namespace=namespace,
        actor=actor,
        action="schedule.trigger",
        resource_kind=RESOURCE_KIND,
        resource_id=name,
        resource_version=row.version,
        reason=reason or "trigger now through the API",
        after={"status": status.value, "reason": why.value, "task_id": task_id},
        now=now,
    )
    return Triggered(status, why, message, now, task_id)
