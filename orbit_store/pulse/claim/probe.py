"""The long-poll's cheap "anything for me?" probe: read-only, no transaction that writes.

An idle worker's lease request must not run a claim transaction every poll interval when
nothing changed. Between claims it asks this instead: is a task READY in a queue it serves,
for a handler it runs, with room under the max-running quotas — and when does the next
SCHEDULED task of its queues fall due (so it can sleep until then)? Index seeks only.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import sqlalchemy as sa

from orbit_store.db import force_index
from orbit_store.pulse.claim.claim import Claimant, claimable_queues
from orbit_store.pulse.limits.quota import WHOLE_NAMESPACE
from orbit_store.pulse.model import WaitPath
from orbit_store.schema import quotas, tasks


@dataclass(frozen=True)
class ClaimPreview:
    ready: bool  # a claim now would likely grant something, or promote what fell due
    next_due_at: dt.datetime | None  # the earliest SCHEDULED task of these queues
    now: dt.datetime


def preview_claim(conn: sa.Connection, namespace: str, claimant: Claimant) -> ClaimPreview:
    """What a claim by ``claimant`` would find now, without locking anything."""
    claimable, now = claimable_queues(conn, namespace, claimant.queues)
    if not claimable or claimant.handlers == []:
        return ClaimPreview(False, None, now)
    ready_in = _ready_queues(conn, namespace, claimable, claimant.handlers)
    full = full_queues(conn, namespace, claimable) if ready_in else set()
    next_due = conn.execute(
        force_index(
            sa.select(sa.func.min(tasks.c.available_at)).where(
                tasks.c.namespace == namespace,
                tasks.c.wait_path == WaitPath.SCHEDULED.value,
                tasks.c.queue.in_(claimable),
            ),
            tasks,
            "ix_tasks_due",
        )
    ).scalar_one_or_none()
    if isinstance(next_due, str):  # SQLite returns text for an aggregate
        next_due = dt.datetime.fromisoformat(next_due)
    # A SCHEDULED task already due is promoted by the next claim (wherever it then belongs).
    due_now = next_due is not None and next_due <= now
    return ClaimPreview(bool(ready_in - full) or due_now, next_due, now)


def _ready_queues(
    conn: sa.Connection, namespace: str, queue_names: list[str], handlers: list[str] | None
) -> set[str]:
    where = [
        tasks.c.namespace == namespace,
        tasks.c.queue.in_(queue_names),
        tasks.c.wait_path == WaitPath.READY.value,
    ]
    index = "ix_tasks_ready"
    if handlers is not None:
        where.append(tasks.c.handler.in_(handlers))
        index = "ix_tasks_ready_by_handler"
    query = force_index(sa.select(tasks.c.queue).where(*where).distinct(), tasks, index)
    return set(conn.execute(query).scalars())


def full_queues(conn: sa.Connection, namespace: str, queue_names: list[str]) -> set[str]:
    """Queues a max-running quota allows no more grants in (read without locks)."""
    rows = conn.execute(
        sa.select(quotas.c.queue, quotas.c.max_running, quotas.c.running).where(
            quotas.c.namespace == namespace,
            quotas.c.queue.in_([*queue_names, WHOLE_NAMESPACE]),
            quotas.c.max_running.is_not(None),
        )
    ).all()
    if any(r.queue == WHOLE_NAMESPACE and r.running >= r.max_running for r in rows):
        return set(queue_names)
    return {r.queue for r in rows if r.running >= r.max_running}
