"""Execution gates (seed §4 "通用执行门控", invariant 12): the ONE entry point.

A gate is an allow/pause flag with a control version, owned by something outside Pulse (a
workflow instance pauses its tasks by closing its gate). Closing a gate stops new grants of its
tasks and opening it lets them run again, each in the transaction that flips the flag:

- close: its WAITING tasks leave the claim path for BLOCKED_GATE (READY ones give their
  concurrency permits back, which go to other blocked tasks of the key); a task already LEASED
  is refused at start and handed back; a RUNNING one finishes and its result is recorded;
- open: its BLOCKED_GATE tasks are placed again (READY, or BLOCKED_KEY without a free permit).

Both cost in proportion to that gate's WAITING tasks only (index ix_tasks_gate). SCHEDULED tasks
of the gate stay where they are; their promotion checks the gate when they fall due.

Lock order: the gate row first (exclusive here; shared where a task is placed or started), then
the gate's task rows by id, then concurrency keys in key order.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.db import by_primary_key, force_index, insert_or_lock
from orbit_store.errors import NotFound, StaleControlVersion
from orbit_store.ids import new_id
from orbit_store.pulse.limits import semaphores
from orbit_store.pulse.limits.paths import move_path
from orbit_store.pulse.limits.placement import place_due
from orbit_store.pulse.model import WaitPath
from orbit_store.schema import execution_gates, tasks


@dataclass(frozen=True)
class GateState:
    gate_id: str
    allowed: bool
    control_version: int
    changed: bool  # False when the gate already was in the asked state (nothing written)


def create_gate(
    conn: sa.Connection, *, namespace: str, owner_kind: str, owner_id: str, now: dt.datetime
) -> str:
    """A new open gate (allowed, control_version 1) for its owner; returns its id. Asking again
    for the same owner returns the same gate (idempotent; the owner is unique per namespace),
    also when two transactions ask at once: the second waits for the first's row and gets it."""
    owner = (
        execution_gates.c.namespace == namespace,
        execution_gates.c.owner_kind == owner_kind,
        execution_gates.c.owner_id == owner_id,
    )
    existing = conn.execute(sa.select(execution_gates.c.id).where(*owner)).scalar_one_or_none()
    if existing is not None:
        return str(existing)
    values = {
        "id": new_id(),
        "namespace": namespace,
        "owner_kind": owner_kind,
        "owner_id": owner_id,
        "allowed": True,
        "control_version": 1,
        "created_at": now,
        "updated_at": now,
    }
    # Not a plain INSERT: a concurrent creator may have inserted the owner's row since the read
    # above. Insert-or-lock waits for it and locks it; the locking read then sees the winner's id.
    insert_or_lock(conn, execution_gates, values)
    return str(
        conn.execute(sa.select(execution_gates.c.id).where(*owner).with_for_update()).scalar_one()
    )


def set_gate(
    conn: sa.Connection,
    *,
    namespace: str,
    gate_id: str,
    allowed: bool,
    expected_control_version: int | None = None,
) -> GateState:
    """Open (``allowed=True``) or close the gate and move its WAITING tasks accordingly.

    Raises NotFound for an unknown gate and StaleControlVersion (a Conflict) when
    ``expected_control_version`` is given and the gate is at another version. A flip bumps the
    control version; asking for the state it already has changes nothing."""
    row = conn.execute(
        sa.select(execution_gates.c.allowed, execution_gates.c.control_version)
        .where(execution_gates.c.id == gate_id, execution_gates.c.namespace == namespace)
        .with_for_update()
    ).one_or_none()
    if row is None:
        raise NotFound(f"execution gate {gate_id} not found in namespace {namespace!r}")
    version = int(row.control_version)
    if expected_control_version is not None and expected_control_version != version:
        raise StaleControlVersion(gate_id, expected_control_version, version)
    if bool(row.allowed) == allowed:
        return GateState(gate_id, allowed, version, changed=False)
    now = db_now(conn)
    conn.execute(
        execution_gates.update()
        .where(execution_gates.c.id == gate_id)
        .values(allowed=allowed, control_version=version + 1, updated_at=now)
    )
    if allowed:
        _open(conn, namespace, gate_id, now)
    else:
        _close(conn, namespace, gate_id, now)
    return GateState(gate_id, allowed, version + 1, changed=True)


def gate_is_open(conn: sa.Connection, gate_id: str | None) -> bool:
    """Read a gate under a shared lock (a flip waits for us, and we for a flip in flight).
    Taken before the task row it is about (lock order gate → task). No gate: open."""
    if gate_id is None:
        return True
    allowed = conn.execute(_GATE_ALLOWED, {"gate_id": gate_id}).scalar_one_or_none()
    return bool(allowed)


#: Built once (every start and completion of a gated task); the id is bound per call.
_GATE_ALLOWED = (
    sa.select(execution_gates.c.allowed)
    .where(execution_gates.c.id == sa.bindparam("gate_id"))
    .with_for_update(read=True)
)


def gates_open(conn: sa.Connection, gate_ids: set[str]) -> dict[str, bool]:
    """Several gates under shared locks, in id order."""
    if not gate_ids:
        return {}
    rows = conn.execute(
        sa.select(execution_gates.c.id, execution_gates.c.allowed)
        .where(execution_gates.c.id.in_(sorted(gate_ids)))
        .order_by(execution_gates.c.id)
        .with_for_update(read=True)
    )
    return {row.id: bool(row.allowed) for row in rows}


def _gate_tasks(
    conn: sa.Connection, namespace: str, gate_id: str, paths: list[WaitPath]
) -> list[sa.Row]:  # type: ignore[type-arg]
    """The gate's tasks on ``paths``, locked. Found by a plain read, then locked by primary key
    and checked again (a waiting lock through ix_tasks_gate would deadlock with a transition
    that holds the task and moves it between paths). No task can join these paths meanwhile:
    that takes the gate's shared lock, and we hold it exclusively."""
    wanted = [p.value for p in paths]
    found = conn.execute(
        force_index(
            sa.select(tasks.c.id).where(
                tasks.c.namespace == namespace,
                tasks.c.gate_id == gate_id,
                tasks.c.wait_path.in_(wanted),
            ),
            tasks,
            "ix_tasks_gate",
        )
    ).scalars()
    query = (
        sa.select(
            tasks.c.id,
            tasks.c.gate_id,
            tasks.c.wait_path,
            tasks.c.concurrency_key,
            tasks.c.priority,
            tasks.c.available_at,
        )
        .where(tasks.c.id.in_(sorted(found)))
        .order_by(tasks.c.id)
        .with_for_update()
    )
    rows = conn.execute(by_primary_key(query, tasks))
    return [row for row in rows if row.wait_path in wanted]


def _close(conn: sa.Connection, namespace: str, gate_id: str, now: dt.datetime) -> None:
    rows = _gate_tasks(conn, namespace, gate_id, [WaitPath.READY, WaitPath.BLOCKED_KEY])
    for path in (WaitPath.READY, WaitPath.BLOCKED_KEY):
        move_path(conn, [r.id for r in rows if r.wait_path == path], path, WaitPath.BLOCKED_GATE)
    permits: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        if row.wait_path == WaitPath.READY.value and row.concurrency_key is not None:
            permits[row.concurrency_key].append(row.id)
    for key in sorted(permits):
        semaphores.release(conn, namespace, key, permits[key], now)


def _open(conn: sa.Connection, namespace: str, gate_id: str, now: dt.datetime) -> None:
    rows = _gate_tasks(conn, namespace, gate_id, [WaitPath.BLOCKED_GATE])
    place_due(
        conn,
        namespace,
        rows,
        from_path=WaitPath.BLOCKED_GATE,
        gate_open=lambda _gate: True,
        now=now,
    )
