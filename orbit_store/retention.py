"""Retention inventory (seed §7): per data group, how many rows are older than a UTC cutoff, and
how many of those must be kept whatever a retention policy says. Read-only: it deletes nothing,
and its counts are not a licence to delete (the seed: not until retention periods, archive format
and protected-record checks are settled).

Protected means:

- tasks: not terminal (WAITING, LEASED, RUNNING, NEEDS_REVIEW) — live work;
- task events and attempts: their task is not terminal — the history of live work;
- submission keys: still inside their dedupe window (``expires_at`` after now): purging one would
  let a retried submission create a second task (seed §7: keys outlive their tasks);
- workflow signals and inbox events: not consumed yet;
- result events: some delivery of theirs is not DELIVERED; deliveries: not DELIVERED
  (unacknowledged events are never dropped silently);
- audit rows: all — append-only, removed only by a separately authorised, audited process.

Each group is a count over its creation instant; the whole inventory reads one snapshot.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .clock import db_now
from .schema import (
    audit_log,
    event_deliveries,
    result_events,
    submission_keys,
    task_attempts,
    task_events,
    tasks,
    workflow_inbox,
    workflow_signals,
)

LIVE_TASK_STATES = ("WAITING", "LEASED", "RUNNING", "NEEDS_REVIEW")


@dataclass(frozen=True)
class GroupCount:
    group: str
    table: str
    older: int
    protected: int
    protected_because: str

    @property
    def unprotected(self) -> int:
        return self.older - self.protected


@dataclass(frozen=True)
class Inventory:
    before: dt.datetime
    namespace: str | None
    counted_at: dt.datetime
    groups: list[GroupCount]
    deleted: int = 0  # always: the inventory only counts

    def as_json(self) -> dict[str, Any]:
        return {
            "before": _z(self.before),
            "namespace": self.namespace,
            "counted_at": _z(self.counted_at),
            "deleted": self.deleted,
            "note": "inventory only: nothing was deleted",
            "groups": [
                {
                    "group": g.group,
                    "table": g.table,
                    "older_than_cutoff": g.older,
                    "protected": g.protected,
                    "unprotected": g.unprotected,
                    "protected_because": g.protected_because,
                }
                for g in self.groups
            ],
        }


def _z(value: dt.datetime) -> str:
    return value.isoformat(timespec="microseconds") + "Z"


def _count(
    conn: sa.Connection,
    table: sa.Table,
    age: sa.ColumnElement[Any],
    protected: sa.ColumnElement[bool],
    before: dt.datetime,
    namespace: str | None,
    *joins: tuple[sa.Table, sa.ColumnElement[bool]],
) -> tuple[int, int]:
    source: Any = table
    for other, on in joins:
        source = source.join(other, on)
    query = sa.select(
        sa.func.count(), sa.func.coalesce(sa.func.sum(sa.case((protected, 1), else_=0)), 0)
    ).select_from(source)
    query = query.where(age < before)
    if namespace is not None:
        query = query.where(table.c.namespace == namespace)
    older, kept = conn.execute(query).one()
    return int(older), int(kept)


def retention_inventory(
    conn: sa.Connection, *, before: dt.datetime, namespace: str | None = None
) -> Inventory:
    """Count, per data group, the rows created before ``before`` (naive UTC)."""
    now = db_now(conn)
    live_task = tasks.c.state.in_(LIVE_TASK_STATES)
    unsettled = sa.exists().where(
        event_deliveries.c.event_id == result_events.c.id,
        event_deliveries.c.state != "DELIVERED",
    )
    plan: list[tuple[str, sa.Table, Any, Any, str, list[Any]]] = [
        ("tasks and history", tasks, tasks.c.created_at, live_task, "not terminal", []),
        (
            "tasks and history",
            task_events,
            task_events.c.at,
            live_task,
            "task not terminal",
            [(tasks, tasks.c.id == task_events.c.task_id)],
        ),
        (
            "tasks and history",
            task_attempts,
            task_attempts.c.leased_at,
            live_task,
            "task not terminal",
            [(tasks, tasks.c.id == task_attempts.c.task_id)],
        ),
        (
            "submission keys",
            submission_keys,
            submission_keys.c.created_at,
            submission_keys.c.expires_at > now,
            "inside the dedupe window",
            [],
        ),
        (
            "signals",
            workflow_signals,
            workflow_signals.c.received_at,
            workflow_signals.c.state == "PENDING",
            "pending: a later wait may still take it",
            [],
        ),
        (
            "internal events",
            workflow_inbox,
            workflow_inbox.c.received_at,
            workflow_inbox.c.state != "CONSUMED",
            "not consumed",
            [],
        ),
        (
            "result events",
            result_events,
            result_events.c.created_at,
            unsettled,
            "a delivery not acknowledged",
            [],
        ),
        (
            "deliveries",
            event_deliveries,
            event_deliveries.c.created_at,
            event_deliveries.c.state != "DELIVERED",
            "not acknowledged (pending or parked)",
            [],
        ),
        (
            "audit",
            audit_log,
            audit_log.c.at,
            sa.true(),
            "append-only: needs the audit retention process",
            [],
        ),
    ]
    groups = []
    for group, table, age, protected, because, joins in plan:
        older, kept = _count(conn, table, age, protected, before, namespace, *joins)
        groups.append(GroupCount(group, table.name, older, kept, because))
    return Inventory(before=before, namespace=namespace, counted_at=now, groups=groups)
