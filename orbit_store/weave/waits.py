"""Signal waits (seed §5 "信号受理 / 消费", invariant 10): giving pending signals to active waits
of their name — oldest signal first, one signal per wait — and expiring what no wait will take.
Consuming moves the wait, the signal and the step together. Used by the core (``advance``,
``activate``) and by the signal and resume transactions.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from orbit_store.schema import workflow_activations, workflow_signals, workflow_waits

from .context import InstanceContext, LostRace, Step
from .model import SignalState, StepState, WaitState
from .transitions import move_step


def match_waits(ctx: InstanceContext, only_name: str | None = None) -> str | None:
    """Give each WAITING signal wait the oldest pending signal of its name; returns the last
    step that consumed one (None when none did)."""
    query = (
        sa.select(
            workflow_waits.c.id, workflow_waits.c.signal_name, workflow_activations.c.step_name
        )
        .join(workflow_activations, workflow_activations.c.id == workflow_waits.c.activation_id)
        .where(
            workflow_waits.c.instance_id == ctx.instance.id,
            workflow_waits.c.state == WaitState.WAITING.value,
            workflow_waits.c.kind == "signal",
        )
        .order_by(workflow_waits.c.created_at)
    )
    if only_name is not None:
        query = query.where(workflow_waits.c.signal_name == only_name)
    consumed_by = None
    for wait_id, signal_name, step_name in ctx.conn.execute(query).all():
        if take_pending(ctx, ctx.steps[step_name], wait_id, signal_name):
            consumed_by = step_name
    return consumed_by


def take_pending(ctx: InstanceContext, step: Step, wait_id: str, name: str) -> bool:
    """Consume the oldest pending signal named ``name`` for this wait, if there is one."""
    if ctx.writes is not None and ctx.writes.pending_signals == 0:
        return False  # none under the instance lock (counted by the set pass): nothing to take
    signal = ctx.conn.execute(
        sa.select(workflow_signals)
        .where(
            workflow_signals.c.instance_id == ctx.instance.id,
            workflow_signals.c.state == SignalState.PENDING.value,
            workflow_signals.c.name == name,
        )
        .order_by(workflow_signals.c.received_at, workflow_signals.c.id)
        .limit(1)
    ).one_or_none()
    if signal is None:
        return False
    _consume(ctx, step, wait_id, signal)
    return True


def _consume(ctx: InstanceContext, step: Step, wait_id: str, signal: sa.Row[Any]) -> None:
    conn = ctx.conn
    waited = conn.execute(
        workflow_waits.update()
        .where(workflow_waits.c.id == wait_id, workflow_waits.c.state == WaitState.WAITING.value)
        .values(
            state=WaitState.SATISFIED.value,
            satisfied_by_signal_id=signal.id,
            finished_at=ctx.now,
        )
    )
    taken = conn.execute(
        workflow_signals.update()
        .where(
            workflow_signals.c.id == signal.id,
            workflow_signals.c.state == SignalState.PENDING.value,
        )
        .values(
            state=SignalState.CONSUMED.value,
            consumed_at=ctx.now,
            consumed_by_activation_id=step.current_activation_id,
        )
    )
    if waited.rowcount != 1 or taken.rowcount != 1:
        raise LostRace(f"signal {signal.signal_id} or the wait of {step.name} moved on")
    ctx.timers_changed = True
    ctx.signal_consumed(signal.name, signal.payload)
    ctx.event(
        "signal.consumed",
        step.name,
        step.activation_count,
        {"signal_id": signal.signal_id, "name": signal.name},
    )
    result = {"signal": signal.name, "signal_id": signal.signal_id, "payload": signal.payload}
    move_step(ctx, step, StepState.SUCCEEDED, reason=f"signal {signal.name}", result=result)


def expire_pending(ctx: InstanceContext) -> None:
    """The instance is finishing: its unmatched signals will never be consumed."""
    if ctx.writes is not None and ctx.writes.pending_signals == 0:
        return  # none under the instance lock: nothing to expire (the set path's common case)
    expired = ctx.conn.execute(
        workflow_signals.update()
        .where(
            workflow_signals.c.instance_id == ctx.instance.id,
            workflow_signals.c.state == SignalState.PENDING.value,
        )
        .values(state=SignalState.EXPIRED.value)
    )
    if expired.rowcount:
        ctx.event("signal.expired", details={"count": expired.rowcount})


def pending_signals(conn: sa.Connection, instance_ids: list[str]) -> dict[str, int]:
    """How many PENDING signals each of several instances has (read at once by a set pass,
    which expires them alone)."""
    return dict(
        conn.execute(
            sa.select(workflow_signals.c.instance_id, sa.func.count())
            .where(
                workflow_signals.c.instance_id.in_(instance_ids),
                workflow_signals.c.state == SignalState.PENDING.value,
            )
            .group_by(workflow_signals.c.instance_id)
        ).all()
    )
