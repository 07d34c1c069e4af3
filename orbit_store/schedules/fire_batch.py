"""Deciding the due instants of a batch of schedules of one namespace in one transaction (seed §5
"调度触发"): for each schedule its occurrence record, its task and its progress commit together
(invariant 5), as in :func:`~.fire.fire_next`, but written for the whole batch at once.

The statements, whatever the batch's size:

1. the batch's schedule rows, locked by id ``FOR UPDATE SKIP LOCKED`` with the database's time
   (a row another replica holds is left to it; each row's ``next_fire_at <= now`` is checked
   again under the lock, so two replicas never decide the same instant);
2. the unfinished tasks of its Forbid and Replace schedules (one read, only if it has any);
3. the set-based submission of every task it fires (``submit_tasks``: one multi-row INSERT per
   table; idempotency by the deterministic key ``submission_key``, invariant 6);
4. one multi-row INSERT of the occurrences (UNIQUE (schedule_id, scheduled_at): invariant 6);
5. one UPDATE moving every schedule to its next instant, guarded by the (id, version,
   next_fire_at) each was read as, with its affected-row count checked.

Each schedule is judged on its own: a task the queue or a quota refuses, or a template that
cannot be read, is that schedule's SKIPPED occurrence with the reason; a schedule whose
expression can no longer be evaluated (a time zone the tzdata dropped) is left out of the batch,
not moved, and returned in ``failed``. A Replace schedule with unfinished tasks takes the single
path inside the batch (``apply_fire``: its cancels need their own locks), in the lock order of
``fire.py``: schedule rows, then Pulse's order.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import as_db_time, utc_now
from orbit_store.db import by_primary_key
from orbit_store.ids import new_id
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.pulse.submit.bulk import SUB_BATCH, submit_tasks
from orbit_store.schema import schedule_occurrences, schedules, tasks

from .cron import Cron, parse
from .fire import (
    SUBMIT_ERRORS,
    UNFINISHED,
    Verdict,
    apply_fire,
    concurrency_verdict,
    fired_message,
    policies_of,
    refused,
    request_for,
)
from .model import ConcurrencyPolicy, FireStep, OccurrenceStatus
from .plan import Decision, Fire, Miss, decide
from .progress import ScheduleMoved

#: Schedules per transaction at most: one set-based submission's worth.
BATCH = SUB_BATCH

_OCCURRENCES = schedule_occurrences.insert()


@dataclass
class BatchOutcome:
    """What one batch decided, and the schedules it had to leave out (not moved)."""

    steps: list[FireStep] = field(default_factory=list)
    failed: list[tuple[str, Exception]] = field(default_factory=list)


@dataclass
class _Planned:
    row: sa.Row[Any]
    cron: Cron
    decision: Decision
    verdict: Verdict | None = None


def fire_batch(conn: sa.Connection, *, namespace: str, schedule_ids: Sequence[str]) -> BatchOutcome:
    """Decide the oldest due instant (or run of missed instants) of each schedule named, in this
    transaction. Schedules not due, or held by another replica, are left alone."""
    if len(schedule_ids) > BATCH:
        raise ValueError(f"at most {BATCH} schedules per transaction")
    outcome = BatchOutcome()
    rows = _claim(conn, namespace, schedule_ids)
    if not rows:
        return outcome
    now = as_db_time(conn, rows[0].db_now)
    planned: list[_Planned] = []
    for row in rows:
        if row.next_fire_at is None or row.next_fire_at > now:
            continue
        try:
            cron = parse(row.cron, row.time_zone)
            planned.append(
                _Planned(row, cron, decide(cron, policies_of(row), row.next_fire_at, now))
            )
        except Exception as exc:  # this schedule alone: the others are decided
            outcome.failed.append((row.id, exc))
    _judge_fires(conn, namespace, planned, now)
    if planned:
        outcome.steps = _write(conn, namespace, planned, now)
    return outcome


def _claim(conn: sa.Connection, namespace: str, schedule_ids: Sequence[str]) -> list[sa.Row[Any]]:
    query = (
        sa.select(schedules, utc_now().label("db_now"))
        .where(schedules.c.namespace == namespace, schedules.c.id.in_(sorted(schedule_ids)))
        .order_by(schedules.c.id)
        .with_for_update(skip_locked=True)
    )
    return list(conn.execute(by_primary_key(query, schedules)))


def _judge_fires(
    conn: sa.Connection, namespace: str, planned: list[_Planned], now: dt.datetime
) -> None:
    """Set the verdict of every planned fire: held back by its concurrencyPolicy, refused, or
    FIRED with the task the set-based submission created."""
    fires = [p for p in planned if isinstance(p.decision, Fire)]
    previous = _unfinished_of(conn, namespace, fires)
    submitting: list[tuple[_Planned, SubmitRequest]] = []
    for plan in fires:
        assert isinstance(plan.decision, Fire)
        policy = ConcurrencyPolicy(plan.row.concurrency_policy)
        before = previous.get(plan.row.id, [])
        if before and policy is ConcurrencyPolicy.REPLACE:
            plan.verdict = apply_fire(conn, plan.row, plan.decision, now)  # rare: its own path
            continue
        plan.verdict = concurrency_verdict(policy, before)
        if plan.verdict is None:
            try:
                submitting.append((plan, request_for(plan.row, plan.decision.instant)))
            except SUBMIT_ERRORS as exc:
                plan.verdict = refused(exc)
    if not submitting:
        return
    results = submit_tasks(conn, namespace=namespace, requests=[r for _, r in submitting])
    for (plan, _), result in zip(submitting, results, strict=True):
        assert isinstance(plan.decision, Fire)
        if result.result is None:
            plan.verdict = refused(result.error or RuntimeError("no result"))
        else:
            message = fired_message(plan.decision, now)
            plan.verdict = (
                OccurrenceStatus.FIRED,
                plan.decision.reason,
                message,
                result.result.task_id,
            )


def _unfinished_of(
    conn: sa.Connection, namespace: str, fires: list[_Planned]
) -> dict[str, list[sa.Row[Any]]]:
    """schedule id -> its unfinished tasks, for the Forbid and Replace schedules (one read)."""
    wanted = sorted(
        p.row.id for p in fires if p.row.concurrency_policy != ConcurrencyPolicy.ALLOW.value
    )
    if not wanted:
        return {}
    rows: sa.Result[Any] = conn.execute(
        sa.select(tasks.c.schedule_id, tasks.c.id, tasks.c.state)
        .where(
            tasks.c.namespace == namespace,
            tasks.c.schedule_id.in_(wanted),
            tasks.c.state.in_([s.value for s in UNFINISHED]),
        )
        .order_by(tasks.c.id)
    )
    found: dict[str, list[sa.Row[Any]]] = defaultdict(list)
    for row in rows:
        found[row.schedule_id].append(row)
    return found


def _write(
    conn: sa.Connection, namespace: str, planned: list[_Planned], now: dt.datetime
) -> list[FireStep]:
    """The occurrences (one INSERT) and every schedule's progress (one guarded UPDATE)."""
    steps = [_step(namespace, plan, now) for plan in planned]
    conn.execute(
        _OCCURRENCES,
        [_occurrence(plan.row, step, plan) for plan, step in zip(planned, steps, strict=True)],
    )
    _advance(conn, planned, steps)
    return steps


def _step(namespace: str, plan: _Planned, now: dt.datetime) -> FireStep:
    decision, row = plan.decision, plan.row
    if isinstance(decision, Miss):
        status, reason, task_id = OccurrenceStatus.MISSED, decision.reason, None
        first, through, instants = decision.first, decision.through, decision.instants
    else:
        assert plan.verdict is not None
        status, reason, _, task_id = plan.verdict
        first = through = decision.instant
        instants = 1
    next_fire_at = plan.cron.next_after(through, end_at=row.end_at)
    return FireStep(
        namespace=namespace,
        schedule_id=row.id,
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


def _occurrence(row: sa.Row[Any], step: FireStep, plan: _Planned) -> dict[str, Any]:
    if isinstance(plan.decision, Miss):
        message = plan.decision.message
    else:
        assert plan.verdict is not None
        message = plan.verdict[2]
    return {
        "id": new_id(),
        "schedule_id": row.id,
        "namespace": row.namespace,
        "scheduled_at": step.scheduled_at,
        "through_at": step.through_at,
        "instants": step.instants,
        "recorded_at": step.recorded_at,
        "schedule_version": row.version,
        "status": step.status.value,
        "reason": step.reason.value,
        "message": str(message)[:1024],
        "task_id": step.task_id,
    }


def _advance(conn: sa.Connection, planned: list[_Planned], steps: list[FireStep]) -> None:
    """Move each schedule to its next instant (and its last fire, when it fired) in one UPDATE,
    guarded by the (id, version, next_fire_at) it was read as under lock."""
    ids = [plan.row.id for plan in planned]
    moves: dict[str, Any] = {
        "next_fire_at": sa.case(
            {step.schedule_id: _at(step.next_fire_at) for step in steps}, value=schedules.c.id
        )
    }
    fired = {
        s.schedule_id: _at(s.scheduled_at) for s in steps if s.status is OccurrenceStatus.FIRED
    }
    if fired:
        moves["last_fire_at"] = sa.case(fired, value=schedules.c.id, else_=schedules.c.last_fire_at)
    read_as = [(p.row.id, p.row.version, p.row.next_fire_at) for p in planned]
    statement = (
        schedules.update()
        .where(
            schedules.c.id.in_(ids),
            sa.tuple_(schedules.c.id, schedules.c.version, schedules.c.next_fire_at).in_(read_as),
        )
        .values(**moves)
    )
    updated = conn.execute(by_primary_key(statement, schedules))
    if updated.rowcount != len(ids):
        raise ScheduleMoved(
            f"{len(ids) - updated.rowcount} of {len(ids)} schedules moved on since read under lock"
        )


def _at(value: dt.datetime | None) -> Any:
    """A datetime bound as the schedules' own column type (a CASE branch has none of its own)."""
    return sa.literal(value, type_=schedules.c.next_fire_at.type)
