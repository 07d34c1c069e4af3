"""Bodies of the batched calls: many attempts started or completed per request (worker
protocol 2) and many tasks submitted per request. Every item answers on its own: ``ok`` with
the single-item call's answer, or ``refused`` with the problem document the single-item call
would have answered with."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field

from orbit.api.schemas.base import Out, Problem, Strict
from orbit.api.schemas.tasks import Safety, Task, TaskStateName, TaskSubmission
from orbit.api.schemas.workers import MAX_REPORTS, CompletionItem, CompletionItemResult

#: Bumped when the worker calls change shape; in the OpenAPI document as ``x-worker-protocol``.
#: 2: ``POST /v1/attempts:start`` and ``POST /v1/attempts:complete`` (batches).
#: 3: lease with start (``start_handlers`` on a lease request, ``started`` on each grant).
#: 4: reports on the lease (``reports`` on a lease request and its answer).
WORKER_PROTOCOL = 4
MAX_ATTEMPT_BATCH = MAX_REPORTS
MAX_SUBMIT_BATCH = 1000


class StartItem(Strict):
    attempt_id: str = Field(..., min_length=1, max_length=36)
    token: str = Field(..., min_length=1, max_length=128)
    safety: Safety | None = Field(None, description="The handler's declared safety.")


class StartBatch(Strict):
    items: list[StartItem] = Field(..., min_length=1, max_length=MAX_ATTEMPT_BATCH)


class StartItemResult(Out):
    attempt_id: str
    status: Literal["ok", "refused"]
    already_started: bool = False
    lease_expires_at: dt.datetime | None = None
    #: As on the single start's answer: the worker's local lease deadline is measured by it.
    lease_remaining_seconds: float | None = None
    problem: Problem | None = None


class StartBatchResponse(Out):
    results: list[StartItemResult]


class CompletionBatch(Strict):
    items: list[CompletionItem] = Field(..., min_length=1, max_length=MAX_ATTEMPT_BATCH)


class CompletionBatchResponse(Out):
    results: list[CompletionItemResult]


class SubmissionBatch(Strict):
    items: list[TaskSubmission] = Field(..., min_length=1, max_length=MAX_SUBMIT_BATCH)
    with_tasks: bool = Field(
        False,
        description="Answer each created or replayed item with its task, the document the "
        "single submission answers (the SDK sends concurrent Client.submit calls this way).",
    )


class SubmissionItemResult(Out):
    index: int = Field(..., description="The item's position in the request.")
    status: Literal["created", "replayed", "conflict", "refused"]
    idempotency_key: str | None = None
    task_id: str | None = Field(None, description="The task created or replayed.")
    state: TaskStateName | None = None
    problem: Problem | None = Field(
        None, description="Why nothing was written for this item (conflict, refused)."
    )
    task: Task | None = Field(
        None, description="With with_tasks: the task created or replayed, as POST …/tasks answers."
    )


class SubmissionBatchResponse(Out):
    results: list[SubmissionItemResult]
    created: int
    replayed: int
    failed: int
