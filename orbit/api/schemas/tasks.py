"""Bodies of the task routes: a submission, a task as the wire shows it (with its attempts,
events and what it waits for), and the operator's cancel, review and retry requests."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import Field

from orbit.api.schemas.base import NAME_PATTERN, Out, Strict
from orbit.api.schemas.mirror import mirrors
from orbit_store.pulse.views import queries as task_views

Safety = Literal["safe", "unsafe"]
WaitingReason = Literal["ready", "scheduled", "gate_closed", "concurrency_limit"]
TaskStateName = Literal[
    "WAITING", "LEASED", "RUNNING", "SUCCEEDED", "FAILED", "NEEDS_REVIEW", "CANCELLED"
]


class RetryPolicyIn(Strict):
    max_attempts: int | None = Field(None, ge=1, le=1000)
    backoff_initial_seconds: float | None = Field(None, ge=0, le=86_400)
    backoff_max_seconds: float | None = Field(None, ge=0, le=86_400 * 7)
    backoff_multiplier: float | None = Field(None, ge=1, le=100)


class TaskSubmission(Strict):
    checked_by_route = frozenset({"params"})

    queue: str = Field("default", pattern=NAME_PATTERN, max_length=63)
    handler: str = Field(..., min_length=1, max_length=255, examples=["shop.send_receipt"])
    params: Any = Field(default_factory=dict, examples=[{"order_id": 42}])
    idempotency_key: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        description="Same key + same request returns the original task (200); "
        "same key + different request is 409.",
    )
    delay_seconds: float | None = Field(None, ge=0, le=86_400 * 366)
    available_at: dt.datetime | None = Field(None, description="RFC 3339; not with delay_seconds")
    deadline_at: dt.datetime | None = None
    priority: int | None = Field(None, ge=-1000, le=1000, description="Lower runs first.")
    concurrency_key: str | None = Field(None, min_length=1, max_length=255)
    concurrency_limit: int | None = Field(None, ge=1, le=10_000)
    retry: RetryPolicyIn | None = None
    safety: Safety | None = Field(
        None, description="'unsafe' tasks go to NEEDS_REVIEW when their worker is lost mid-run."
    )


@mirrors(
    task_views.TaskView,
    types={"state": TaskStateName, "safety": Safety},
    omit=["current_attempt_id"],
)
class Task(Out):
    replayed: bool = Field(False, description="True when an idempotent submit found this task.")
    waiting_reason: WaitingReason | None = Field(
        None,
        description="Why a WAITING task waits: ready (to be leased), scheduled (until "
        "available_at), gate_closed (its workflow is paused), concurrency_limit (its "
        "concurrency key has no free permit). Null for other states.",
    )
    runnable_by_live_worker: bool | None = Field(
        None,
        description="For a WAITING task in GET and list responses: whether a live worker "
        "session serves its queue and runs its handler. false: it will not start until one "
        "does. Null otherwise.",
    )


class Progress(Out):
    """What the attempt's handler last reported (``ctx.progress``), sent with its heartbeat."""

    fraction: float | None = Field(None, description="Done, from 0 to 1.")
    message: str | None = None
    details: Any = Field(None, description="A JSON object the handler chose.")
    at: dt.datetime = Field(..., description="When the server heard it (database time).")


@mirrors(task_views.AttemptView, types={"state": Literal["LEASED", "RUNNING", "FINISHED"]})
class Attempt(Out):
    heartbeat_at: dt.datetime | None = Field(None, description="Its last lease renewal.")
    late_result: Any = Field(
        None, description="The late report's result: evidence of what a lost worker did."
    )
    late_error: Any = Field(None, description="The late report's error, if it failed.")
    epoch: int = Field(0, description="Restore epoch of the grant (with generation: the fence).")
    progress: Progress | None = None


@mirrors(task_views.EventView)
class TaskEvent(Out):
    pass


class WaitCause(Out):
    kind: Literal[
        "scheduled",
        "gate_closed",
        "concurrency_limit",
        "queue_paused",
        "quota_full",
        "no_live_worker",
    ]
    detail: str = Field(..., description="What holds the task, in words.")


class TaskDetail(Task):
    attempts: list[Attempt]
    events: list[TaskEvent]
    waiting_causes: list[WaitCause] = Field(
        default_factory=list,
        description="For a WAITING task: every cause that keeps it from starting now (not due, "
        "workflow paused, concurrency key full, queue paused, max-running quota full, no live "
        "worker for its queue and handler). Empty: it is ready and the next free worker takes it.",
    )
    progress: Progress | None = Field(
        None, description="The latest attempt's progress: where it is, or where it stopped."
    )


class TaskPage(Out):
    items: list[Task]
    next_page_token: str | None


class CancelRequest(Strict):
    reason: str = Field("", max_length=1024)


class ReviewRequest(Strict):
    decision: Literal["succeeded", "failed"]
    reason: str = Field(..., min_length=1, max_length=1024)
    evidence_ref: str = Field(..., min_length=1, max_length=1024)
    expected_state_version: int = Field(..., ge=1)
    execution_ended: bool = Field(
        ..., description="Must be true: you confirm no handler is still producing effects."
    )


class RetryRequest(Strict):
    reason: str = Field(..., min_length=1, max_length=1024)
    expected_state_version: int = Field(..., ge=1)
    safe_to_retry: bool = Field(..., description="Must be true: running it again is safe.")
