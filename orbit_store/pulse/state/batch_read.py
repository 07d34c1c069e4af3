"""What a set-based batch reads and locks before it writes (``batch.start_set``,
``batch.complete_set``).

The same checks as the single-item bodies (``start_attempt``, ``complete_attempt``), made once
per batch instead of once per item — invariant 3 is judged per item from these reads:

1. the batch's attempts joined to their tasks' gate ids, by primary key, in the namespace (a
   plain read, as ``find_attempt``: it learns what to lock) and the restore epoch
   (``fencing.current_epoch``), read once and compared with each attempt's epoch;
2. the worker sessions (starts only) under shared locks, in id order, as ``session_is_live``;
   the execution gates under shared locks, in id order (``gates.gates_open``);
3. every task row the batch will touch, ``SELECT … FOR UPDATE`` by primary key in task-id
   order, with the database time in the same statement (as ``transitions._LOCK_TASK_NOW``),
   without the JSON payloads (nothing here decides by them);
   for completions, then their attempt rows in id order (:func:`lock_attempts`).

Lock order (``orbit_store/pulse/__init__.py``): sessions, gates, tasks (and attempts) — for
the whole batch, so the per-item bodies that run afterwards for the rare items find theirs
already held; their permits and quota counters are settled at the batch's end, key by key and
quota row by quota row (``batch_deferred``).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable
from typing import Any, Protocol

import sqlalchemy as sa

from orbit_store.clock import as_db_time, db_now, utc_now
from orbit_store.db import by_primary_key
from orbit_store.fencing import current_epoch_column
from orbit_store.pulse.limits.gates import gates_open
from orbit_store.pulse.model import LIVE_SESSION_STATES
from orbit_store.pulse.state.attempts import token_matches
from orbit_store.schema import task_attempts, tasks, worker_sessions


class SetPathMismatch(Exception):
    """A grouped conditional update changed another number of rows than the batch expected:
    something moved between the reads and the writes. The transaction is rolled back and the
    batch applied item by item in a new one (``batches.run_batch``; always correct, just
    slower)."""


class BatchItemView(Protocol):
    """What an item presents: its attempt id and its secret token."""

    @property
    def attempt_id(self) -> str: ...

    @property
    def token(self) -> str: ...


def read_attempts(
    conn: sa.Connection, namespace: str, attempt_ids: Iterable[str]
) -> dict[str, sa.Row[Any]]:
    """Step 1: the attempts (with their task's gate id, and the restore fence's current epoch as
    ``fence_epoch``) that exist in ``namespace``."""
    ids = sorted(attempt_ids)
    if not ids:
        return {}
    rows: sa.CursorResult[Any] = conn.execute(_FIND_ATTEMPTS, {"ids": ids, "namespace": namespace})
    return {row.id: row for row in rows}


# What the set paths judge an attempt by (its token, its restore epoch, its session and lease
# end, its task and gate) — not the whole row: every value PyMySQL reads is parsed in Python,
# and the timestamps and JSON of a finished report are most of a row.
ATTEMPT_COLUMNS = (
    "id",
    "task_id",
    "token_hash",
    "epoch",
    "worker_session_id",
    "lease_expires_at",
)

# Built once (every batch): constructing a statement costs about as much Python as sending it;
# the expanding IN takes any number of ids.
_FIND_ATTEMPTS = (
    sa.select(
        *(task_attempts.c[name] for name in ATTEMPT_COLUMNS),
        tasks.c.gate_id,
        current_epoch_column().label("fence_epoch"),
    )
    .join(tasks, tasks.c.id == task_attempts.c.task_id)
    .where(
        task_attempts.c.id.in_(sa.bindparam("ids", expanding=True)),
        task_attempts.c.namespace == sa.bindparam("namespace"),
    )
)


def split_by_token(
    found: dict[str, sa.Row[Any]], items: Iterable[BatchItemView]
) -> tuple[list[str], list[str], list[str]]:
    """The attempt ids that are (not found here, presented a wrong token, passed both)."""
    missing, wrong, passed = [], [], []
    for item in items:
        row = found.get(item.attempt_id)
        if row is None:
            missing.append(item.attempt_id)
        elif not token_matches(item.token, row.token_hash):
            wrong.append(item.attempt_id)
        else:
            passed.append(item.attempt_id)
    return missing, wrong, passed


def fenced_ids(found: dict[str, sa.Row[Any]], ids: list[str]) -> set[str]:
    """The attempts of ``ids`` granted before the current restore fence (``fencing.is_fenced``
    judged per item, by the fence's epoch read in step 1's statement)."""
    return {
        attempt_id for attempt_id in ids if found[attempt_id].epoch < found[attempt_id].fence_epoch
    }


def live_sessions(conn: sa.Connection, namespace: str, session_ids: set[str]) -> set[str]:
    """Step 2 (starts): which of these sessions are ACTIVE or DRAINING, read under shared locks
    in id order (an end in flight waits for us, or we for it), as ``session_is_live``."""
    if not session_ids:
        return set()
    rows = conn.execute(_SESSIONS, {"ids": sorted(session_ids), "namespace": namespace})
    return {row.id for row in rows if row.state in LIVE_SESSION_STATES}


_SESSIONS = by_primary_key(
    sa.select(worker_sessions.c.id, worker_sessions.c.state)
    .where(
        worker_sessions.c.id.in_(sa.bindparam("ids", expanding=True)),
        worker_sessions.c.namespace == sa.bindparam("namespace"),
    )
    .order_by(worker_sessions.c.id)
    .with_for_update(read=True),
    worker_sessions,
)


def open_gates(conn: sa.Connection, found: Iterable[sa.Row[Any]]) -> dict[str | None, bool]:
    """Step 2: whether each attempt's gate is open (shared locks in id order; no gate: open;
    a gate that is gone: closed, as ``gate_is_open``)."""
    gate_ids = {row.gate_id for row in found if row.gate_id is not None}
    allowed = gates_open(conn, gate_ids)
    answer: dict[str | None, bool] = {gate_id: allowed.get(gate_id, False) for gate_id in gate_ids}
    answer[None] = True
    return answer


def lock_tasks_now(
    conn: sa.Connection, namespace: str, task_ids: set[str]
) -> tuple[dict[str, sa.Row[Any]], dt.datetime]:
    """Step 3: the task rows, locked by primary key in id order, and the database time read in
    the same statement (after every lock is held)."""
    if not task_ids:
        return {}, db_now(conn)
    rows = list(conn.execute(_LOCK_TASKS_NOW, {"ids": sorted(task_ids), "namespace": namespace}))
    now = as_db_time(conn, rows[0].db_now) if rows else db_now(conn)
    return {row.id: row for row in rows}, now


# The columns a start or a completion on the set path decides from and writes events with
# (``start_set._judge``, ``complete.decide``, ``batch_moves``, ``delivery.fanout``, Weave's
# inbox rows) — not the JSON payloads nor the timestamps nothing here reads: read under the
# lock for every item of every batch, each value is parsed in Python for nothing. An item that
# needs more goes item by item (``start_attempt``, ``complete_attempt`` read their own rows).
TASK_COLUMNS = (
    "id",
    "namespace",
    "queue",
    "handler",
    "state",
    "state_version",
    "wait_path",
    "current_attempt_id",
    "cancel_requested",
    "workflow_instance_id",
    "workflow_activation_id",
    "safety",
    "lease_seconds",
    "attempts_used",
    "max_attempts",
    "backoff_initial_ms",
    "backoff_max_ms",
    "backoff_multiplier",
    "deadline_at",
    "concurrency_key",
    "quota_counted",
)
_LOCK_TASKS_NOW = by_primary_key(
    sa.select(*(tasks.c[name] for name in TASK_COLUMNS), utc_now().label("db_now"))
    .where(
        tasks.c.id.in_(sa.bindparam("ids", expanding=True)),
        tasks.c.namespace == sa.bindparam("namespace"),
    )
    .order_by(tasks.c.id)
    .with_for_update(),
    tasks,
)


def lock_attempts(conn: sa.Connection, attempt_ids: list[str]) -> None:
    """Step 3b (completions): the batch's attempt rows, locked by primary key in id order after
    the tasks — as a session's end or a restore fence locks them (``attempts.cut_leases``), so
    the grouped update and the single-item bodies afterwards never take one out of that order."""
    if attempt_ids:
        conn.execute(_LOCK_ATTEMPTS, {"ids": sorted(attempt_ids)}).all()


_LOCK_ATTEMPTS = by_primary_key(
    sa.select(task_attempts.c.id)
    .where(task_attempts.c.id.in_(sa.bindparam("ids", expanding=True)))
    .order_by(task_attempts.c.id)
    .with_for_update(),
    task_attempts,
)


def shared_tasks(found: dict[str, sa.Row[Any]], ids: Iterable[str]) -> set[str]:
    """Tasks named by more than one attempt of the batch. Their items go item by item, in
    attempt-id order, so each answer sees what the earlier ones wrote (as before)."""
    counts = Counter(found[attempt_id].task_id for attempt_id in ids)
    return {task_id for task_id, n in counts.items() if n > 1}
