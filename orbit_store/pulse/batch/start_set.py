"""Set-based start of a batch of attempts: LEASED → RUNNING for the common case in
a few statements per batch, whatever its size.

Each item is judged by ``start.start_attempt``'s rules (invariant 3: the current attempt, its
token, its restore epoch, a live session, within its lease; invariant 12: its gate open), from
reads made once per batch (``batch_read``). What the rules refuse without writing anything
(not found, wrong token, fenced, superseded, already started, session ended) is answered here;
an item whose start is the common case — task LEASED under this attempt, live session, no cancel
request, gate open, lease not run out — is started by grouped conditional UPDATEs:

    UPDATE task_attempts SET state='RUNNING', … WHERE id IN (…) AND state='LEASED'
        AND lease_expires_at > now                       (one per lease length)
    UPDATE tasks SET state='RUNNING', state_version=state_version+1, safety=CASE id … END
        WHERE id IN (…) AND state='LEASED' AND state_version = CASE id … END

each with its affected rows checked (:class:`SetPathMismatch` otherwise), and one multi-row
INSERT of their task_events. Every other item (cancel requested, gate closed, a lease that ran
out and may need the outage grace, two attempts of one task) is left to the caller, which runs
``start_attempt`` for it in its own savepoint afterwards: its session, gate and task are locked
here already, so it takes only what comes later in the lock order.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from orbit_store.db import by_primary_key
from orbit_store.pulse.batch.items import StartItem
from orbit_store.pulse.leases.start import answer_before_start
from orbit_store.pulse.model import AttemptState, Safety, StartRefusal, StartResult, TaskState
from orbit_store.pulse.state.batch_moves import Move, move_tasks
from orbit_store.pulse.state.batch_read import (
    SetPathMismatch,
    fenced_ids,
    live_sessions,
    lock_tasks_now,
    open_gates,
    read_attempts,
    shared_tasks,
    split_by_token,
)
from orbit_store.schema import task_attempts

#: An item the set path leaves to the single-item body.
PER_ITEM = "per_item"


def start_set(
    conn: sa.Connection, namespace: str, items: Sequence[StartItem]
) -> tuple[dict[str, StartResult], list[str]]:
    """Start what the set path can; returns the answers given and the attempt ids (in id
    order) left for ``start_attempt``. Raises :class:`SetPathMismatch` (see the module)."""
    found = read_attempts(conn, namespace, [item.attempt_id for item in items])
    missing, wrong, passed = split_by_token(found, items)
    answers = {a: StartResult(False, StartRefusal.NOT_FOUND) for a in missing}
    answers |= {a: StartResult(False, StartRefusal.INVALID_TOKEN) for a in wrong}
    fenced = fenced_ids(found, passed)
    answers |= {a: StartResult(False, StartRefusal.RESTORE_FENCED) for a in fenced}
    checked = sorted(a for a in passed if a not in fenced)
    if not checked:
        return answers, []
    sessions = {found[a].worker_session_id for a in checked} - {None}
    live = live_sessions(conn, namespace, sessions)
    gates = open_gates(conn, [found[a] for a in checked])
    locked, now = lock_tasks_now(conn, namespace, {found[a].task_id for a in checked})
    shared = shared_tasks(found, checked)
    rest: list[str] = []
    starts: list[tuple[str, sa.Row[Any]]] = []
    for attempt_id in checked:
        attempt = found[attempt_id]
        task = locked.get(attempt.task_id)
        if task is None or task.id in shared:
            rest.append(attempt_id)
            continue
        session_live = attempt.worker_session_id is None or attempt.worker_session_id in live
        verdict = _judge(attempt, task, session_live, gates[attempt.gate_id], now)
        if verdict == PER_ITEM:
            rest.append(attempt_id)
        elif isinstance(verdict, StartResult):
            answers[attempt_id] = verdict
        else:
            starts.append((attempt_id, task))
    by_id = {item.attempt_id: item for item in items}
    answers |= _start(conn, namespace, starts, by_id, now)
    return answers, rest


def _judge(
    attempt: sa.Row[Any], task: sa.Row[Any], session_live: bool, gate_open: bool, now: dt.datetime
) -> StartResult | str | None:
    """``start_attempt``'s decision for one item, in its order (its answers without a write
    are the same function's): an answer, :data:`PER_ITEM`, or None (start it on the set
    path)."""
    answer = answer_before_start(task, attempt.id, attempt.lease_expires_at, session_live, now)
    if answer is not None:
        return answer
    if task.cancel_requested or not gate_open or task.state != TaskState.LEASED.value:
        return PER_ITEM  # a write of its own: cancelled or handed back
    if attempt.lease_expires_at <= now:
        return PER_ITEM  # the outage grace may apply (pulse.outages)
    return None


def _start(
    conn: sa.Connection,
    namespace: str,
    starts: list[tuple[str, sa.Row[Any]]],
    items: dict[str, StartItem],
    now: dt.datetime,
) -> dict[str, StartResult]:
    if not starts:
        return {}
    by_lease: dict[int, list[str]] = defaultdict(list)
    for attempt_id, task in starts:
        by_lease[int(task.lease_seconds)].append(attempt_id)
    for lease_seconds, attempt_ids in sorted(by_lease.items()):
        _run_attempts(conn, attempt_ids, now, now + dt.timedelta(seconds=lease_seconds))
    moves = [
        Move(
            task,
            TaskState.RUNNING,
            "started",
            attempt_id,
            values={"safety": _safety(items[attempt_id], task)},
        )
        for attempt_id, task in starts
    ]
    move_tasks(conn, namespace, moves, now)
    return {
        attempt_id: StartResult(
            True,
            lease_expires_at=now + dt.timedelta(seconds=int(task.lease_seconds)),
            lease_remaining_seconds=float(task.lease_seconds),
        )
        for attempt_id, task in starts
    }


def _run_attempts(
    conn: sa.Connection, attempt_ids: list[str], now: dt.datetime, expires: dt.datetime
) -> None:
    """LEASED → RUNNING for attempts whose lease has not run out (checked again here)."""
    values = {"ids": sorted(attempt_ids), "now": now, "expires": expires}
    changed = conn.execute(_RUN_ATTEMPTS, values).rowcount
    if changed != len(attempt_ids):
        raise SetPathMismatch(f"started {changed} of {len(attempt_ids)} attempts")


#: Built once (every batch of starts); the expanding IN takes any number of ids.
_RUN_ATTEMPTS = by_primary_key(
    task_attempts.update()
    .where(
        task_attempts.c.id.in_(sa.bindparam("ids", expanding=True)),
        task_attempts.c.state == AttemptState.LEASED.value,
        task_attempts.c.lease_expires_at > sa.bindparam("now"),
    )
    .values(
        state=AttemptState.RUNNING.value,
        started_at=sa.bindparam("now"),
        heartbeat_at=sa.bindparam("now"),
        lease_expires_at=sa.bindparam("expires"),
    ),
    task_attempts,
)


def _safety(item: StartItem, task: sa.Row[Any]) -> str:
    """The stricter of the handler's declared class and the task's own (invariant 7)."""
    unsafe = Safety.UNSAFE in (item.handler_safety, task.safety)
    return (Safety.UNSAFE if unsafe else Safety.SAFE).value
