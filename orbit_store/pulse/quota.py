"""Quotas: max waiting and submit rate at submission, max running at claim.

The quota rows in scope (the queue's and the namespace-wide '*') are locked FOR UPDATE before
counting, so concurrent submitters or claimers can never overshoot a quota together. Only
namespaces that declare quotas pay for the lock and the count.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from orbit_store.errors import QuotaExceeded
from orbit_store.schema import quotas, tasks

from .model import TaskState

WHOLE_NAMESPACE = "*"


def _lock_quotas(conn: sa.Connection, namespace: str, queue: str) -> list[sa.Row[Any]]:
    query = (
        sa.select(quotas)
        .where(quotas.c.namespace == namespace, quotas.c.queue.in_([queue, WHOLE_NAMESPACE]))
        .order_by(quotas.c.id)
        .with_for_update()
    )
    return list(conn.execute(query))


def _count(conn: sa.Connection, namespace: str, queue: str, states: tuple[TaskState, ...]) -> int:
    query = sa.select(sa.func.count()).where(
        tasks.c.namespace == namespace, tasks.c.state.in_([s.value for s in states])
    )
    if queue != WHOLE_NAMESPACE:
        query = query.where(tasks.c.queue == queue)
    return int(conn.execute(query).scalar_one())


def check_submission(conn: sa.Connection, namespace: str, queue: str, now: dt.datetime) -> None:
    """Raise QuotaExceeded if one more WAITING task in ``queue`` would break a quota."""
    for quota in _lock_quotas(conn, namespace, queue):
        if quota.max_waiting is not None:
            waiting = _count(conn, namespace, quota.queue, (TaskState.WAITING,))
            if waiting >= quota.max_waiting:
                raise QuotaExceeded(
                    f"quota {quota.name!r}: {waiting} tasks waiting in "
                    f"{_scope(quota.queue)}, the limit is {quota.max_waiting}"
                )
        if quota.submit_rate_per_second is not None:
            _take_rate_token(conn, quota, now)


def _take_rate_token(conn: sa.Connection, quota: sa.Row[Any], now: dt.datetime) -> None:
    burst = float(quota.submit_burst or 1)
    tokens = burst if quota.rate_tokens is None else float(quota.rate_tokens)
    if quota.rate_refilled_at is not None:
        elapsed = max((now - quota.rate_refilled_at).total_seconds(), 0.0)
        tokens = min(burst, tokens + elapsed * quota.submit_rate_per_second)
    if tokens < 1.0:
        raise QuotaExceeded(
            f"quota {quota.name!r}: submit rate of {quota.submit_rate_per_second}/s in "
            f"{_scope(quota.queue)} exceeded; retry shortly"
        )
    conn.execute(
        quotas.update()
        .where(quotas.c.id == quota.id)
        .values(rate_tokens=tokens - 1.0, rate_refilled_at=now)
    )


def running_capacity(conn: sa.Connection, namespace: str, queue: str) -> int | None:
    """How many more tasks of ``queue`` may be leased now; None when no quota limits it."""
    capacity: int | None = None
    for quota in _lock_quotas(conn, namespace, queue):
        if quota.max_running is None:
            continue
        running = _count(conn, namespace, quota.queue, (TaskState.LEASED, TaskState.RUNNING))
        room = max(quota.max_running - running, 0)
        capacity = room if capacity is None else min(capacity, room)
    return capacity


def _scope(queue: str) -> str:
    return "the namespace" if queue == WHOLE_NAMESPACE else f"queue {queue!r}"
