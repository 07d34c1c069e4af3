"""Read-only views of tasks for the API and CLI: one task with its attempts and events, and a
cursor-paginated list (the cursor is the last id seen; ids are time-ordered UUIDv7)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa

from orbit_store.ids import id_floor
from orbit_store.pulse.model import Progress
from orbit_store.pulse.state.progress import progress_of
from orbit_store.pulse.views.routing import WAITING_REASONS, LiveWorkers, live_workers
from orbit_store.schema import submission_keys, task_attempts, task_events, tasks

MAX_PAGE = 500
#: Tries at reading a task and its history as one committed state (``get_task``).
DETAIL_READS = 5


@dataclass(frozen=True)
class TaskView:
    id: str
    namespace: str
    queue: str
    handler: str
    params: Any
    state: str
    state_version: int
    priority: int
    available_at: dt.datetime
    deadline_at: dt.datetime | None
    created_at: dt.datetime
    updated_at: dt.datetime
    finished_at: dt.datetime | None
    attempts_used: int
    max_attempts: int
    safety: str
    concurrency_key: str | None
    cancel_requested: bool
    current_attempt_id: str | None
    retry_of: str | None
    result: Any
    error: Any
    # WAITING only: why it waits (ready, scheduled, gate_closed, concurrency_limit) and whether
    # a live worker session serves its queue and handler (handler routing).
    waiting_reason: str | None = None
    runnable_by_live_worker: bool | None = None


@dataclass(frozen=True)
class AttemptView:
    id: str
    generation: int
    state: str
    outcome: str | None
    outcome_reason: str | None
    worker_session_id: str | None
    leased_at: dt.datetime
    lease_expires_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    result: Any
    error: Any
    late_outcome: str | None
    late_reported_at: dt.datetime | None
    heartbeat_at: dt.datetime | None = None  # its last lease renewal
    late_result: Any = None  # what the late report said: evidence, never applied
    late_error: Any = None
    epoch: int = 0  # the restore epoch it was granted under (orbit_store/fencing.py)
    progress: Progress | None = None  # what its handler last reported (pulse/state/progress.py)


@dataclass(frozen=True)
class EventView:
    state_version: int
    from_state: str | None
    to_state: str
    reason: str
    attempt_id: str | None
    actor: str | None
    at: dt.datetime


@dataclass(frozen=True)
class TaskDetail:
    task: TaskView
    attempts: list[AttemptView] = field(default_factory=list)
    events: list[EventView] = field(default_factory=list)


def _view(cls: Any, row: Any) -> Any:
    values = {f.name: getattr(row, f.name) for f in fields(cls) if hasattr(row, f.name)}
    if "cancel_requested" in values:
        values["cancel_requested"] = bool(values["cancel_requested"])
    return cls(**values)


def _task_view(row: Any, workers: LiveWorkers | None) -> TaskView:
    view: TaskView = _view(TaskView, row)
    if row.state != "WAITING":
        return view
    runnable = None if workers is None else workers.can_run(row.queue, row.handler)
    return replace(
        view,
        waiting_reason=WAITING_REASONS.get(row.wait_path),
        runnable_by_live_worker=runnable,
    )


def task_view_from_row(row: dict[str, Any]) -> TaskView:
    """The view of a task just written (``SubmitResult.row``), without reading it back: the
    columns it leaves to their defaults are the ones a new task has empty."""
    written = {"finished_at": None, "result": None, "error": None, "current_attempt_id": None}
    return _task_view(SimpleNamespace(**(written | row)), None)


def get_task_view(
    conn: sa.Connection, namespace: str, task_id: str, *, routing: bool = False
) -> TaskView | None:
    """The task alone (one statement; two with ``routing``: whether a live worker runs it)."""
    row = conn.execute(
        sa.select(tasks).where(tasks.c.id == task_id, tasks.c.namespace == namespace)
    ).one_or_none()
    if row is None:
        return None
    workers = live_workers(conn, namespace) if routing and row.state == "WAITING" else None
    return _task_view(row, workers)


def get_task_views(
    conn: sa.Connection, namespace: str, task_ids: Sequence[str]
) -> dict[str, TaskView]:
    """The tasks alone, by id (one statement whatever their number); ids not found are absent."""
    if not task_ids:
        return {}
    rows = conn.execute(
        sa.select(tasks).where(tasks.c.namespace == namespace, tasks.c.id.in_(sorted(task_ids)))
    )
    return {row.id: _task_view(row, None) for row in rows}


def get_task(conn: sa.Connection, namespace: str, task_id: str) -> TaskDetail | None:
    """The task with its attempts and events, as of one committed state (invariant 4).

    The three reads are separate statements under READ COMMITTED, so a transition committing
    between them would pair a LEASED task with its already LAPSED attempt. Every transition
    writes the task's new ``state_version`` and its event in one transaction, so the reads
    agree exactly when the newest event carries the task's version; otherwise they are made
    again (a task changing faster than three reads, every time, is returned as last read)."""
    row: Any = None
    for _ in range(DETAIL_READS):
        row = conn.execute(
            sa.select(tasks).where(tasks.c.id == task_id, tasks.c.namespace == namespace)
        ).one_or_none()
        if row is None:
            return None
        attempts = conn.execute(
            sa.select(task_attempts)
            .where(task_attempts.c.task_id == task_id)
            .order_by(task_attempts.c.generation)
        ).all()
        events = conn.execute(
            sa.select(task_events)
            .where(task_events.c.task_id == task_id)
            .order_by(task_events.c.state_version)
        ).all()
        if not events or events[-1].state_version == row.state_version:
            break
    workers = live_workers(conn, namespace) if row.state == "WAITING" else None
    return TaskDetail(
        task=_task_view(row, workers),
        attempts=[replace(_view(AttemptView, a), progress=progress_of(a)) for a in attempts],
        events=[_view(EventView, e) for e in events],
    )


def list_tasks(
    conn: sa.Connection,
    namespace: str,
    *,
    queue: str | None = None,
    state: str | None = None,
    handler: str | None = None,
    idempotency_key: str | None = None,
    created_after: dt.datetime | None = None,
    created_before: dt.datetime | None = None,
    limit: int = 50,
    before_id: str | None = None,
) -> tuple[list[TaskView], str | None]:
    """Newest first. Returns the page and the id to pass as ``before_id`` for the next one.

    The cursor is an id, so a page never repeats or skips a task however many are submitted or
    change state meanwhile. ``created_after``/``created_before`` (naive UTC, inclusive/exclusive)
    are id bounds too (ids are time-ordered); ``idempotency_key`` is looked up by its primary
    key first."""
    limit = max(1, min(limit, MAX_PAGE))
    query = sa.select(tasks).where(tasks.c.namespace == namespace)
    if idempotency_key is not None:
        task_id = conn.execute(
            sa.select(submission_keys.c.task_id).where(
                submission_keys.c.namespace == namespace,
                submission_keys.c.idempotency_key == idempotency_key,
            )
        ).scalar_one_or_none()
        if task_id is None:
            return [], None
        query = query.where(tasks.c.id == task_id)
    for column, value in (
        (tasks.c.queue, queue),
        (tasks.c.state, state),
        (tasks.c.handler, handler),
    ):
        if value is not None:
            query = query.where(column == value)
    if created_after is not None:
        query = query.where(tasks.c.id >= id_floor(_unix_ms(created_after)))
    if created_before is not None:
        query = query.where(tasks.c.id < id_floor(_unix_ms(created_before)))
    if before_id is not None:
        query = query.where(tasks.c.id < before_id)
    rows = conn.execute(query.order_by(tasks.c.id.desc()).limit(limit + 1)).all()
    waiting = any(r.state == "WAITING" for r in rows[:limit])
    workers = live_workers(conn, namespace) if waiting else None
    page = [_task_view(r, workers) for r in rows[:limit]]
    return page, (page[-1].id if len(rows) > limit else None)


def _unix_ms(at: dt.datetime) -> int:
    """Milliseconds since the epoch of a naive UTC instant."""
    return int(at.replace(tzinfo=dt.UTC).timestamp() * 1000)
