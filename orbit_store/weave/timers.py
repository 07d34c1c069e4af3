"""Timers: sleeps that are over, signal waits that timed out, poll rounds that are due.

Every timer is persisted state — a wait's ``deadline_at``, a poll activation's ``next_poll_at``
— and the instance's ``wake_at`` is the earliest of them. The server's timer loop lists running,
unpaused instances whose ``wake_at`` has passed (:func:`due_instances`) and runs
:func:`wake_instance` for each: one transaction that fires what is due under the instance lock
(conditional updates, so a timer fires once) and advances. A paused instance's timers fire on
resume instead.
"""

from __future__ import annotations

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.schema import workflow_activations, workflow_instances, workflow_waits

from .activate import start_round
from .context import InstanceContext, LostRace, lock_instance
from .model import AdvanceReport, InstanceState, StepState, WaitState
from .transitions import move_step


def due_instances(
    conn: sa.Connection, *, limit: int = 100, namespace: str | None = None
) -> list[tuple[str, str]]:
    """(namespace, instance id) of running, unpaused instances with a timer due (no locks)."""
    query = (
        sa.select(workflow_instances.c.namespace, workflow_instances.c.id)
        .where(
            workflow_instances.c.state == InstanceState.RUNNING.value,
            workflow_instances.c.wake_at <= db_now(conn),
            workflow_instances.c.paused.is_(False),
        )
        .order_by(workflow_instances.c.wake_at)
        .limit(limit)
    )
    if namespace is not None:
        query = query.where(workflow_instances.c.namespace == namespace)
    return [(ns, instance_id) for ns, instance_id in conn.execute(query)]


def wake_instance(conn: sa.Connection, *, namespace: str, instance_id: str) -> AdvanceReport:
    """Fire the instance's due timers and advance it (a no-op if another replica did)."""
    from .advance import advance  # the core imports this module's fire_due

    ctx = lock_instance(conn, namespace, instance_id)
    advance(ctx)
    ctx.flush()
    return ctx.report


def fire_due(ctx: InstanceContext) -> None:
    """Fire every timer of the instance whose time has come (called by ``advance``)."""
    wake = ctx.instance.wake_at
    if wake is None or wake > ctx.now:
        return
    _fire_waits(ctx)
    _fire_polls(ctx)
    ctx.timers_changed = True


def _fire_waits(ctx: InstanceContext) -> None:
    due = ctx.conn.execute(
        sa.select(workflow_waits.c.id, workflow_waits.c.kind, workflow_activations.c.step_name)
        .join(workflow_activations, workflow_activations.c.id == workflow_waits.c.activation_id)
        .where(
            workflow_waits.c.instance_id == ctx.instance.id,
            workflow_waits.c.state == WaitState.WAITING.value,
            workflow_waits.c.deadline_at <= ctx.now,
        )
        .order_by(workflow_waits.c.deadline_at)
    ).all()
    for wait_id, kind, step_name in due:
        step = ctx.steps[step_name]
        satisfied = kind == "sleep"
        to_wait = WaitState.SATISFIED if satisfied else WaitState.TIMED_OUT
        updated = ctx.conn.execute(
            workflow_waits.update()
            .where(
                workflow_waits.c.id == wait_id, workflow_waits.c.state == WaitState.WAITING.value
            )
            .values(state=to_wait.value, finished_at=ctx.now)
        )
        if updated.rowcount != 1:
            raise LostRace(f"wait of step {step_name} moved on")
        if satisfied:
            move_step(
                ctx, step, StepState.SUCCEEDED, reason="slept", result={"woke_at": str(ctx.now)}
            )
            continue
        wait = ctx.definition.step(step_name).wait
        assert wait is not None
        move_step(
            ctx,
            step,
            StepState.TIMED_OUT,
            reason=f"no signal {wait.signal!r} within {wait.timeout_seconds:g}s; "
            f"onTimeout: {wait.on_timeout}",
            result={"timed_out": True},
        )


def _fire_polls(ctx: InstanceContext) -> None:
    due = ctx.conn.execute(
        sa.select(workflow_activations.c.step_name).where(
            workflow_activations.c.instance_id == ctx.instance.id,
            workflow_activations.c.state == StepState.ACTIVE.value,
            workflow_activations.c.next_poll_at <= ctx.now,
        )
    ).all()
    for (step_name,) in due:
        start_round(ctx, ctx.steps[step_name])
