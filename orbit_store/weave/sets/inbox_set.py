"""Consuming the inbox of a set of instances in one transaction (seed §5 "内部事件消费", §6.3;
invariants 9, 10 and 12): the set pass of the inbox consumer.

In a constant number of statements, whatever the set's size:

1. the instance rows, locked ``FOR UPDATE SKIP LOCKED`` in id order with the database's time
   (the first lock of every Weave transaction; an instance another transaction holds, or one
   not found, is left to the single path);
2. their steps; their PENDING inbox rows that are due, oldest first; the activations those rows
   name; their PENDING signals (counted) — one read each;
3. each instance decided in Python, its outcomes in order, as :func:`inbox.consume` would —
   applied to the activation only if its task is still the current one (invariant 10), then
   ``advance`` — with every write held back (``buffered``);
4. everything written at once (``set_writes``).

An instance that needs what the set path does not hold back — paused (invariant 12: its
continuation row), a cancel, a pending signal a new wait would consume, a poll round, a retry,
signals to expire — or whose decision raises is left out, nothing of it written, and returned
in ``alone``: the caller consumes its rows one per transaction (``inbox.consume``), where a
failure is recorded on the row and backed off for that instance only. Pulse refusing a step
task (a quota) raises ``SetRefused``: the caller decides the set again without that instance.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import as_db_time
from orbit_store.payload import DEFAULT_MAX_PAYLOAD_BYTES
from orbit_store.schema import (
    workflow_activations,
    workflow_inbox,
)

from ..advance import advance
from ..buffered import NeedsSinglePath
from ..context import InstanceContext, context_of, lock_set, steps_of
from ..inbox import apply_outcome
from ..set_writes import SET_SIZE, SetOutcome, SetRefused, decide_held, release, write_set
from ..waits import pending_signals

__all__ = ["SET_SIZE", "SetOutcome", "SetRefused", "consume_set"]


def consume_set(
    conn: sa.Connection,
    *,
    namespace: str,
    instance_ids: Sequence[str],
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> SetOutcome:
    """Consume the due inbox rows of ``instance_ids`` (one namespace) in this transaction; see
    the module docstring."""
    if len(instance_ids) > SET_SIZE:
        raise ValueError(f"at most {SET_SIZE} instances per set")
    outcome = SetOutcome()
    rows = lock_set(conn, namespace, instance_ids)
    # Held by another transaction, or not found: the single path waits for it, or says so.
    outcome.alone = sorted(set(instance_ids) - {row.id for row in rows})
    if not rows:
        return outcome
    ids = [row.id for row in rows]
    steps, messages, activations, signals = _read(conn, ids, as_db_time(conn, rows[0].db_now))
    decided: list[InstanceContext] = []
    consumed: dict[str, str] = {}
    for row in rows:
        if not messages[row.id]:
            continue
        ctx = context_of(conn, row, steps[row.id], max_payload_bytes=max_payload_bytes)
        done: dict[str, str] = {}
        held = decide_held(
            ctx,
            conn,
            functools.partial(_decide, messages[row.id], activations, done),
            pending_signals=signals.get(row.id, 0),
            falls_back=(Exception,),  # whatever its decision raises, it is taken alone
        )
        if not held:
            outcome.alone.append(row.id)
            continue
        decided.append(ctx)
        consumed.update(done)
    write_set(conn, namespace, decided, consumed)
    release(decided, conn)
    outcome.reports += [ctx.report for ctx in decided]
    outcome.consumed = len(consumed)
    return outcome


def _read(
    conn: sa.Connection, ids: list[str], db_now: Any
) -> tuple[dict[str, list[Any]], dict[str, list[Any]], dict[str, Any], dict[str, int]]:
    """Steps, due PENDING inbox rows (in order), the activations they name, PENDING signals."""
    steps = steps_of(conn, ids)
    messages: dict[str, list[Any]] = defaultdict(list)
    due = conn.execute(
        sa.select(workflow_inbox)
        .where(
            workflow_inbox.c.instance_id.in_(ids),
            workflow_inbox.c.state == "PENDING",
            workflow_inbox.c.next_attempt_at <= db_now,
        )
        .order_by(workflow_inbox.c.received_at, workflow_inbox.c.id)
    )
    for row in due:
        messages[row.instance_id].append(row)
    named = sorted({m.activation_id for rows in messages.values() for m in rows if m.activation_id})
    activations: dict[str, Any] = {}
    if named:
        for row in conn.execute(
            sa.select(workflow_activations).where(workflow_activations.c.id.in_(named))
        ):
            activations[row.id] = row
    signals = pending_signals(conn, ids)
    return steps, messages, activations, signals


def _decide(
    messages: list[Any], activations: dict[str, Any], done: dict[str, str], ctx: InstanceContext
) -> None:
    """Apply the instance's outcomes in order and advance after each (held back); ``done``
    gets inbox row id → what consuming it did."""
    if ctx.instance.paused:
        raise NeedsSinglePath("paused: its continuations are recorded alone")
    for message in messages:
        if message.activation_id is None:
            what = f"advanced after {message.kind}"
        else:
            activation = activations.get(message.activation_id)
            what, _ = apply_outcome(ctx, message, activation)
        advance(ctx)
        ctx.flush()
        done[message.id] = what
        received = message.received_at
        if isinstance(received, str):  # SQLite returns text
            received = dt.datetime.fromisoformat(received)
        lag = max((ctx.now - received).total_seconds(), 0.0)
        ctx.report.orchestration_lag_seconds = max(ctx.report.orchestration_lag_seconds or 0, lag)
    ctx.report.outcome = "; ".join(done.values())[:255]
