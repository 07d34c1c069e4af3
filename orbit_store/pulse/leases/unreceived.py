"""Handing back grants that never reached their worker (the lease route's client had gone).

The server saw the lease request's client disconnect before the answer was written: the worker
never learned the attempt's token, so no handler can have run it — also not for a grant the
claim already started (a lease with start, ``grant``). Each goes back to WAITING at once as a
RELEASED attempt, not counted against max attempts (``transitions.hand_back``), instead of
lapsing after its lease: invariant 7 judges a lapse by what ran, and nothing ran. A task whose
cancel was requested meanwhile is CANCELLED instead, as a start would have settled it.

Lock order: gate (shared) → task → attempt, as in a start or completion.
"""

from __future__ import annotations

import sqlalchemy as sa

from orbit_store.pulse.limits.gates import gate_is_open
from orbit_store.pulse.model import TaskState
from orbit_store.pulse.state.attempts import find_attempt, granted_before_fence, token_matches
from orbit_store.pulse.state.transitions import cancel_unstarted, hand_back, lock_task_now

REASON = "handed back: the lease request's client had disconnected"


def hand_back_unreceived(
    conn: sa.Connection, *, namespace: str, attempt_id: str, token: str
) -> TaskState | None:
    """Return the never-delivered grant ``attempt_id`` (LEASED or started) to WAITING; the
    task's new state, or None when the grant is no longer current (a fence, a revoke or a
    cancel settled it first) and nothing was changed."""
    found = find_attempt(conn, namespace, attempt_id)
    if found is None or not token_matches(token, found.token_hash):
        return None
    if granted_before_fence(found):  # the fence already cut its lease
        return None
    gate_open = gate_is_open(conn, found.gate_id)
    task, now = lock_task_now(conn, namespace, found.task_id)
    assert task is not None
    live = (TaskState.LEASED.value, TaskState.RUNNING.value)
    if task.current_attempt_id != attempt_id or task.state not in live:
        return None
    if task.cancel_requested:
        cancel_unstarted(conn, task, attempt_id, now=now, attempt_reason=REASON)
        return TaskState.CANCELLED
    hand_back(conn, task, attempt_id, now=now, reason=REASON, gate_open=gate_open)
    return TaskState.WAITING
