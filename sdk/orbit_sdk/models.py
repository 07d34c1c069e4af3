"""Response bodies of the ``/v1`` API, mirrored from the server's wire contract.

Every model ignores fields it does not know, so a newer server can add fields without breaking
older clients. For the same reason enumerated values (states, statuses, safety) are typed as plain
``str`` here, with the known values as constants: a new state must not make a response
unparseable for a client that only wants to display it.
"""

from __future__ import annotations

import datetime as dt
import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class TaskState(enum.StrEnum):
    WAITING = "WAITING"
    LEASED = "LEASED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    NEEDS_REVIEW = "NEEDS_REVIEW"
    CANCELLED = "CANCELLED"


#: States a task never leaves on its own.
TERMINAL_STATES = frozenset({TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED})
#: Where ``wait()`` stops: terminal, or parked for a human (NEEDS_REVIEW) -- polling on would
#: only burn the timeout.
SETTLED_STATES = TERMINAL_STATES | {TaskState.NEEDS_REVIEW}


class WireModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


# --- tasks ---------------------------------------------------------------------------------


class Task(WireModel):
    id: str
    namespace: str
    queue: str
    handler: str
    params: Any = None
    state: str
    state_version: int
    priority: int = 0
    available_at: dt.datetime
    deadline_at: dt.datetime | None = None
    created_at: dt.datetime
    updated_at: dt.datetime
    finished_at: dt.datetime | None = None
    attempts_used: int = 0
    max_attempts: int = 1
    safety: str = "safe"
    concurrency_key: str | None = None
    cancel_requested: bool = False
    retry_of: str | None = None
    result: Any = None
    error: Any = None
    #: True when an idempotent submit found an existing task instead of creating one.
    replayed: bool = False
    #: WAITING only: ready, scheduled, gate_closed or concurrency_limit.
    waiting_reason: str | None = None
    #: WAITING only, on get/list: False when no live worker serves its queue and handler.
    runnable_by_live_worker: bool | None = None

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def is_settled(self) -> bool:
        """Terminal or waiting for review: nothing more happens without a human."""
        return self.state in SETTLED_STATES


class Progress(WireModel):
    """What an attempt's handler last reported with ``ctx.progress``."""

    fraction: float | None = None
    message: str | None = None
    details: Any = None
    #: When the server heard it (its database's clock).
    at: dt.datetime


class Attempt(WireModel):
    id: str
    generation: int
    state: str
    outcome: str | None = None
    outcome_reason: str | None = None
    worker_session_id: str | None = None
    leased_at: dt.datetime
    lease_expires_at: dt.datetime
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    result: Any = None
    error: Any = None
    #: Its last lease renewal.
    heartbeat_at: dt.datetime | None = None
    #: A report that arrived after this attempt was superseded: evidence, never applied.
    late_outcome: str | None = None
    late_reported_at: dt.datetime | None = None
    late_result: Any = None
    late_error: Any = None
    #: The restore epoch it was granted under (0 from servers before restore fencing).
    epoch: int = 0
    progress: Progress | None = None


class TaskEvent(WireModel):
    state_version: int
    from_state: str | None = None
    to_state: str
    reason: str
    attempt_id: str | None = None
    actor: str | None = None
    at: dt.datetime


class WaitCause(WireModel):
    """One cause that keeps a WAITING task from starting now."""

    #: scheduled, gate_closed, concurrency_limit, queue_paused, quota_full or no_live_worker.
    kind: str
    detail: str


class TaskDetail(Task):
    attempts: list[Attempt] = Field(default_factory=list)
    events: list[TaskEvent] = Field(default_factory=list)
    #: The latest attempt's progress: where it is, or where it stopped.
    progress: Progress | None = None
    #: WAITING only: every cause that keeps it from starting now; empty when it is ready.
    waiting_causes: list[WaitCause] = Field(default_factory=list)


class TaskPage(WireModel):
    items: list[Task]
    next_page_token: str | None = None


# --- identity ------------------------------------------------------------------------------


class Identity(WireModel):
    """Who a token is (``GET /v1/whoami``): its namespace, name and roles."""

    namespace: str
    name: str
    roles: list[str] = Field(default_factory=list)


# --- schedules -----------------------------------------------------------------------------


class ScheduleTask(WireModel):
    """The task a schedule submits at each fire."""

    handler: str
    queue: str = "default"
    params: Any = None
    priority: int | None = None
    safety: str | None = None
    max_attempts: int | None = None


class ScheduleOccurrence(WireModel):
    """One decided instant: FIRED (``task_id`` set), SKIPPED or MISSED, with the reason. A
    MISSED occurrence may stand for a run of ``instants`` instants up to ``through_at``."""

    scheduled_at: dt.datetime
    through_at: dt.datetime
    instants: int = 1
    recorded_at: dt.datetime
    status: str
    reason: str
    message: str = ""
    schedule_version: int
    task_id: str | None = None
    task_state: str | None = None


class Schedule(WireModel):
    id: str
    namespace: str
    name: str
    cron: str
    time_zone: str
    task: ScheduleTask
    suspend: bool = False
    concurrency_policy: str = "Allow"
    starting_deadline_seconds: int | None = None
    misfire_policy: str = "FireOnce"
    catch_up_limit: int = 1
    start_at: dt.datetime | None = None
    end_at: dt.datetime | None = None
    version: int
    #: Active, Suspended, or Ended (no instant left before end_at).
    state: str
    next_fire_at: dt.datetime | None = None
    last_fire_at: dt.datetime | None = None
    source: str = "api"
    created_at: dt.datetime
    updated_at: dt.datetime
    active_tasks: int = 0
    #: Newest first (``get_schedule``; empty in lists).
    occurrences: list[ScheduleOccurrence] = Field(default_factory=list)


class SchedulePage(WireModel):
    items: list[Schedule]
    next_page_token: str | None = None


class PreviewInstant(WireModel):
    at: dt.datetime
    local: dt.datetime


class SchedulePreview(WireModel):
    cron: str
    time_zone: str
    instants: list[PreviewInstant] = Field(default_factory=list)


# --- worker protocol -----------------------------------------------------------------------


class Session(WireModel):
    id: str
    namespace: str
    worker_name: str
    generation: int
    state: str
    expires_at: dt.datetime
    heartbeat_interval_seconds: float = 10.0
    #: The handlers it runs: it is granted only their tasks (None: any handler).
    handlers: list[str] | None = None


class Lease(WireModel):
    task_id: str
    attempt_id: str
    #: Fencing number: pass it to downstream resources so they can refuse a stale writer.
    generation: int
    #: Restore epoch of the grant (0 from servers before restore fencing): ``(epoch,
    #: generation)`` is the fencing token, and keeps increasing across a restore from backup.
    epoch: int = 0
    #: The attempt's secret; kept out of ``repr`` so it never lands in logs by accident.
    token: str = Field(repr=False)
    lease_expires_at: dt.datetime
    namespace: str
    queue: str
    handler: str
    params: Any = None
    safety: str = "safe"
    state_version: int
    deadline_at: dt.datetime | None = None
    #: Seconds to the lease's end as the server saw it: the local deadline's measure.
    lease_remaining_seconds: float | None = None
    #: Started with the lease (worker protocol 3): RUNNING already, run it without a start call.
    #: Servers before protocol 3 never send it.
    started: bool = False


class LeaseBatch(WireModel):
    leases: list[Lease] = Field(default_factory=list)
    #: How long the server held the request before the claim that granted (None: an older
    #: server, or no grants).
    claimed_after_seconds: float | None = None
    #: One answer per report the request carried (worker protocol 4), as the items of
    #: ``POST /v1/attempts:complete``'s answer.
    reports: list[dict[str, Any]] = Field(default_factory=list)

    def measured_from(self, sent_at: float, received_at: float) -> float:
        """The monotonic time this batch's leases count from: when the request was sent plus
        the server's hold before claiming, never later than the answer's arrival. An answer
        that sat in a paused worker's socket thus does not stretch its leases (older servers
        say nothing: the arrival, as before)."""
        if self.claimed_after_seconds is None:
            return received_at
        return min(sent_at + max(self.claimed_after_seconds, 0.0), received_at)


class StartResponse(WireModel):
    started: bool
    already_started: bool = False
    lease_expires_at: dt.datetime | None = None
    #: Seconds to the lease's end as the server saw it: the local deadline's measure.
    lease_remaining_seconds: float | None = None


class HeartbeatStatus(enum.StrEnum):
    EXTENDED = "extended"
    CANCEL_REQUESTED = "cancel_requested"
    LOST = "lost"


class HeartbeatResult(WireModel):
    attempt_id: str
    status: str
    lease_expires_at: dt.datetime | None = None
    reason: str | None = None
    #: Seconds to the lease's end as the server saw it: the local deadline's measure.
    lease_remaining_seconds: float | None = None
    #: Why the server did not keep the progress sent with it (the lease was renewed).
    progress_refused: str | None = None


class HeartbeatResponse(WireModel):
    results: list[HeartbeatResult] = Field(default_factory=list)
    session: Session | None = None


class CompletionResponse(WireModel):
    #: ``applied`` or ``duplicate`` (the same outcome was already recorded).
    status: str
    task_state: str | None = None
    reason: str | None = None


# --- errors --------------------------------------------------------------------------------


class Problem(BaseModel):
    """RFC 9457 problem details. Extension members are kept (``extra="allow"``): RFC 9457 lets a
    server add them, and they are often the useful part (e.g. which quota was exceeded)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    type: str = "about:blank"
    title: str = ""
    status: int = 0
    detail: str | None = None
    instance: str | None = None
    errors: list[dict[str, Any]] | None = None


__all__ = [
    "SETTLED_STATES",
    "TERMINAL_STATES",
    "Attempt",
    "CompletionResponse",
    "HeartbeatResponse",
    "HeartbeatResult",
    "HeartbeatStatus",
    "Identity",
    "Lease",
    "LeaseBatch",
    "PreviewInstant",
    "Problem",
    "Progress",
    "Schedule",
    "ScheduleOccurrence",
    "SchedulePage",
    "SchedulePreview",
    "ScheduleTask",
    "Session",
    "StartResponse",
    "Task",
    "TaskDetail",
    "TaskEvent",
    "TaskPage",
    "TaskState",
]
