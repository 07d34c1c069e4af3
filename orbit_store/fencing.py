"""Restore fencing (seed §7): after a restore from an older backup, stop dispatch, invalidate
every grant issued before, and reopen only after the operator has reconciled.

Why an epoch and not the generation alone: a restore rolls ``state_version`` back, so the
generations granted after the backup are granted again — to other workers. Each attempt records
the **restore epoch** it was granted under; ``(epoch, generation)`` is the fencing token
handlers pass downstream, and it keeps increasing across a restore. The epoch is the database
clock in microseconds at the fence (or the old epoch + 1, whichever is larger): the restored
database does not remember fences made after its backup, but it is fenced later than all of
them (keep the database clock monitored, seed §3).

What the checks below keep (invariant 3: a new operation must present the current grant):

- :func:`dispatch_columns` and :func:`open_epoch` — claims (which read the fence beside their
  queues): refused while dispatch is closed (:class:`DispatchClosed`); a grant records the
  epoch read there;
- :func:`is_fenced` and :func:`current_epoch_column` — start, renewal and completion (which
  read the epoch beside their attempts: ``pulse.attempts.granted_before_fence``, the batches'
  ``batch_read``): an attempt of an older epoch is refused (its report is kept as evidence,
  never applied).

The checks are plain reads of one row: a claim or start that read the old epoch just before a
fence commits made a grant of the old epoch, which every later call refuses; the fence's
per-namespace pass (``restore_fence``) then ends its session (waiting for it) and its lease.
The fence belongs to the database, not to a namespace: a restore restores a database, so with
namespaces spread over several databases each is fenced on its own. The database-wide rows
(``dispatch_fence``, ``restore_fences``) and their audit rows (in :data:`SYSTEM_NAMESPACE`) are
written in a transaction of their own; each namespace's sessions and leases in one of its own.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .audit import record_audit
from .clock import db_now
from .errors import Conflict, DispatchClosed, InvalidRequest
from .ids import new_id
from .schema import dispatch_fence, restore_fences

#: Where the audit rows of database-wide actions (a fence, a reopen) are kept.
SYSTEM_NAMESPACE = "orbit-system"
_ROW = 1
_UNIX_EPOCH = dt.datetime(1970, 1, 1)


@dataclass(frozen=True)
class RestoreFence:
    """One fence from the history (``restore_fences``)."""

    id: str
    epoch: int
    previous_epoch: int
    reason: str
    fenced_by: str
    fenced_at: dt.datetime
    reopened_at: dt.datetime | None = None
    reopened_by: str | None = None
    reopen_reason: str | None = None


@dataclass(frozen=True)
class FenceState:
    """The database's current restore epoch, whether dispatch is open, and the last fence."""

    epoch: int
    dispatch_open: bool
    fence: RestoreFence | None


# --- the checks on the worker protocol's path ------------------------------------------------


def current_epoch(conn: sa.Connection) -> int:
    """The current restore epoch (0 on a database never fenced)."""
    epoch = conn.execute(
        sa.select(dispatch_fence.c.epoch).where(dispatch_fence.c.id == _ROW)
    ).scalar_one_or_none()
    return int(epoch or 0)


def current_epoch_column() -> sa.ColumnElement[int]:
    """``current_epoch`` as a column of another statement, to read it without a round trip of
    its own (starts and completions, single or batched, read it beside their attempts)."""
    fence = sa.select(dispatch_fence.c.epoch).where(dispatch_fence.c.id == _ROW)
    return sa.func.coalesce(fence.scalar_subquery(), 0)


def is_fenced(conn: sa.Connection, attempt_epoch: int) -> bool:
    """Whether an attempt granted under ``attempt_epoch`` was issued before the current fence."""
    return attempt_epoch < current_epoch(conn)


def dispatch_columns() -> tuple[sa.ColumnElement[int], sa.ColumnElement[bool]]:
    """``epoch`` (:func:`current_epoch_column`) and ``dispatch_open`` as columns of another
    statement (a claim reads them beside its queues, without a round trip of their own); no
    fence row: epoch 0, open."""
    is_open = sa.select(dispatch_fence.c.dispatch_open).where(dispatch_fence.c.id == _ROW)
    return current_epoch_column(), sa.func.coalesce(is_open.scalar_subquery(), 1)


def open_epoch(conn: sa.Connection, epoch: int, dispatch_open: Any) -> int:
    """``epoch`` as read by :func:`dispatch_columns`; :class:`DispatchClosed` if not open."""
    if not dispatch_open:
        fence = fence_state(conn).fence
        raise DispatchClosed(int(epoch), fence.reason if fence else None)
    return int(epoch)


# --- reading and changing the fence ----------------------------------------------------------


def fence_state(conn: sa.Connection) -> FenceState:
    row = conn.execute(sa.select(dispatch_fence).where(dispatch_fence.c.id == _ROW)).one_or_none()
    if row is None:
        return FenceState(0, True, None)
    return FenceState(int(row.epoch), bool(row.dispatch_open), _fence(conn, row.fence_id))


def fence_history(conn: sa.Connection, *, limit: int = 20) -> list[RestoreFence]:
    """The latest fences, newest first."""
    rows = conn.execute(
        sa.select(restore_fences).order_by(restore_fences.c.epoch.desc()).limit(limit)
    )
    return [_view(row) for row in rows]


def raise_fence(conn: sa.Connection, *, reason: str, actor: str) -> RestoreFence:
    """Bump the restore epoch and close dispatch; append the fence to the history and its audit
    row in :data:`SYSTEM_NAMESPACE`, in this one transaction (invariant 8). From its commit on,
    every attempt granted before is refused at start, renewal and completion, and no claim
    grants anything. Fencing an already fenced database bumps the epoch again (a second restore)."""
    reason = _required(reason, "reason")
    row = _lock(conn)
    now = db_now(conn)
    previous = int(row.epoch) if row is not None else 0
    epoch = max(previous + 1, _micros(now))
    fence = RestoreFence(new_id(), epoch, previous, reason, actor[:255], now)
    conn.execute(
        restore_fences.insert().values(
            id=fence.id,
            epoch=epoch,
            previous_epoch=previous,
            reason=reason,
            fenced_by=fence.fenced_by,
            fenced_at=now,
        )
    )
    values = {"epoch": epoch, "dispatch_open": False, "fence_id": fence.id, "changed_at": now}
    if row is None:  # a database whose row went missing: recreate it, closed
        conn.execute(dispatch_fence.insert().values(id=_ROW, **values))
    else:
        conn.execute(dispatch_fence.update().where(dispatch_fence.c.id == _ROW).values(values))
    record_audit(
        conn,
        namespace=SYSTEM_NAMESPACE,
        actor=actor,
        action="restore.fence",
        resource_kind="RestoreFence",
        resource_id=fence.id,
        reason=reason,
        now=now,
        before={"epoch": previous, "dispatch_open": bool(row.dispatch_open) if row else True},
        after={"epoch": epoch, "dispatch_open": False},
    )
    return fence


def reopen_dispatch(conn: sa.Connection, *, reason: str, actor: str) -> RestoreFence:
    """Open dispatch again under the current epoch, once the operator has reconciled; recorded
    on the fence and audited in the same transaction. Conflict when dispatch is already open."""
    reason = _required(reason, "reason")
    row = _lock(conn)
    if row is None or row.dispatch_open:
        raise Conflict("dispatch is already open: there is no restore fence to reopen")
    now = db_now(conn)
    updated = conn.execute(
        restore_fences.update()
        .where(restore_fences.c.id == row.fence_id, restore_fences.c.reopened_at.is_(None))
        .values(reopened_at=now, reopened_by=actor[:255], reopen_reason=reason)
    )
    if updated.rowcount != 1:
        raise Conflict(f"restore fence {row.fence_id} is missing or already reopened")
    conn.execute(
        dispatch_fence.update()
        .where(dispatch_fence.c.id == _ROW, dispatch_fence.c.dispatch_open.is_(False))
        .values(dispatch_open=True, changed_at=now)
    )
    record_audit(
        conn,
        namespace=SYSTEM_NAMESPACE,
        actor=actor,
        action="restore.reopen",
        resource_kind="RestoreFence",
        resource_id=row.fence_id,
        reason=reason,
        now=now,
        before={"epoch": int(row.epoch), "dispatch_open": False},
        after={"epoch": int(row.epoch), "dispatch_open": True},
    )
    fence = _fence(conn, row.fence_id)
    assert fence is not None
    return fence


def _lock(conn: sa.Connection) -> sa.Row[Any] | None:
    """The fence row, exclusively: fences and reopens are serialised (no other lock is held)."""
    query = sa.select(dispatch_fence).where(dispatch_fence.c.id == _ROW).with_for_update()
    return conn.execute(query).one_or_none()


def _fence(conn: sa.Connection, fence_id: str | None) -> RestoreFence | None:
    if fence_id is None:
        return None
    row = conn.execute(
        sa.select(restore_fences).where(restore_fences.c.id == fence_id)
    ).one_or_none()
    return _view(row) if row is not None else None


def _view(row: sa.Row[Any]) -> RestoreFence:
    return RestoreFence(
        id=row.id,
        epoch=int(row.epoch),
        previous_epoch=int(row.previous_epoch),
        reason=row.reason,
        fenced_by=row.fenced_by,
        fenced_at=row.fenced_at,
        reopened_at=row.reopened_at,
        reopened_by=row.reopened_by,
        reopen_reason=row.reopen_reason,
    )


def _micros(now: dt.datetime) -> int:
    """Microseconds since the Unix epoch of a naive UTC database time."""
    return (now - _UNIX_EPOCH) // dt.timedelta(microseconds=1)


def _required(text: str, name: str) -> str:
    text = (text or "").strip()
    if not text:
        raise InvalidRequest(f"{name} is required: say why (it is kept in the audit trail)")
    return text[:1024]
