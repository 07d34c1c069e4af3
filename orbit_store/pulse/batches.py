"""Many attempts started or completed in one transaction (the batched worker protocol).

One commit (one log flush) for a whole batch instead of one per attempt, with nothing of the
per-item rules given up. First the set path (``batch.start_set``, ``batch.complete_set``): the
common items — a start of a leased attempt, a success or failure of a running one — are judged item
by item from reads made once per batch and applied with grouped conditional UPDATEs and multi-row
INSERTs, a few statements per batch whatever its size, first in its transaction. If one of its
affected-row counts does not match (something moved between its reads and its writes), it
raises :class:`SetPathMismatch` (counted in :data:`SET_PATH_FALLBACKS`), which rolls the whole
transaction back; :func:`run_batch` runs the batch again, item by item (below), in a new
transaction. (No SAVEPOINT around the set path: that cost two statements in every batch for a
fallback that is rare.) The set path answers exactly what the item-by-item path would.

Every other item runs the single-item transaction body (``start_attempt``,
``complete_attempt``) with its own attempt token, its own conditional updates and its own typed
result, inside its own SAVEPOINT. An item the rules refuse (wrong token, superseded attempt,
lapsed lease — invariant 3) answers with its refusal; an item whose request is invalid or
whose conditional update loses a race is rolled back to its savepoint and answers
``InvalidRequest``/``LostRace``; its neighbours commit either way (invariant 4 per item: an
applied outcome commits with its events). A batch of one item sent by :func:`run_batch` has no
neighbours: it runs without the SAVEPOINT, and its refusal rolls back the whole transaction,
which held nothing else.

Lock order: the set path takes the sessions (starts), gates and task rows of the whole batch
first, in that order and each kind in id order (``batch_read``), so the items left to the
single-item body afterwards find theirs held and take only attempts, keys, quotas and inserts.
Item by item (a batch of one, or the fallback), items are applied in attempt-id order, so two
batches naming the same attempts lock their tasks in the same order. Each item takes the locks
of the single-item body in the documented order (session, gate, task, attempt, keys, quotas,
inserts); a batch holds the locks of its earlier items while it takes the next item's, and a
deadlock with another transaction rolls the whole batch back, which ``run_transaction`` runs
again (every item is idempotent: a start answers ``already_started``, a completion
``duplicate``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa

from orbit_store.db import RetryCounter, run_transaction
from orbit_store.errors import DataRefused, InvalidRequest
from orbit_store.pulse.batch.complete_set import complete_set
from orbit_store.pulse.batch.items import CompletionItem, StartItem
from orbit_store.pulse.batch.start_set import start_set
from orbit_store.pulse.leases.complete import complete_attempt
from orbit_store.pulse.leases.start import start_attempt
from orbit_store.pulse.limits.batch_deferred import Deferred, deferred
from orbit_store.pulse.model import CompletionResult, StartResult
from orbit_store.pulse.state.batch_read import SetPathMismatch
from orbit_store.pulse.state.transitions import LostRace

#: The most items one batch may carry (the API refuses more).
MAX_BATCH = 100

#: The smallest batch that takes the set path: one item is cheaper through the single-item body
#: (its statements are built once; bench/tasks/batch_paths.py).
SET_PATH_FROM = 2

#: Batches whose set path was rolled back and applied item by item, by kind (start, complete)
#: in this process: exported as orbit_attempt_batch_fallbacks_total.
SET_PATH_FALLBACKS = RetryCounter()

log = logging.getLogger(__name__)

R = TypeVar("R")
Item = TypeVar("Item", StartItem, CompletionItem)


@dataclass(frozen=True)
class ItemRefused:
    """An item the store refused as a request (not by the fencing rules): ``kind`` names why
    (``invalid`` — e.g. an outcome before a start —, ``lost_race``)."""

    kind: str
    detail: str


def start_attempts(
    conn: sa.Connection,
    *,
    namespace: str,
    items: Sequence[StartItem],
    set_based: bool = True,
    alone: bool = False,
) -> dict[str, StartResult | ItemRefused]:
    """Start every item's attempt that the rules allow (invariants 3, 12); one result per
    attempt id. See the module docstring for isolation between items. ``set_based=False``
    applies every item through the single-item body (the reference the set path is tested
    against, and an escape hatch). ``alone``: the transaction holds this batch only, so a
    batch of one item needs no SAVEPOINT (see :class:`LoneItemRefused`)."""

    def start(item: StartItem) -> StartResult:
        return start_attempt(
            conn,
            namespace=namespace,
            attempt_id=item.attempt_id,
            token=item.token,
            handler_safety=item.handler_safety,
        )

    set_path = functools.partial(start_set, conn, namespace) if set_based else None
    return _apply(conn, namespace, "start", items, set_path, start, alone)


def complete_attempts(
    conn: sa.Connection,
    *,
    namespace: str,
    items: Sequence[CompletionItem],
    set_based: bool = True,
    alone: bool = False,
) -> dict[str, CompletionResult | ItemRefused]:
    """Apply every item's report (invariants 3, 4, 7); one result per attempt id.
    ``set_based`` and ``alone``: as for :func:`start_attempts`."""

    def complete(item: CompletionItem) -> CompletionResult:
        return complete_attempt(
            conn,
            namespace=namespace,
            attempt_id=item.attempt_id,
            token=item.token,
            outcome=item.outcome,
            result=item.result,
            error=item.error,
            retryable=item.retryable,
        )

    set_path = functools.partial(complete_set, conn, namespace) if set_based else None
    return _apply(conn, namespace, "complete", items, set_path, complete, alone)


def run_batch(
    engine: sa.Engine,
    apply: Callable[..., dict[str, Any]],
    *,
    namespace: str,
    items: Sequence[StartItem] | Sequence[CompletionItem],
) -> dict[str, Any]:
    """``apply`` (:func:`start_attempts` or :func:`complete_attempts`) in one transaction; when
    its set path's counts do not match, that transaction is rolled back whole and the batch runs
    again item by item in a new one (every item is idempotent, and nothing of the first
    transaction was committed). A batch of one item is its transaction's only work, so it runs
    without a SAVEPOINT and a refusal rolls the whole transaction back
    (:class:`LoneItemRefused`). A value the database refuses (``DataRefused``: nothing of the
    transaction committed) sends the batch through again item by item, each in a transaction
    of its own, so that item answers its refusal and its neighbours apply."""
    work = functools.partial(apply, namespace=namespace, items=items, alone=True)
    try:
        try:
            return run_transaction(engine, work)
        except SetPathMismatch:
            return run_transaction(engine, functools.partial(work, set_based=False))
    except LoneItemRefused as refused:  # rolled back: the transaction held nothing else
        return {refused.attempt_id: refused.answer}
    except DataRefused as refused:
        if len(items) == 1:
            return {items[0].attempt_id: ItemRefused("invalid", str(refused))}
        answers: dict[str, Any] = {}
        for index in sorted(range(len(items)), key=lambda i: items[i].attempt_id):
            alone = items[index : index + 1]
            answers.update(run_batch(engine, apply, namespace=namespace, items=alone))
        return answers


def _apply(
    conn: sa.Connection,
    namespace: str,
    kind: str,
    items: Sequence[Item],
    set_path: Callable[[list[Item]], tuple[dict[str, R], list[str]]] | None,
    apply: Callable[[Item], R],
    alone: bool = False,
) -> dict[str, R | ItemRefused]:
    """A batch of ``kind``: checked, then the set path (None: off) and the items it left, or
    every item on its own; permits and quota counters settled once at the end (``deferred``).
    ``alone`` with one item: that item without a SAVEPOINT (:class:`LoneItemRefused`)."""
    by_id = _checked(items)
    with deferred(conn, namespace) as record:
        if alone and len(by_id) == 1:
            return _lone(by_id, apply)
        if set_path is None:
            return _each(conn, record, by_id, sorted(by_id), apply)
        return _set_then_each(
            conn, record, kind, by_id, lambda: set_path(list(by_id.values())), apply
        )


def _checked(items: Sequence[Item]) -> dict[str, Item]:
    by_id = {item.attempt_id: item for item in items}
    if len(by_id) != len(items):
        raise InvalidRequest("an attempt may appear only once in a batch")
    if len(items) > MAX_BATCH:
        raise InvalidRequest(f"a batch holds at most {MAX_BATCH} items")
    return by_id


def _set_then_each(
    conn: sa.Connection,
    record: Deferred,
    kind: str,
    by_id: dict[str, Item],
    set_path: Callable[[], tuple[dict[str, R], list[str]]],
    apply: Callable[[Item], R],
) -> dict[str, R | ItemRefused]:
    """The set path, then the items it left, each on its own. Its :class:`SetPathMismatch` is
    counted here and leaves the transaction to be rolled back (see :func:`run_batch`)."""
    if len(by_id) < SET_PATH_FROM:
        return _each(conn, record, by_id, sorted(by_id), apply)
    try:
        answers, rest = set_path()
    except SetPathMismatch as exc:
        SET_PATH_FALLBACKS.add(kind)
        log.warning("batch %s set path rolled back, to run item by item: %s", kind, exc)
        raise
    results: dict[str, R | ItemRefused] = dict(answers)
    results.update(_each(conn, record, by_id, rest, apply))
    return results


class LoneItemRefused(Exception):
    """The refusal of the only item of a batch that is its transaction's only work, raised so
    that the transaction is rolled back whole — what its SAVEPOINT would have undone, without
    the two statements a SAVEPOINT and its RELEASE cost every lone item (a worker's batches of
    one under a trickle of tasks). :func:`run_batch` answers it as ``_each`` would have."""

    def __init__(self, attempt_id: str, answer: ItemRefused) -> None:
        super().__init__(f"{attempt_id}: {answer.kind}: {answer.detail}")
        self.attempt_id, self.answer = attempt_id, answer


#: What an item's own request error answers (the item is rolled back; its neighbours go on).
_ITEM_ERRORS = (InvalidRequest, LostRace)


def _refusal(exc: Exception) -> ItemRefused:
    return ItemRefused("invalid" if isinstance(exc, InvalidRequest) else "lost_race", str(exc))


def _lone(by_id: dict[str, Item], apply: Callable[[Item], R]) -> dict[str, R | ItemRefused]:
    ((attempt_id, item),) = by_id.items()
    try:
        return {attempt_id: apply(item)}
    except _ITEM_ERRORS as exc:
        raise LoneItemRefused(attempt_id, _refusal(exc)) from exc


def _each(
    conn: sa.Connection,
    record: Deferred,
    by_id: dict[str, Item],
    attempt_ids: list[str],
    apply: Callable[[Item], R],
) -> dict[str, R | ItemRefused]:
    results: dict[str, R | ItemRefused] = {}
    for attempt_id in attempt_ids:
        savepoint, mark = conn.begin_nested(), record.mark()
        try:
            results[attempt_id] = apply(by_id[attempt_id])
        except _ITEM_ERRORS as exc:
            savepoint.rollback()
            record.reset(mark)
            results[attempt_id] = _refusal(exc)
        else:
            savepoint.commit()
    return results
