"""Deciding a schedule's oldest due instant (seed §5 "调度触发"): the occurrence record, its task
and the schedule's progress commit in one transaction (invariant 5).

Lock order: the schedule row first (claimed ``FOR UPDATE SKIP LOCKED`` on MySQL/MariaDB, so a
replica never waits for another one busy with the same schedule), then Pulse's own order: for a
Replace, the new task's queue row (shared), the previous tasks by id, their attempts, keys and
quota rows (``cancel_tasks``); then ``submit_task`` (queue, key, quota rows → the new task's
rows). A Replace's new task holds the schedule's own concurrency key (limit 1), so it waits
until the tasks it replaced have ended, as a CronJob deletes the old Job first.

The claim re-reads ``next_fire_at <= now`` under the lock, so two scheduler replicas never decide
the same instant; UNIQUE (schedule_id, scheduled_at) and the task's idempotency key (schedule id +
instant) are the second and third lines of defence (invariant 6). A task refused by the queue or a
quota is recorded as a SKIPPED occurrence with that reason — the instant is decided, never retried
forever.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import as_db_time, utc_now
from orbit_store.errors import Conflict, InvalidRequest, NotFound, QuotaExceeded
from orbit_store.pulse.limits.queues import lock_submission_scope
from orbit_store.pulse.manual.cancel import cancel_tasks
from orbit_store.pulse.model import TaskState
from orbit_store.pulse.submit.accept import SubmitRequest, submit_task
from orbit_store.schema import schedules, tasks

from .cron import parse
from .model import (
    ConcurrencyPolicy,
    FireStep,
    MisfirePolicy,
    OccurrenceStatus,
    Reason,
    TaskTemplate,
)
from .plan import Fire, Miss, Policies, decide
from .progress import move, record

UNFINISHED = (TaskState.WAITING, TaskState.LEASED, TaskState.RUNNING, TaskState.NEEDS_REVIEW)
SUBMIT_REFUSALS: tuple[tuple[type[Exception], Reason], ...] = (
    (NotFound, Reason.QUEUE_NOT_FOUND),
    (QuotaExceeded, Reason.QUOTA_EXCEEDED),
    (Conflict, Reason.SUBMIT_CONFLICT),
    (InvalidRequest, Reason.INVALID_TASK),
)
#: What a fire may meet that is the schedule's own: a refusal of its task, or a stored template
#: that cannot be read; recorded as a SKIPPED occurrence with the reason.
SUBMIT_ERRORS = (NotFound, QuotaExceeded, Conflict, InvalidRequest, KeyError, ValueError, TypeError)
Verdict = tuple[OccurrenceStatus, Reason, str, str | None]


def submission_key(schedule_id: str, instant: dt.datetime) -> str:
    """The deterministic idempotency key of the task fired for ``instant``."""
    return f"schedule:{schedule_id}:{instant:%Y-%m-%dT%H:%M:%S.%f}Z"


def fire_next(conn: sa.Connection, *, namespace: str, schedule_id: str) -> FireStep | None:
    """Decide the oldest due instant of the schedule (or a run of missed ones), in one
    transaction. None when it is not due, or another replica holds it right now."""
    row = conn.execute(
        sa.select(schedules, utc_now().label("db_now"))
        .where(schedules.c.id == schedule_id, schedules.c.namespace == namespace)
        .with_for_update(skip_locked=True)
    ).one_or_none()
    if row is None:
        return None
    now = as_db_time(conn, row.db_now)
    if row.next_fire_at is None or row.next_fire_at > now:
        return None
    cron = parse(row.cron, row.time_zone)
    decision = decide(cron, policies_of(row), row.next_fire_at, now)
    if isinstance(decision, Miss):
        verdict: Verdict = (OccurrenceStatus.MISSED, decision.reason, decision.message, None)
        first, through, instants = decision.first, decision.through, decision.instants
    else:
        verdict = apply_fire(conn, row, decision, now)
        first = through = decision.instant
        instants = 1
    status, reason, message, task_id = verdict
    record(
        conn,
        row,
        status=status,
        reason=reason,
        message=message,
        first=first,
        through=through,
        instants=instants,
        now=now,
        task_id=task_id,
    )
    next_fire_at = cron.next_after(through, end_at=row.end_at)
    fired = status is OccurrenceStatus.FIRED
    move(conn, row, next_fire_at=next_fire_at, last_fire_at=first if fired else row.last_fire_at)
    return FireStep(
        namespace=namespace,
        schedule_id=schedule_id,
        name=row.name,
        status=status,
        reason=reason,
        scheduled_at=first,
        through_at=through,
        instants=instants,
        recorded_at=now,
        task_id=task_id,
        next_fire_at=next_fire_at,
        more_due=next_fire_at is not None and next_fire_at <= now,
    )


def policies_of(row: sa.Row[Any]) -> Policies:
    """The schedule row's policies that :func:`~.plan.decide` applies."""
    return Policies(
        MisfirePolicy(row.misfire_policy),
        row.catch_up_limit,
        row.starting_deadline_seconds,
        row.end_at,
    )


def apply_fire(conn: sa.Connection, row: sa.Row[Any], fire: Fire, now: dt.datetime) -> Verdict:
    """Apply concurrencyPolicy, then submit the task (quotas, queue checks, idempotency); the
    schedule row is locked by the caller. Also the core of a manual trigger (``trigger.py``)."""
    policy = ConcurrencyPolicy(row.concurrency_policy)
    previous = unfinished_tasks(conn, row) if policy is not ConcurrencyPolicy.ALLOW else []
    held_back = concurrency_verdict(policy, previous)
    if held_back is not None:
        return held_back
    try:
        request = request_for(row, fire.instant)
        with conn.begin_nested():  # a refused submission cancels nothing
            if previous:
                _cancel_previous(conn, row, request, previous, fire.instant)
            submitted = submit_task(conn, request)
    except SUBMIT_ERRORS as exc:
        return refused(exc)
    message = fired_message(fire, now)
    if previous:
        message += (
            f"; concurrencyPolicy Replace cancelled {_describe(previous)}; the new task "
            "starts once they have ended"
        )
    reason = Reason.REPLACED if previous else fire.reason
    return OccurrenceStatus.FIRED, reason, message, submitted.task_id


def concurrency_verdict(policy: ConcurrencyPolicy, previous: list[sa.Row[Any]]) -> Verdict | None:
    """The SKIPPED verdict when the unfinished ``previous`` tasks hold this fire back (Forbid,
    or one awaiting review); None when it may go ahead."""
    if previous and policy is ConcurrencyPolicy.FORBID:
        return (
            OccurrenceStatus.SKIPPED,
            Reason.CONCURRENCY_FORBID,
            f"{_describe(previous)} unfinished; concurrencyPolicy Forbid skips this instant",
            None,
        )
    reviews = [t for t in previous if t.state == TaskState.NEEDS_REVIEW]
    if reviews:
        return (
            OccurrenceStatus.SKIPPED,
            Reason.PREVIOUS_AWAITS_REVIEW,
            f"{_describe(reviews)} awaiting review: a task whose outcome is unknown is never "
            "replaced; review it (`orbit task review`) and the next instant fires",
            None,
        )
    return None


def refused(exc: Exception) -> Verdict:
    """The SKIPPED verdict of a task the submission refused (or a template it cannot read)."""
    reason = next((r for cls, r in SUBMIT_REFUSALS if isinstance(exc, cls)), Reason.INVALID_TASK)
    return OccurrenceStatus.SKIPPED, reason, f"task not created: {exc}", None


def fired_message(fire: Fire, now: dt.datetime) -> str:
    late = (now - fire.instant).total_seconds()
    return f"fired {late:.1f}s after its instant" + _misfire_note(fire.reason)


def replace_key(schedule_id: str) -> str:
    """The concurrency key (limit 1) every task of a Replace schedule holds while it runs, so a
    new fire's task waits until the tasks it replaced have ended."""
    return f"schedule:{schedule_id}"


def _cancel_previous(
    conn: sa.Connection,
    row: sa.Row[Any],
    request: SubmitRequest,
    previous: list[sa.Row[Any]],
    instant: dt.datetime,
) -> None:
    """Cancel every unfinished previous task (Replace), in Pulse's lock order: the new task's
    queue row (shared) first, then the tasks by id, their attempts, keys and quota rows."""
    lock_submission_scope(conn, row.namespace, request.queue)
    cancel_tasks(
        conn,
        namespace=row.namespace,
        task_ids=[t.id for t in previous],
        actor=f"schedule/{row.name}",
        reason=f"replaced by the {instant:%Y-%m-%dT%H:%M:%S}Z fire of schedule {row.name}",
    )


def request_for(row: sa.Row[Any], instant: dt.datetime) -> SubmitRequest:
    """The submission of the schedule's task for ``instant`` (its template; KeyError,
    ValueError or TypeError when the stored template cannot be read)."""
    template = TaskTemplate.from_json(row.task_template)
    replace = row.concurrency_policy == ConcurrencyPolicy.REPLACE.value
    return SubmitRequest(
        namespace=row.namespace,
        queue=template.queue,
        handler=template.handler,
        params=template.params,
        idempotency_key=submission_key(row.id, instant),
        priority=template.priority,
        max_attempts=template.max_attempts,
        safety=template.safety,
        schedule_id=row.id,
        submitted_by=f"schedule/{row.name}",
        concurrency_key=replace_key(row.id) if replace else None,
        concurrency_limit=1 if replace else None,
    )


def unfinished_tasks(conn: sa.Connection, row: sa.Row[Any]) -> list[sa.Row[Any]]:
    """The schedule's tasks that are not terminal, all of them (a plain read; ix_tasks_schedule).
    Replace keeps them to one or two; more only after the policy changed to Replace."""
    return list(
        conn.execute(
            sa.select(tasks.c.id, tasks.c.state)
            .where(
                tasks.c.schedule_id == row.id,
                tasks.c.namespace == row.namespace,
                tasks.c.state.in_([s.value for s in UNFINISHED]),
            )
            .order_by(tasks.c.id)
        )
    )


def _describe(found: list[sa.Row[Any]]) -> str:
    shown = ", ".join(f"task {t.id} ({t.state})" for t in found[:3])
    return shown + (f" and {len(found) - 3} more" if len(found) > 3 else "")


def _misfire_note(reason: Reason) -> str:
    if reason is Reason.FIRE_ONCE:
        return " (misfired: misfirePolicy FireOnce fires the latest missed instant)"
    if reason is Reason.CATCH_UP:
        return " (misfired: misfirePolicy CatchUp)"
    return ""
