"""The HTTP API's request and response bodies (``/v1``): the wire contract the SDK
(``orbit_sdk``) mirrors; extend it, don't break it.

Here: the base models (``Strict`` in, ``Out`` out), tasks and the worker protocol; beside it one
module per other resource family (batches, fencing, results, schedules, views, workflows)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from orbit.api.schemas.mirror import mirrors
from orbit_sdk.json_values import check_storable
from orbit_store.pulse import model as pulse_model
from orbit_store.pulse.views import queries as task_views

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
#: Outcome reports per request (POST /v1/attempts:complete, or riding a lease request).
MAX_REPORTS = 100

Safety = Literal["safe", "unsafe"]
WaitingReason = Literal["ready", "scheduled", "gate_closed", "concurrency_limit"]
TaskStateName = Literal[
    "WAITING", "LEASED", "RUNNING", "SUCCEEDED", "FAILED", "NEEDS_REVIEW", "CANCELLED"
]


class Strict(BaseModel):
    """A request body: unknown fields, non-JSON numbers (NaN, Infinity: also in a typed float)
    and anything the database cannot store (``orbit_sdk.json_values``) are a 422 naming the
    field."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    #: JSON fields the route checks itself (``limits.check_payload``), so that a batch refuses
    #: only its item and a completion fails its attempt instead of being refused.
    checked_by_route: ClassVar[frozenset[str]] = frozenset()

    @field_validator("*", mode="after")
    @classmethod
    def _storable(cls, value: Any, info: ValidationInfo) -> Any:
        if (
            not isinstance(value, str | dict | list | float)
            or info.field_name in cls.checked_by_route
        ):
            return value
        if isinstance(value, list) and any(isinstance(v, BaseModel) for v in value):
            return value  # a list of bodies (batch items): each checked itself
        check_storable(value, info.field_name or "")
        return value


class Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    @field_validator("*", mode="after")
    @classmethod
    def _utc(cls, value: Any) -> Any:
        """The store keeps naive UTC; the wire always says so (RFC 3339 with an offset)."""
        if isinstance(value, dt.datetime) and value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value


# --- tasks ---------------------------------------------------------------------------------


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


# --- identity ------------------------------------------------------------------------------


class Identity(Out):
    namespace: str = Field(..., description="The one namespace this token may act in.")
    name: str
    roles: list[str] = Field(..., examples=[["submit", "review"]])


# --- worker protocol -----------------------------------------------------------------------


class SessionCreate(Strict):
    namespace: str = Field(..., pattern=NAME_PATTERN, max_length=63)
    worker_name: str = Field(..., min_length=1, max_length=255)
    queues: list[str] = Field(default_factory=lambda: ["default"], min_length=1, max_length=50)
    handlers: list[Annotated[str, Field(min_length=1, max_length=255)]] | None = Field(
        None,
        max_length=500,
        description="The handlers this worker runs: it is granted only their tasks. Omitted "
        "(older clients): any handler.",
        examples=[["shop.send_receipt", "shop.refund"]],
    )
    ttl_seconds: int = Field(60, ge=5, le=3600)
    pod_uid: str | None = Field(None, max_length=64)
    registration_key: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="A key of the client's, new for each registration it means to make and "
        "the same on every resend of it: a copy that arrives after the registration opened "
        "its session answers that session instead of replacing it. Omitted (older clients): "
        "every copy opens a new session.",
        examples=["9f0c2d7e-3c1b-4c39-9a52-1d6a2f0b8e11"],
    )


class Session(Out):
    id: str
    namespace: str
    worker_name: str
    generation: int
    state: str
    expires_at: dt.datetime
    heartbeat_interval_seconds: float = 10.0
    handlers: list[str] | None = None


class LeaseRequest(Strict):
    max_tasks: int = Field(1, ge=1, le=100)
    wait_seconds: float = Field(0, ge=0, le=60, description="Long-poll up to this long.")
    start_handlers: list[Annotated[str, Field(min_length=1, max_length=255)]] = Field(
        default_factory=list,
        max_length=500,
        description="Lease with start (worker protocol 3): grants of tasks of these handlers are "
        "started in the lease's own transaction (answered with started=true, RUNNING, no start "
        "call). Name only handlers that are safe to run again. Tasks of class unsafe and of "
        "other handlers are leased only.",
        examples=[["shop.send_receipt"]],
    )
    reports: list[CompletionItem] = Field(
        default_factory=list,
        max_length=MAX_REPORTS,
        description="Outcomes of attempts this worker finished (worker protocol 4), applied "
        "before the claim exactly as POST /v1/attempts:complete applies them: each item with "
        "its own token and fencing, answered in the response's reports. A worker sends them "
        "with its next lease request instead of a call of their own.",
    )


class Lease(Out):
    task_id: str
    attempt_id: str
    generation: int = Field(..., description="Fencing number: pass it to downstream resources.")
    epoch: int = Field(
        0,
        description="Restore epoch of the grant; (epoch, generation) is the fencing token: "
        "compare it as a pair, so it keeps increasing across a restore from backup.",
    )
    token: str = Field(..., description="Secret; present it on start, heartbeat and complete.")
    lease_expires_at: dt.datetime
    namespace: str
    queue: str
    handler: str
    params: Any
    safety: Safety
    state_version: int
    deadline_at: dt.datetime | None
    lease_remaining_seconds: float | None = Field(
        None,
        description="Seconds from the server's now to lease_expires_at. Workers measure it from "
        "the moment they sent the request, on their own monotonic clock: past it, the attempt "
        "must assume it lost the lease.",
    )
    started: bool = Field(
        False,
        description="Started with the lease (its handler was in start_handlers): the attempt is "
        "RUNNING and its lease runs from the grant; run the handler without a start call.",
    )


class LeaseBatch(Out):
    leases: list[Lease]
    claimed_after_seconds: float | None = Field(
        None,
        description="Seconds from this server receiving the request to the start of the claim "
        "that granted these leases (null when none). A long poll can hold a request for a while "
        "before it grants; a worker measures each grant's lease from when it sent the request "
        "plus this, never later than the answer's arrival — so an answer that sat undelivered "
        "(a paused worker) does not stretch the lease past its end on the server.",
    )
    reports: list[CompletionItemResult] = Field(
        default_factory=list,
        description="One answer per item of the request's reports, in their order: what "
        "POST /v1/attempts:complete answers for it.",
    )


class AttemptToken(Strict):
    token: str = Field(..., min_length=1, max_length=128)


class StartRequest(AttemptToken):
    safety: Safety | None = Field(
        None,
        description="The handler's declared safety; 'unsafe' makes the task unsafe from here on "
        "(a lost worker then leads to NEEDS_REVIEW, not a re-run).",
    )


class StartResponse(Out):
    started: bool
    already_started: bool
    lease_expires_at: dt.datetime | None
    lease_remaining_seconds: float | None = Field(
        None,
        description="Seconds from the server's now to lease_expires_at. Workers measure it from "
        "the moment they sent the request, on their own monotonic clock: past it, the attempt "
        "must assume it lost the lease.",
    )


class ProgressIn(Strict):
    """Checked per item by the store (fraction 0..1, message up to 500 characters, details a
    JSON object of up to 4 KiB): an item whose progress is out of bounds is still renewed."""

    fraction: float | None = None
    message: str | None = None
    details: Any = None


class HeartbeatItem(Strict):
    attempt_id: str = Field(..., min_length=1, max_length=36)
    token: str = Field(..., min_length=1, max_length=128)
    progress: ProgressIn | None = Field(
        None, description="The handler's latest progress since the last heartbeat, if any."
    )


class HeartbeatRequest(Strict):
    session_id: str | None = Field(None, description="Also renews this worker session.")
    items: list[HeartbeatItem] = Field(default_factory=list, max_length=500)


@mirrors(pulse_model.RenewResult, types={"status": Literal["extended", "cancel_requested", "lost"]})
class HeartbeatResult(Out):
    lease_remaining_seconds: float | None = Field(
        None,
        description="Seconds from the server's now to lease_expires_at. Workers measure it from "
        "the moment they sent the request, on their own monotonic clock: past it, the attempt "
        "must assume it lost the lease.",
    )
    progress_refused: str | None = Field(
        None, description="Why the item's progress was not kept (the lease was renewed)."
    )


class HeartbeatResponse(Out):
    results: list[HeartbeatResult]
    session: Session | None = None


class Completion(Strict):
    checked_by_route = frozenset({"result", "error"})

    token: str = Field(..., min_length=1, max_length=128)
    outcome: Literal["succeeded", "failed", "unknown", "cancelled", "released"]
    result: Any = None
    error: Any = None
    retryable: bool = False


class CompletionResponse(Out):
    status: Literal["applied", "duplicate"]
    task_state: TaskStateName | None
    reason: str | None


class CompletionItem(Completion):
    attempt_id: str = Field(..., min_length=1, max_length=36)


class CompletionItemResult(Out):
    attempt_id: str
    status: Literal["ok", "refused"]
    outcome_status: Literal["applied", "duplicate"] | None = Field(
        None, description="For ok items: what the single-item call answers as ``status``."
    )
    task_state: TaskStateName | None = None
    reason: str | None = None
    problem: Problem | None = None


# --- errors --------------------------------------------------------------------------------


class Problem(BaseModel):
    """RFC 9457 problem details; ``type`` is stable per kind of error."""

    type: str = Field(..., examples=["https://orbit.dev/problems/lease-lost"])
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    errors: list[dict[str, Any]] | None = None
