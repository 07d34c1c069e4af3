"""Declaring schedules: create, update, suspend/resume and delete, each one transaction that
locks the schedule row first (then nothing else but inserts).

An edit that changes the spec bumps ``version`` and restarts the schedule from now: its next fire
is the new definition's first instant after the edit (and not before ``start_at``), so no instant
is decided twice (invariants 5, 6). If an instant of the old definition was already due but not
yet decided (the edit raced the scheduler, or no scheduler ran), the same transaction records it
as MISSED (``Superseded``) — nothing is dropped silently. Suspending holds ``next_fire_at`` at
NULL; resuming starts from now like an edit: instants that passed while suspended never fire
(unlike a Kubernetes CronJob without a starting deadline, which fires them on resume).

Schedules created through the API can be changed through the API; those declared by a Schedule
resource (``source`` operator or manifest) only through the resource, or the operator would
undo the change on its next resync.

Every change through the API (create, update, suspend, resume, delete) appends an audit row in
its transaction (invariant 8) — actor, reason, the schedule's version, its fields before and
after — with ``resource_kind`` ``Schedule`` like the resource's own changes
(orbit/reconcile/audited.py), so one filter shows a schedule's whole history. A change that
changes nothing is not audited.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

import sqlalchemy as sa

from orbit_store.audit import declared_fields, record_change
from orbit_store.clock import db_now
from orbit_store.declared import require_own
from orbit_store.errors import Conflict, NotFound
from orbit_store.ids import new_id
from orbit_store.namespaces import ensure_namespace
from orbit_store.pulse.limits.queues import undeclared_queues
from orbit_store.schema import schedules

from .cron import Cron, parse
from .model import (
    MAX_CATCH_UP,
    ConcurrencyPolicy,
    InvalidSchedule,
    MisfirePolicy,
    OccurrenceStatus,
    Reason,
    ScheduleSpec,
    TaskTemplate,
    WriteResult,
)
from .plan import run_of
from .progress import lock_schedule, move, record

RESOURCE_KIND = "Schedule"


def validate(spec: ScheduleSpec) -> Cron:
    """Check everything a spec says that a schema cannot; InvalidSchedule names the field."""
    cron = parse(spec.cron, spec.time_zone)
    if not spec.task.handler:
        raise InvalidSchedule("task.handler", "must not be empty")
    if spec.start_at is not None and spec.end_at is not None and spec.end_at <= spec.start_at:
        raise InvalidSchedule("end_at", "must be later than start_at")
    if not 1 <= spec.catch_up_limit <= MAX_CATCH_UP:
        raise InvalidSchedule("catch_up_limit", f"must be between 1 and {MAX_CATCH_UP}")
    if spec.catch_up_limit != 1 and spec.misfire_policy is not MisfirePolicy.CATCH_UP:
        raise InvalidSchedule("catch_up_limit", "only applies with misfire_policy CatchUp")
    deadline = spec.starting_deadline_seconds
    if deadline is not None and deadline < 1:
        raise InvalidSchedule("starting_deadline_seconds", "must be at least 1")
    return cron


def require_queue(conn: sa.Connection, namespace: str, spec: ScheduleSpec) -> None:
    """The task template must name a declared queue (or the implicit 'default'). A queue removed
    later is not an error here: its fires are recorded as skipped (QueueNotFound)."""
    if undeclared_queues(conn, namespace, [spec.task.queue]):
        raise InvalidSchedule(
            "task.queue",
            f"queue {spec.task.queue!r} is not declared in namespace {namespace!r}; "
            "declare it with a Queue resource first, or use the 'default' queue",
        )


def create_schedule(
    conn: sa.Connection,
    namespace: str,
    spec: ScheduleSpec,
    *,
    actor: str,
    reason: str = "",
    source: str = "api",
) -> WriteResult:
    """A new schedule (audited); Conflict when the name is taken."""
    cron = validate(spec)
    require_queue(conn, namespace, spec)
    if lock_schedule(conn, namespace, spec.name) is not None:
        raise Conflict(
            f"schedule {spec.name!r} already exists in namespace {namespace!r}; "
            "update it, or delete it first"
        )
    result = _insert(conn, namespace, spec, cron, source=source, spec_generation=1)
    _audit(conn, namespace, spec.name, "create", actor, reason, None, result.version)
    return result


def update_schedule(
    conn: sa.Connection,
    namespace: str,
    spec: ScheduleSpec,
    *,
    actor: str,
    reason: str = "",
    expected_version: int | None = None,
    source: str = "api",
) -> WriteResult:
    """Replace an API-made schedule's spec (audited when it changes); ``expected_version``
    makes it conditional."""
    cron = validate(spec)
    require_queue(conn, namespace, spec)
    row = _lock_own(conn, namespace, spec.name, source)
    if expected_version is not None and row.version != expected_version:
        raise Conflict(
            f"schedule {spec.name!r} is at version {row.version}, not {expected_version}: "
            "it changed since you read it; read it again and reapply your change"
        )
    before = declared_fields(conn, schedules, namespace, spec.name)
    result = _rewrite(conn, row, spec, cron, source=source, spec_generation=row.spec_generation)
    if result.changed:
        _audit(conn, namespace, spec.name, "update", actor, reason, before, result.version)
    return result


def set_suspended(
    conn: sa.Connection,
    namespace: str,
    name: str,
    suspended: bool,
    *,
    actor: str,
    reason: str = "",
    source: str = "api",
) -> WriteResult:
    """Suspend (no instant fires) or resume (from now on) an API-made schedule (audited when it
    changes)."""
    row = _lock_own(conn, namespace, name, source)
    before = declared_fields(conn, schedules, namespace, name)
    spec = replace(spec_of(row), suspended=suspended)
    result = _rewrite(
        conn, row, spec, validate(spec), source=source, spec_generation=row.spec_generation
    )
    if result.changed:
        action = "suspend" if suspended else "resume"
        _audit(conn, namespace, name, action, actor, reason, before, result.version)
    return result


def declare_schedule(
    conn: sa.Connection,
    namespace: str,
    spec: ScheduleSpec,
    *,
    source: str,
    spec_generation: int,
) -> WriteResult:
    """Make the schedule match a declared resource (level-based: unchanged → no write)."""
    cron = validate(spec)
    require_queue(conn, namespace, spec)
    row = lock_schedule(conn, namespace, spec.name)
    if row is None:
        return _insert(conn, namespace, spec, cron, source=source, spec_generation=spec_generation)
    return _rewrite(conn, row, spec, cron, source=source, spec_generation=spec_generation)


def delete_schedule(
    conn: sa.Connection,
    namespace: str,
    name: str,
    *,
    actor: str,
    reason: str = "",
    source: str = "api",
) -> bool:
    """Remove an API-made schedule (audited; its occurrences stay as history); False when there
    was none."""
    row = lock_schedule(conn, namespace, name)
    if row is None:
        return False
    _require_own(row, source)
    before = declared_fields(conn, schedules, namespace, name)
    conn.execute(schedules.delete().where(schedules.c.id == row.id))
    _audit(conn, namespace, name, "delete", actor, reason, before, row.version)
    return True


def delete_declared_schedule(conn: sa.Connection, namespace: str, name: str) -> bool:
    """The Schedule resource's own deletion, whoever declared the row (the reconcile framework
    audits it); False when there was none."""
    row = lock_schedule(conn, namespace, name)
    if row is None:
        return False
    conn.execute(schedules.delete().where(schedules.c.id == row.id))
    return True


def spec_of(row: sa.Row[Any]) -> ScheduleSpec:
    """The spec a schedules row holds."""
    return ScheduleSpec(
        name=row.name,
        cron=row.cron,
        task=TaskTemplate.from_json(row.task_template),
        time_zone=row.time_zone,
        suspended=bool(row.suspended),
        concurrency_policy=ConcurrencyPolicy(row.concurrency_policy),
        starting_deadline_seconds=row.starting_deadline_seconds,
        misfire_policy=MisfirePolicy(row.misfire_policy),
        catch_up_limit=row.catch_up_limit,
        start_at=row.start_at,
        end_at=row.end_at,
    )


def _insert(
    conn: sa.Connection,
    namespace: str,
    spec: ScheduleSpec,
    cron: Cron,
    *,
    source: str,
    spec_generation: int,
) -> WriteResult:
    now = db_now(conn)
    ensure_namespace(conn, namespace, now)
    schedule_id = new_id()
    next_fire_at = _restart(cron, spec, now)
    conn.execute(
        schedules.insert().values(
            id=schedule_id,
            namespace=namespace,
            name=spec.name,
            version=1,
            next_fire_at=next_fire_at,
            last_fire_at=None,
            source=source,
            spec_generation=spec_generation,
            created_at=now,
            updated_at=now,
            **spec.columns(),
        )
    )
    return WriteResult(schedule_id, 1, True, next_fire_at)


def _rewrite(
    conn: sa.Connection,
    row: sa.Row[Any],
    spec: ScheduleSpec,
    cron: Cron,
    *,
    source: str,
    spec_generation: int,
) -> WriteResult:
    """Give ``row`` the new spec: unchanged → nothing; otherwise a new version from now."""
    columns = spec.columns()
    same_spec = all(getattr(row, key) == value for key, value in columns.items())
    same_owner = (row.source, row.spec_generation) == (source, spec_generation)
    if same_spec and same_owner:
        return WriteResult(row.id, row.version, False, row.next_fire_at)
    if same_spec:
        move(conn, row, source=source, spec_generation=spec_generation)
        return WriteResult(row.id, row.version, False, row.next_fire_at)
    now = db_now(conn)
    _supersede_due(conn, row, now, "suspended" if spec.suspended else "changed")
    next_fire_at = _restart(cron, spec, now)
    version = row.version + 1
    move(
        conn,
        row,
        version=version,
        next_fire_at=next_fire_at,
        source=source,
        spec_generation=spec_generation,
        updated_at=now,
        **columns,
    )
    return WriteResult(row.id, version, True, next_fire_at)


def _restart(cron: Cron, spec: ScheduleSpec, now: dt.datetime) -> dt.datetime | None:
    if spec.suspended:
        return None
    return cron.first_from(now, start_at=spec.start_at, end_at=spec.end_at)


def _supersede_due(conn: sa.Connection, row: sa.Row[Any], now: dt.datetime, why: str) -> None:
    """Record the old definition's due, undecided instants as one MISSED run (Superseded)."""
    first = row.next_fire_at
    if first is None or first > now:
        return
    cron = parse(row.cron, row.time_zone)
    horizon = now if row.end_at is None else min(now, row.end_at)
    through, count = run_of(cron, first, horizon)
    plural = "instant" if count == 1 else "instants"
    record(
        conn,
        row,
        status=OccurrenceStatus.MISSED,
        reason=Reason.SUPERSEDED,
        message=f"{count} due {plural} of version {row.version} not yet fired when the "
        f"schedule was {why}; version {row.version + 1} starts from then",
        first=first,
        through=through,
        instants=count,
        now=now,
    )


def _audit(
    conn: sa.Connection,
    namespace: str,
    name: str,
    action: str,
    actor: str,
    reason: str,
    before: dict[str, Any] | None,
    version: int,
) -> None:
    """The audit row of an API change, written after it (``after`` is the row as it is now)."""
    record_change(
        conn,
        namespace=namespace,
        actor=actor,
        action=f"schedule.{action}",
        resource_kind=RESOURCE_KIND,
        resource_id=name,
        resource_version=version,
        reason=reason or f"{action} through the API",
        before=before,
        after=declared_fields(conn, schedules, namespace, name),
    )


def _lock_own(conn: sa.Connection, namespace: str, name: str, source: str) -> sa.Row[Any]:
    row = lock_schedule(conn, namespace, name)
    if row is None:
        raise NotFound(f"schedule {name!r} not found in namespace {namespace!r}")
    _require_own(row, source)
    return row


def _require_own(row: sa.Row[Any], source: str) -> None:
    require_own("schedule", RESOURCE_KIND, row.name, row.source, source)
