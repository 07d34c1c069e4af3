"""Pulse's states, policies and the typed results its transactions return."""

from __future__ import annotations

import datetime as dt
import enum
import math
import random
from dataclasses import dataclass, field
from typing import Any


class TaskState(enum.StrEnum):
    WAITING = "WAITING"
    LEASED = "LEASED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    NEEDS_REVIEW = "NEEDS_REVIEW"
    CANCELLED = "CANCELLED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def is_live(self) -> bool:
        return self in (TaskState.LEASED, TaskState.RUNNING)


TERMINAL_STATES = frozenset({TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED})

#: States whose arrival is an outcome (announced as a result event, counted in metrics).
OUTCOME_TASK_STATES = TERMINAL_STATES | {TaskState.NEEDS_REVIEW}

#: Every transition the seed's state machine (§2) allows; anything else is a bug.
LEGAL_TRANSITIONS: frozenset[tuple[TaskState | None, TaskState]] = frozenset(
    {
        (None, TaskState.WAITING),
        (TaskState.WAITING, TaskState.LEASED),
        (TaskState.WAITING, TaskState.CANCELLED),
        (TaskState.WAITING, TaskState.FAILED),
        (TaskState.LEASED, TaskState.RUNNING),
        (TaskState.LEASED, TaskState.WAITING),
        (TaskState.LEASED, TaskState.FAILED),
        (TaskState.LEASED, TaskState.CANCELLED),
        (TaskState.RUNNING, TaskState.SUCCEEDED),
        (TaskState.RUNNING, TaskState.WAITING),
        (TaskState.RUNNING, TaskState.FAILED),
        (TaskState.RUNNING, TaskState.NEEDS_REVIEW),
        (TaskState.RUNNING, TaskState.CANCELLED),
        (TaskState.NEEDS_REVIEW, TaskState.SUCCEEDED),
        (TaskState.NEEDS_REVIEW, TaskState.FAILED),
    }
)


class WaitPath(enum.StrEnum):
    """Which path a WAITING task is on (internal; users see WAITING). Claims read only READY."""

    READY = "READY"  # due, gate open, permit held if it has a concurrency key: claimable now
    SCHEDULED = "SCHEDULED"  # available_at is in the future (promoted when it falls due)
    BLOCKED_GATE = "BLOCKED_GATE"  # its execution gate is closed (moved back when it opens)
    BLOCKED_KEY = "BLOCKED_KEY"  # its concurrency key has no free permit (released in order)


#: Worker-session states in which a session may still be granted work and renew its leases.
LIVE_SESSION_STATES = ("ACTIVE", "DRAINING")


class AttemptState(enum.StrEnum):
    LEASED = "LEASED"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"


class AttemptOutcome(enum.StrEnum):
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"
    LAPSED = "LAPSED"
    CANCELLED = "CANCELLED"
    RELEASED = "RELEASED"


class Safety(enum.StrEnum):
    """Whether a task may be re-run automatically after its worker vanished mid-run."""

    SAFE = "safe"  # idempotent: a lapsed RUNNING attempt is retried
    UNSAFE = "unsafe"  # side effects unknown after a lapse: NEEDS_REVIEW, never re-run blindly


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    backoff_initial_ms: int = 1_000
    backoff_max_ms: int = 300_000
    backoff_multiplier: float = 2.0

    def backoff_after(self, attempts_used: int) -> dt.timedelta:
        """Delay before the next attempt, after ``attempts_used`` attempts (1-based):
        ``initial * multiplier ** (attempts_used - 1)``, at most ``backoff_max_ms``.

        The exponent is capped *before* the power is taken (at the first exponent that reaches
        the maximum), so no policy value and no attempt count can overflow a float."""
        return dt.timedelta(milliseconds=self._capped_delay_ms(max(attempts_used - 1, 0)))

    def _capped_delay_ms(self, exponent: int) -> float:
        initial, ceiling = float(self.backoff_initial_ms), float(self.backoff_max_ms)
        if initial >= ceiling or initial <= 0 or self.backoff_multiplier <= 1:
            return min(initial, ceiling)
        reaches_ceiling = math.ceil(math.log(ceiling / initial, self.backoff_multiplier))
        return min(initial * self.backoff_multiplier ** min(exponent, reaches_ceiling), ceiling)

    def jittered_backoff_after(
        self, attempts_used: int, rng: random.Random | None = None
    ) -> dt.timedelta:
        """:meth:`backoff_after` with equal jitter: a uniform random delay between half and all
        of it, so tasks that failed together (an outage) do not all come back together."""
        full = self.backoff_after(attempts_used)
        return full * (rng or _JITTER).uniform(0.5, 1.0)


_JITTER = random.Random()


@dataclass(frozen=True)
class QueuePolicy:
    """A queue's defaults, snapshotted into each task at submission."""

    name: str
    paused: bool = False
    priority: int = 0
    retry: RetryPolicy = RetryPolicy()
    lease_seconds: int = 30
    attempt_timeout_seconds: int | None = None
    safety_default: Safety = Safety.SAFE
    concurrency_limit: int | None = None
    draining: bool = False  # being deleted: no new submissions (read-only; not set by put_queue)


#: Every namespace has this queue even when nothing declared it.
DEFAULT_QUEUE = "default"


@dataclass(frozen=True)
class LeaseGrant:
    """What a worker receives for one claimed task. ``token`` is shown only here, once."""

    task_id: str
    attempt_id: str
    generation: int
    token: str
    lease_expires_at: dt.datetime
    namespace: str
    queue: str
    handler: str
    params: Any
    safety: Safety
    state_version: int
    deadline_at: dt.datetime | None
    available_at: dt.datetime | None = None  # when it became due: dispatch latency starts here
    leased_at: dt.datetime | None = None
    #: The restore epoch of the grant: (epoch, generation) is the fencing token (fencing.py).
    epoch: int = 0
    #: Started in the claim (a lease with start, ``grant``): RUNNING, no start call needed.
    started: bool = False


@dataclass(frozen=True)
class SubmitResult:
    task_id: str
    state: TaskState
    replayed: bool
    wait_path: WaitPath | None = None  # where a new task starts (None for a replay)
    #: A new task's row as written (None for a replay): lets the caller answer without
    #: reading it back (``queries.task_view_from_row``).
    row: dict[str, Any] | None = field(default=None, compare=False, repr=False)


class StartRefusal(enum.StrEnum):
    NOT_FOUND = "not_found"
    INVALID_TOKEN = "invalid_token"
    STALE_ATTEMPT = "stale_attempt"
    LEASE_EXPIRED = "lease_expired"
    GATE_CLOSED = "gate_closed"
    CANCEL_REQUESTED = "cancel_requested"
    RESTORE_FENCED = "restore_fenced"  # granted before a restore fence (orbit_store/fencing.py)


@dataclass(frozen=True)
class StartResult:
    started: bool
    refusal: StartRefusal | None = None
    lease_expires_at: dt.datetime | None = None
    already_started: bool = False
    #: Seconds from the database's now to the lease's end: workers keep a local deadline by it.
    lease_remaining_seconds: float | None = None


class RenewStatus(enum.StrEnum):
    EXTENDED = "extended"
    CANCEL_REQUESTED = "cancel_requested"  # extended, but the handler should stop
    LOST = "lost"


#: Bounds of what an attempt's progress may hold (the row stays small whatever a handler says).
PROGRESS_MESSAGE_MAX = 500
PROGRESS_DETAILS_MAX_BYTES = 4096
PROGRESS_DETAILS_MAX_DEPTH = 16


@dataclass(frozen=True)
class Progress:
    """What a handler last said about how far it is: a fraction done (0..1), a message, details
    (a JSON object), and when the server heard it (database time; set by the store)."""

    fraction: float | None = None
    message: str | None = None
    details: Any = None
    at: dt.datetime | None = None


@dataclass(frozen=True)
class RenewRequest:
    attempt_id: str
    token: str
    #: The handler's latest progress since the last heartbeat, if it reported any.
    progress: Progress | None = None


@dataclass(frozen=True)
class RenewResult:
    attempt_id: str
    status: RenewStatus
    lease_expires_at: dt.datetime | None = None
    reason: str | None = None
    lease_remaining_seconds: float | None = None
    #: Why the item's progress was not kept (its lease was renewed all the same).
    progress_refused: str | None = None


class Outcome(enum.StrEnum):
    """What a worker reports for a started attempt."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN = "unknown"  # side effects may have happened: the task goes to NEEDS_REVIEW
    CANCELLED = "cancelled"  # the handler stopped after a cancel request
    RELEASED = "released"  # handed back before starting (drain)


class CompletionStatus(enum.StrEnum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"  # the same outcome was already recorded for this attempt
    SUPERSEDED = "superseded"  # stale attempt: kept as evidence, changed nothing else
    REFUSED = "refused"  # wrong token
    NOT_FOUND = "not_found"  # no such attempt in this namespace
    FENCED = "fenced"  # granted before a restore fence: kept as evidence only (fencing.py)


@dataclass(frozen=True)
class CompletionResult:
    status: CompletionStatus
    task_state: TaskState | None
    reason: str | None = None
    queue: str | None = None
    #: The outcome was written to Weave's inbox (the task is a workflow's step, seed §6.3).
    workflow: bool = False


@dataclass(frozen=True)
class CancelResult:
    task_id: str
    state: TaskState
    cancel_requested: bool
    changed: bool
