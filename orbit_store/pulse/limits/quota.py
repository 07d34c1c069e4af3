"""Quotas: max waiting and submit rate checked at submission, max running at claim — each O(1).

A quota row counts the tasks in its scope (its queue, or the whole namespace '*') that carry
``tasks.quota_counted``: ``waiting`` (WAITING) and ``running`` (LEASED + RUNNING). The counters
are kept by the transitions themselves, in the same transaction as the state change
(``transition`` and the claim's grant), so a check reads one row instead of counting the
backlog. Only tasks submitted while a quota covered their scope are counted — declaring a
quota adopts the scope's unfinished tasks (``quota_declarations``) — so queues without quotas
never touch this table.

Which rows each transaction locks: a submit only the quotas of its scope, and only in namespaces
that have quotas (``namespaces.has_quotas``); a claim only when it grants a counted task; other
transitions of a counted task update their scope's counters, last (lock order).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orbit_store.db import by_primary_key, force_index
from orbit_store.errors import QuotaExceeded
from orbit_store.pulse.model import TaskState
from orbit_store.schema import quotas

WHOLE_NAMESPACE = "*"
_LIVE = (TaskState.LEASED, TaskState.RUNNING)


def _scope_ids(conn: sa.Connection, namespace: str, queues: list[str]) -> list[str]:
    """The ids of the quotas covering ``queues`` and the whole namespace (a plain read: quota
    rows are always locked by primary key, in id order, so lockers never cross)."""
    scope = sorted({*queues, WHOLE_NAMESPACE})
    query = sa.select(quotas.c.id).where(quotas.c.namespace == namespace, quotas.c.queue.in_(scope))
    return sorted(conn.execute(force_index(query, quotas, "ix_quotas_scope")).scalars())


def lock_scope(conn: sa.Connection, namespace: str, queues: list[str]) -> list[sa.Row[Any]]:
    """The quotas covering ``queues`` (and the namespace-wide ones), locked in id order."""
    ids = _scope_ids(conn, namespace, queues)
    if not ids:
        return []
    lock = sa.select(quotas).where(quotas.c.id.in_(ids)).order_by(quotas.c.id).with_for_update()
    rows = conn.execute(by_primary_key(lock, quotas))
    scope = {*queues, WHOLE_NAMESPACE}
    return [row for row in rows if row.queue in scope]  # its scope may have changed meanwhile


def check_submission(conn: sa.Connection, namespace: str, queue: str, now: dt.datetime) -> bool:
    """Raise QuotaExceeded if one more WAITING task in ``queue`` would break a quota (nothing
    is written then); True when quotas cover the queue, i.e. the new task is counted."""
    scope = lock_scope(conn, namespace, [queue])
    for quota in scope:
        if quota.max_waiting is not None and quota.waiting >= quota.max_waiting:
            raise QuotaExceeded(
                f"quota {quota.name!r}: {quota.waiting} tasks waiting in "
                f"{_scope(quota.queue)}, the limit is {quota.max_waiting}"
            )
        if quota.submit_rate_per_second is not None:
            _take_rate_token(conn, quota, now)
    return bool(scope)


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


def state_deltas(from_state: TaskState | None, to_state: TaskState) -> tuple[int, int]:
    """How a move changes a counted task's contribution to (waiting, running)."""

    def weight(state: TaskState | None) -> tuple[int, int]:
        return (int(state is TaskState.WAITING), int(state in _LIVE))

    before, after = weight(from_state), weight(to_state)
    return after[0] - before[0], after[1] - before[1]


def count(
    conn: sa.Connection, namespace: str, queue: str, *, waiting: int = 0, running: int = 0
) -> None:
    """Add to the counters of every quota covering ``queue`` (a counted task moved)."""
    if not (waiting or running):
        return
    ids = _scope_ids(conn, namespace, [queue])
    if ids:
        update = (
            quotas.update()
            .where(quotas.c.id.in_(ids), quotas.c.queue.in_([queue, WHOLE_NAMESPACE]))
            .values(waiting=quotas.c.waiting + waiting, running=quotas.c.running + running)
        )
        conn.execute(by_primary_key(update, quotas))


def count_queues(conn: sa.Connection, namespace: str, deltas: dict[str, tuple[int, int]]) -> None:
    """:func:`count` for several queues at once — ``{queue: (waiting, running)}`` — each quota
    row updated once, in id order (a batch of moves: its rows are locked in one order)."""
    if not deltas:
        return
    scope = sorted({*deltas, WHOLE_NAMESPACE})
    query = sa.select(quotas.c.id, quotas.c.queue).where(
        quotas.c.namespace == namespace, quotas.c.queue.in_(scope)
    )
    rows = conn.execute(force_index(query, quotas, "ix_quotas_scope")).all()
    for row in sorted(rows, key=lambda r: str(r.id)):
        covered = list(deltas) if row.queue == WHOLE_NAMESPACE else [row.queue]
        waiting = sum(deltas[q][0] for q in covered if q in deltas)
        running = sum(deltas[q][1] for q in covered if q in deltas)
        if not (waiting or running):
            continue
        update = (
            quotas.update()
            .where(quotas.c.id == row.id, quotas.c.queue == row.queue)
            .values(waiting=quotas.c.waiting + waiting, running=quotas.c.running + running)
        )
        conn.execute(by_primary_key(update, quotas))


@dataclass
class RunningRoom:
    """How many more counted tasks each queue may lease now, under every max-running quota of
    its scope (the namespace-wide ones are shared by all queues). None: no limit."""

    per_queue: dict[str, int | None]
    whole_namespace: int | None

    def take(self, queue: str) -> bool:
        """Use one unit of room for ``queue``; False when a quota is full."""
        own = self.per_queue.get(queue)
        if (own is not None and own <= 0) or (
            self.whole_namespace is not None and self.whole_namespace <= 0
        ):
            return False
        if own is not None:
            self.per_queue[queue] = own - 1
        if self.whole_namespace is not None:
            self.whole_namespace -= 1
        return True


def running_room(conn: sa.Connection, namespace: str, queues: list[str]) -> RunningRoom:
    """Lock the quotas covering ``queues`` and read the room their max_running leaves."""
    room = RunningRoom(dict.fromkeys(queues), None)
    for quota in lock_scope(conn, namespace, queues):
        if quota.max_running is None:
            continue
        left = max(quota.max_running - quota.running, 0)
        if quota.queue == WHOLE_NAMESPACE:
            current = room.whole_namespace
            room.whole_namespace = left if current is None else min(current, left)
        else:
            current = room.per_queue.get(quota.queue)
            room.per_queue[quota.queue] = left if current is None else min(current, left)
    return room


def _scope(queue: str) -> str:
    return "the namespace" if queue == WHOLE_NAMESPACE else f"queue {queue!r}"
