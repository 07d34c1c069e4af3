"""Accepting many tasks in one transaction (bulk submission: one commit for the whole batch).

Invariants 1 and 6 hold per item: when the transaction commits, every item answered ``created``
has its task, its idempotency record and its accepted event durable; an item whose key names an
earlier identical request is ``replayed`` (the original task), a different request under a used
key is a ``conflict``, and nothing is written for either. An item the rules refuse (undeclared
or draining queue, invalid request, a quota — invariant-level checks of ``submit_task``) is
``refused`` with its typed error and nothing of it is written; its neighbours are accepted.

**The same key twice in one batch**: the later item is answered like a retry of the earlier
one — ``replayed`` with the earlier item's task when the two requests are identical,
``conflict`` when they differ. No key ever names two tasks.

How: the keys of the whole batch are looked up in one statement; each queue's scope (namespace
and queue rows, shared lock) is read once, the batch's execution gates in one read (shared
lock); then each new item is written. An item that needs per-item locks or counts (a quota or a
concurrency key) goes through ``enter`` inside its own SAVEPOINT, so a refusal rolls back only
what it wrote. Every other item's task, key and event
rows are inserted together at the end, three multi-row INSERTs for the batch. Lock order as in
``submit_task``: namespace/queue (shared) → gate → key → quota rows → inserts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orbit_store.errors import IdempotencyConflict, StoreError
from orbit_store.ids import new_id
from orbit_store.pulse.limits.queues import lock_submission_scope
from orbit_store.pulse.model import SubmitResult, TaskState
from orbit_store.pulse.state import inserts
from orbit_store.pulse.submit.accept import (
    KEY_RETENTION,
    SubmitRequest,
    admit_in,
    enter,
    first_path,
    gates_open_for,
    task_row,
)
from orbit_store.schema import submission_keys, tasks

#: Items per transaction: long enough to share one commit, short enough to hold the shared
#: queue locks and quota rows for milliseconds.
SUB_BATCH = 100


@dataclass(frozen=True)
class BatchItemResult:
    """``result`` for created/replayed items; ``error`` (typed, nothing written) otherwise."""

    result: SubmitResult | None = None
    error: StoreError | None = None


def submit_tasks(
    conn: sa.Connection,
    *,
    namespace: str,
    requests: Sequence[SubmitRequest],
    look_up_keys: bool = True,
) -> list[BatchItemResult]:
    """Accept ``requests`` (one namespace, at most ``SUB_BATCH``) in this transaction; one
    result per request, in order. See the module docstring for the rules.

    ``look_up_keys=False`` (optimistic, for a group of single submissions: most are new): the
    keys are not looked up first. A used key then fails the keys' INSERT (IntegrityError:
    nothing of the transaction commits; the caller resolves each request on its own), and the
    keys of refused items are looked up before they answer, so a replay is answered as one
    whatever its queue or quotas say now."""
    if len(requests) > SUB_BATCH:
        raise ValueError(f"at most {SUB_BATCH} submissions per transaction")
    if any(r.namespace != namespace for r in requests):
        raise ValueError("one namespace per transaction")
    # Only keyed items are ever compared (and their digests stored): none made for the others.
    digests = [r.digest() if r.idempotency_key is not None else "" for r in requests]
    keys = [r.idempotency_key for r in requests]
    known = _known_keys(conn, namespace, keys) if look_up_keys else {}
    results: list[BatchItemResult | None] = [None] * len(requests)
    fresh: list[int] = []
    claimed: dict[str, int] = {}  # key -> index of the item in this batch that takes it
    for index, (request, digest) in enumerate(zip(requests, digests, strict=True)):
        key = request.idempotency_key
        if key is not None and key in known:
            results[index] = _replay(key, digest, *known[key])
        elif key is not None and key in claimed:
            continue  # answered from the earlier item's outcome below
        else:
            fresh.append(index)
            if key is not None:
                claimed[key] = index
    scopes = {
        queue: lock_submission_scope(conn, namespace, queue)
        for queue in sorted({requests[i].queue for i in fresh})
    }
    gates = gates_open_for(conn, namespace, {g for i in fresh if (g := requests[i].gate_id)})
    rows: list[tuple[SubmitRequest, str, dict[str, Any]]] = []  # with each request's digest
    for index in fresh:
        request = requests[index]
        gate_id = request.gate_id
        try:
            # A gate read absent is a gate not found: admit_in reads it again, and says so.
            gate_open = gates.get(gate_id) if gate_id is not None else True
            admission = admit_in(conn, request, scopes[request.queue], gate_open)
            if admission.has_quotas or request.concurrency_key:
                with conn.begin_nested():
                    results[index] = BatchItemResult(enter(conn, request, admission))
                continue
            task_id = new_id()
            path = first_path(admission.available_at, admission.now, admission.gate_open, None)
            row = task_row(request, admission, task_id, path, False, None)
            rows.append((request, digests[index], row))
            results[index] = BatchItemResult(
                SubmitResult(task_id, TaskState.WAITING, False, path, row=row)
            )
        except StoreError as exc:  # nothing of this item was written
            results[index] = BatchItemResult(error=exc)
    if not look_up_keys:
        _replays_among_refused(conn, namespace, requests, digests, results)
    _insert(conn, rows)
    return [_settle(requests, digests, results, claimed, index) for index in range(len(requests))]


def _known_keys(
    conn: sa.Connection, namespace: str, keys: list[str | None]
) -> dict[str, tuple[str, str, str]]:
    """key -> (request digest, task id, task state) for the keys already used."""
    wanted = sorted({key for key in keys if key is not None})
    if not wanted:
        return {}
    rows = conn.execute(
        sa.select(
            submission_keys.c.idempotency_key,
            submission_keys.c.request_digest,
            tasks.c.id,
            tasks.c.state,
        )
        .join(tasks, tasks.c.id == submission_keys.c.task_id)
        .where(
            submission_keys.c.namespace == namespace,
            submission_keys.c.idempotency_key.in_(wanted),
        )
    )
    return {row[0]: (row[1], row[2], row[3]) for row in rows}


def _replays_among_refused(
    conn: sa.Connection,
    namespace: str,
    requests: Sequence[SubmitRequest],
    digests: list[str],
    results: list[BatchItemResult | None],
) -> None:
    """A refused keyed item whose key was used before is that earlier submission's replay (or a
    conflict), as if its key had been looked up first."""
    refused = [
        i
        for i, result in enumerate(results)
        if result is not None and result.error is not None and requests[i].idempotency_key
    ]
    if not refused:
        return
    known = _known_keys(conn, namespace, [requests[i].idempotency_key for i in refused])
    for i in refused:
        key = requests[i].idempotency_key
        if key in known:
            results[i] = _replay(key, digests[i], *known[key])


def _replay(key: str, digest: str, used_digest: str, task_id: str, state: str) -> BatchItemResult:
    if used_digest != digest:
        return BatchItemResult(
            error=IdempotencyConflict(
                f"idempotency key {key!r} was already used for a different request "
                f"(task {task_id}); use a new key for a new request"
            )
        )
    return BatchItemResult(SubmitResult(task_id, TaskState(state), replayed=True))


def _insert(conn: sa.Connection, rows: list[tuple[SubmitRequest, str, dict[str, Any]]]) -> None:
    """The plain items' tasks, keys and accepted events: one multi-row INSERT each, dated as
    each task is."""
    if not rows:
        return
    conn.execute(inserts.TASKS, [row for _, _, row in rows])
    keys = [
        {
            "namespace": request.namespace,
            "idempotency_key": request.idempotency_key,
            "request_digest": digest,
            "task_id": row["id"],
            "created_at": row["created_at"],
            "expires_at": row["created_at"] + KEY_RETENTION,
        }
        for request, digest, row in rows
        if request.idempotency_key is not None
    ]
    if keys:
        conn.execute(inserts.SUBMISSION_KEYS, keys)
    events = [
        {
            "id": new_id(),
            "task_id": row["id"],
            "namespace": request.namespace,
            "state_version": 1,
            "from_state": None,
            "to_state": TaskState.WAITING.value,
            "reason": "submitted",
            "attempt_id": None,
            "actor": request.submitted_by,
            "details": None,
            "at": row["created_at"],
        }
        for request, _, row in rows
    ]
    conn.execute(inserts.TASK_EVENTS, events)


def _settle(
    requests: Sequence[SubmitRequest],
    digests: list[str],
    results: list[BatchItemResult | None],
    claimed: dict[str, int],
    index: int,
) -> BatchItemResult:
    """An item's answer; a repeated key takes its first item's outcome as a replay."""
    own = results[index]
    if own is not None:
        return own
    key = requests[index].idempotency_key
    assert key is not None
    first_index = claimed[key]
    first = results[first_index]
    assert first is not None
    if first.result is None:  # the first was refused: so is its repetition, for the same reason
        return first
    if digests[first_index] != digests[index]:
        return BatchItemResult(
            error=IdempotencyConflict(
                f"idempotency key {key!r} is used by item {first_index} of this batch for a "
                "different request; use a new key for a new request"
            )
        )
    return BatchItemResult(SubmitResult(first.result.task_id, first.result.state, replayed=True))
