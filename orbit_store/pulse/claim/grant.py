"""Writing a claim's grants (seed §5 "领取", and "开始" for a lease with start): the attempts,
the tasks' one batched move, quota counters and events, in the claim's transaction.

A grant is LEASED (WAITING → LEASED, the worker starts it with a second call) or — for a lease
with start, when the task and its handler (as the worker declared it) are safe — started at once:
WAITING → LEASED → RUNNING in the same transaction, with both events, so a task's history reads
the same either way. Starting here keeps every rule of ``start.start_attempt`` (invariant 3):

- the restore fence: the claim read the open epoch (``fencing.open_epoch``) and stamps it;
- the session: the claim holds it ACTIVE under a shared lock (stricter than start's "live");
- the gate (invariant 12): a READY task's gate is open — a gate closing moves its READY tasks
  off the path under their row locks, which this claim holds, so the claim's view is the one
  a start would read;
- the cancel intent: a task with a cancel request is never started here (it is leased only,
  and its start call then settles it as CANCELLED);
- the lease runs from now (database time), ``lease_seconds`` long, as after a start.

Invariant 7 judges a lapse by what ran: the recorded safety is the stricter of the handler's
and the task's, as at start. Only grants where both are safe are started here, so a started
grant's lapse always means "retry" — harmless also for a grant whose answer never reached its
worker. Unsafe handlers and unsafe tasks keep the two-step protocol: a grant that never reached
its worker must not count as having run (see also ``unreceived``).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Collection
from typing import Any

import sqlalchemy as sa

from orbit_store.ids import new_id, new_secret
from orbit_store.pulse.limits import quota
from orbit_store.pulse.model import AttemptState, LeaseGrant, Safety, TaskState
from orbit_store.pulse.state import inserts
from orbit_store.pulse.state.attempts import hash_token
from orbit_store.pulse.state.batch_moves import grouped_params, grouped_update
from orbit_store.pulse.state.event_inserts import insert_task_events
from orbit_store.schema import tasks


def starts_at_grant(task: sa.Row[Any], start_handlers: Collection[str]) -> bool:
    """Whether a lease with start starts this task now: its handler was declared safe by the
    worker, the task's own class is safe too, and nobody asked to cancel it (a start would
    refuse that). An unsafe task is leased only: were its grant's answer lost on the way, its
    lapse while RUNNING would send it to review although nothing ran (invariant 7)."""
    return (
        task.handler in start_handlers
        and task.safety == Safety.SAFE.value
        and not task.cancel_requested
    )


def grant_tasks(
    conn: sa.Connection,
    granted: list[sa.Row[Any]],
    session_id: str | None,
    now: dt.datetime,
    epoch: int,
    start_handlers: Collection[str] = (),
) -> list[LeaseGrant]:
    """Grant the locked WAITING rows ``granted``: LEASED, or RUNNING for those
    ``starts_at_grant`` picks. One attempt insert, one task UPDATE, one event insert."""
    attempt_rows, event_rows, results = [], [], []
    attempt_of: dict[str, str] = {}
    steps_of: dict[str, int] = {}  # state_version steps: 1 (LEASED) or 2 (LEASED, RUNNING)
    for task in granted:
        started = starts_at_grant(task, start_handlers)
        attempt_id, token = new_id(), new_secret()
        attempt_of[task.id] = attempt_id
        steps_of[task.id] = 2 if started else 1
        generation = task.state_version + 1
        expires = now + dt.timedelta(seconds=task.lease_seconds)
        attempt_rows.append(_attempt_row(task, attempt_id, token, session_id, now, epoch, started))
        event_rows += _event_rows(task, attempt_id, session_id, now, started)
        results.append(
            LeaseGrant(
                task_id=task.id,
                attempt_id=attempt_id,
                generation=generation,
                epoch=epoch,  # restore fence
                token=token,
                lease_expires_at=expires,
                namespace=task.namespace,
                queue=task.queue,
                handler=task.handler,
                params=task.params,
                safety=Safety(task.safety),
                state_version=task.state_version + steps_of[task.id],
                deadline_at=task.deadline_at,
                available_at=task.available_at,
                leased_at=now,
                started=started,
            )
        )
    conn.execute(inserts.TASK_ATTEMPTS, attempt_rows)
    _move_tasks(conn, attempt_of, steps_of, now)
    counted = Counter(t.queue for t in granted if t.quota_counted)
    for queue_name in sorted(counted):
        n = counted[queue_name]
        quota.count(conn, granted[0].namespace, queue_name, waiting=-n, running=n)
    insert_task_events(conn, event_rows)
    return results


def _attempt_row(
    task: sa.Row[Any],
    attempt_id: str,
    token: str,
    session_id: str | None,
    now: dt.datetime,
    epoch: int,
    started: bool,
) -> dict[str, Any]:
    return {
        "id": attempt_id,
        "task_id": task.id,
        "namespace": task.namespace,
        "generation": task.state_version + 1,
        "epoch": epoch,  # restore fence
        "worker_session_id": session_id,
        "token_hash": hash_token(token),
        "state": (AttemptState.RUNNING if started else AttemptState.LEASED).value,
        "leased_at": now,
        "started_at": now if started else None,
        "heartbeat_at": now if started else None,
        "lease_expires_at": now + dt.timedelta(seconds=task.lease_seconds),
    }


def _event_rows(
    task: sa.Row[Any], attempt_id: str, session_id: str | None, now: dt.datetime, started: bool
) -> list[dict[str, Any]]:
    """The claim's LEASED event, and for a started grant the RUNNING one a start writes."""
    steps = [(TaskState.WAITING, TaskState.LEASED, "claimed", session_id)]
    if started:
        steps.append((TaskState.LEASED, TaskState.RUNNING, "started", None))
    return [
        {
            "id": new_id(),
            "task_id": task.id,
            "namespace": task.namespace,
            "state_version": task.state_version + i,
            "from_state": from_state.value,
            "to_state": to_state.value,
            "reason": reason,
            "attempt_id": attempt_id,
            "actor": actor,
            "details": None,
            "at": now,
        }
        for i, (from_state, to_state, reason, actor) in enumerate(steps, start=1)
    ]


def _move_tasks(
    conn: sa.Connection, attempt_of: dict[str, str], steps_of: dict[str, int], now: dt.datetime
) -> None:
    """One UPDATE for the whole batch (a statement kept per shape: ``batch_moves
    .grouped_update``); rows are locked by us, so every one must match. A READY task keeps its
    concurrency permit through LEASED and RUNNING. A started grant's recorded safety is SAFE
    already (task and handler are), so ``safety`` is left as is."""
    ids = sorted(attempt_of)
    states = {
        task_id: (TaskState.RUNNING if n == 2 else TaskState.LEASED).value
        for task_id, n in steps_of.items()
    }
    values: dict[str, dict[str, Any]] = {
        "state": states,
        "current_attempt_id": attempt_of,
        "wait_path": dict.fromkeys(ids),
        "updated_at": dict.fromkeys(ids, now),
    }
    sets, params = grouped_params(ids, values)
    ((_, steps),), step_params = grouped_params(
        ids, {"state_version": steps_of}, {"state_version": "state_version_add"}
    )
    adds = (("state_version", steps), ("attempts_used", 1))
    lease = grouped_update(tasks, len(ids), sets, adds=adds, from_state=True)
    updated = conn.execute(lease, params | step_params | {"from_state": TaskState.WAITING.value})
    if updated.rowcount != len(ids):
        raise RuntimeError(f"claim updated {updated.rowcount} of {len(ids)} locked tasks")
