"""``orbit admin restore-fence``: the whole procedure after a restore from backup (seed §7).

1. :func:`fencing.raise_fence` — one transaction: a new restore epoch, dispatch closed, the
   fence in the history, its audit row. From here every older grant is refused.
2. :func:`fence_namespace` — one transaction per namespace: every live worker session ends
   (REVOKED: workers register again and wait for the reopen), every lease granted under an
   older epoch is cut to now, and an audit row in that namespace says what was cut.
3. The reaper's own rules settle each cut lease (``pulse.service.reap``, one transaction per
   task): never started → WAITING; RUNNING and safe → WAITING (retried after the reopen);
   RUNNING and unsafe → NEEDS_REVIEW (invariant 7: the restored records cannot tell whether its
   side effects happened).

Each step can be run again: a second run of step 2 finds nothing live, the reaper re-checks
everything under lock. Reopening is :func:`fencing.reopen_dispatch`, after reconciliation.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field

import sqlalchemy as sa

from orbit_store.pulse import service
from orbit_store.pulse.model import AttemptOutcome
from orbit_store.pulse.state.attempts import LIVE_ATTEMPT_STATES, cut_leases
from orbit_store.pulse.workers.sessions import LIVE, end_session, lock_session

from ..audit import record_audit
from ..clock import db_now
from ..db import run_transaction
from ..fencing import RestoreFence, raise_fence
from ..schema import namespaces, task_attempts, tasks, worker_sessions

#: Reaper passes the procedure runs at most to settle the cut leases (each pass: up to 500).
MAX_LAPSE_PASSES = 1_000


@dataclass(frozen=True)
class NamespaceFenced:
    namespace: str
    sessions_ended: int
    leases_cut: int
    #: Every live attempt granted before the fence, whichever step cut its lease.
    attempts_cut: tuple[str, ...] = ()


@dataclass(frozen=True)
class FenceReport:
    fence: RestoreFence
    namespaces: tuple[NamespaceFenced, ...]
    #: What the reaper's rules made of the cut leases: task state → count.
    settled: dict[str, int] = field(default_factory=dict)
    errors: int = 0  # items the reaper could not settle (logged; the reaper loop retries them)


def restore_fence(engine: sa.Engine, *, reason: str, actor: str) -> FenceReport:
    """Fence the database, end every session and lease issued before, settle the tasks."""
    fence = run_transaction(engine, functools.partial(raise_fence, reason=reason, actor=actor))
    with engine.connect() as conn:
        names = _namespaces(conn)
    fenced = tuple(
        run_transaction(
            engine, functools.partial(fence_namespace, namespace=name, fence=fence, actor=actor)
        )
        for name in names
    )
    errors = 0
    for name in names:
        for _ in range(MAX_LAPSE_PASSES):
            report = service.reap(engine, limit=500, namespace=name)
            errors += report.errors
            if report.leases_lapsed == 0:
                break
    with engine.connect() as conn:
        settled = _settled(conn, [a for n in fenced for a in n.attempts_cut])
    return FenceReport(fence, fenced, settled, errors)


def _settled(conn: sa.Connection, attempt_ids: list[str]) -> dict[str, int]:
    """Task state → count, for the tasks whose cut attempts have lapsed — counted from the
    rows, not from our own reaper passes: the server's reaper loop may settle some first."""
    settled: Counter[str] = Counter()
    for k in range(0, len(attempt_ids), 500):
        rows = conn.execute(
            sa.select(tasks.c.state, sa.func.count())
            .select_from(task_attempts.join(tasks, tasks.c.id == task_attempts.c.task_id))
            .where(
                task_attempts.c.id.in_(attempt_ids[k : k + 500]),
                task_attempts.c.outcome == AttemptOutcome.LAPSED.value,
            )
            .group_by(tasks.c.state)
        )
        settled.update({state: int(n) for state, n in rows})
    return dict(settled)


def _namespaces(conn: sa.Connection) -> list[str]:
    """Every declared namespace, and any other that holds a live session or lease (a worker
    may register in a namespace nothing was declared in)."""
    declared = sa.select(namespaces.c.name.label("name"))
    with_sessions = sa.select(worker_sessions.c.namespace).where(worker_sessions.c.state.in_(LIVE))
    with_leases = sa.select(task_attempts.c.namespace).where(
        task_attempts.c.state.in_(LIVE_ATTEMPT_STATES)
    )
    union = sa.union(declared, with_sessions, with_leases).subquery()
    return sorted(conn.execute(sa.select(union.c.name).distinct()).scalars())


def fence_namespace(
    conn: sa.Connection, *, namespace: str, fence: RestoreFence, actor: str
) -> NamespaceFenced:
    """End the namespace's live sessions and cut every lease older than ``fence``; audited here.

    Lock order (``pulse/__init__.py``): the sessions first, exclusively, in id order — a claim,
    start or renewal holding one shared finishes first, and its grant is cut below — then the
    attempts, found by a plain read and updated by primary key (as ``end_session`` does)."""
    now = db_now(conn)
    live_sessions = (
        conn.execute(
            sa.select(worker_sessions.c.id)
            .where(worker_sessions.c.namespace == namespace, worker_sessions.c.state.in_(LIVE))
            .order_by(worker_sessions.c.id)
        )
        .scalars()
        .all()
    )
    locked = [lock_session(conn, namespace, sid) for sid in live_sessions]
    why = f"restore fence (epoch {fence.epoch}): {fence.reason}"
    ended = [row.id for row in locked if row.state in LIVE]
    for session_id in ended:
        end_session(conn, namespace, session_id, "REVOKED", why, now)
    # Every attempt granted before the fence that is still live: those the session ends cut
    # (still live, their rows ours until commit), grants made without a session, and what a
    # session end did not reach — cut here (a no-op for the first).
    stale = sorted(
        conn.execute(
            sa.select(task_attempts.c.id).where(
                task_attempts.c.namespace == namespace,
                task_attempts.c.state.in_(LIVE_ATTEMPT_STATES),
                task_attempts.c.epoch < fence.epoch,
            )
        ).scalars()
    )
    cut_leases(conn, stale, now)
    result = NamespaceFenced(namespace, len(ended), len(stale), tuple(stale))
    record_audit(
        conn,
        namespace=namespace,
        actor=actor,
        action="restore.fence",
        resource_kind="RestoreFence",
        resource_id=fence.id,
        reason=fence.reason,
        now=now,
        after={
            "epoch": fence.epoch,
            "sessions_ended": result.sessions_ended,
            "leases_cut": result.leases_cut,
        },
    )
    return result
