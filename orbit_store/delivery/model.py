"""Delivery states, the subscription policy and the typed results of delivery transactions."""

from __future__ import annotations

import datetime as dt
import enum
import fnmatch
import random
from dataclasses import dataclass, field
from typing import Any


class DeliveryState(enum.StrEnum):
    PENDING = "PENDING"  # due at next_attempt_at (a new event, a retry, or an unacked lease)
    DELIVERED = "DELIVERED"  # acknowledged (pull) or answered 2xx (push)
    PARKED = "PARKED"  # attempts exhausted: kept, counted, alerted; redrive sends it again


#: Every move a delivery may make (see ``transitions.move``).
LEGAL_MOVES = frozenset(
    {
        (DeliveryState.PENDING, DeliveryState.PENDING),
        (DeliveryState.PENDING, DeliveryState.DELIVERED),
        (DeliveryState.PENDING, DeliveryState.PARKED),
        (DeliveryState.PARKED, DeliveryState.DELIVERED),
        (DeliveryState.PARKED, DeliveryState.PENDING),
    }
)


class Mode(enum.StrEnum):
    PULL = "pull"
    PUSH = "push"


#: Outcome states a subscription can filter on (the states that write a result event).
OUTCOMES = ("SUCCEEDED", "FAILED", "CANCELLED", "NEEDS_REVIEW")

#: Doubling stops here, so the arithmetic stays bounded whatever the attempt count.
MAX_BACKOFF_EXPONENT = 30


@dataclass(frozen=True)
class EventFilter:
    """Which result events a subscription receives; an empty list matches everything."""

    queues: tuple[str, ...] = ()
    handlers: tuple[str, ...] = ()  # glob patterns, e.g. "shop.*"
    outcomes: tuple[str, ...] = ()

    def matches(self, *, queue: str, handler: str, task_state: str) -> bool:
        return (
            (not self.queues or queue in self.queues)
            and (not self.handlers or any(fnmatch.fnmatchcase(handler, p) for p in self.handlers))
            and (not self.outcomes or task_state in self.outcomes)
        )

    def as_json(self) -> dict[str, list[str]]:
        return {
            "queues": list(self.queues),
            "handlers": list(self.handlers),
            "outcomes": list(self.outcomes),
        }

    @classmethod
    def from_json(cls, value: dict[str, Any] | None) -> EventFilter:
        value = value or {}
        return cls(
            queues=tuple(value.get("queues") or ()),
            handlers=tuple(value.get("handlers") or ()),
            outcomes=tuple(value.get("outcomes") or ()),
        )


@dataclass(frozen=True)
class DeliveryPolicy:
    max_attempts: int = 10
    backoff_initial_ms: int = 1_000
    backoff_max_ms: int = 600_000
    timeout_ms: int = 10_000

    def backoff_after(self, attempts: int, rng: random.Random | None = None) -> dt.timedelta:
        """Delay before the next try after ``attempts`` tries (1-based): exponential, capped,
        with "equal jitter" — uniform in [half, full] of the capped delay, so receivers that
        failed together do not get retried in lock-step, and a retry is never immediate."""
        exponent = min(max(attempts - 1, 0), MAX_BACKOFF_EXPONENT)
        ceiling = min(self.backoff_max_ms, self.backoff_initial_ms * 2**exponent)
        jittered = ceiling / 2 + (rng or random).uniform(0, ceiling / 2)
        return dt.timedelta(milliseconds=jittered)


@dataclass(frozen=True)
class SubscriptionSpec:
    """What a caller declares; ``put_subscription`` makes the row match it."""

    name: str
    mode: Mode
    filter: EventFilter = EventFilter()
    url: str | None = None
    secret_ref: str | None = None
    policy: DeliveryPolicy = DeliveryPolicy()


@dataclass(frozen=True)
class Subscription:
    id: str
    namespace: str
    name: str
    mode: Mode
    filter: EventFilter
    url: str | None
    secret_ref: str | None
    policy: DeliveryPolicy
    version: int
    created_at: dt.datetime
    updated_at: dt.datetime
    counts: dict[str, int] = field(default_factory=dict)  # deliveries per state (when asked)


@dataclass(frozen=True)
class ResultEvent:
    """One event as a subscriber receives it. Receivers dedupe by ``id``."""

    id: str
    namespace: str
    kind: str
    task_id: str
    task_state: str
    state_version: int
    queue: str
    handler: str
    payload: Any
    created_at: dt.datetime
    attempt: int  # how many times this delivery has been handed out, this one included


@dataclass(frozen=True)
class PulledBatch:
    events: list[ResultEvent]
    ack_deadline: dt.datetime
    parked: int  # deliveries parked by this pull (handed out max_attempts times, never acked)


class AckStatus(enum.StrEnum):
    ACKED = "acked"
    ALREADY_ACKED = "already_acked"
    UNKNOWN = "unknown"  # no delivery of this event for this subscription


@dataclass(frozen=True)
class PushItem:
    """A delivery a sender leased: send it, then report at ``state_version``."""

    delivery_id: str
    namespace: str
    subscription: str
    state_version: int
    url: str
    secret_ref: str
    timeout_seconds: float
    event: ResultEvent


class PushResult(enum.StrEnum):
    DELIVERED = "delivered"
    FAILED = "failed"  # will be tried again after a backoff
    PARKED = "parked"  # that was the last allowed attempt
    STALE = "stale"  # the lease lapsed and someone else moved the delivery on: nothing applied


@dataclass(frozen=True)
class BacklogRow:
    namespace: str
    subscription: str
    pending: int
    parked: int
    oldest_pending_age_seconds: float
