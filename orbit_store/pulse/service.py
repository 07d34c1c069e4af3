"""Engine-level entry points: each runs one store transaction through ``run_transaction`` (with
deadlock retries) and resolves the ambiguous cases the transactions themselves cannot."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import sqlalchemy as sa

from orbit_store.db import run_transaction
from orbit_store.errors import CommitOutcomeUnknown
from orbit_store.passes import ItemPass

from . import expiry, sessions
from .model import SubmitResult
from .submit import SubmitRequest, find_submission, submit_task


def submit(engine: sa.Engine, request: SubmitRequest) -> SubmitResult:
    """Submit with invariant 6 kept end to end.

    A concurrent duplicate that lost the race on the idempotency key, or a commit whose outcome
    is unknown, is resolved by looking the same key up — never by submitting under a new one.
    """
    try:
        return run_transaction(engine, functools.partial(submit_task, request=request))
    except (sa.exc.IntegrityError, CommitOutcomeUnknown):
        if request.idempotency_key is None:
            raise
        key = request.idempotency_key
        found = run_transaction(
            engine,
            lambda conn: find_submission(conn, request.namespace, key, request.digest()),
        )
        if found is None:
            raise
        return found


#: The engine loop ``reap`` runs in (``orbit_engine_item_errors_total{loop}``).
REAPER_LOOP = "reaper"


@dataclass(frozen=True)
class ReapReport:
    sessions_expired: int
    leases_lapsed: int
    deadlines_failed: int
    decisions: tuple[expiry.Decision, ...] = ()
    errors: int = 0  # items that failed (each logged); the pass went on


def reap(engine: sa.Engine, *, limit: int = 100, namespace: str | None = None) -> ReapReport:
    """One pass of the lease reaper: expire sessions, lapse leases, fail overdue tasks.

    Safe to run in any number of server replicas at once: every decision re-checks under lock.
    ``namespace`` restricts the pass to one namespace (tests, per-namespace operations). Finding
    the work is a read; each decision is its own transaction (:class:`ItemPass`): one that
    fails is logged naming its task and skipped, and the pass goes on.
    """
    items = ItemPass(engine, REAPER_LOOP)
    expired = items.run(
        functools.partial(sessions.expire_sessions, limit=limit, namespace=namespace),
        namespace=namespace or "(all)",
        item="expired worker sessions",
    )
    lapsed: list[expiry.Decision] = []
    for candidate in run_transaction(
        engine, functools.partial(expiry.find_lapsed_attempts, limit=limit, namespace=namespace)
    ):
        decision = items.run(
            functools.partial(expiry.lapse_attempt, lapsed=candidate),
            namespace=candidate.namespace,
            item=f"task {candidate.task_id} (attempt {candidate.attempt_id})",
        )
        if decision is not None:
            lapsed.append(decision)
    failed: list[expiry.Decision] = []
    for task_namespace, task_id in run_transaction(
        engine, functools.partial(expiry.find_overdue_waiting, limit=limit, namespace=namespace)
    ):
        decision = items.run(
            functools.partial(expiry.fail_overdue_task, namespace=task_namespace, task_id=task_id),
            namespace=task_namespace,
            item=f"task {task_id}",
        )
        if decision is not None:
            failed.append(decision)
    decisions = tuple(lapsed + failed)
    return ReapReport(expired or 0, len(lapsed), len(failed), decisions, items.errors)
