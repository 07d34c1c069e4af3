"""Request and response bodies of result subscriptions, pulled events and the audit trail (the
wire contract ``orbit_sdk.results`` mirrors)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Annotated, Literal

from pydantic import Field

from orbit.api.schemas.base import NAME_PATTERN, Out, Strict
from orbit.api.schemas.mirror import mirrors
from orbit_store import audit
from orbit_store.delivery import model as delivery_model

OutcomeName = Literal["SUCCEEDED", "FAILED", "CANCELLED", "NEEDS_REVIEW"]


class EventFilterIn(Strict):
    #: Queue names as queues are declared: a name no queue can have would never match.
    queues: list[Annotated[str, Field(pattern=NAME_PATTERN, max_length=63)]] = Field(
        default_factory=list, max_length=100
    )
    handlers: list[str] = Field(
        default_factory=list, max_length=100, description="Glob patterns, e.g. 'shop.*'."
    )
    outcomes: list[OutcomeName] = Field(default_factory=list)


class SubscriptionPut(Strict):
    mode: Literal["pull", "push"]
    filter: EventFilterIn = Field(default_factory=EventFilterIn)
    url: str | None = Field(
        None,
        max_length=2048,
        pattern=r"^https?://",
        description="push only: where to POST; loopback, link-local, private and metadata "
        "addresses are refused unless the server's --webhook-allow lists them",
    )
    secret_ref: str | None = Field(
        None,
        max_length=253,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="push only: the signing secret's name in this namespace's folder of the "
        "server's --webhook-secrets-dir (a Secret mounted per namespace); the database never "
        "holds the secret, and another namespace's secrets cannot be named",
    )
    max_attempts: int = Field(10, ge=1, le=1000, description="then the delivery is PARKED")
    backoff_initial_seconds: float = Field(1.0, ge=0.1, le=3600)
    backoff_max_seconds: float = Field(600.0, ge=0.1, le=86_400)
    timeout_seconds: float = Field(10.0, ge=0.1, le=120, description="push: per HTTP call")
    reason: str = Field("", max_length=1024, description="Recorded in the audit log.")


class EventFilterOut(Out):
    queues: list[str]
    handlers: list[str]
    outcomes: list[str]


class Subscription(Out):
    namespace: str
    name: str
    mode: Literal["pull", "push"]
    filter: EventFilterOut
    url: str | None
    secret_ref: str | None
    max_attempts: int
    backoff_initial_seconds: float
    backoff_max_seconds: float
    timeout_seconds: float
    version: int
    created_at: dt.datetime
    updated_at: dt.datetime
    deliveries: dict[str, int] = Field(description="deliveries per state")


class SubscriptionList(Out):
    items: list[Subscription]


def _stored(view: type) -> list[str]:
    return [f.name for f in dataclasses.fields(view)]


@mirrors(
    delivery_model.ResultEvent,
    types={"task_state": OutcomeName},
    said={
        "id": "Stable across redeliveries: dedupe by it.",
        "attempt": "How many times this event has been handed out.",
    },
    omit=["kind"],
    order=[
        "id",
        "type",
        *(n for n in _stored(delivery_model.ResultEvent) if n not in ("id", "kind")),
    ],
)
class ResultEvent(Out):
    #: The store's ``kind`` under the name pushed events carry (``event_document``), second.
    type: str


class EventBatch(Out):
    events: list[ResultEvent]
    ack_deadline: dt.datetime = Field(description="Unacknowledged events come back after it.")
    parked: int = Field(description="Deliveries parked by this pull (max_attempts reached).")


class AckRequest(Strict):
    event_ids: list[str] = Field(..., min_length=1, max_length=1000)


class AckResponse(Out):
    results: dict[str, Literal["acked", "already_acked", "unknown"]]


class RedriveRequest(Strict):
    reason: str = Field(..., min_length=1, max_length=1024)
    event_ids: list[str] | None = Field(None, max_length=1000)


class RedriveResponse(Out):
    redriven: int


class DeletedSubscription(Out):
    name: str
    deliveries: dict[str, int] = Field(description="what was removed, per state")


@mirrors(audit.AuditEntry)
class AuditEntry(Out):
    pass


class AuditPage(Out):
    items: list[AuditEntry]
    next_page_token: str | None
