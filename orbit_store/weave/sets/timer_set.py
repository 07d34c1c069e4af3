"""Firing the due timers of a set of instances in one transaction (seed §5 "流程启动 / 推进";
invariants 9 and 12): the set pass of the timer loop.

In a constant number of statements, whatever the set's size:

1. the instance rows, locked ``FOR UPDATE SKIP LOCKED`` in id order with the database's time
   (the first lock of every Weave transaction), the due condition checked again under the lock
   — running, unpaused (invariant 12), ``wake_at`` passed, not backing off: an instance another
   transaction fired meanwhile is no longer due, and is left as it is;
2. their steps; their timers (WAITING waits with a deadline, ACTIVE activations with a poll
   due); their PENDING signals (counted) — one read each;
3. each instance fired and advanced in Python as :func:`timers.wake_instance` would, with every
   write held back (``buffered``): a sleep that is over succeeds, a signal wait that timed out
   follows its ``onTimeout``, and the next steps' tasks, signal waits and sleeps are created —
   a new wait's deadline counting in the instance's next wake-up;
4. everything written at once (``set_writes``): a wait ends by one guarded UPDATE for the set,
   its affected rows checked, so a timer fires once.

An instance another transaction holds, or one whose move the set does not hold back — a poll
round, a pending signal a new wait would consume, a cancel — or whose decision raises, is left
out, nothing of it written, and returned in ``alone``: the caller wakes it in its own transaction
(``timers.wake_instance``), whose failure backs that instance off alone. Pulse refusing a step
task (a quota) raises ``SetRefused``: the caller fires the set again without that instance.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import as_db_time
from orbit_store.payload import DEFAULT_MAX_PAYLOAD_BYTES
from orbit_store.schema import workflow_activations, workflow_waits

from ..advance import advance
from ..context import InstanceContext, Timers, context_of, lock_set, steps_of
from ..model import InstanceState, StepState, WaitState
from ..set_writes import SET_SIZE, SetOutcome, decide_held, release, write_set
from ..waits import pending_signals


def fire_set(
    conn: sa.Connection,
    *,
    namespace: str,
    instance_ids: Sequence[str],
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> SetOutcome:
    """Fire the due timers of ``instance_ids`` (one namespace) in this transaction and advance
    them; see the module docstring."""
    if len(instance_ids) > SET_SIZE:
        raise ValueError(f"at most {SET_SIZE} instances per set")
    outcome = SetOutcome()
    locked = lock_set(conn, namespace, instance_ids)
    # Held by another transaction, or not found: the single path waits for it, or says so.
    outcome.alone = sorted(set(instance_ids) - {row.id for row in locked})
    rows = [row for row in locked if _is_due(row, as_db_time(conn, row.db_now))]
    if not rows:
        return outcome
    ids = [row.id for row in rows]
    steps, timers, signals = steps_of(conn, ids), _timers(conn, ids), pending_signals(conn, ids)
    fired: list[InstanceContext] = []
    for row in rows:
        ctx = context_of(conn, row, steps[row.id], max_payload_bytes=max_payload_bytes)
        ctx.timers = timers.get(row.id, Timers([], []))
        held = decide_held(
            ctx,
            conn,
            _fire,
            pending_signals=signals.get(row.id, 0),
            falls_back=(Exception,),  # whatever its firing raises, it is woken alone
        )
        if held:
            fired.append(ctx)
        else:
            outcome.alone.append(row.id)
    write_set(conn, namespace, fired, {})
    release(fired, conn)
    outcome.reports += [ctx.report for ctx in fired]
    return outcome


def _is_due(row: Any, now: Any) -> bool:
    """:func:`timers.due_instances`' condition, seen under the instance lock."""
    return (
        row.state == InstanceState.RUNNING.value
        and not row.paused
        and row.wake_at is not None
        and row.wake_at <= now
        and (row.timer_retry_at is None or row.timer_retry_at <= now)
    )


def _timers(conn: sa.Connection, ids: list[str]) -> dict[str, Timers]:
    """Each instance's WAITING waits with a deadline and ACTIVE activations with a poll due."""
    waits: dict[str, list[Any]] = defaultdict(list)
    for wait in conn.execute(
        sa.select(
            workflow_waits.c.id,
            workflow_waits.c.instance_id,
            workflow_waits.c.kind,
            workflow_waits.c.deadline_at,
            workflow_activations.c.step_name,
        )
        .join(workflow_activations, workflow_activations.c.id == workflow_waits.c.activation_id)
        .where(
            workflow_waits.c.instance_id.in_(ids),
            workflow_waits.c.state == WaitState.WAITING.value,
            workflow_waits.c.deadline_at.is_not(None),
        )
    ):
        waits[wait.instance_id].append(wait)
    polls: dict[str, list[Any]] = defaultdict(list)
    for poll in conn.execute(
        sa.select(
            workflow_activations.c.id,
            workflow_activations.c.instance_id,
            workflow_activations.c.step_name,
            workflow_activations.c.next_poll_at,
        ).where(
            workflow_activations.c.instance_id.in_(ids),
            workflow_activations.c.state == StepState.ACTIVE.value,
            workflow_activations.c.next_poll_at.is_not(None),
        )
    ):
        polls[poll.instance_id].append(poll)
    return {i: Timers(waits[i], polls[i]) for i in ids}


def _fire(ctx: InstanceContext) -> None:
    advance(ctx)  # fires the due timers first (``firing``)
    ctx.flush()
