"""Request and response bodies of ``/v1/namespaces/{ns}/schedules`` (mirrored by the SDK).

Field names are the API's snake_case of Kubernetes CronJob's where the concept is the same
(``concurrency_policy``, ``starting_deadline_seconds``, ``suspend``); ``cron`` is CronJob's
``schedule``. docs/concepts/schedules.md explains every policy.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import Field

from orbit.api.schemas.base import NAME_PATTERN, Out, Strict
from orbit.api.schemas.mirror import mirrors
from orbit.api.schemas.tasks import Safety
from orbit_store.schedules import cron as store_cron
from orbit_store.schedules import model, trigger

ConcurrencyPolicyName = Literal["Allow", "Forbid", "Replace"]
MisfirePolicyName = Literal["Skip", "FireOnce", "CatchUp"]
OccurrenceStatusName = Literal["FIRED", "SKIPPED", "MISSED"]
CRON = Field(
    ...,
    min_length=1,
    max_length=255,
    description="Five fields (minute hour day-of-month month day-of-week), an optional leading "
    "seconds field, or @hourly/@daily/@weekly/@monthly/@yearly.",
    examples=["0 9 * * MON-FRI"],
)
TIME_ZONE = Field("UTC", min_length=1, max_length=64, examples=["Europe/Berlin"])
#: What the store keeps a deadline in (a 32-bit column): about 68 years.
MAX_DEADLINE_SECONDS = 2**31 - 1
REASON = Field("", max_length=1024, description="Why: recorded in the audit log with the change.")


class TaskTemplate(Strict):
    handler: str = Field(..., min_length=1, max_length=255, examples=["reports.nightly"])
    queue: str = Field("default", pattern=NAME_PATTERN, max_length=63)
    params: Any = Field(default_factory=dict)
    priority: int | None = Field(None, ge=-1000, le=1000)
    safety: Safety | None = None
    max_attempts: int | None = Field(None, ge=1, le=1000)


class ScheduleIn(Strict):
    cron: str = CRON
    time_zone: str = TIME_ZONE
    task: TaskTemplate
    suspend: bool = False
    concurrency_policy: ConcurrencyPolicyName = "Allow"
    starting_deadline_seconds: int | None = Field(
        None,
        ge=1,
        le=MAX_DEADLINE_SECONDS,
        description="An instant decided later than this is recorded as missed.",
    )
    misfire_policy: MisfirePolicyName = Field(
        "FireOnce", description="What happens to instants that came due while no scheduler ran."
    )
    catch_up_limit: int = Field(1, ge=1, le=1000, description="CatchUp fires at most this many.")
    start_at: dt.datetime | None = Field(None, description="No fire before (RFC 3339).")
    end_at: dt.datetime | None = Field(None, description="No fire after (RFC 3339).")
    reason: str = REASON


#: The spec's fields, in the order of the request bodies and of a schedule on the wire.
SPEC_FIELDS = [name for name in ScheduleIn.model_fields if name != "reason"]


class ScheduleCreate(ScheduleIn):
    name: str = Field(..., pattern=NAME_PATTERN, max_length=63, examples=["nightly-report"])


class ScheduleUpdate(ScheduleIn):
    expected_version: int | None = Field(
        None, ge=1, description="Apply only if the schedule is still at this version (else 409)."
    )


class ScheduleControl(Strict):
    reason: str = REASON


@mirrors(
    model.OccurrenceView,
    types={"status": OccurrenceStatusName},
    said={"through_at": "Last instant of a missed run."},
)
class Occurrence(Out):
    pass


#: The wire's order: the store's spec sits flattened where the view nests it, the state after
#: the version.
SCHEDULE_ORDER = [
    "id",
    "namespace",
    "name",
    *SPEC_FIELDS,
    "version",
    "state",
    "next_fire_at",
    "last_fire_at",
    "source",
    "created_at",
    "updated_at",
    "active_tasks",
    "occurrences",
]


@mirrors(
    model.ScheduleView,
    said={"active_tasks": "Tasks it fired that are not finished."},
    omit=["spec"],
    order=SCHEDULE_ORDER,
)
class Schedule(Out):
    # The store's spec flattened, as a CronJob's are (``suspend`` is its ``suspended``); the
    # request bodies (``ScheduleIn``) take the same fields.
    cron: str
    time_zone: str
    task: TaskTemplate
    suspend: bool
    concurrency_policy: ConcurrencyPolicyName
    starting_deadline_seconds: int | None
    misfire_policy: MisfirePolicyName
    catch_up_limit: int
    start_at: dt.datetime | None
    end_at: dt.datetime | None
    #: The view's ``state`` property: Active, Suspended, or Ended.
    state: Literal["Active", "Suspended", "Ended"]
    #: Redeclared with a default: the wire never required it (a page of schedules has none).
    occurrences: list[Occurrence] = Field(default_factory=list, description="Newest first.")


@mirrors(
    trigger.Triggered,
    types={"status": Literal["FIRED", "SKIPPED"], "reason": str},
    said={
        "reason": "Manual when fired; else why not (ConcurrencyForbid, …).",
        "scheduled_at": "The instant it fired at: now.",
    },
)
class Triggered(Out):
    pass


class SchedulePage(Out):
    items: list[Schedule]
    next_page_token: str | None


class PreviewRequest(Strict):
    cron: str = CRON
    time_zone: str = TIME_ZONE
    after: dt.datetime | None = Field(None, description="Start after this instant; default now.")
    count: int = Field(10, ge=1, le=100)
    start_at: dt.datetime | None = None
    end_at: dt.datetime | None = None


@mirrors(
    store_cron.PreviewInstant,
    said={
        "at": "The instant in UTC.",
        "local": "The same instant on the schedule's wall clock.",
    },
)
class PreviewInstant(Out):
    pass


class Preview(Out):
    cron: str
    time_zone: str
    instants: list[PreviewInstant]
