"""Weave's states and the typed results its transactions return."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class InstanceState(enum.StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def is_terminal(self) -> bool:
        return self is not InstanceState.RUNNING


class StepState(enum.StrEnum):
    PENDING = "PENDING"
    ACTIVE = "ACTIVE"
    PARKED = "PARKED"  # its task awaits review (NEEDS_REVIEW)
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    SKIPPED = "SKIPPED"
    CANCELLED = "CANCELLED"

    @property
    def is_open(self) -> bool:
        return self in (StepState.PENDING, StepState.ACTIVE, StepState.PARKED)

    @property
    def is_live(self) -> bool:
        return self in (StepState.ACTIVE, StepState.PARKED)


class WaitState(enum.StrEnum):
    WAITING = "WAITING"
    SATISFIED = "SATISFIED"
    TIMED_OUT = "TIMED_OUT"
    CANCELLED = "CANCELLED"


class SignalState(enum.StrEnum):
    PENDING = "PENDING"
    CONSUMED = "CONSUMED"
    EXPIRED = "EXPIRED"


class RoundState(enum.StrEnum):
    RUNNING = "RUNNING"
    MATCHED = "MATCHED"
    NOT_MATCHED = "NOT_MATCHED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


class PollOutcome(enum.StrEnum):
    """The label of ``orbit_workflow_poll_rounds_total``."""

    MATCHED = "matched"
    NOT_MATCHED = "not_matched"
    FAILED = "failed"
    EXHAUSTED = "exhausted"


#: What a step task's ``submitted_by`` says.
ACTOR_PREFIX = "workflow:"


@dataclass
class AdvanceReport:
    """What one Weave transaction moved: for metrics and logs."""

    namespace: str
    step_changes: int = 0
    poll_outcomes: list[PollOutcome] = field(default_factory=list)
    #: (queue, handler) of each step task created READY: whom to wake among long-polling workers.
    ready_tasks: list[tuple[str, str]] = field(default_factory=list)
    finished: InstanceState | None = None
    outcome: str = ""
    #: The transaction left its follow-ups to the inbox consumer (wake it).
    deferred_advance: bool = False
    #: The instance's next timer now falls due sooner (a new sleep, wait or poll round): wake
    #: this process's timer loop, whose wait may have been set before it.
    timer_sooner: bool = False
    #: Consuming an inbox row: seconds from its outcome being persisted to this consumption.
    orchestration_lag_seconds: float | None = None


@dataclass(frozen=True)
class PublishResult:
    definition_id: str
    name: str
    version: int
    digest: str
    changed: bool


@dataclass(frozen=True)
class StartResult:
    instance_id: str
    state: InstanceState
    replayed: bool


@dataclass(frozen=True)
class SignalResult:
    signal_id: str
    state: SignalState
    replayed: bool
    consumed_by_step: str | None = None


@dataclass(frozen=True)
class ControlResult:
    """What pause, resume or cancel did; ``changed`` is False when it was already so."""

    instance_id: str
    state: InstanceState
    paused: bool
    control_version: int
    changed: bool
    report: AdvanceReport | None = None
