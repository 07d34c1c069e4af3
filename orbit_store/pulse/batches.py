"""Many attempts started or completed in one transaction (the batched worker protocol).

One commit (one log flush) for a whole batch instead of one per attempt, with nothing of the
per-item rules given up: each item runs the single-item transaction body (``start_attempt``,
``complete_attempt``) with its own attempt token, its own conditional updates and its own typed
result, inside its own SAVEPOINT. An item the rules refuse (wrong token, superseded attempt,
lapsed lease — invariant 3) answers with its refusal; an item whose request is invalid or
whose conditional update loses a race is rolled back to its savepoint and answers
``InvalidRequest``/``LostRace``; its neighbours commit either way (invariant 4 per item: an
applied outcome commits with its events).

Lock order: items are applied in attempt-id order, so two batches naming the same attempts lock
their tasks in the same order. Each item takes the locks of the single-item body in the
documented order (session, gate, task, attempt, keys, quotas, inserts); a batch holds the locks of
its earlier items while it takes the next item's, and a deadlock with another transaction rolls
the whole batch back, which ``run_transaction`` runs again (every item is idempotent: a start
answers ``already_started``, a completion ``duplicate``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa

from orbit_store.errors import InvalidRequest

from .complete import complete_attempt
from .model import CompletionResult, Outcome, Safety, StartResult
from .start import start_attempt
from .transitions import LostRace

#: The most items one batch may carry (the API refuses more).
MAX_BATCH = 100

R = TypeVar("R")
Item = TypeVar("Item", "StartItem", "CompletionItem")


@dataclass(frozen=True)
class StartItem:
    attempt_id: str
    token: str
    handler_safety: Safety | None = None


@dataclass(frozen=True)
class CompletionItem:
    attempt_id: str
    token: str
    outcome: Outcome
    result: Any = None
    error: Any = None
    retryable: bool = False


@dataclass(frozen=True)
class ItemRefused:
    """An item the store refused as a request (not by the fencing rules): ``kind`` names why
    (``invalid`` — e.g. an outcome before a start —, ``lost_race``)."""

    kind: str
    detail: str


def start_attempts(
    conn: sa.Connection, *, namespace: str, items: Sequence[StartItem]
) -> dict[str, StartResult | ItemRefused]:
    """Start every item's attempt that the rules allow (invariants 3, 12); one result per
    attempt id. See the module docstring for isolation between items."""

    def start(item: StartItem) -> StartResult:
        return start_attempt(
            conn,
            namespace=namespace,
            attempt_id=item.attempt_id,
            token=item.token,
            handler_safety=item.handler_safety,
        )

    return _each(conn, items, start)


def complete_attempts(
    conn: sa.Connection, *, namespace: str, items: Sequence[CompletionItem]
) -> dict[str, CompletionResult | ItemRefused]:
    """Apply every item's report (invariants 3, 4, 7); one result per attempt id."""

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

    return _each(conn, items, complete)


def _each(
    conn: sa.Connection, items: Sequence[Item], apply: Callable[[Item], R]
) -> dict[str, R | ItemRefused]:
    by_id = {item.attempt_id: item for item in items}
    if len(by_id) != len(items):
        raise InvalidRequest("an attempt may appear only once in a batch")
    if len(items) > MAX_BATCH:
        raise InvalidRequest(f"a batch holds at most {MAX_BATCH} items")
    results: dict[str, R | ItemRefused] = {}
    for attempt_id in sorted(by_id):
        savepoint = conn.begin_nested()
        try:
            results[attempt_id] = apply(by_id[attempt_id])
        except InvalidRequest as exc:
            savepoint.rollback()
            results[attempt_id] = ItemRefused("invalid", str(exc))
        except LostRace as exc:
            savepoint.rollback()
            results[attempt_id] = ItemRefused("lost_race", str(exc))
        else:
            savepoint.commit()
    return results
