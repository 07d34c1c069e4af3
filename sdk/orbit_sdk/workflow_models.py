"""Workflow response bodies of the ``/v1`` API, mirrored from the server's wire contract.

As in ``models``: unknown fields are ignored and enumerations are plain ``str``, so a newer
server never breaks an older client.
"""

from __future__ import annotations

import datetime as dt
import enum
from typing import Any

from .models import WireModel


class WorkflowState(enum.StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


#: States a workflow never leaves: where ``wait_workflow()`` stops.
FINISHED_WORKFLOW_STATES = frozenset(
    {WorkflowState.SUCCEEDED, WorkflowState.FAILED, WorkflowState.CANCELLED}
)


class WorkflowDefinitionVersion(WireModel):
    version: int
    digest: str
    published_at: dt.datetime
    published_by: str | None = None
    running_instances: int = 0


class WorkflowDefinition(WireModel):
    namespace: str
    name: str
    latest_version: int
    retired: bool = False
    versions: list[WorkflowDefinitionVersion] = []
    #: On publish: the version the spec now is, and whether publishing added it.
    published_version: int | None = None
    changed: bool | None = None


class Workflow(WireModel):
    id: str
    namespace: str
    definition: str
    version: int
    start_key: str
    state: str
    state_version: int
    paused: bool = False
    control_version: int = 1
    input: Any = None
    output: Any = None
    error: Any = None
    started_by: str | None = None
    created_at: dt.datetime
    updated_at: dt.datetime
    finished_at: dt.datetime | None = None
    #: True when the start key found an existing workflow instead of starting one.
    replayed: bool = False

    @property
    def is_finished(self) -> bool:
        return self.state in FINISHED_WORKFLOW_STATES


class WorkflowActivation(WireModel):
    seq: int
    state: str
    task_id: str | None = None
    task_state: str | None = None
    rounds_used: int = 0
    max_rounds: int | None = None
    deadline_at: dt.datetime | None = None
    next_poll_at: dt.datetime | None = None
    created_at: dt.datetime
    finished_at: dt.datetime | None = None


class WorkflowStep(WireModel):
    name: str
    kind: str
    state: str
    depends_on: list[str] = []
    activation_count: int = 0
    result: Any = None
    error: Any = None
    activations: list[WorkflowActivation] = []
    #: The step's task has finished but the orchestration has not applied it yet.
    awaiting_orchestration: bool = False
    inbox_lag_seconds: float | None = None
    detail: str = ""


class PendingSignal(WireModel):
    signal_id: str
    name: str
    state: str
    received_at: dt.datetime


class WorkflowDetail(Workflow):
    steps: list[WorkflowStep] = []
    pending_signals: list[PendingSignal] = []
    inbox_pending: int = 0
    inbox_oldest_age_seconds: float | None = None
    pending_continuations: int = 0
    #: Why the engine could not advance the workflow on its last try, and when it retries.
    orchestration_error: str | None = None
    orchestration_retry_at: dt.datetime | None = None

    def step(self, name: str) -> WorkflowStep:
        return next(s for s in self.steps if s.name == name)


class WorkflowPage(WireModel):
    items: list[Workflow]
    next_page_token: str | None = None


class Signal(WireModel):
    signal_id: str
    name: str
    #: CONSUMED when an active wait took it; PENDING until a later wait of its name does.
    state: str
    consumed_by_step: str | None = None
    replayed: bool = False


class WorkflowEvent(WireModel):
    seq: int
    kind: str
    step_name: str | None = None
    activation_seq: int | None = None
    details: Any = None
    actor: str | None = None
    at: dt.datetime
