"""Declaring quotas (the Quota resource): create/update to match a spec, delete.

A quota counts the unfinished tasks of its scope in counters the transitions keep (``quota``).
When a quota is created (or its scope changes) it adopts its scope: under an exclusive lock on
the namespace row (submissions hold it shared, so none is in flight) it locks the scope's
unfinished tasks, marks them counted and sets the counters from a real count — all in one
transaction, so the counters are exact from the first moment. This costs in proportion to the
scope's backlog, once; updating limits later touches only the quota row.

Lock order: namespace row → task rows → quota row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.db import by_primary_key
from orbit_store.declared import lock_declared, upsert_declared
from orbit_store.namespaces import ensure_namespace
from orbit_store.pulse.limits.quota import WHOLE_NAMESPACE
from orbit_store.pulse.model import TaskState
from orbit_store.schema import namespaces, quotas, tasks

UNFINISHED = (TaskState.WAITING.value, TaskState.LEASED.value, TaskState.RUNNING.value)
ADOPT_CHUNK = 1000


@dataclass(frozen=True)
class QuotaSpec:
    name: str
    queue: str = WHOLE_NAMESPACE
    max_waiting: int | None = None
    max_running: int | None = None
    submit_rate_per_second: float | None = None
    submit_burst: int | None = None


def put_quota(
    conn: sa.Connection,
    namespace: str,
    spec: QuotaSpec,
    *,
    source: str = "api",
    spec_generation: int = 1,
) -> bool:
    """Create or update the quota to match ``spec``; True when anything changed. Changing the
    rate resets its token bucket; a new scope is adopted (see the module docstring)."""
    now = db_now(conn)
    ensure_namespace(conn, namespace, now)
    scope = conn.execute(
        sa.select(quotas.c.queue).where(quotas.c.namespace == namespace, quotas.c.name == spec.name)
    ).scalar_one_or_none()
    counters = {}
    if scope != spec.queue:
        _lock_namespace(conn, namespace)
        counters = _adopt(conn, namespace, spec.queue)
    values = {
        "queue": spec.queue,
        "max_waiting": spec.max_waiting,
        "max_running": spec.max_running,
        "submit_rate_per_second": spec.submit_rate_per_second,
        "submit_burst": spec.submit_burst,
        "source": source,
        "spec_generation": spec_generation,
        **counters,
    }
    row = lock_declared(conn, quotas, namespace, spec.name)
    rate_changed = row is not None and (row.submit_rate_per_second, row.submit_burst) != (
        spec.submit_rate_per_second,
        spec.submit_burst,
    )
    # A new rate starts with a full token bucket.
    reset = {"rate_tokens": None, "rate_refilled_at": None} if rate_changed else None
    changed = upsert_declared(conn, quotas, namespace, spec.name, values, now, on_update=reset)
    if counters:
        conn.execute(
            namespaces.update().where(namespaces.c.name == namespace).values(has_quotas=True)
        )
    return changed


def _lock_namespace(conn: sa.Connection, namespace: str) -> None:
    conn.execute(
        sa.select(namespaces.c.name).where(namespaces.c.name == namespace).with_for_update()
    ).one()


def _adopt(conn: sa.Connection, namespace: str, queue: str) -> dict[str, int]:
    """Count every unfinished task of the scope (locked) and mark it counted.

    The tasks are found by a plain read and then locked by primary key (a waiting lock taken
    through a secondary index would deadlock with transitions that lock the row first and then
    change that index); a task that finished in between is no longer counted. None can start
    being unfinished meanwhile: new tasks need the namespace row we hold."""
    scope = [tasks.c.namespace == namespace, tasks.c.state.in_(UNFINISHED)]
    if queue != WHOLE_NAMESPACE:
        scope.append(tasks.c.queue == queue)
    found = conn.execute(sa.select(tasks.c.id).where(*scope)).scalars().all()
    rows: list[sa.Row[Any]] = []
    for start in range(0, len(found), ADOPT_CHUNK):
        chunk = (
            sa.select(tasks.c.id, tasks.c.state, tasks.c.quota_counted)
            .where(tasks.c.id.in_(sorted(found)[start : start + ADOPT_CHUNK]))
            .order_by(tasks.c.id)
            .with_for_update()
        )
        rows += conn.execute(by_primary_key(chunk, tasks)).all()
    rows = [r for r in rows if r.state in UNFINISHED]
    uncounted = [r.id for r in rows if not r.quota_counted]
    for start in range(0, len(uncounted), ADOPT_CHUNK):
        mark = (
            tasks.update()
            .where(tasks.c.id.in_(uncounted[start : start + ADOPT_CHUNK]))
            .values(quota_counted=True)
        )
        conn.execute(by_primary_key(mark, tasks))
    waiting = sum(1 for r in rows if r.state == TaskState.WAITING.value)
    return {"waiting": waiting, "running": len(rows) - waiting}


def delete_quota(conn: sa.Connection, namespace: str, name: str) -> bool:
    """Remove the quota; the namespace's last one clears ``has_quotas`` (tasks already counted
    stay marked, harmlessly: their counter updates then match no row)."""
    if (
        conn.execute(
            sa.select(namespaces.c.name).where(namespaces.c.name == namespace).with_for_update()
        ).one_or_none()
        is None
    ):
        return False
    deleted = conn.execute(
        quotas.delete().where(quotas.c.namespace == namespace, quotas.c.name == name)
    )
    remaining = conn.execute(
        sa.select(sa.func.count()).select_from(quotas).where(quotas.c.namespace == namespace)
    ).scalar_one()
    if not remaining:
        conn.execute(
            namespaces.update().where(namespaces.c.name == namespace).values(has_quotas=False)
        )
    return deleted.rowcount == 1


def list_quotas(conn: sa.Connection, namespace: str | None = None) -> list[tuple[str, str, str]]:
    """(namespace, name, source) of every declared quota."""
    query = sa.select(quotas.c.namespace, quotas.c.name, quotas.c.source)
    if namespace is not None:
        query = query.where(quotas.c.namespace == namespace)
    return [(r.namespace, r.name, r.source) for r in conn.execute(query)]
