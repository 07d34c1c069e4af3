"""Request and response bodies of the workflow API (``/v1/namespaces/{ns}/workflow…``). The SDK
(``orbit_sdk.workflows``) mirrors them; extend them, don't break them."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import Field

from orbit.api.schemas import NAME_PATTERN, Out, Strict

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


class DefinitionVersion(Out):
    version: int
    digest: str
    published_at: dt.datetime
    published_by: str | None
    running_instances: int


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


class Workflow(Out):
    id: str
    namespace: str
    definition: str
    version: int
    start_key: str
    state: InstanceStateName
    state_version: int
    paused: bool
    control_version: int
    input: Any
    output: Any
    error: Any
    started_by: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    finished_at: dt.datetime | None
    replayed: bool = Field(False, description="True when the start key found this workflow.")


class Activation(Out):
    seq: int
    state: str
    task_id: str | None
    task_state: str | None
    rounds_used: int
    max_rounds: int | None
    deadline_at: dt.datetime | None
    next_poll_at: dt.datetime | None
    created_at: dt.datetime
    finished_at: dt.datetime | None


class Step(Out):
    name: str
    kind: Literal["task", "wait", "sleep", "poll"]
    state: str
    depends_on: list[str]
    activation_count: int
    result: Any
    error: Any
    activations: list[Activation]
    awaiting_orchestration: bool = Field(
        ..., description="The task has an outcome the inbox has not applied yet."
    )
    inbox_lag_seconds: float | None
    detail: str = Field(..., description="Where the step is, in words.")


class PendingSignal(Out):
    signal_id: str
    name: str
    state: str
    received_at: dt.datetime


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


class WorkflowEvent(Out):
    seq: int
    kind: str
    step_name: str | None
    activation_seq: int | None
    details: Any
    actor: str | None
    at: dt.datetime


class WorkflowHistory(Out):
    events: list[WorkflowEvent]
