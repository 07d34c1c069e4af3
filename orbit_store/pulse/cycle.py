"""A busy worker's cycle in one transaction (worker protocol 4): the outcomes it reports, then
the claim that fills the slots they free — one commit and one connection per cycle instead of
two.

Nothing of either part's rules is given up. The reports go through
``batches.complete_attempts`` (each item with its own token and fencing: invariants 3, 4, 7),
the claim through ``claim.claim_tasks`` (invariant 2) after the reports' permits and quota
counters are settled, so a task whose report frees a max-running place can be followed by a
grant in the same cycle. Whenever one part would answer on its own what the two-transaction
path answers differently — the reports' set path does not match its reads, a lone report is
refused, the database refuses a value, or the claim is refused (session ended, dispatch
fenced, an invalid request) — the cycle's transaction is rolled back whole (nothing of it is
committed) and the cycle runs as two transactions: the reports by ``batches.run_batch``, then
the claim, each answering as it always has.

Lock order (``pulse/__init__.py``): the worker session first (shared, as a claim takes it),
then the reports' gates, task rows and attempts; then the claim's gates (shared, to promote due
tasks: the reports hold the gates of the task rows they hold, so no one holding one of these
waits for those rows) and task rows with SKIP LOCKED (never waited for). Key and quota rows
(lock orders 6 and 9) are taken by both parts, each part in its own order; so when the reports
took any (their permits and counters, settled at their end: ``batch_deferred``), the
transaction commits there and the claim runs in a transaction of its own. The task_events
rows of both parts are inserted together at the end (``event_inserts``): inserts come last.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence

import sqlalchemy as sa

from orbit_store.db import run_transaction
from orbit_store.errors import Conflict, DispatchClosed, InvalidRequest, NotFound
from orbit_store.pulse import batches
from orbit_store.pulse.batch.items import CompletionItem
from orbit_store.pulse.claim.claim import claim_tasks, require_active_session
from orbit_store.pulse.limits.batch_deferred import deferred
from orbit_store.pulse.model import CompletionResult, LeaseGrant
from orbit_store.pulse.state.batch_read import SetPathMismatch
from orbit_store.pulse.state.event_inserts import one_events_insert

Answers = dict[str, CompletionResult | batches.ItemRefused]

#: What sends a cycle back to two transactions (see the module docstring).
_APART = (
    SetPathMismatch,
    batches.LoneItemRefused,
    NotFound,
    Conflict,
    InvalidRequest,
    DispatchClosed,
)


def report_then_claim(
    engine: sa.Engine,
    *,
    namespace: str,
    session_id: str,
    items: Sequence[CompletionItem],
    limit: int,
    start_handlers: Collection[str] = (),
) -> tuple[Answers, list[LeaseGrant]]:
    """The reports applied and up to ``limit`` tasks claimed for ``session_id``, in one
    transaction when both parts take their common path, else in two (invariants 2, 3, 4, 7):
    one answer per reported attempt id, and the grants."""
    claim = functools.partial(
        claim_tasks,
        namespace=namespace,
        queues_=None,
        limit=limit,
        worker_session_id=session_id,
        start_handlers=start_handlers,
    )
    together = functools.partial(_together, namespace=namespace, items=items, claim=claim)
    try:
        answers, grants = run_transaction(engine, together)
    except _APART:
        answers = batches.run_batch(
            engine, batches.complete_attempts, namespace=namespace, items=items
        )
        return answers, run_transaction(engine, claim)
    if grants is None:  # the reports took key or quota rows: committed, the claim apart
        grants = run_transaction(engine, claim)
    return answers, grants


def _together(
    conn: sa.Connection,
    *,
    namespace: str,
    items: Sequence[CompletionItem],
    claim: functools.partial[list[LeaseGrant]],
) -> tuple[Answers, list[LeaseGrant] | None]:
    """The session, the reports, then the claim — or None for the claim when the reports took
    key or quota rows, which the claim may take too, in an order of its own."""
    session_id = claim.keywords["worker_session_id"]
    claimant = require_active_session(conn, namespace, session_id)  # the session first
    with one_events_insert(conn):  # both parts' task_events in one INSERT, at the end
        with deferred(conn, namespace) as record:
            # ``alone``: a lone report's refusal rolls back this transaction, which then runs
            # apart.
            answers = batches.complete_attempts(conn, namespace=namespace, items=items, alone=True)
        if record.locks_keys_or_quotas():
            return answers, None
        return answers, claim(conn, claimant=claimant)
