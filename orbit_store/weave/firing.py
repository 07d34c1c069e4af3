"""Firing an instance's due timers inside the advancing transaction (called by ``advance``):
sleeps that are over succeed, signal waits that timed out follow their ``onTimeout``, due poll
rounds start. Each moves by a conditional update, so a timer fires once however many
transactions see it due (invariant 11 for poll rounds).
"""

from __future__ import annotations

import sqlalchemy as sa

from orbit_store.schema import workflow_activations, workflow_waits

from .activate import start_round
from .context import InstanceContext, LostRace
from .model import StepState, WaitState
from .transitions import move_step


def fire_due(ctx: InstanceContext) -> None:
    """Fire every timer of the instance whose time has come (called by ``advance``)."""
    wake = ctx.instance.wake_at
    if wake is None or wake > ctx.now:
        return
    _fire_waits(ctx)
    _fire_polls(ctx)
    ctx.timers_changed = ctx.timers_fired = True


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
