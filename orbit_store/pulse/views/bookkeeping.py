"""Checks that the engine's bookkeeping agrees with the tasks it describes (part of
``orbit admin verify``): every WAITING task is on exactly one wait path and the path agrees
with its gate; semaphores match the permits held and permits match the tasks that should hold
them; quota counters equal a real count of the tasks they count. Read-only, like every check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from orbit_store.pulse.model import TaskState, WaitPath
from orbit_store.schema import (
    concurrency_keys,
    concurrency_permits,
    execution_gates,
    quotas,
    tasks,
)

_LIVE = (TaskState.LEASED, TaskState.RUNNING)


def scoped(query: sa.Select[Any], table: sa.Table, namespace: str | None) -> sa.Select[Any]:
    """``query`` restricted to one namespace (all of them when None)."""
    return query if namespace is None else query.where(table.c.namespace == namespace)


def ids(conn: sa.Connection, query: sa.Select[Any]) -> list[str]:
    """The first column of every row, as text (the examples a check reports)."""
    return [str(row[0]) for row in conn.execute(query)]


def _holds_permit() -> sa.ColumnElement[bool]:
    """A task with a key should hold a permit: READY, LEASED or RUNNING (pulse/limits/paths.py)."""
    return sa.and_(
        tasks.c.concurrency_key.is_not(None),
        sa.or_(
            tasks.c.wait_path == WaitPath.READY.value,
            tasks.c.state.in_([TaskState.LEASED.value, TaskState.RUNNING.value]),
        ),
    )


def _permit_held_by_task_off_the_claim_path(conn: sa.Connection, ns: str | None) -> list[str]:
    query = (
        sa.select(concurrency_permits.c.task_id)
        .join(tasks, tasks.c.id == concurrency_permits.c.task_id)
        .where(sa.not_(_holds_permit()))
    )
    return ids(conn, scoped(query, concurrency_permits, ns))


def _permit_missing(conn: sa.Connection, ns: str | None) -> list[str]:
    query = (
        sa.select(tasks.c.id)
        .outerjoin(concurrency_permits, concurrency_permits.c.task_id == tasks.c.id)
        .where(_holds_permit(), concurrency_permits.c.task_id.is_(None))
    )
    return ids(conn, scoped(query, tasks, ns))


def _permit_counts(ns: str | None) -> sa.Subquery:
    """Permits held per key (of one namespace when ``ns`` is given)."""
    return (
        scoped(
            sa.select(
                concurrency_permits.c.namespace,
                concurrency_permits.c.concurrency_key,
                sa.func.count().label("n"),
                sa.func.min(concurrency_permits.c.acquired_at).label("oldest"),
            ),
            concurrency_permits,
            ns,
        )
        .group_by(concurrency_permits.c.namespace, concurrency_permits.c.concurrency_key)
        .subquery()
    )


def _on_key(counts: sa.Subquery) -> sa.ColumnElement[bool]:
    return sa.and_(
        counts.c.namespace == concurrency_keys.c.namespace,
        counts.c.concurrency_key == concurrency_keys.c.concurrency_key,
    )


def _semaphore_count_mismatch(conn: sa.Connection, ns: str | None) -> list[str]:
    counts = _permit_counts(ns)
    query = (
        sa.select(concurrency_keys.c.concurrency_key)
        .outerjoin(counts, _on_key(counts))
        .where(sa.func.coalesce(counts.c.n, 0) != concurrency_keys.c.held)
    )
    return ids(conn, scoped(query, concurrency_keys, ns))


def _permits_over_limit(conn: sa.Connection, ns: str | None) -> list[str]:
    """More permits than the limit, unless the limit was lowered after they were granted
    (a permit already held is never revoked)."""
    counts = _permit_counts(ns)
    query = (
        sa.select(concurrency_keys.c.concurrency_key)
        .join(counts, _on_key(counts))
        .where(
            counts.c.n > concurrency_keys.c.permit_limit,
            sa.or_(
                concurrency_keys.c.limit_changed_at.is_(None),
                concurrency_keys.c.limit_changed_at <= counts.c.oldest,
            ),
        )
    )
    return ids(conn, scoped(query, concurrency_keys, ns))


def _blocked_with_free_permit(conn: sa.Connection, ns: str | None) -> list[str]:
    query = (
        sa.select(tasks.c.id)
        .join(
            concurrency_keys,
            sa.and_(
                concurrency_keys.c.namespace == tasks.c.namespace,
                concurrency_keys.c.concurrency_key == tasks.c.concurrency_key,
            ),
        )
        .where(
            tasks.c.wait_path == WaitPath.BLOCKED_KEY.value,
            concurrency_keys.c.held < concurrency_keys.c.permit_limit,
        )
    )
    return ids(conn, scoped(query, tasks, ns))


def _off_path(conn: sa.Connection, ns: str | None) -> list[str]:
    """Every WAITING task on exactly one wait path, and no other task on one."""
    on_path = tasks.c.wait_path.in_([p.value for p in WaitPath])
    query = sa.select(tasks.c.id).where(
        sa.or_(
            sa.and_(tasks.c.state == TaskState.WAITING.value, sa.not_(on_path)),
            sa.and_(tasks.c.state == TaskState.WAITING.value, tasks.c.wait_path.is_(None)),
            sa.and_(tasks.c.state != TaskState.WAITING.value, tasks.c.wait_path.is_not(None)),
        )
    )
    return ids(conn, scoped(query, tasks, ns))


def _path_contradicts_gate(conn: sa.Connection, ns: str | None) -> list[str]:
    """READY or waiting for a permit behind a closed gate; BLOCKED_GATE behind an open one."""
    query = (
        sa.select(tasks.c.id)
        .join(execution_gates, execution_gates.c.id == tasks.c.gate_id)
        .where(
            sa.or_(
                sa.and_(
                    tasks.c.wait_path.in_([WaitPath.READY.value, WaitPath.BLOCKED_KEY.value]),
                    execution_gates.c.allowed.is_(False),
                ),
                sa.and_(
                    tasks.c.wait_path == WaitPath.BLOCKED_GATE.value,
                    execution_gates.c.allowed.is_(True),
                ),
            )
        )
    )
    return ids(conn, scoped(query, tasks, ns))


def _quota_counter_mismatch(conn: sa.Connection, ns: str | None) -> list[str]:
    """A quota's counters differ from a real count of the counted tasks in its scope."""
    bad: list[str] = []
    for quota in conn.execute(scoped(sa.select(quotas), quotas, ns)):
        scope = [tasks.c.namespace == quota.namespace, tasks.c.quota_counted.is_(True)]
        if quota.queue != "*":
            scope.append(tasks.c.queue == quota.queue)
        counts: dict[str, int] = dict(
            conn.execute(
                sa.select(tasks.c.state, sa.func.count()).where(*scope).group_by(tasks.c.state)
            ).all()
        )
        running = counts.get("LEASED", 0) + counts.get("RUNNING", 0)
        if (quota.waiting, quota.running) != (counts.get("WAITING", 0), running):
            bad.append(f"{quota.namespace}/{quota.name}")
    return bad


def _uncounted_under_quota(conn: sa.Connection, ns: str | None) -> list[str]:
    """An unfinished task that a quota covers but that is not counted."""
    covering = (
        sa.select(quotas.c.id)
        .where(
            quotas.c.namespace == tasks.c.namespace,
            sa.or_(quotas.c.queue == "*", quotas.c.queue == tasks.c.queue),
        )
        .exists()
    )
    query = sa.select(tasks.c.id).where(
        tasks.c.state.in_([s.value for s in (TaskState.WAITING, *_LIVE)]),
        tasks.c.quota_counted.is_(False),
        covering,
    )
    return ids(conn, scoped(query, tasks, ns))


Check = Callable[[sa.Connection, str | None], list[str]]

#: name → (invariant, description, check), merged into orbit_store.recovery.verify.CHECKS.
BOOKKEEPING_CHECKS: dict[str, tuple[str, str, Check]] = {
    "permit_held_off_the_claim_path": (
        "2",
        "a concurrency permit held by a task that is not READY, LEASED or RUNNING",
        _permit_held_by_task_off_the_claim_path,
    ),
    "permit_missing": (
        "2",
        "a READY, LEASED or RUNNING task with a concurrency key but no permit",
        _permit_missing,
    ),
    "semaphore_count_mismatch": (
        "2",
        "a concurrency key whose held count differs from its permits",
        _semaphore_count_mismatch,
    ),
    "permits_over_limit": ("2", "more permits than the concurrency limit", _permits_over_limit),
    "blocked_with_free_permit": (
        "2",
        "a task waiting for a permit of a key that has one free",
        _blocked_with_free_permit,
    ),
    "waiting_off_path": (
        "2",
        "a WAITING task on no wait path (or a task on one that is not WAITING)",
        _off_path,
    ),
    "path_contradicts_gate": (
        "12",
        "a task on the claim path behind a closed gate, or blocked behind an open one",
        _path_contradicts_gate,
    ),
    "quota_counter_mismatch": (
        "2",
        "a quota whose waiting/running counters differ from a count of its tasks",
        _quota_counter_mismatch,
    ),
    "uncounted_under_quota": (
        "2",
        "an unfinished task covered by a quota but not counted in it",
        _uncounted_under_quota,
    ),
}
