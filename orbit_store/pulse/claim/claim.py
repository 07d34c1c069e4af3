"""Claiming due tasks (seed §5 "领取"): one transaction grants up to N tasks of the given queues.

Invariant 2: within one state_version a task has at most one valid grant. Claims read only the
READY path (``paths``), lane by lane (``lanes``: only the handlers the worker session runs),
with ``FOR UPDATE SKIP LOCKED`` (claimers never wait on each other's rows), and move the rows
WAITING → LEASED by one conditional UPDATE whose row count is checked. Each grant gets a new
attempt whose generation (the fencing number) is the state_version the grant created — so it
strictly increases and names the one version the grant is valid for — and a random secret
token stored only as a hash.

Everything that could refuse a READY task was settled before it became READY: its gate was
open (a gate closing moves it off the path, inv. 12; start checks the gate again) and it holds
its concurrency permit. What a claim still checks: the session is live and ACTIVE (shared lock),
the queue is not paused, the deadline has not passed, and the max-running quotas — whose rows
it locks only when it grants a counted task. Due SCHEDULED tasks of its queues are promoted
first, so a task is claimable the moment it falls due.

A lease with start (``start_handlers``) starts the grants of handlers the worker declared safe
in this same transaction (``grant``): it takes no lock beyond the claim's, since every check a
start makes is already settled here under the locks above.

Lock order here: session (shared) → gates (shared, promotion) → task rows (SKIP LOCKED, never
waited for) → concurrency keys (promotion) → quota rows (queue order) → inserts.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import as_db_time, utc_now
from orbit_store.db import by_primary_key
from orbit_store.errors import Conflict, InvalidRequest, NotFound
from orbit_store.fencing import dispatch_columns, open_epoch
from orbit_store.pulse.claim import lanes
from orbit_store.pulse.claim.grant import grant_tasks
from orbit_store.pulse.claim.promote import promote_due
from orbit_store.pulse.limits import quota
from orbit_store.pulse.model import DEFAULT_QUEUE, LeaseGrant, TaskState
from orbit_store.pulse.state.transitions import transition
from orbit_store.schema import queues, tasks, worker_sessions

MAX_CLAIM_BATCH = 500

# The hot path's statements are built once: SQLAlchemy then skips their construction and cache
# key on every call, a large share of a claim's own CPU.
_SESSION = sa.select(
    worker_sessions.c.state, worker_sessions.c.queues, worker_sessions.c.handlers
).where(
    worker_sessions.c.id == sa.bindparam("session_id"),
    worker_sessions.c.namespace == sa.bindparam("namespace"),
)
_SESSION_SHARED = _SESSION.with_for_update(read=True)
_ONE = sa.select(sa.literal(1).label("one")).subquery("one")
_QUEUES_NOW = sa.select(
    utc_now().label("db_now"), queues.c.name, queues.c.paused, queues.c.priority
).select_from(
    _ONE.outerjoin(
        queues,
        sa.and_(
            queues.c.namespace == sa.bindparam("namespace"),
            queues.c.name.in_(sa.bindparam("names", expanding=True)),
        ),
    )
)
_FENCE_EPOCH, _DISPATCH_OPEN = dispatch_columns()
_CLAIMABLE_NOW = _QUEUES_NOW.add_columns(
    _FENCE_EPOCH.label("fence_epoch"), _DISPATCH_OPEN.label("dispatch_open")
)


@dataclass(frozen=True)
class Claimant:
    """Who claims: the queues to serve and the handlers it runs (None: any handler)."""

    queues: list[str]
    handlers: list[str] | None


def claim_tasks(
    conn: sa.Connection,
    *,
    namespace: str,
    queues_: list[str] | None,
    limit: int,
    worker_session_id: str | None = None,
    start_handlers: Collection[str] = (),
    claimant: Claimant | None = None,
) -> list[LeaseGrant]:
    """Lease up to ``limit`` due WAITING tasks from ``queues_`` (in queue-priority order) that
    the worker session can run; ``queues_=None`` means the queues the session registered for.

    ``start_handlers``: handlers the worker declared safe and wants started at once (a lease
    with start): their grants are RUNNING when this returns (``grant``, invariants 3, 7, 12).
    ``claimant``: the session as this transaction already read it under its shared lock
    (``cycle``), not read again."""
    if not 1 <= limit <= MAX_CLAIM_BATCH:
        raise InvalidRequest(f"limit must be between 1 and {MAX_CLAIM_BATCH}")
    if claimant is None:
        claimant = Claimant(queues_ or [], None)
        if worker_session_id is not None:
            claimant = require_active_session(conn, namespace, worker_session_id, queues_)
    if not claimant.queues:
        raise InvalidRequest("name at least one queue to claim from")
    # The restore fence is read with the queues: refused while closed (orbit_store/fencing.py).
    claimable, now, epoch = _claimable_now(conn, namespace, claimant.queues)
    if not claimable:
        return []
    promote_due(conn, namespace=namespace, now=now, queues=claimable)
    candidates: list[sa.Row[Any]] = []
    for queue in claimable:
        if len(candidates) >= limit:
            break
        candidates += lanes.lock_ready(
            conn, namespace, queue, claimant.handlers, limit - len(candidates)
        )
    if not candidates:
        return []
    room = _running_room(conn, namespace, candidates)
    granted = [
        t for t in _fail_overdue(conn, candidates, now) if not t.quota_counted or room.take(t.queue)
    ]
    if not granted:
        return []
    return grant_tasks(conn, granted, worker_session_id, now, epoch, start_handlers)


def require_active_session(
    conn: sa.Connection,
    namespace: str,
    session_id: str,
    queues_: list[str] | None = None,
    *,
    lock: bool = True,
) -> Claimant:
    """The session's queues (unless given) and handlers. Shared lock (a claim): a concurrent
    revoke waits until this claim commits, then lapses its leases. ``lock=False``: a plain read
    (the long-poll's probe)."""
    params = {"session_id": session_id, "namespace": namespace}
    row = conn.execute(_SESSION_SHARED if lock else _SESSION, params).one_or_none()
    if row is None:
        raise NotFound(f"worker session {session_id} not found in namespace {namespace!r}")
    if row.state != "ACTIVE":
        raise Conflict(
            f"worker session {session_id} is {row.state}: only ACTIVE sessions lease "
            "tasks; register a new session"
        )
    handlers = None if row.handlers is None else list(row.handlers)
    return Claimant(list(row.queues) if queues_ is None else queues_, handlers)


def claimable_queues(
    conn: sa.Connection, namespace: str, names: list[str]
) -> tuple[list[str], dt.datetime]:
    """Declared (or implicit default), unpaused queues in queue-priority order, and the
    database time — in one round trip (a one-row derived table outer-joined to the queues,
    so it answers even with none)."""
    rows = conn.execute(_QUEUES_NOW, {"namespace": namespace, "names": names}).all()
    return _ordered(rows, names), as_db_time(conn, rows[0].db_now)


def _claimable_now(
    conn: sa.Connection, namespace: str, names: list[str]
) -> tuple[list[str], dt.datetime, int]:
    """:func:`claimable_queues` and the open dispatch epoch (``fencing.open_epoch``'s
    answer and refusal) from the same statement."""
    rows = conn.execute(_CLAIMABLE_NOW, {"namespace": namespace, "names": names}).all()
    first = rows[0]
    fence_epoch = open_epoch(conn, first.fence_epoch, first.dispatch_open)
    return _ordered(rows, names), as_db_time(conn, first.db_now), fence_epoch


def _ordered(rows: Sequence[sa.Row[Any]], names: list[str]) -> list[str]:
    declared = {row.name: row for row in rows if row.name is not None}
    ordered = []
    for name in sorted(set(names)):
        row = declared.get(name)
        if row is None:
            if name == DEFAULT_QUEUE:
                ordered.append((0, name))
        elif not row.paused:
            ordered.append((row.priority, name))
    return [name for _, name in sorted(ordered)]


def _running_room(
    conn: sa.Connection, namespace: str, candidates: list[sa.Row[Any]]
) -> quota.RunningRoom:
    """Lock the quotas of the queues whose candidates are counted (none: no quota rows)."""
    counted = sorted({t.queue for t in candidates if t.quota_counted})
    if not counted:
        return quota.RunningRoom({}, None)
    return quota.running_room(conn, namespace, counted)


def _whole(conn: sa.Connection, task_id: str) -> sa.Row[Any]:
    """Every column of a task this claim holds locked (it read only ``lanes.CLAIM_COLUMNS``)."""
    return conn.execute(by_primary_key(sa.select(tasks).where(tasks.c.id == task_id), tasks)).one()


def _fail_overdue(
    conn: sa.Connection, candidates: list[sa.Row[Any]], now: dt.datetime
) -> list[sa.Row[Any]]:
    """Candidates whose deadline passed are not granted: FAILED here, or — when they hold a
    concurrency permit, whose release locks the key after our quota rows — by the reaper."""
    due = []
    for task in candidates:
        if task.deadline_at is None or task.deadline_at > now:
            due.append(task)
        elif task.concurrency_key is None:
            transition(
                conn,
                _whole(conn, task.id),
                TaskState.FAILED,
                now=now,
                reason="deadline exceeded",
                error={"type": "deadline_exceeded", "message": "deadline passed before start"},
            )
    return due
