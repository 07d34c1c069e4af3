"""Response bodies of the read-only views people look at: a namespace's overview and its worker
sessions (``/v1/namespaces/{ns}/overview``, ``…/worker-sessions``). The web console reads them;
so can the CLI or any client."""

from __future__ import annotations

import datetime as dt

from pydantic import Field

from orbit.api.schemas import Out


class QueueOverview(Out):
    name: str
    declared: bool = Field(..., description="A Queue resource declares it.")
    paused: bool
    draining: bool
    tasks: dict[str, int] = Field(
        ..., description="Live tasks by state: WAITING, LEASED, RUNNING, NEEDS_REVIEW."
    )
    oldest_waiting_seconds: float | None = Field(
        ..., description="Age of the oldest due WAITING task; null when none is due."
    )


class Overview(Out):
    namespace: str
    at: dt.datetime = Field(..., description="Database time the overview was read at.")
    queues: list[QueueOverview]
    outcomes_per_minute: list[int] = Field(
        ...,
        description="Tasks that finished or went to review in each of the last 15 minutes, "
        "oldest first (the last is the minute up to `at`).",
    )
    needs_review: int = Field(..., description="Tasks waiting for a person's review.")
    parked_deliveries: int = Field(
        ..., description="Result deliveries that gave up retrying: redrive them."
    )
    lapsed_leases_last_hour: int = Field(
        ..., description="Attempts whose lease ran out in the last hour (a worker was lost)."
    )


class WorkerSession(Out):
    id: str
    worker_name: str
    generation: int
    state: str = Field(..., description="ACTIVE, DRAINING, CLOSED, REVOKED or EXPIRED.")
    queues: list[str]
    handlers: list[str] | None = Field(..., description="Null: any handler.")
    pod_uid: str | None
    pod_name: str | None
    pool: str | None
    node: str | None
    created_at: dt.datetime
    renewed_at: dt.datetime = Field(..., description="Its last heartbeat or renewal.")
    expires_at: dt.datetime
    ended_at: dt.datetime | None
    end_reason: str | None
    live_attempts: int = Field(..., description="Attempts it holds now (leased or running).")


class WorkerSessionList(Out):
    at: dt.datetime = Field(..., description="Database time the list was read at.")
    items: list[WorkerSession] = Field(
        ..., description="Live sessions (oldest first), then recently ended ones (newest first)."
    )
