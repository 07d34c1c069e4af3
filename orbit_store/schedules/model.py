"""Schedules' policies, the spec users declare, and the typed results the transactions return.

Names follow Kubernetes CronJob where the concept is the same (concurrencyPolicy Allow | Forbid |
Replace, startingDeadlineSeconds, suspend); docs/concepts/schedules.md explains each in user terms.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import asdict, dataclass, field
from typing import Any

from orbit_store.errors import InvalidRequest
from orbit_store.pulse.model import Safety

#: Longest run of instants one MISSED occurrence row stands for; a longer outage is recorded as
#: several consecutive runs (each its own transaction).
MAX_RUN = 10_000
MAX_CATCH_UP = 1_000


class InvalidSchedule(InvalidRequest):
    """A schedule spec that cannot be accepted; ``field`` names the offending field."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field, self.message = field_name, message


class ConcurrencyPolicy(enum.StrEnum):
    ALLOW = "Allow"  # fire whatever the previous tasks are doing
    FORBID = "Forbid"  # skip while a previous task is unfinished
    REPLACE = "Replace"  # cancel the unfinished previous tasks, then fire


class MisfirePolicy(enum.StrEnum):
    """What happens to instants that came due while no scheduler ran (more than
    :data:`orbit_store.schedules.plan.MISFIRE_GRACE` late)."""

    SKIP = "Skip"  # none of them fire
    FIRE_ONCE = "FireOnce"  # one fire, for the latest of them
    CATCH_UP = "CatchUp"  # the latest catch_up_limit of them fire, oldest first


class OccurrenceStatus(enum.StrEnum):
    FIRED = "FIRED"
    SKIPPED = "SKIPPED"
    MISSED = "MISSED"


class Reason(enum.StrEnum):
    """Why an occurrence ended as it did (``schedule_occurrences.reason``)."""

    # FIRED
    SCHEDULED = "Scheduled"
    FIRE_ONCE = "FireOnce"
    CATCH_UP = "CatchUp"
    REPLACED = "Replaced"
    MANUAL = "Manual"  # triggered now by a person, besides the cron instants
    # SKIPPED: the instant was due and decided, but no task was created
    CONCURRENCY_FORBID = "ConcurrencyForbid"
    PREVIOUS_AWAITS_REVIEW = "PreviousAwaitsReview"
    QUEUE_NOT_FOUND = "QueueNotFound"
    QUOTA_EXCEEDED = "QuotaExceeded"
    SUBMIT_CONFLICT = "SubmitConflict"
    INVALID_TASK = "InvalidTask"
    # MISSED: the instant passed without being due-and-decided in time
    MISFIRE_SKIP = "MisfireSkip"
    MISFIRE_FIRE_ONCE = "MisfireFireOnce"
    MISFIRE_CATCH_UP_LIMIT = "MisfireCatchUpLimit"
    STARTING_DEADLINE_EXCEEDED = "StartingDeadlineExceeded"
    SUPERSEDED = "Superseded"


@dataclass(frozen=True)
class TaskTemplate:
    """The task every fire submits (through Pulse's own submission: quotas, queue checks)."""

    handler: str
    queue: str = "default"
    params: Any = field(default_factory=dict)
    priority: int | None = None
    safety: Safety | None = None
    max_attempts: int | None = None

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        return {k: (str(v) if k == "safety" and v else v) for k, v in data.items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskTemplate:
        safety = data.get("safety")
        return cls(
            handler=data["handler"],
            queue=data.get("queue", "default"),
            params=data.get("params", {}),
            priority=data.get("priority"),
            safety=Safety(safety) if safety else None,
            max_attempts=data.get("max_attempts"),
        )


@dataclass(frozen=True)
class ScheduleSpec:
    """What a user declares (API body, CLI flags or a Schedule resource's spec)."""

    name: str
    cron: str
    task: TaskTemplate
    time_zone: str = "UTC"
    suspended: bool = False
    concurrency_policy: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
    starting_deadline_seconds: int | None = None
    misfire_policy: MisfirePolicy = MisfirePolicy.FIRE_ONCE
    catch_up_limit: int = 1
    start_at: dt.datetime | None = None  # naive UTC
    end_at: dt.datetime | None = None  # naive UTC

    def columns(self) -> dict[str, Any]:
        """The schedules columns this spec sets."""
        return {
            "cron": self.cron,
            "time_zone": self.time_zone,
            "task_template": self.task.as_json(),
            "suspended": self.suspended,
            "concurrency_policy": self.concurrency_policy.value,
            "starting_deadline_seconds": self.starting_deadline_seconds,
            "misfire_policy": self.misfire_policy.value,
            "catch_up_limit": self.catch_up_limit,
            "start_at": self.start_at,
            "end_at": self.end_at,
        }


@dataclass(frozen=True)
class OccurrenceView:
    scheduled_at: dt.datetime
    through_at: dt.datetime
    instants: int
    recorded_at: dt.datetime
    status: OccurrenceStatus
    reason: str
    message: str
    schedule_version: int
    task_id: str | None
    task_state: str | None  # the fired task's current state


@dataclass(frozen=True)
class ScheduleView:
    id: str
    namespace: str
    name: str
    spec: ScheduleSpec
    version: int
    next_fire_at: dt.datetime | None
    last_fire_at: dt.datetime | None
    source: str
    created_at: dt.datetime
    updated_at: dt.datetime
    active_tasks: int = 0
    occurrences: list[OccurrenceView] = field(default_factory=list)

    @property
    def state(self) -> str:
        """Active, Suspended, or Ended (no instant left within the bounds)."""
        if self.spec.suspended:
            return "Suspended"
        return "Active" if self.next_fire_at is not None else "Ended"


@dataclass(frozen=True)
class WriteResult:
    """A schedule written by create/update/declare/suspend/resume."""

    schedule_id: str
    version: int
    changed: bool
    next_fire_at: dt.datetime | None


@dataclass(frozen=True)
class FireStep:
    """One decided occurrence (or run of missed instants) of one schedule."""

    namespace: str
    schedule_id: str
    name: str
    status: OccurrenceStatus
    reason: Reason
    scheduled_at: dt.datetime
    through_at: dt.datetime
    instants: int
    recorded_at: dt.datetime
    task_id: str | None
    next_fire_at: dt.datetime | None
    #: Another instant of this schedule is already due (the pass continues with it).
    more_due: bool

    @property
    def lateness_seconds(self) -> float:
        return (self.recorded_at - self.scheduled_at).total_seconds()
