"""Pulse → Weave through the durable inbox (seed §5 "内部事件消费", §6.3; invariant 9).

Pulse persists each outcome of a workflow task as an inbox row in the outcome's own transaction
(``weave.outcomes``), keyed ``task:<id>:v<state_version>`` (UNIQUE with the consumer).

:func:`consume` is one transaction per inbox row: under the instance lock it applies the outcome
to the activation the task serves — only if that task is still the activation's current one
(invariant 10) — advances the instance (creating follow-up tasks) and marks the row CONSUMED
with what it did, all together. A duplicate or replayed row finds itself CONSUMED and changes
nothing, so it can never create a second follow-up task. While the instance is paused the
outcome is still recorded, follow-ups wait, and a continuation row says so (invariant 12).

A signal or a resume that lets the workflow move on records a *deferred advance* here
(:func:`defer_advance`, no activation): the accepting transaction stores only what it was asked
to, and creating the follow-up tasks — which a quota may refuse — is the consumer's, retried
like any outcome (seed §5 "信号受理").
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.ids import new_id
from orbit_store.passes import in_turn
from orbit_store.payload import DEFAULT_MAX_PAYLOAD_BYTES
from orbit_store.schema import (
    workflow_activations,
    workflow_continuations,
    workflow_inbox,
    workflow_poll_rounds,
)

from .activate import fail_step, poll_checkpoint
from .advance import advance
from .context import InstanceContext, LostRace, Step, lock_instance
from .dsl import cel
from .model import AdvanceReport, PollOutcome, RoundState, StepState
from .outcomes import CONSUMER, TASK_RETRIED
from .transitions import move_step

#: Retry delays for a row whose consumption failed (the row stays PENDING; never dropped).
RETRY_BASE_SECONDS, RETRY_MAX_SECONDS = 1.0, 300.0


@dataclass(frozen=True)
class Due:
    id: str
    namespace: str
    instance_id: str


def due_messages(
    conn: sa.Connection, *, limit: int = 100, namespace: str | None = None
) -> list[Due]:
    """PENDING rows whose (re)try time has come (no locks: consume re-checks): every
    namespace's oldest in turn — its first, then its second, … — so one namespace's backlog
    never holds back another's; within a namespace (so within an instance) oldest first."""
    due = sa.select(
        workflow_inbox.c.id, workflow_inbox.c.namespace, workflow_inbox.c.instance_id
    ).where(
        workflow_inbox.c.state == "PENDING",
        workflow_inbox.c.next_attempt_at <= db_now(conn),
    )
    if namespace is not None:
        due = due.where(workflow_inbox.c.namespace == namespace)
    query = in_turn(due, workflow_inbox.c.namespace, workflow_inbox.c.next_attempt_at, limit)
    return [Due(*row) for row in conn.execute(query)]


def consume(
    conn: sa.Connection,
    *,
    namespace: str,
    instance_id: str,
    inbox_id: str,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> AdvanceReport:
    """Consume one inbox row (see the module docstring); report.outcome says what it did."""
    ctx = lock_instance(conn, namespace, instance_id, max_payload_bytes=max_payload_bytes)
    message = conn.execute(
        sa.select(workflow_inbox)
        .where(workflow_inbox.c.id == inbox_id, workflow_inbox.c.namespace == namespace)
        .with_for_update()
    ).one_or_none()
    if message is None or message.state != "PENDING":
        ctx.report.outcome = "duplicate: already consumed"
        return ctx.report
    if message.activation_id is None:
        outcome, step = f"advanced after {message.kind}", None
    else:
        outcome, step = _apply(ctx, message)
    if step is not None and ctx.instance.paused:
        conn.execute(
            workflow_continuations.insert().values(
                id=new_id(),
                instance_id=instance_id,
                namespace=namespace,
                inbox_id=inbox_id,
                activation_id=message.activation_id,
                reason=f"{message.kind} of step {step.name} while paused: follow-ups on resume",
                created_at=ctx.now,
            )
        )
        ctx.event("continuation.recorded", step.name, step.activation_count)
        outcome = "deferred: instance paused; " + outcome
    advance(ctx)
    updated = conn.execute(
        workflow_inbox.update()
        .where(workflow_inbox.c.id == inbox_id, workflow_inbox.c.state == "PENDING")
        .values(state="CONSUMED", consumed_at=ctx.now, outcome=outcome[:255], last_error=None)
    )
    if updated.rowcount != 1:
        raise LostRace(f"inbox row {inbox_id} consumed twice")
    ctx.flush()
    ctx.report.outcome = outcome
    received = _as_datetime(message.received_at)
    ctx.report.orchestration_lag_seconds = max((ctx.now - received).total_seconds(), 0.0)
    return ctx.report


#: Kinds of the deferred advances a signal or a resume records.
SIGNAL_ACCEPTED, RESUMED = "signal.accepted", "instance.resumed"


def defer_advance(ctx: InstanceContext, kind: str, source_event_id: str) -> None:
    """Record that the instance may move on after ``kind`` (a signal consumed by a wait, a
    resume): the inbox consumer advances it, creating what a quota may refuse, and retries
    until it can. ``source_event_id`` names the signal or the resume (UNIQUE: once each)."""
    ctx.conn.execute(
        workflow_inbox.insert().values(
            id=new_id(),
            namespace=ctx.namespace,
            source_event_id=source_event_id,
            consumer=CONSUMER,
            instance_id=ctx.instance.id,
            activation_id=None,
            task_id=None,
            kind=kind,
            payload={},
            state="PENDING",
            received_at=ctx.now,
            attempts=0,
            next_attempt_at=ctx.now,
        )
    )
    ctx.report.deferred_advance = True


def _apply(ctx: InstanceContext, message: Any) -> tuple[str, Step | None]:
    """Apply the outcome to its activation; (what happened, the step it moved or None)."""
    if ctx.instance.state.is_terminal:
        return f"ignored: workflow is {ctx.instance.state.value}", None
    activation = ctx.conn.execute(
        sa.select(workflow_activations).where(workflow_activations.c.id == message.activation_id)
    ).one_or_none()
    return apply_outcome(ctx, message, activation)


def apply_outcome(ctx: InstanceContext, message: Any, activation: Any) -> tuple[str, Step | None]:
    """Apply the outcome to its activation row as read (None: there is none)."""
    if ctx.instance.state.is_terminal:
        return f"ignored: workflow is {ctx.instance.state.value}", None
    if activation is None or activation.instance_id != ctx.instance.id:
        return "ignored: no such activation", None
    step = ctx.steps[activation.step_name]
    if step.current_activation_id != activation.id or not step.state.is_live:
        return f"ignored: step {step.name} is {step.state.value}", None
    if message.kind == TASK_RETRIED:
        return _retried(ctx, step, activation, message), step
    if activation.task_id != message.task_id:
        return f"ignored: task {message.task_id} no longer serves step {step.name}", None
    state, payload = message.payload["state"], message.payload
    ctx.event(
        "task.outcome",
        step.name,
        step.activation_count,
        {"task_id": message.task_id, "state": state},
    )
    if state == "NEEDS_REVIEW":
        move_step(ctx, step, StepState.PARKED, reason=f"task {message.task_id} awaits review")
        return f"parked step {step.name}", step
    if step.state is StepState.PARKED and state != "SUCCEEDED":
        # Settled as failed on review: whether it runs again is the reviewer's next call.
        return f"{KEPT_PARKED} {step.name}: task {state.lower()} on review", None
    if step.kind == "poll":
        _poll_round_done(ctx, step, message.task_id, state, payload)
    elif state == "SUCCEEDED":
        move_step(ctx, step, StepState.SUCCEEDED, reason="task succeeded", result=payload["result"])
    else:
        error = payload.get("error") or {"type": f"task_{state.lower()}"}
        move_step(ctx, step, StepState.FAILED, reason=f"task {state.lower()}", error=error)
    return f"step {step.name} {step.state.value}", step


#: What consuming a reviewed failure of a parked step's task did (a retry carries the step on).
KEPT_PARKED = "kept parked"


def _retried(ctx: InstanceContext, step: Step, activation: Any, message: Any) -> str:
    """A manual retry of the step's task: a parked step goes on with the successor."""
    retry_of = message.payload["retry_of"]
    if step.state is not StepState.PARKED or activation.task_id != retry_of:
        return f"ignored: step {step.name} no longer waits on task {retry_of}"
    updated = ctx.conn.execute(
        workflow_activations.update()
        .where(
            workflow_activations.c.id == activation.id,
            workflow_activations.c.task_id == retry_of,
        )
        .values(task_id=message.task_id)
    )
    if updated.rowcount != 1:
        raise LostRace(f"activation of step {step.name} moved on")
    move_step(ctx, step, StepState.ACTIVE, reason=f"task {retry_of} retried as {message.task_id}")
    details = {"task_id": message.task_id, "retry_of": retry_of}
    ctx.event("task.retried", step.name, step.activation_count, details)
    return f"step {step.name} ACTIVE on retry {message.task_id}"


def _poll_round_done(
    ctx: InstanceContext, step: Step, task_id: str, state: str, payload: dict[str, Any]
) -> None:
    spec = ctx.definition.step(step.name).poll
    assert spec is not None
    number = ctx.conn.execute(
        sa.select(workflow_poll_rounds.c.round).where(workflow_poll_rounds.c.task_id == task_id)
    ).scalar_one()
    if state != "SUCCEEDED":
        _finish_round(ctx, task_id, RoundState.FAILED, None)
        ctx.report.poll_outcomes.append(PollOutcome.FAILED)
        error = payload.get("error") or {"type": f"task_{state.lower()}"}
        move_step(
            ctx, step, StepState.FAILED, reason=f"round {number} task {state.lower()}", error=error
        )
        return
    result = payload["result"]
    try:
        matched = cel.condition(spec.until, {**ctx.variables(), "result": result, "round": number})
    except cel.CelError as exc:
        _finish_round(ctx, task_id, RoundState.FAILED, result)
        ctx.report.poll_outcomes.append(PollOutcome.FAILED)
        fail_step(ctx, step, "until_failed", f"poll.until: {exc}")
        return
    _finish_round(ctx, task_id, RoundState.MATCHED if matched else RoundState.NOT_MATCHED, result)
    ctx.event(
        "poll.round_finished",
        step.name,
        step.activation_count,
        {"round": number, "matched": matched},
    )
    if matched:
        ctx.report.poll_outcomes.append(PollOutcome.MATCHED)
        move_step(
            ctx, step, StepState.SUCCEEDED, reason=f"until held in round {number}", result=result
        )
        return
    ctx.report.poll_outcomes.append(PollOutcome.NOT_MATCHED)
    _schedule_next_round(ctx, step, spec.interval_seconds)


def _finish_round(ctx: InstanceContext, task_id: str, to: RoundState, result: Any) -> None:
    updated = ctx.conn.execute(
        workflow_poll_rounds.update()
        .where(
            workflow_poll_rounds.c.task_id == task_id,
            workflow_poll_rounds.c.state == RoundState.RUNNING.value,
        )
        .values(state=to.value, result=result, finished_at=ctx.now)
    )
    if updated.rowcount != 1:
        raise LostRace(f"poll round of task {task_id} finished twice")


def _schedule_next_round(ctx: InstanceContext, step: Step, interval: float) -> None:
    next_at = ctx.now + dt.timedelta(seconds=interval)
    activation = poll_checkpoint(ctx, step, next_at)
    if activation is None:
        return
    ctx.conn.execute(
        workflow_activations.update()
        .where(workflow_activations.c.id == activation.id)
        .values(next_poll_at=next_at)
    )
    ctx.timers_changed = True


def record_failure(conn: sa.Connection, *, namespace: str, inbox_id: str, error: str) -> None:
    """Consumption failed (a quota, a bug): keep the row PENDING and retry it with backoff."""
    row = conn.execute(
        sa.select(workflow_inbox.c.attempts)
        .where(workflow_inbox.c.id == inbox_id, workflow_inbox.c.namespace == namespace)
        .with_for_update()
    ).one_or_none()
    if row is None:
        return
    delay = min(RETRY_BASE_SECONDS * 2 ** min(row.attempts, 16), RETRY_MAX_SECONDS)
    conn.execute(
        workflow_inbox.update()
        .where(workflow_inbox.c.id == inbox_id, workflow_inbox.c.state == "PENDING")
        .values(
            attempts=row.attempts + 1,
            next_attempt_at=db_now(conn) + dt.timedelta(seconds=delay),
            last_error=error[:1024],
        )
    )


def _as_datetime(value: dt.datetime | str) -> dt.datetime:
    return dt.datetime.fromisoformat(value) if isinstance(value, str) else value


@dataclass(frozen=True)
class Backlog:
    namespace: str
    pending: int
    oldest_age_seconds: float


def backlog(conn: sa.Connection) -> list[Backlog]:
    """PENDING rows and the age of the oldest, per namespace (the consumer's gauges)."""
    now = db_now(conn)
    rows = conn.execute(
        sa.select(
            workflow_inbox.c.namespace,
            sa.func.count(),
            sa.func.min(workflow_inbox.c.received_at),
        )
        .where(workflow_inbox.c.state == "PENDING")
        .group_by(workflow_inbox.c.namespace)
    ).all()
    out = []
    for namespace, count, oldest in rows:
        oldest_at = dt.datetime.fromisoformat(oldest) if isinstance(oldest, str) else oldest
        out.append(Backlog(namespace, count, max((now - oldest_at).total_seconds(), 0.0)))
    return out
