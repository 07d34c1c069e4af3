"""Firing an instance's due timers inside the advancing transaction (called by ``advance``):
sleeps that are over succeed, signal waits that timed out follow their ``onTimeout``, due poll
rounds start. Each moves by a conditional update, so a timer fires once however many
transactions see it due (invariant 11 for poll rounds).

In a timer set (``timer_set``) the instance's timers were read with the set's (``ctx.timers``)
and a wait's move is held back, written by ``set_writes`` with one guarded statement for the
set; a poll round is not held back: it takes the instance alone.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from orbit_store.schema import workflow_activations, workflow_waits

from .activate import start_round
from .buffered import NeedsSinglePath
from .context import InstanceContext, LostRace, opened_deadline
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
    for wait_id, kind, step_name in _due_waits(ctx):
        step = ctx.steps[step_name]
        satisfied = kind == "sleep"
        _end_wait(
            ctx, wait_id, step_name, WaitState.SATISFIED if satisfied else WaitState.TIMED_OUT
        )
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


def _due_waits(ctx: InstanceContext) -> list[tuple[str, str, str]]:
    """(wait id, kind, step name) of the WAITING waits whose deadline passed, earliest first
    (from the set's read in a timer set, leaving out a wait this decision already moved). A
    wait opened in this set that is already due ends alone: it is not in either read."""
    if ctx.writes is not None and _opened_due(ctx):
        raise NeedsSinglePath("a wait opened in this set is already due")
    if ctx.timers is None:
        return [
            (row.id, row.kind, row.step_name)
            for row in ctx.conn.execute(
                sa.select(
                    workflow_waits.c.id, workflow_waits.c.kind, workflow_activations.c.step_name
                )
                .join(
                    workflow_activations,
                    workflow_activations.c.id == workflow_waits.c.activation_id,
                )
                .where(
                    workflow_waits.c.instance_id == ctx.instance.id,
                    workflow_waits.c.state == WaitState.WAITING.value,
                    workflow_waits.c.deadline_at <= ctx.now,
                )
                .order_by(workflow_waits.c.deadline_at)
            )
        ]
    moved = ctx.writes.waits if ctx.writes is not None else {}
    due = [w for w in ctx.timers.waits if w.deadline_at <= ctx.now and w.id not in moved]
    return [(w.id, w.kind, w.step_name) for w in sorted(due, key=lambda w: w.deadline_at)]


def _opened_due(ctx: InstanceContext) -> bool:
    assert ctx.writes is not None
    deadline = opened_deadline(ctx.writes)
    return deadline is not None and deadline <= ctx.now


def _end_wait(ctx: InstanceContext, wait_id: str, step_name: str, to: WaitState) -> None:
    """WAITING → ``to`` by a conditional update: the wait ends once (held back in a set)."""
    values: dict[str, Any] = {"state": to.value, "finished_at": ctx.now}
    if ctx.writes is not None:
        if ctx.timers is None:  # its next wake-up is read from the database: alone
            raise NeedsSinglePath(f"the wait of step {step_name} is ended alone")
        ctx.writes.move_wait(wait_id, WaitState.WAITING.value, values)
        return
    updated = ctx.conn.execute(
        workflow_waits.update()
        .where(workflow_waits.c.id == wait_id, workflow_waits.c.state == WaitState.WAITING.value)
        .values(**values)
    )
    if updated.rowcount != 1:
        raise LostRace(f"wait of step {step_name} moved on")


def _fire_polls(ctx: InstanceContext) -> None:
    if ctx.timers is None:
        due = ctx.conn.execute(
            sa.select(workflow_activations.c.step_name).where(
                workflow_activations.c.instance_id == ctx.instance.id,
                workflow_activations.c.state == StepState.ACTIVE.value,
                workflow_activations.c.next_poll_at <= ctx.now,
            )
        ).scalars()
        names = list(due)
    else:
        names = [p.step_name for p in ctx.timers.polls if p.next_poll_at <= ctx.now]
    if names and ctx.writes is not None:  # its round row and count are written alone
        raise NeedsSinglePath(f"poll round of {names[0]} is started alone")
    for step_name in names:
        start_round(ctx, ctx.steps[step_name])
