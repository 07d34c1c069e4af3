"""Engine-level entry points: each runs store transactions through ``run_transaction`` (with
deadlock retries) and resolves the ambiguous cases the transactions themselves cannot.

The passes of the engine loops (``reap``, ``promote``) handle each item — one session, one
lease, one task, one namespace — in its own transaction of one namespace. An item that fails is
logged with what it was, counted in the pass's report, and skipped: one bad row never stops a
pass, nor the passes of other namespaces.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.db import retry_sleep, run_transaction
from orbit_store.errors import CommitOutcomeUnknown, Conflict, DataRefused, StoreError
from orbit_store.passes import ItemBackoff, ItemPass
from orbit_store.pulse.claim import promote as promotion
from orbit_store.pulse.leases import expiry
from orbit_store.pulse.model import SubmitResult
from orbit_store.pulse.submit import bulk
from orbit_store.pulse.submit.accept import SubmitRequest, find_submission, submit_task
from orbit_store.pulse.workers import sessions

log = logging.getLogger(__name__)

T = TypeVar("T")


def submit(engine: sa.Engine, request: SubmitRequest) -> SubmitResult:
    """Submit with invariant 6 kept end to end.

    Optimistic: the key is not looked up before the request is accepted (one statement less
    for every new submission). A used key — an earlier submission, or a concurrent duplicate
    that won the race — fails the key's INSERT; a commit whose outcome is unknown, or a keyed
    request refused (its queue paused since, a quota full), may also name an earlier
    submission. Each is resolved by looking the same key up in a new transaction: a replay is
    answered as the original task, a different request under the key as a conflict — never by
    submitting under a new key.
    """
    work = functools.partial(submit_task, request=request, look_up_key=False)
    try:
        return run_transaction(engine, work)
    except (sa.exc.IntegrityError, StoreError):
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


def submit_many(
    engine: sa.Engine, namespace: str, requests: Sequence[SubmitRequest]
) -> list[bulk.BatchItemResult]:
    """Submit ``requests`` in transactions of ``bulk.SUB_BATCH``; one result each.

    A sub-batch that lost a race on a key to a concurrent submission (IntegrityError), or whose
    commit outcome is unknown, runs again: its keys are then found and answered as replays, never
    accepted twice (invariant 6). Without a key on every item an unknown commit is raised. A
    sub-batch with a value the database refuses (``DataRefused``: nothing committed) runs again
    item by item, in order, so that item is answered with the refusal and the others commit.
    """
    results: list[bulk.BatchItemResult] = []
    for start in range(0, len(requests), bulk.SUB_BATCH):
        chunk = requests[start : start + bulk.SUB_BATCH]
        try:
            results += _submit_chunk(engine, namespace, chunk)
        except DataRefused as refused:
            if len(chunk) == 1:
                results.append(bulk.BatchItemResult(error=refused))
                continue
            for request in chunk:  # one transaction each: a later duplicate key still replays
                results += submit_many(engine, namespace, [request])
    return results


def _submit_chunk(
    engine: sa.Engine, namespace: str, chunk: Sequence[SubmitRequest]
) -> list[bulk.BatchItemResult]:
    """One sub-batch in one transaction, run again after a lost key race or unknown commit."""
    work = functools.partial(bulk.submit_tasks, namespace=namespace, requests=chunk)
    for attempt in range(1, SUBMIT_BATCH_RUNS + 1):
        try:
            return run_transaction(engine, work)
        except (sa.exc.IntegrityError, CommitOutcomeUnknown):
            unkeyed = any(r.idempotency_key is None for r in chunk)
            if attempt == SUBMIT_BATCH_RUNS or unkeyed:
                raise
            time.sleep(retry_sleep(attempt))
    raise AssertionError("unreachable")


SUBMIT_BATCH_RUNS = 3
REGISTER_ATTEMPTS = 5


def register(
    engine: sa.Engine, work: Callable[[sa.Connection], sessions.WorkerSession]
) -> sessions.WorkerSession:
    """Register a worker session. Registrations of one worker name racing: a loser hits the
    live-name unique key; run again, it replaces the winner (the newest wins). Bounded."""
    for attempt in range(1, REGISTER_ATTEMPTS + 1):
        try:
            return run_transaction(engine, work)
        except sa.exc.IntegrityError as exc:
            if attempt == REGISTER_ATTEMPTS:
                raise Conflict(
                    "this worker name is being registered by several processes at once; "
                    "give each worker its own name"
                ) from exc
            time.sleep(retry_sleep(attempt))
    raise AssertionError("unreachable")


#: The engine loops ``reap`` and ``promote`` run in (``orbit_engine_item_errors_total{loop}``).
REAPER_LOOP = "reaper"
PROMOTER_LOOP = "promoter"


@dataclass(frozen=True)
class ReapReport:
    sessions_expired: int
    leases_lapsed: int
    deadlines_failed: int
    decisions: tuple[expiry.Decision, ...] = ()
    errors: int = 0  # items that failed (each logged); the pass went on
    leases_graced: int = 0  # ran out in a server outage: extended, not lapsed (pulse.outages)


def reap(
    engine: sa.Engine,
    *,
    limit: int = 100,
    namespace: str | None = None,
    backoff: ItemBackoff | None = None,
) -> ReapReport:
    """One pass of the lease reaper: expire sessions, lapse leases, fail overdue tasks.

    Safe to run in any number of server replicas at once: every decision re-checks under lock.
    ``namespace`` restricts the pass to one namespace (tests, per-namespace operations). Finding
    the work is a read taking every namespace's oldest in turn; each decision is its own
    transaction in the item's namespace (:class:`ItemPass`): one that fails is logged naming it
    and skipped, and the pass goes on. With ``backoff`` (kept by the loop between passes) a
    failed item backs off alone: the next windows leave it out until its retry time.
    """
    now = run_transaction(engine, db_now) if backoff is not None else None
    run = ItemPass(engine, REAPER_LOOP, backoff=backoff, now=now)

    def find(kind: str, finder: Callable[..., list[T]]) -> list[T]:
        skip = backoff.backing_off(now, kind) if backoff and now else frozenset()
        return run_transaction(
            engine, functools.partial(finder, limit=limit, namespace=namespace, skip=skip)
        )

    expired = 0
    for session in find("session", sessions.find_expired_sessions):
        ended = run.run(
            functools.partial(sessions.expire_session, expired=session),
            namespace=session.namespace,
            item=f"worker session {session.session_id}",
            key=("session", session.session_id),
        )
        expired += bool(ended)
    lapsed: list[expiry.Decision] = []
    graced = 0
    for candidate in find("attempt", expiry.find_lapsed_attempts):
        decision = run.run(
            functools.partial(expiry.lapse_attempt, lapsed=candidate),
            namespace=candidate.namespace,
            item=f"task {candidate.task_id} (attempt {candidate.attempt_id})",
            key=("attempt", candidate.attempt_id),
        )
        if isinstance(decision, expiry.Graced):
            graced += 1
        elif decision is not None:
            lapsed.append(decision)
    failed: list[expiry.Decision] = []
    for task_namespace, task_id in find("task", expiry.find_overdue_waiting):
        decision = run.run(
            functools.partial(expiry.fail_overdue_task, namespace=task_namespace, task_id=task_id),
            namespace=task_namespace,
            item=f"task {task_id}",
            key=("task", task_id),
        )
        if decision is not None:
            failed.append(decision)
    decisions = tuple(lapsed + failed)
    return ReapReport(expired, len(lapsed), len(failed), decisions, run.errors, graced)


@dataclass(frozen=True)
class PromoteReport:
    promoted: int  # SCHEDULED tasks placed on their path
    released: int  # blocked tasks that got a permit left free (repair)
    errors: int = 0
    namespaces: int = 0  # namespaces that had work and got transactions of their own


def promote(
    engine: sa.Engine, *, namespace: str | None = None, limit: int = promotion.PROMOTE_BATCH
) -> PromoteReport:
    """One pass of the promoter: in each namespace (its own transactions), place the SCHEDULED
    tasks that fell due, batch by batch, and hand free permits to blocked tasks. Namespaces take
    turns — every namespace with due tasks gets a batch in each round — so a burst of due tasks
    in one namespace never delays another's by the burst's length."""
    run = ItemPass(engine, PROMOTER_LOOP)
    promoted = released = 0
    names = [namespace] if namespace is not None else _namespaces_with_work(engine)
    due = names
    while due:
        more: list[str] = []
        for name in due:
            placed = run.run(
                functools.partial(_promote_due, namespace=name, limit=limit),
                namespace=name,
                item="due tasks",
            )
            promoted += placed or 0
            if placed and placed >= limit:  # a full batch: more may be due
                more.append(name)
        due = more
    for name in names:
        moved = run.run(
            functools.partial(_release_stranded, namespace=name),
            namespace=name,
            item="concurrency keys",
        )
        released += moved or 0
    return PromoteReport(promoted, released, run.errors, len(names))


def _promote_due(conn: sa.Connection, namespace: str, limit: int) -> int:
    return promotion.promote_due(conn, namespace=namespace, now=db_now(conn), limit=limit)


def _release_stranded(conn: sa.Connection, namespace: str) -> int:
    return promotion.release_stranded_permits(conn, namespace=namespace, now=db_now(conn))


def _namespaces_with_work(engine: sa.Engine) -> list[str]:
    return run_transaction(
        engine, lambda conn: promotion.namespaces_with_work(conn, now=db_now(conn))
    )
