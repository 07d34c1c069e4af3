"""Request and response bodies of the workflow API (``/v1/namespaces/{ns}/workflow…``). The SDK
(``orbit_sdk.workflows``) mirrors them; extend them, don't break them. The bodies of Weave's
views take their fields from the store's (``orbit_store.weave.queries``, ``mirrors``)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import Field

from orbit.api.schemas.base import NAME_PATTERN, Out, Strict
from orbit.api.schemas.mirror import mirrors
from orbit_store.weave import definitions, queries

IDENTIFIER = r"^[a-z][a-z0-9_]{0,62}$"
InstanceStateName = Literal["RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"]


class DefinitionPublish(Strict):
    name: str = Field(..., pattern=NAME_PATTERN, max_length=63, examples=["order-fulfilment"])
    spec: dict[str, Any] = Field(
        ...,
        description="The WorkflowDefinition spec (docs/concepts/workflows.md): steps, "
        "inputSchema, output.",
        examples=[{"steps": [{"name": "charge", "task": {"handler": "shop.charge"}}]}],
    )
    reason: str = Field(
        "", max_length=1024, description="Why: recorded in the audit log with a new version."
    )


@mirrors(definitions.VersionInfo)
class DefinitionVersion(Out):
    pass


class Definition(Out):
    namespace: str
    name: str
    latest_version: int
    retired: bool = Field(..., description="Withdrawn: no new starts; running ones continue.")
    versions: list[DefinitionVersion]
    published_version: int | None = Field(
        None, description="On publish: the version the spec is (new or unchanged)."
    )
    changed: bool | None = Field(None, description="On publish: whether a version was added.")


class WorkflowStart(Strict):
    definition: str = Field(..., pattern=NAME_PATTERN, max_length=63)
    version: int | None = Field(None, ge=1, description="Default: the latest version.")
    start_key: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        description="Same key + same request returns the original workflow (200); same key + "
        "different request is 409. Default: a new key (not idempotent across retries).",
    )
    input: Any = Field(default_factory=dict)


@mirrors(queries.InstanceView, types={"state": InstanceStateName})
class Workflow(Out):
    replayed: bool = Field(False, description="True when the start key found this workflow.")


@mirrors(queries.ActivationView)
class Activation(Out):
    pass


@mirrors(
    queries.StepView,
    nested=[Activation],
    types={"kind": Literal["task", "wait", "sleep", "poll"]},
    said={
        "awaiting_orchestration": "The task has an outcome the inbox has not applied yet.",
        "detail": "Where the step is, in words.",
    },
)
class Step(Out):
    pass


@mirrors(queries.SignalView)
class PendingSignal(Out):
    pass


class WorkflowDetail(Workflow):
    steps: list[Step]
    pending_signals: list[PendingSignal]
    inbox_pending: int = Field(..., description="Task outcomes not yet applied.")
    inbox_oldest_age_seconds: float | None
    pending_continuations: int = Field(
        ..., description="Outcomes consumed while paused, applied on resume."
    )
    orchestration_error: str | None = Field(
        None,
        description="Why the engine could not advance the workflow on its last try (e.g. a "
        "quota refused the next step's task); it tries again at orchestration_retry_at.",
    )
    orchestration_retry_at: dt.datetime | None = None


class WorkflowPage(Out):
    items: list[Workflow]
    next_page_token: str | None


class SignalSend(Strict):
    signal_id: str = Field(
        ...,
        min_length=1,
        max_length=255,
        description="Your id for this signal: sending it again is a replay, not a second signal.",
    )
    name: str = Field(..., pattern=IDENTIFIER)
    payload: Any = None


class Signal(Out):
    signal_id: str
    name: str
    state: Literal["PENDING", "CONSUMED", "EXPIRED"]
    consumed_by_step: str | None
    replayed: bool


class ControlRequest(Strict):
    reason: str = Field("", max_length=1024)


@mirrors(queries.EventView)
class WorkflowEvent(Out):
    pass


class WorkflowHistory(Out):
    events: list[WorkflowEvent]
