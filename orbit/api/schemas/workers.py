"""Bodies of the worker protocol: sessions, leases (with starts and reports riding along),
starts, heartbeats and completions."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import Field

from orbit.api.schemas.base import NAME_PATTERN, Out, Problem, Strict
from orbit.api.schemas.mirror import mirrors
from orbit.api.schemas.tasks import Safety, TaskStateName
from orbit_store.pulse import model as pulse_model

#: Outcome reports per request (POST /v1/attempts:complete, or riding a lease request).
MAX_REPORTS = 100

#: A lease's time left, as every response that renews or grants one carries it.
LEASE_REMAINING = Field(
    None,
    description="Seconds from the server's now to lease_expires_at. Workers measure it from "
    "the moment they sent the request, on their own monotonic clock: past it, the attempt "
    "must assume it lost the lease.",
)


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
    lease_remaining_seconds: float | None = LEASE_REMAINING
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
    lease_remaining_seconds: float | None = LEASE_REMAINING


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
    lease_remaining_seconds: float | None = LEASE_REMAINING
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
