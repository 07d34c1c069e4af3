"""Read-only views of workflows for the API, SDK and CLI: an instance with, per step, its state,
activations, linked task state and what it waits for — including the explicit "task finished,
orchestration not yet advanced" with the inbox lag (seed §6.3) — its history, lists, and the
live counts behind the gauges."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.schema import (
    tasks,
    workflow_activations,
    workflow_continuations,
    workflow_events,
    workflow_inbox,
    workflow_instances,
    workflow_signals,
    workflow_steps,
    workflow_waits,
)

from .definitions import load_version

OUTCOME_TASK_STATES = ("SUCCEEDED", "FAILED", "CANCELLED", "NEEDS_REVIEW")


@dataclass(frozen=True)
class InstanceView:
    id: str
    namespace: str
    definition: str
    version: int
    start_key: str
    state: str
    state_version: int
    paused: bool
    control_version: int
    input: Any
    output: Any
    error: Any
    started_by: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    finished_at: dt.datetime | None


@dataclass(frozen=True)
class ActivationView:
    seq: int
    state: str
    task_id: str | None
    task_state: str | None
    rounds_used: int
    max_rounds: int | None
    deadline_at: dt.datetime | None
    next_poll_at: dt.datetime | None
    created_at: dt.datetime
    finished_at: dt.datetime | None


@dataclass(frozen=True)
class StepView:
    name: str
    kind: str
    state: str
    depends_on: list[str]
    activation_count: int
    result: Any
    error: Any
    activations: list[ActivationView]
    #: The step's task has an outcome that the inbox has not applied yet (seed §6.3).
    awaiting_orchestration: bool
    inbox_lag_seconds: float | None
    detail: str


@dataclass(frozen=True)
class SignalView:
    signal_id: str
    name: str
    state: str
    received_at: dt.datetime


@dataclass(frozen=True)
class InstanceDetail:
    instance: InstanceView
    steps: list[StepView]
    pending_signals: list[SignalView]
    inbox_pending: int
    inbox_oldest_age_seconds: float | None
    pending_continuations: int
    #: Why the engine could not advance the instance on its last try (a quota refused the
    #: next step's task, a defect), and when it tries again; None while it advances.
    orchestration_error: str | None = None
    orchestration_retry_at: dt.datetime | None = None


@dataclass(frozen=True)
class EventView:
    seq: int
    kind: str
    step_name: str | None
    activation_seq: int | None
    details: Any
    actor: str | None
    at: dt.datetime


def _instance(row: Any) -> InstanceView:
    return InstanceView(
        id=row.id,
        namespace=row.namespace,
        definition=row.definition_name,
        version=row.version,
        start_key=row.start_key,
        state=row.state,
        state_version=row.state_version,
        paused=bool(row.paused),
        control_version=row.control_version,
        input=row.input,
        output=row.output,
        error=row.error,
        started_by=row.started_by,
        created_at=row.created_at,
        updated_at=row.updated_at,
        finished_at=row.finished_at,
    )


def get_instance(conn: sa.Connection, namespace: str, instance_id: str) -> InstanceView | None:
    row = conn.execute(
        sa.select(workflow_instances).where(
            workflow_instances.c.id == instance_id, workflow_instances.c.namespace == namespace
        )
    ).one_or_none()
    return None if row is None else _instance(row)


def list_instances(
    conn: sa.Connection,
    namespace: str,
    *,
    state: str | None = None,
    definition: str | None = None,
    limit: int = 50,
    before_id: str | None = None,
) -> tuple[list[InstanceView], str | None]:
    """Newest first; returns the page and the cursor of the next one (None at the end)."""
    query = (
        sa.select(workflow_instances)
        .where(workflow_instances.c.namespace == namespace)
        .order_by(workflow_instances.c.id.desc())
        .limit(limit + 1)
    )
    if state is not None:
        query = query.where(workflow_instances.c.state == state)
    if definition is not None:
        query = query.where(workflow_instances.c.definition_name == definition)
    if before_id is not None:
        query = query.where(workflow_instances.c.id < before_id)
    rows = list(conn.execute(query))
    page = [_instance(r) for r in rows[:limit]]
    return page, (page[-1].id if len(rows) > limit else None)


def history(conn: sa.Connection, namespace: str, instance_id: str) -> list[EventView]:
    rows = conn.execute(
        sa.select(workflow_events)
        .where(
            workflow_events.c.instance_id == instance_id,
            workflow_events.c.namespace == namespace,
        )
        .order_by(workflow_events.c.seq)
    )
    return [
        EventView(r.seq, r.kind, r.step_name, r.activation_seq, r.details, r.actor, r.at)
        for r in rows
    ]


def get_detail(conn: sa.Connection, namespace: str, instance_id: str) -> InstanceDetail | None:
    row = conn.execute(
        sa.select(workflow_instances).where(
            workflow_instances.c.id == instance_id, workflow_instances.c.namespace == namespace
        )
    ).one_or_none()
    if row is None:
        return None
    now = db_now(conn)
    definition = load_version(conn, row.definition_version_id)
    activations = _activations(conn, instance_id)
    pending, inbox_error = _pending_inbox(conn, instance_id)
    waits = {
        w.activation_id: w
        for w in conn.execute(
            sa.select(workflow_waits).where(
                workflow_waits.c.instance_id == instance_id, workflow_waits.c.state == "WAITING"
            )
        )
    }
    steps_rows = {
        s.name: s
        for s in conn.execute(
            sa.select(workflow_steps).where(workflow_steps.c.instance_id == instance_id)
        )
    }
    steps = []
    for name in definition.order:
        step, spec = steps_rows[name], definition.step(name)
        acts = activations.get(name, [])
        current = acts[-1] if acts else None
        lag = None
        if current is not None and current.task_id in pending:
            lag = max((now - pending[current.task_id]).total_seconds(), 0.0)
        awaiting = (
            step.state in ("ACTIVE", "PARKED")
            and current is not None
            and current.task_state in OUTCOME_TASK_STATES
            and lag is not None
        )
        context = _Context(now, bool(row.paused), steps_rows, waits, lag)
        steps.append(
            StepView(
                name=name,
                kind=step.kind,
                state=step.state,
                depends_on=list(spec.depends_on),
                activation_count=step.activation_count,
                result=step.result,
                error=step.error,
                activations=acts,
                awaiting_orchestration=awaiting,
                inbox_lag_seconds=lag,
                detail=_explain(step, spec.depends_on, current, awaiting, context),
            )
        )
    signals = [
        SignalView(s.signal_id, s.name, s.state, s.received_at)
        for s in conn.execute(
            sa.select(workflow_signals)
            .where(
                workflow_signals.c.instance_id == instance_id,
                workflow_signals.c.state == "PENDING",
            )
            .order_by(workflow_signals.c.received_at)
        )
    ]
    oldest = min(pending.values()) if pending else None
    stalled = (row.timer_error, row.timer_retry_at) if row.timer_error else inbox_error
    stalled = stalled or (None, None)
    continuations = conn.execute(
        sa.select(sa.func.count()).where(
            workflow_continuations.c.instance_id == instance_id,
            workflow_continuations.c.resumed_at.is_(None),
        )
    ).scalar_one()
    return InstanceDetail(
        instance=_instance(row),
        steps=steps,
        pending_signals=signals,
        inbox_pending=len(pending),
        inbox_oldest_age_seconds=(
            None if oldest is None else max((now - oldest).total_seconds(), 0.0)
        ),
        pending_continuations=int(continuations),
        orchestration_error=stalled[0],
        orchestration_retry_at=stalled[1],
    )


def _activations(conn: sa.Connection, instance_id: str) -> dict[str, list[ActivationView]]:
    rows = conn.execute(
        sa.select(workflow_activations, tasks.c.state.label("task_state"))
        .outerjoin(tasks, tasks.c.id == workflow_activations.c.task_id)
        .where(workflow_activations.c.instance_id == instance_id)
        .order_by(workflow_activations.c.step_name, workflow_activations.c.seq)
    )
    out: dict[str, list[ActivationView]] = defaultdict(list)
    for r in rows:
        out[r.step_name].append(
            ActivationView(
                seq=r.seq,
                state=r.state,
                task_id=r.task_id,
                task_state=r.task_state,
                rounds_used=r.rounds_used,
                max_rounds=r.max_rounds,
                deadline_at=r.deadline_at,
                next_poll_at=r.next_poll_at,
                created_at=r.created_at,
                finished_at=r.finished_at,
            )
        )
    return out


def _pending_inbox(
    conn: sa.Connection, instance_id: str
) -> tuple[dict[str, dt.datetime], tuple[str | None, dt.datetime | None] | None]:
    """Task id → when its oldest unconsumed outcome arrived; and the error and retry time of
    an unconsumed row whose consumption failed, if one did."""
    rows = conn.execute(
        sa.select(
            workflow_inbox.c.task_id,
            workflow_inbox.c.received_at,
            workflow_inbox.c.last_error,
            workflow_inbox.c.next_attempt_at,
        ).where(workflow_inbox.c.instance_id == instance_id, workflow_inbox.c.state == "PENDING")
    )
    found: dict[str, dt.datetime] = {}
    failed = None
    for task_id, received, last_error, retry_at in rows:
        if task_id is not None:  # a signal's or a resume's deferred advance serves no task
            found[task_id] = min(received, found.get(task_id, received))
        if last_error is not None:
            failed = (last_error, retry_at)
    return found, failed


@dataclass(frozen=True)
class _Context:
    now: dt.datetime
    paused: bool
    steps: dict[str, Any]
    waits: dict[str, Any]
    lag: float | None


def _explain(
    step: Any,
    depends_on: list[str],
    current: ActivationView | None,
    awaiting: bool,
    ctx: _Context,
) -> str:
    """Where the step is, in one sentence a person can act on."""
    if step.state == "PENDING":
        open_deps = [d for d in depends_on if ctx.steps[d].state in ("PENDING", "ACTIVE", "PARKED")]
        if ctx.paused:
            return "paused: decided after resume"
        return f"waiting for {', '.join(open_deps)}" if open_deps else "ready: decided next"
    if current is None:
        return str(step.state).lower()
    if awaiting:
        return (
            f"task finished ({current.task_state}), orchestration not yet advanced "
            f"(inbox lag {ctx.lag:.1f}s)"
        )
    if step.state == "PARKED" and current.task_state in ("FAILED", "CANCELLED"):
        return (
            f"parked: task {current.task_id} failed on review; orbit task retry runs the step "
            "again, orbit workflow cancel ends the workflow"
        )
    if step.state == "PARKED":
        return f"parked: task {current.task_id} awaits review (orbit task review)"
    if step.state != "ACTIVE":
        return str(step.state).lower()
    wait = ctx.waits.get(step.current_activation_id)
    if wait is not None and wait.kind == "signal":
        until = f" until {wait.deadline_at:%Y-%m-%dT%H:%M:%SZ}" if wait.deadline_at else ""
        return f"waiting for signal {wait.signal_name!r}{until}"
    if wait is not None:
        return f"sleeping until {wait.deadline_at:%Y-%m-%dT%H:%M:%SZ}"
    prefix = "paused: " if ctx.paused else ""
    if step.kind == "poll":
        when = (
            f"; next round at {current.next_poll_at:%Y-%m-%dT%H:%M:%SZ}"
            if current.next_poll_at
            else f"; round task {current.task_state}"
        )
        return f"{prefix}poll round {current.rounds_used} of {current.max_rounds}{when}"
    return f"{prefix}task {current.task_id} {current.task_state}"


@dataclass(frozen=True)
class LiveCounts:
    """Live instances by (namespace, RUNNING|PAUSED), and pending signals by namespace."""

    instances: dict[tuple[str, str], int] = field(default_factory=dict)
    pending_signals: dict[str, int] = field(default_factory=dict)
    #: Running instances whose timers failed to fire and wait for their retry, by namespace.
    timers_backing_off: dict[str, int] = field(default_factory=dict)


def live_counts(conn: sa.Connection) -> LiveCounts:
    instances: dict[tuple[str, str], int] = {
        (ns, "PAUSED" if paused else "RUNNING"): n
        for ns, paused, n in conn.execute(
            sa.select(workflow_instances.c.namespace, workflow_instances.c.paused, sa.func.count())
            .where(workflow_instances.c.state == "RUNNING")
            .group_by(workflow_instances.c.namespace, workflow_instances.c.paused)
        )
    }
    signals: dict[str, int] = dict(
        conn.execute(
            sa.select(workflow_signals.c.namespace, sa.func.count())
            .where(workflow_signals.c.state == "PENDING")
            .group_by(workflow_signals.c.namespace)
        ).all()
    )
    backing_off: dict[str, int] = dict(
        conn.execute(
            sa.select(workflow_instances.c.namespace, sa.func.count())
            .where(
                workflow_instances.c.state == "RUNNING",
                workflow_instances.c.timer_failures.is_not(None),
            )
            .group_by(workflow_instances.c.namespace)
        ).all()
    )
    return LiveCounts(instances, signals, backing_off)
