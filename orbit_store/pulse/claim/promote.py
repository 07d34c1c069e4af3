"""Promoting SCHEDULED tasks that fell due onto their path (READY, or blocked by a closed gate
or a saturated key), in batches, SKIP LOCKED so promoters never wait on each other.

Claims promote what is due in their queues first (a due task is claimable at once, without
waiting for a loop); the promoter loop (``service.promote``) covers namespaces nobody is
claiming from, and hands any free permit of a key to its blocked tasks (a repair: a release
that found its blocked task locked by a transaction that then rolled back leaves room behind).

Lock order: gates (shared, in id order, read before the tasks: a gate_id never changes) → task
rows (SKIP LOCKED) → concurrency keys (key order).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from orbit_store.db import by_primary_key, force_index
from orbit_store.pulse.limits import semaphores
from orbit_store.pulse.limits.gates import gates_open
from orbit_store.pulse.limits.placement import place_due
from orbit_store.pulse.model import WaitPath
from orbit_store.schema import concurrency_keys, namespaces, tasks

PROMOTE_BATCH = 200


def _due(in_queues: bool) -> Any:
    """Due SCHEDULED tasks of a namespace (of some queues), built once: every claim runs it,
    and building a statement and its cache key per call costs a claim CPU."""
    query = (
        sa.select(tasks.c.id, tasks.c.gate_id)
        .where(
            tasks.c.namespace == sa.bindparam("namespace"),
            tasks.c.wait_path == WaitPath.SCHEDULED.value,
            tasks.c.available_at <= sa.bindparam("now"),
        )
        .order_by(tasks.c.available_at)
        .limit(sa.bindparam("limit"))
    )
    if in_queues:
        query = query.where(tasks.c.queue.in_(sa.bindparam("queues", expanding=True)))
    return force_index(query, tasks, "ix_tasks_due")


_DUE = _due(in_queues=False)
_DUE_IN_QUEUES = _due(in_queues=True)


def promote_due(
    conn: sa.Connection,
    *,
    namespace: str,
    now: dt.datetime,
    queues: list[str] | None = None,
    limit: int = PROMOTE_BATCH,
) -> int:
    """Place up to ``limit`` due SCHEDULED tasks of ``namespace`` (of ``queues`` when given);
    returns how many were placed."""
    params = {"namespace": namespace, "now": now, "limit": limit, "queues": queues}
    candidates = conn.execute(_DUE if queues is None else _DUE_IN_QUEUES, params).all()
    if not candidates:
        return 0
    gates = gates_open(conn, {c.gate_id for c in candidates if c.gate_id is not None})
    lock = (
        sa.select(
            tasks.c.id,
            tasks.c.gate_id,
            tasks.c.concurrency_key,
            tasks.c.priority,
            tasks.c.available_at,
        )
        .where(
            tasks.c.id.in_(sorted(c.id for c in candidates)),
            tasks.c.wait_path == WaitPath.SCHEDULED.value,
        )
        .order_by(tasks.c.id)
        .with_for_update(skip_locked=True)
    )
    locked = conn.execute(by_primary_key(lock, tasks)).all()
    placed = place_due(
        conn,
        namespace,
        list(locked),
        from_path=WaitPath.SCHEDULED,
        gate_open=lambda gate: gate is None or gates.get(gate, False),
        now=now,
    )
    return sum(len(ids) for ids in placed.values())


def release_stranded_permits(conn: sa.Connection, *, namespace: str, now: dt.datetime) -> int:
    """Keys of ``namespace`` with a free permit and blocked tasks get them released (repair;
    normally each release does this itself). Returns how many tasks moved to READY."""
    blocked_keys = (
        sa.select(tasks.c.concurrency_key)
        .where(
            tasks.c.namespace == namespace,
            tasks.c.wait_path == WaitPath.BLOCKED_KEY.value,
        )
        .distinct()
    )
    stranded = (
        conn.execute(
            sa.select(concurrency_keys.c.concurrency_key)
            .where(
                concurrency_keys.c.namespace == namespace,
                concurrency_keys.c.held < concurrency_keys.c.permit_limit,
                concurrency_keys.c.concurrency_key.in_(
                    force_index(blocked_keys, tasks, "ix_tasks_key_waiting")
                ),
            )
            .order_by(concurrency_keys.c.concurrency_key)
        )
        .scalars()
        .all()
    )
    moved = 0
    for key in stranded:
        moved += len(semaphores.release_blocked(conn, semaphores.lock(conn, namespace, key), now))
    return moved


def namespaces_with_work(conn: sa.Connection, *, now: dt.datetime) -> list[str]:
    """Namespaces with SCHEDULED tasks due by ``now`` or tasks blocked on a key, in one read
    (an index probe per namespace inside the database): the promoter opens transactions only
    there, so namespaces of finished work cost an idle pass nothing."""

    def waiting(path: WaitPath) -> Any:
        return force_index(
            sa.select(tasks.c.id).where(
                tasks.c.namespace == namespaces.c.name, tasks.c.wait_path == path.value
            ),
            tasks,
            "ix_tasks_due",
        )

    due = waiting(WaitPath.SCHEDULED).where(tasks.c.available_at <= now).exists()
    blocked = waiting(WaitPath.BLOCKED_KEY).exists()
    query = sa.select(namespaces.c.name).where(sa.or_(due, blocked)).order_by(namespaces.c.name)
    return list(conn.execute(query).scalars())
