"""Response bodies of the read-only views people look at: a namespace's overview and its worker
sessions (``/v1/namespaces/{ns}/overview``, ``…/worker-sessions``). The web console reads them;
so can the CLI or any client. Their fields are the store's views' (``mirrors``), described here."""

from __future__ import annotations

import datetime as dt

from pydantic import Field

from orbit.api.schemas.base import Out
from orbit.api.schemas.mirror import mirrors
from orbit_store import overview
from orbit_store.pulse.workers import worker_views


@mirrors(
    overview.QueueOverview,
    said={
        "declared": "A Queue resource declares it.",
        "tasks": "Live tasks by state: WAITING, LEASED, RUNNING, NEEDS_REVIEW.",
        "oldest_waiting_seconds": "Age of the oldest due WAITING task; null when none is due.",
    },
)
class QueueOverview(Out):
    pass


@mirrors(
    overview.Overview,
    nested=[QueueOverview],
    said={
        "at": "Database time the overview was read at.",
        "outcomes_per_minute": "Tasks that finished or went to review in each of the last 15 "
        "minutes, oldest first (the last is the minute up to `at`).",
        "needs_review": "Tasks waiting for a person's review.",
        "parked_deliveries": "Result deliveries that gave up retrying: redrive them.",
        "lapsed_leases_last_hour": "Attempts whose lease ran out in the last hour (a worker "
        "was lost).",
    },
)
class Overview(Out):
    pass


@mirrors(
    worker_views.SessionView,
    said={
        "state": "ACTIVE, DRAINING, CLOSED, REVOKED or EXPIRED.",
        "handlers": "Null: any handler.",
        "renewed_at": "Its last heartbeat or renewal.",
        "live_attempts": "Attempts it holds now (leased or running).",
    },
)
class WorkerSession(Out):
    pass


class WorkerSessionList(Out):
    at: dt.datetime = Field(..., description="Database time the list was read at.")
    items: list[WorkerSession] = Field(
        ..., description="Live sessions (oldest first), then recently ended ones (newest first)."
    )
