"""Task resources: submit, read, list, cancel, review, retry (``/v1/namespaces/{ns}/tasks``)."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import functools
import uuid
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Path, Query, Response

from orbit.api.context import AppContext, Ctx
from orbit.api.schemas import tasks as schemas
from orbit.api.schemas.base import NAME_PATTERN, Problem
from orbit.api.transport import limits
from orbit.api.transport.auth import READ_ROLES, CurrentCredential, authorize
from orbit.api.transport.problems import ApiProblem
from orbit_store.access.credentials import Role
from orbit_store.db import run_transaction
from orbit_store.pulse.manual.cancel import cancel_task
from orbit_store.pulse.manual.review import ReviewDecision, retry_task, review_task
from orbit_store.pulse.model import OUTCOME_TASK_STATES, Safety, WaitPath
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.pulse.views import queries
from orbit_store.pulse.views.waiting import waiting_causes

router = APIRouter(prefix="/v1/namespaces/{namespace}/tasks", tags=["tasks"])

Namespace = Annotated[str, Path(pattern=NAME_PATTERN, max_length=63)]
TaskId = Annotated[str, Path(min_length=1, max_length=36)]
PROBLEMS: dict[int | str, dict[str, Any]] = {
    code: {
        "model": Problem,
        "content": {
            "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
        },
    }
    for code in (400, 401, 403, 404, 409, 413, 422, 429, 503)
}


def _detail(ctx: AppContext, namespace: str, task_id: str) -> queries.TaskDetail:
    with ctx.engine.connect() as conn:
        detail = queries.get_task(conn, namespace, task_id)  # with routing for WAITING tasks
    if detail is None:
        raise ApiProblem(404, "not-found", f"task {task_id} not found in namespace {namespace!r}")
    return detail


def _task(ctx: AppContext, namespace: str, task_id: str) -> queries.TaskView:
    """The task without its history: one statement. Routes read the store's view; the body
    (``schemas.Task``) is made from it when answering."""
    with ctx.engine.connect() as conn:
        view = queries.get_task_view(conn, namespace, task_id)
    if view is None:
        raise ApiProblem(404, "not-found", f"task {task_id} not found in namespace {namespace!r}")
    return view


def _body(view: queries.TaskView, *, replayed: bool = False) -> schemas.Task:
    return schemas.Task.model_validate({**view.__dict__, "replayed": replayed})


def submission_request(
    namespace: str, body: schemas.TaskSubmission, submitter: str
) -> SubmitRequest:
    retry = body.retry or schemas.RetryPolicyIn()
    return SubmitRequest(
        namespace=namespace,
        queue=body.queue,
        handler=body.handler,
        params=body.params,
        idempotency_key=body.idempotency_key,
        delay_seconds=body.delay_seconds,
        available_at=_utc(body.available_at),
        deadline_at=_utc(body.deadline_at),
        priority=body.priority,
        concurrency_key=body.concurrency_key,
        concurrency_limit=body.concurrency_limit,
        max_attempts=retry.max_attempts,
        backoff_initial_ms=_ms(retry.backoff_initial_seconds),
        backoff_max_ms=_ms(retry.backoff_max_seconds),
        backoff_multiplier=retry.backoff_multiplier,
        safety=Safety(body.safety) if body.safety else None,
        submitted_by=submitter,
    )


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    """Store naive UTC; aware inputs are converted, naive inputs are taken as UTC."""
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone(dt.UTC).replace(tzinfo=None)


@router.post(
    "",
    status_code=201,
    response_model=schemas.Task,
    responses=PROBLEMS,
    summary="Submit a task (idempotent by key)",
)
async def submit(
    namespace: Namespace,
    body: schemas.TaskSubmission,
    credential: CurrentCredential,
    ctx: Ctx,
    response: Response,
) -> schemas.Task:
    """201 for a new task; 200 with ``replayed: true`` when the key names an identical request;
    409 ``idempotency-conflict`` for a different request under the same key; 429 on a quota;
    413 ``payload-too-large`` when ``params`` exceed the server's ``max_payload_bytes``.

    Submissions that arrive together share a transaction (group commit, ``submit_groups``);
    each is answered as it would have been alone."""
    authorize(credential, namespace, Role.SUBMIT)
    limits.check_payload(ctx.settings.max_payload_bytes, params=body.params)
    task, replayed = await accept_submission(ctx, namespace, body, credential.name)
    response.status_code = 200 if replayed else 201
    response.headers["Location"] = task_location(namespace, task.id)
    return _body(task, replayed=replayed)


async def accept_submission(
    ctx: AppContext, namespace: str, body: schemas.TaskSubmission, submitter: str
) -> tuple[queries.TaskView, bool]:
    """A submission that passed its checks (token, role, payload size): accepted or replayed
    (the task and whether it was a replay), or the store's typed refusal raised."""
    request = submission_request(namespace, body, submitter)
    result = await ctx.submit_groups.submit(request)
    ctx.metrics.submissions.labels(
        namespace, body.queue, "replayed" if result.replayed else "new"
    ).inc()
    if not result.replayed and result.wait_path is WaitPath.READY:
        ctx.wakeups.notify(namespace, body.queue, body.handler)
    if result.row is not None:  # new: answer from what was written (no read-back)
        return queries.task_view_from_row(result.row), False
    task = await anyio.to_thread.run_sync(functools.partial(_task, ctx, namespace, result.task_id))
    return task, result.replayed


def task_location(namespace: str, task_id: str) -> str:
    """The ``Location`` of a submitted task."""
    return f"/v1/namespaces/{namespace}/tasks/{task_id}"


@router.get(
    "/{task_id}",
    response_model=schemas.TaskDetail,
    responses=PROBLEMS,
    summary="A task with its attempts and events",
)
def get(
    namespace: Namespace, task_id: TaskId, credential: CurrentCredential, ctx: Ctx
) -> schemas.TaskDetail:
    authorize(credential, namespace, *READ_ROLES)
    detail = _detail(ctx, namespace, task_id)
    causes = []
    if detail.task.state == "WAITING":
        with ctx.engine.connect() as conn:
            causes = waiting_causes(conn, namespace, task_id)
    latest = detail.attempts[-1].progress if detail.attempts else None
    return schemas.TaskDetail.model_validate(
        {
            **detail.task.__dict__,
            "attempts": detail.attempts,
            "events": detail.events,
            "waiting_causes": causes,
            "progress": latest,
        }
    )


@router.get("", response_model=schemas.TaskPage, responses=PROBLEMS, summary="List tasks")
def list_(
    namespace: Namespace,
    credential: CurrentCredential,
    ctx: Ctx,
    queue: Annotated[str | None, Query(max_length=63)] = None,
    state: Annotated[schemas.TaskStateName | None, Query()] = None,
    handler: Annotated[str | None, Query(max_length=255)] = None,
    idempotency_key: Annotated[
        str | None, Query(max_length=255, description="The task submitted under this key.")
    ] = None,
    created_after: Annotated[dt.datetime | None, Query(description="Inclusive, RFC 3339.")] = None,
    created_before: Annotated[dt.datetime | None, Query(description="Exclusive, RFC 3339.")] = None,
    page_size: Annotated[int, Query(ge=1, le=500)] = 50,
    page_token: Annotated[str | None, Query(max_length=200)] = None,
) -> schemas.TaskPage:
    """Newest first; pass ``next_page_token`` back as ``page_token`` (with the same filters)
    for the next page. The cursor is the last id seen, so pages stay stable while tasks are
    submitted or change state."""
    authorize(credential, namespace, *READ_ROLES)
    before = _decode_token(page_token)
    with ctx.engine.connect() as conn:
        page, last = queries.list_tasks(
            conn,
            namespace,
            queue=queue,
            state=state,
            handler=handler,
            idempotency_key=idempotency_key,
            created_after=_utc(created_after),
            created_before=_utc(created_before),
            limit=page_size,
            before_id=before,
        )
    token = base64.urlsafe_b64encode(last.encode()).decode() if last else None
    return schemas.TaskPage(
        items=[schemas.Task.model_validate(t.__dict__) for t in page], next_page_token=token
    )


def _decode_token(token: str | None) -> str | None:
    if token is None:
        return None
    try:
        decoded = base64.b64decode(token.encode(), altchars=b"-_", validate=True).decode()
        uuid.UUID(decoded)
        return decoded
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise ApiProblem(422, "validation", "page_token is not one this API issued") from exc


@router.post(
    "/{task_id}/cancel",
    response_model=schemas.Task,
    responses=PROBLEMS,
    summary="Cancel (or request cancellation of) a task",
)
def cancel(
    namespace: Namespace,
    task_id: TaskId,
    credential: CurrentCredential,
    ctx: Ctx,
    body: schemas.CancelRequest | None = None,
) -> schemas.Task:
    """WAITING/LEASED tasks are cancelled at once; a RUNNING task gets ``cancel_requested``
    and ends CANCELLED when its worker confirms; finished tasks are left as they are."""
    authorize(credential, namespace, Role.SUBMIT)
    result = run_transaction(
        ctx.engine,
        functools.partial(
            cancel_task,
            namespace=namespace,
            task_id=task_id,
            actor=credential.name,
            reason=(body.reason if body else ""),
        ),
    )
    task = _task(ctx, namespace, task_id)
    if result.changed and result.state in OUTCOME_TASK_STATES:
        ctx.metrics.outcomes.labels(namespace, task.queue, result.state).inc()
        ctx.wake_weave()
    return _body(task)


@router.post(
    "/{task_id}/review",
    response_model=schemas.Task,
    responses=PROBLEMS,
    summary="Settle a NEEDS_REVIEW task (audited)",
)
def review(
    namespace: Namespace,
    task_id: TaskId,
    body: schemas.ReviewRequest,
    credential: CurrentCredential,
    ctx: Ctx,
) -> schemas.Task:
    authorize(credential, namespace, Role.REVIEW)
    run_transaction(
        ctx.engine,
        functools.partial(
            review_task,
            namespace=namespace,
            task_id=task_id,
            decision=ReviewDecision(body.decision),
            actor=credential.name,
            reason=body.reason,
            evidence_ref=body.evidence_ref,
            expected_state_version=body.expected_state_version,
            execution_ended=body.execution_ended,
        ),
    )
    task = _task(ctx, namespace, task_id)
    ctx.metrics.outcomes.labels(namespace, task.queue, task.state).inc()
    ctx.metrics.reviews.labels(namespace, task.queue, body.decision).inc()
    ctx.wake_weave()  # a parked workflow step may go on
    return _body(task)


@router.post(
    "/{task_id}/retry",
    status_code=201,
    response_model=schemas.Task,
    responses=PROBLEMS,
    summary="Manual retry: a new task linked by retry_of",
)
def retry(
    namespace: Namespace,
    task_id: TaskId,
    body: schemas.RetryRequest,
    credential: CurrentCredential,
    ctx: Ctx,
    response: Response,
) -> schemas.Task:
    authorize(credential, namespace, Role.REVIEW)
    result = run_transaction(
        ctx.engine,
        functools.partial(
            retry_task,
            namespace=namespace,
            task_id=task_id,
            actor=credential.name,
            reason=body.reason,
            expected_state_version=body.expected_state_version,
            safe_to_retry=body.safe_to_retry,
        ),
    )
    task = _task(ctx, namespace, result.task_id)
    if result.wait_path is WaitPath.READY:
        ctx.wakeups.notify(namespace, task.queue, task.handler)
    response.headers["Location"] = f"/v1/namespaces/{namespace}/tasks/{result.task_id}"
    return _body(task)
