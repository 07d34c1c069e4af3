"""Signals (seed §5 "信号受理 / 消费", invariant 10).

Accepting stores the signal idempotently by the client's ``signal_id`` (the same id and content
again is a replay; the same id with other content is a conflict). A signal advances only a
matching *active* wait: a WAITING wait of the same name in a running, unpaused instance — then
wait, signal and step move together in the accepting transaction. Otherwise it stays PENDING,
and the next wait of that name takes the oldest pending one when it is activated. Signals still
pending when the instance finishes are EXPIRED. A name no wait of the bound definition uses is
refused outright.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import sqlalchemy as sa

from orbit_store.errors import Conflict, IdempotencyConflict, InvalidRequest
from orbit_store.ids import new_id
from orbit_store.schema import workflow_activations, workflow_signals, workflow_waits

from .context import InstanceContext, LostRace, Step, lock_instance
from .model import SignalResult, SignalState, StepState, WaitState
from .transitions import move_step


def _digest(name: str, payload: Any) -> str:
    text = json.dumps({"name": name, "payload": payload}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def accept_signal(
    conn: sa.Connection,
    *,
    namespace: str,
    instance_id: str,
    signal_id: str,
    name: str,
    payload: Any = None,
    sent_by: str | None = None,
) -> tuple[SignalResult, InstanceContext]:
    """Store the signal and, when a wait of its name is active, consume it and advance."""
    from .advance import advance  # the core calls back into signal matching

    ctx = lock_instance(conn, namespace, instance_id, actor=sent_by)
    digest = _digest(name, payload)
    existing = conn.execute(
        sa.select(workflow_signals).where(
            workflow_signals.c.instance_id == instance_id,
            workflow_signals.c.signal_id == signal_id,
        )
    ).one_or_none()
    if existing is not None:
        if existing.digest != digest:
            raise IdempotencyConflict(
                f"signal id {signal_id!r} was already used for a different signal on workflow "
                f"{instance_id}; use a new signal id for a new signal"
            )
        return SignalResult(signal_id, SignalState(existing.state), replayed=True), ctx
    if name not in ctx.definition.signal_names:
        known = ", ".join(sorted(ctx.definition.signal_names)) or "none"
        raise InvalidRequest(
            f"workflow {instance_id} (definition {ctx.instance.definition_name} "
            f"v{ctx.instance.version}) has no wait for signal {name!r}; its signals: {known}"
        )
    if ctx.instance.state.is_terminal:
        raise Conflict(
            f"workflow {instance_id} is {ctx.instance.state.value}: it accepts no more signals"
        )
    row_id = new_id()
    conn.execute(
        workflow_signals.insert().values(
            id=row_id,
            instance_id=instance_id,
            namespace=namespace,
            signal_id=signal_id,
            name=name,
            payload=payload,
            digest=digest,
            state=SignalState.PENDING.value,
            sent_by=sent_by,
            received_at=ctx.now,
        )
    )
    ctx.event("signal.accepted", details={"signal_id": signal_id, "name": name})
    consumed_by = None
    if not ctx.instance.paused:
        consumed_by = match_waits(ctx, only_name=name)
        advance(ctx)
    ctx.flush()
    state = SignalState.CONSUMED if consumed_by else SignalState.PENDING
    return SignalResult(signal_id, state, replayed=False, consumed_by_step=consumed_by), ctx


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
