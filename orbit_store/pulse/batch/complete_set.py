"""Set-based completion of a batch of attempts: the common reports — success and
failure (retryable or not) of the current, running attempt — in a few statements per batch.

Each item is judged by ``complete.complete_attempt``'s rules (invariant 3: the current attempt,
its token, its restore epoch; invariant 4: the outcome commits with its events; invariant 7: an
unknown outcome is never applied here) from reads made once per batch (``batch_read``). Not found
and wrong token are answered here (nothing is written for them). An item whose report is the
common case is applied with grouped conditional UPDATEs:

    UPDATE task_attempts SET state='FINISHED', outcome=…, result=CASE id …, error=CASE id …
        WHERE id IN (…) AND state IN ('LEASED', 'RUNNING')    (one per outcome and reason)
    UPDATE tasks SET state=…, state_version=state_version+1, result=CASE id … END, …
        WHERE id IN (…) AND state='RUNNING' AND state_version = CASE id … END   (per new state)

their affected rows checked (:class:`SetPathMismatch` otherwise), then permits, quota counters,
task_events, result events and deliveries as sets (``batch_moves``). Every other item — fenced
(kept as evidence), superseded or duplicate, released, unknown or cancelled outcomes, a cancel
request pending, two attempts of one task, an outcome before a start — is left to the caller,
which runs ``complete_attempt`` for it afterwards in its own savepoint. A workflow task's
outcome writes its Weave inbox row with the others' (one INSERT, invariant 9).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orbit_store.pulse.batch.items import CompletionItem
from orbit_store.pulse.leases.complete import decide
from orbit_store.pulse.limits.paths import reentry_path
from orbit_store.pulse.model import (
    AttemptOutcome,
    AttemptState,
    CompletionResult,
    CompletionStatus,
    Outcome,
    TaskState,
)
from orbit_store.pulse.state.attempts import LIVE_ATTEMPT_STATES
from orbit_store.pulse.state.batch_moves import Move, grouped_params, grouped_update, move_tasks
from orbit_store.pulse.state.batch_read import (
    SetPathMismatch,
    fenced_ids,
    lock_attempts,
    lock_tasks_now,
    open_gates,
    read_attempts,
    shared_tasks,
    split_by_token,
)
from orbit_store.schema import task_attempts

#: The outcomes the set path applies (the others have rules of their own).
SET_OUTCOMES = {Outcome.SUCCEEDED: AttemptOutcome.SUCCEEDED, Outcome.FAILED: AttemptOutcome.FAILED}


@dataclass(frozen=True)
class _Applied:
    item: CompletionItem
    move: Move


def complete_set(
    conn: sa.Connection, namespace: str, items: Sequence[CompletionItem]
) -> tuple[dict[str, CompletionResult], list[str]]:
    """Apply what the set path can; returns the answers given and the attempt ids (in id
    order) left for ``complete_attempt``. Raises :class:`SetPathMismatch` (see the module)."""
    found = read_attempts(conn, namespace, [item.attempt_id for item in items])
    missing, wrong, passed = split_by_token(found, items)
    answers = {
        a: CompletionResult(CompletionStatus.NOT_FOUND, None, "no such attempt here")
        for a in missing
    }
    answers |= {
        a: CompletionResult(CompletionStatus.REFUSED, None, "wrong attempt token") for a in wrong
    }
    fenced = fenced_ids(found, passed)
    checked = sorted(a for a in passed if a not in fenced)
    rest = sorted(fenced)
    if not checked:
        return answers, rest
    gates = open_gates(conn, [found[a] for a in checked])
    locked, now = lock_tasks_now(conn, namespace, {found[a].task_id for a in checked})
    lock_attempts(conn, passed)
    shared = shared_tasks(found, checked)
    by_id = {item.attempt_id: item for item in items}
    applied: list[_Applied] = []
    for attempt_id in checked:
        task = locked.get(found[attempt_id].task_id)
        item = by_id[attempt_id]
        if task is None or task.id in shared or not _common(item, task):
            rest.append(attempt_id)
            continue
        gate_open = gates[found[attempt_id].gate_id]
        applied.append(_Applied(item, _move(item, task, gate_open, now)))
    _finish_attempts(conn, applied, now)
    move_tasks(conn, namespace, [a.move for a in applied], now)
    for a in applied:
        answers[a.item.attempt_id] = CompletionResult(
            CompletionStatus.APPLIED, a.move.to_state, a.move.reason, queue=a.move.task.queue
        )
    return answers, sorted(rest)


def _common(item: CompletionItem, task: sa.Row[Any]) -> bool:
    """Whether ``complete_attempt`` would take its plain path for this item: the current,
    running attempt reports success or failure, with no cancel request."""
    return (
        task.current_attempt_id == item.attempt_id
        and task.state == TaskState.RUNNING.value
        and item.outcome in SET_OUTCOMES
        and not task.cancel_requested
    )


def _move(item: CompletionItem, task: sa.Row[Any], gate_open: bool, now: dt.datetime) -> Move:
    """The task's transition, decided as ``complete_attempt`` decides it."""
    to_state, reason, values = decide(task, item.outcome, item.retryable, now)
    if to_state is TaskState.SUCCEEDED:
        values["result"], values["error"] = item.result, None  # an earlier error is history
    elif item.error is not None:
        values["error"] = item.error
    wait_path = None
    if to_state is TaskState.WAITING:
        wait_path = reentry_path(values["available_at"], now, gate_open)
    return Move(task, to_state, reason, item.attempt_id, wait_path, values)


def _finish_attempts(conn: sa.Connection, applied: list[_Applied], now: dt.datetime) -> None:
    """End the attempts with their outcomes, one UPDATE per (outcome, reason) — as
    ``attempts.finish_attempt``, which matches only a live attempt."""
    groups: dict[tuple[str, str], list[CompletionItem]] = defaultdict(list)
    for a in applied:
        outcome = SET_OUTCOMES[a.item.outcome].value
        groups[(outcome, a.move.reason[:255])].append(a.item)
    for (outcome, reason), group in sorted(groups.items()):
        ids = sorted(item.attempt_id for item in group)
        values: dict[str, dict[str, Any]] = {
            "state": dict.fromkeys(ids, AttemptState.FINISHED.value),
            "finished_at": dict.fromkeys(ids, now),
            "outcome": dict.fromkeys(ids, outcome),
            "outcome_reason": dict.fromkeys(ids, reason),
            "result": {i.attempt_id: i.result for i in group},
            "error": {i.attempt_id: i.error for i in group},
        }
        sets, params = grouped_params(ids, values)
        finish = grouped_update(task_attempts, len(ids), sets, state_in=LIVE_ATTEMPT_STATES)
        changed = conn.execute(finish, params).rowcount
        if changed != len(ids):
            raise SetPathMismatch(f"finished {changed} of {len(ids)} attempts as {outcome}")
