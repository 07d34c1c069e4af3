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
import functools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from orbit_store.db import by_primary_key
from orbit_store.delivery.fanout import fan_out_many
from orbit_store.ids import new_id
from orbit_store.pulse.limits import quota
from orbit_store.pulse.limits.batch_deferred import count_quota, release_permits
from orbit_store.pulse.limits.paths import holds_permit
from orbit_store.pulse.model import LEGAL_TRANSITIONS, OUTCOME_TASK_STATES, TaskState, WaitPath
from orbit_store.pulse.state import inserts
from orbit_store.pulse.state.batch_read import SetPathMismatch
from orbit_store.pulse.state.event_inserts import insert_task_events
from orbit_store.schema import tasks
from orbit_store.weave.outcomes import outcome_row, record_task_outcomes


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


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and bool(a == b)


#: How a grouped UPDATE binds a value: one for every row, one per row, or one for each row of a
#: mask (the others keep the column's value).
ONE, EACH = "one", "each"
Mode = str | tuple[bool, ...]
Shape = tuple[tuple[str, Mode], ...]


def grouped_update(
    table: sa.Table,
    rows: int,
    sets: Shape,
    *,
    adds: tuple[tuple[str, Mode | int], ...] = (),
    from_state: bool = False,
    state_in: tuple[str, ...] = (),
    version: Mode | None = None,
) -> sa.Update:
    """``UPDATE <table> SET <col> = …, <col> = <col> + … WHERE id IN (:id_0, …) [AND state =
    :from_state | AND state IN (…)] [AND state_version = …]``, through the primary key, with
    named parameters (``grouped_params`` makes them): built once per shape and kept, so
    SQLAlchemy neither builds nor keys it again for each batch — a statement holding each
    row's values costs Python per row to build and key. ``sets``: columns and how their values
    are bound (params ``<col>`` or ``<col>_<i>``); ``adds``: columns increased by a bound value
    (params ``<col>_add…``) or a constant; ``version``: the version guard's binding (params
    ``version…``), None for none."""
    return _grouped_update(table, rows, sets, adds, from_state, state_in, version)


@functools.lru_cache(maxsize=512)
def _grouped_update(
    table: sa.Table,
    rows: int,
    sets: Shape,
    adds: tuple[tuple[str, Mode | int], ...],
    from_state: bool,
    state_in: tuple[str, ...],
    version: Mode | None,
) -> sa.Update:
    ids = [sa.bindparam(f"id_{i}", type_=table.c.id.type) for i in range(rows)]
    values = {name: _bound(table, name, name, how, ids) for name, how in sets}
    for name, how in adds:
        step = how if isinstance(how, int) else _bound(table, name, f"{name}_add", how, ids)
        values[name] = table.c[name] + step
    conditions: list[sa.ColumnElement[bool]] = [table.c.id.in_(ids)]
    if from_state:
        conditions.append(table.c.state == sa.bindparam("from_state"))
    if state_in:
        conditions.append(table.c.state.in_(state_in))
    if version is not None:
        guard = _bound(table, "state_version", "version", version, ids)
        conditions.append(table.c.state_version == guard)
    update = table.update().where(*conditions).values(values)
    return by_primary_key(update, table)  # type: ignore[no-any-return]


def _bound(table: sa.Table, column: str, param: str, how: Mode, ids: list[Any]) -> Any:
    """The value of ``column`` as ``how`` binds it: ``:param``, or ``CASE WHEN id = :id_<i>
    THEN :param_<i> … ELSE column END`` for the rows it names."""
    type_ = table.c[column].type
    if how == ONE:
        return sa.bindparam(param, type_=type_)
    mask = (True,) * len(ids) if how == EACH else how
    whens = [
        (table.c.id == ids[i], sa.bindparam(f"{param}_{i}", type_=type_))
        for i, named in enumerate(mask)
        if named
    ]
    return sa.case(*whens, else_=table.c[column])


def grouped_params(
    ids: list[str], values: dict[str, dict[str, Any]], prefix: dict[str, str] | None = None
) -> tuple[Shape, dict[str, Any]]:
    """How ``values`` (``{column: {row id: value}}``, rows ``ids`` in that order; a row a
    column does not name keeps its value) bind in a grouped UPDATE, and the parameters
    (named ``<prefix or column>…``; the row ids' too)."""
    params: dict[str, Any] = {f"id_{i}": row_id for i, row_id in enumerate(ids)}
    shape: list[tuple[str, Mode]] = []
    for name, by_id in sorted(values.items()):
        param = (prefix or {}).get(name, name)
        found = list(by_id.values())
        if len(by_id) == len(ids) and all(_same(found[0], v) for v in found[1:]):
            shape.append((name, ONE))
            params[param] = found[0]
            continue
        mask = tuple(row_id in by_id for row_id in ids)
        shape.append((name, EACH if all(mask) else mask))
        params |= {f"{param}_{i}": by_id[row_id] for i, row_id in enumerate(ids) if mask[i]}
    return tuple(shape), params


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
    values: dict[str, dict[str, Any]] = {
        "state": dict.fromkeys(ids, to_state),
        "updated_at": dict.fromkeys(ids, now),
    }
    for move in group:  # a column set for some rows only: the others keep theirs
        for name, value in move.all_values(now).items():
            values.setdefault(name, {})[move.task.id] = value
    sets, params = grouped_params(ids, values)
    versions = {m.task.id: int(m.task.state_version) for m in group}
    ((_, version),), guard = grouped_params(
        ids, {"state_version": versions}, {"state_version": "version"}
    )
    update = grouped_update(
        tasks, len(ids), sets, adds=(("state_version", 1),), from_state=True, version=version
    )
    changed = conn.execute(update, params | guard | {"from_state": from_state}).rowcount
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
    insert_task_events(conn, rows)


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
    record_task_outcomes(
        conn,
        [
            outcome_row(
                m.task,
                m.to_state,
                int(m.task.state_version) + 1,
                now,
                m.values.get("result"),
                m.values.get("error"),
            )
            for _, m in events
            if m.task.workflow_instance_id is not None
        ],
    )


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
