"""Signals (seed §5 "信号受理 / 消费", invariant 10).

Accepting stores the signal idempotently by the client's ``signal_id`` (the same id and content
again is a replay; the same id with other content is a conflict). A signal advances only a
matching *active* wait: a WAITING wait of the same name in a running, unpaused instance — then
wait, signal and step move together in the accepting transaction, which also records a deferred
advance in the inbox: the next steps' tasks are created by the inbox consumer, so a quota that
refuses them never refuses the signal (seed §5: the signal's idempotency record and a pending
record, nothing else). Otherwise it stays PENDING,
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
from orbit_store.payload import DEFAULT_MAX_PAYLOAD_BYTES
from orbit_store.schema import workflow_signals

from .context import InstanceContext, lock_instance
from .inbox import SIGNAL_ACCEPTED, defer_advance
from .model import SignalResult, SignalState
from .waits import match_waits


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
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> tuple[SignalResult, InstanceContext]:
    """Store the signal and, when a wait of its name is active, consume it and advance."""
    ctx = lock_instance(
        conn, namespace, instance_id, actor=sent_by, max_payload_bytes=max_payload_bytes
    )
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
    if consumed_by is not None:
        defer_advance(ctx, SIGNAL_ACCEPTED, f"signal:{row_id}")
    ctx.flush()
    state = SignalState.CONSUMED if consumed_by else SignalState.PENDING
    return SignalResult(signal_id, state, replayed=False, consumed_by_step=consumed_by), ctx
