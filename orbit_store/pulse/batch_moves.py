"""Many task transitions in a handful of statements: ``transitions.transition`` for a set.

The same rules as the single transition (invariants 2, 4): each task moves only from the
(state, state_version) read under its lock — one grouped conditional UPDATE per (from, to)
state pair, ``WHERE id IN (…) AND state = … AND state_version = CASE id WHEN … END``, whose
affected-row count must equal the group's size (else :class:`SetPathMismatch`) — and the same
transaction writes what each move implies: permits given back (all ids of a key at once, keys in
key order) and quota counters (summed per queue) — both settled at the batch's end
(``batch_deferred``) —, one
task_event per move (one multi-row INSERT), and for an outcome its result event and deliveries
(multi-row INSERTs, the subscriptions read once). Values that differ per task (a result, an
error, a retry's due time and wait path) are set with ``CASE id WHEN … THEN … ELSE column END``.

Lock order: the caller holds every task row; then keys, quotas, inserts (``pulse/__init__.py``).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from orbit_store.db import by_primary_key
from orbit_store.delivery.fanout import fan_out_many
from orbit_store.ids import new_id
from orbit_store.schema import tasks
from orbit_store.weave.outcomes import record_task_outcome

from . import inserts, quota
from .batch_deferred import count_quota, release_permits
from .batch_read import SetPathMismatch
from .model import LEGAL_TRANSITIONS, OUTCOME_TASK_STATES, TaskState, WaitPath
from .paths import holds_permit


@dataclass(frozen=True)
class Move:
    """One task's transition: ``task`` as read under its lock, where it goes, and the columns
    to set for it besides state, version, wait path and update time (as ``transition``'s
    ``**values``)."""

    task: sa.Row[Any]
    to_state: TaskState
    reason: str
    attempt_id: str
    wait_path: WaitPath | None = None
    values: dict[str, Any] = field(default_factory=dict)

    def all_values(self, now: dt.datetime) -> dict[str, Any]:
        """What ``transition`` would SET besides state, version and update time."""
        values = dict(self.values)
        if self.to_state.is_terminal:
            values.setdefault("finished_at", now)
        if not self.to_state.is_live:
            values.setdefault("current_attempt_id", None)
        values["wait_path"] = self.wait_path.value if self.wait_path is not None else None
        return values


def move_tasks(conn: sa.Connection, namespace: str, moves: list[Move], now: dt.datetime) -> None:
    """Apply every move and what it implies; raises :class:`SetPathMismatch` when a task is no
    longer at the state and version that was read (nothing is undone here: the transaction is
    rolled back, ``batches.run_batch``)."""
    for move in moves:
        _check_legal(move)
    groups: dict[tuple[str, str], list[Move]] = defaultdict(list)
    for move in moves:
        groups[(move.task.state, move.to_state.value)].append(move)
    for (from_state, to_state), group in sorted(groups.items()):
        _update_group(conn, from_state, to_state, group, now)
    _release_permits(conn, namespace, moves, now)
    _count_quotas(conn, namespace, moves)
    _insert_events(conn, namespace, moves, now)
    _announce_outcomes(
        conn, namespace, [m for m in moves if m.to_state in OUTCOME_TASK_STATES], now
    )


def per_item(column: sa.Column[Any], by_id: dict[str, Any], id_column: Any = None) -> Any:
    """The value to SET ``column`` to in an UPDATE of exactly the rows ``by_id`` names: one
    bound value when every row gets the same, else ``CASE id WHEN … THEN … END``."""
    values = list(by_id.values())
    if all(_same(values[0], value) for value in values[1:]):
        return sa.bindparam(None, values[0], type_=column.type)
    return some_items(column, by_id, id_column)


def some_items(column: sa.Column[Any], by_id: dict[str, Any], id_column: Any = None) -> Any:
    """``CASE id WHEN … THEN … ELSE column END``: rows ``by_id`` does not name keep theirs."""
    whens = {row_id: sa.bindparam(None, v, type_=column.type) for row_id, v in by_id.items()}
    key = id_column if id_column is not None else tasks.c.id
    return sa.case(whens, value=key, else_=column)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and bool(a == b)


def _check_legal(move: Move) -> None:
    from_state = TaskState(move.task.state)
    if (from_state, move.to_state) not in LEGAL_TRANSITIONS:
        raise ValueError(f"illegal transition {from_state} -> {move.to_state} ({move.task.id})")
    if (move.wait_path is None) is (move.to_state is TaskState.WAITING):
        raise ValueError(f"a task enters WAITING on a wait path, and only then ({move.task.id})")


def _update_group(
    conn: sa.Connection, from_state: str, to_state: str, group: list[Move], now: dt.datetime
) -> None:
    ids = sorted(m.task.id for m in group)
    columns: dict[str, dict[str, Any]] = defaultdict(dict)
    for move in group:
        for name, value in move.all_values(now).items():
            columns[name][move.task.id] = value
    sets: dict[str, Any] = {
        "state": to_state,
        "state_version": tasks.c.state_version + 1,
        "updated_at": now,
    }
    for name, by_id in columns.items():
        if len(by_id) == len(group):
            sets[name] = per_item(tasks.c[name], by_id)
        else:  # set for some rows only: the others keep theirs (as ``transition``)
            sets[name] = some_items(tasks.c[name], by_id)
    versions = {m.task.id: int(m.task.state_version) for m in group}
    update = (
        tasks.update()
        .where(
            tasks.c.id.in_(ids),
            tasks.c.state == from_state,
            tasks.c.state_version == per_item(tasks.c.state_version, versions),
        )
        .values(sets)
    )
    changed = conn.execute(by_primary_key(update, tasks)).rowcount
    if changed != len(ids):
        raise SetPathMismatch(f"moved {changed} of {len(ids)} tasks {from_state} -> {to_state}")


def _release_permits(
    conn: sa.Connection, namespace: str, moves: Iterable[Move], now: dt.datetime
) -> None:
    by_key: dict[str, list[str]] = defaultdict(list)
    for move in moves:
        task, key = move.task, move.task.concurrency_key
        path = move.wait_path.value if move.wait_path is not None else None
        if holds_permit(task.state, task.wait_path, key) and not holds_permit(
            move.to_state, path, key
        ):
            by_key[key].append(task.id)
    for key in sorted(by_key):  # key rows in key order (lock order), or at the batch's end
        release_permits(conn, namespace, key, sorted(by_key[key]), now)


def _count_quotas(conn: sa.Connection, namespace: str, moves: Iterable[Move]) -> None:
    deltas: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for move in moves:
        if move.task.quota_counted:
            waiting, running = quota.state_deltas(TaskState(move.task.state), move.to_state)
            deltas[move.task.queue][0] += waiting
            deltas[move.task.queue][1] += running
    for queue in sorted(deltas):
        waiting, running = deltas[queue]
        count_quota(conn, namespace, queue, waiting=waiting, running=running)


def _insert_events(
    conn: sa.Connection, namespace: str, moves: list[Move], now: dt.datetime
) -> None:
    if not moves:
        return
    rows = [
        {
            "id": new_id(),
            "task_id": m.task.id,
            "namespace": namespace,
            "state_version": int(m.task.state_version) + 1,
            "from_state": m.task.state,
            "to_state": m.to_state.value,
            "reason": m.reason,
            "attempt_id": m.attempt_id,
            "actor": None,
            "details": None,
            "at": now,
        }
        for m in moves
    ]
    conn.execute(inserts.TASK_EVENTS, rows)


def _announce_outcomes(
    conn: sa.Connection, namespace: str, moves: list[Move], now: dt.datetime
) -> None:
    """The result events of the moves that are outcomes (seed §6.2, §6.3), their deliveries,
    and Weave's inbox rows for workflow tasks (invariant 9)."""
    if not moves:
        return
    events = [(new_id(), m) for m in moves]
    conn.execute(inserts.RESULT_EVENTS, [_result_event(i, m, now) for i, m in events])
    fan_out_many(conn, namespace, [(i, m.task, m.to_state.value) for i, m in events], now=now)
    for _, m in events:
        if m.task.workflow_instance_id is not None:
            version = int(m.task.state_version) + 1
            result, error = m.values.get("result"), m.values.get("error")
            record_task_outcome(conn, m.task, m.to_state, version, now, result, error)


def _result_event(event_id: str, move: Move, now: dt.datetime) -> dict[str, Any]:
    task, state = move.task, move.to_state.value
    return {
        "id": event_id,
        "namespace": task.namespace,
        "task_id": task.id,
        "state_version": int(task.state_version) + 1,
        "kind": f"task.{state.lower()}",
        "task_state": state,
        "queue": task.queue,
        "handler": task.handler,
        "payload": {
            "task_id": task.id,
            "state": state,
            "attempt_id": move.attempt_id,
            "result": move.values.get("result"),
            "error": move.values.get("error"),
            "reason": move.reason,
        },
        "created_at": now,
    }
