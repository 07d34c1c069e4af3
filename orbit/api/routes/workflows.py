"""Workflow resources: publish definitions, start, read, list, signal, pause, resume, cancel
(``/v1/namespaces/{ns}/workflow-definitions`` and ``/v1/namespaces/{ns}/workflows``)."""

from __future__ import annotations

import functools
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Callable
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Path, Query, Response

from orbit.api.context import AppContext, Ctx
from orbit.api.routes.tasks import PROBLEMS, Namespace, _decode_token
from orbit.api.schemas import workflows as wire
from orbit.api.schemas.base import NAME_PATTERN
from orbit.api.transport import limits
from orbit.api.transport.auth import READ_ROLES, CurrentCredential, authorize
from orbit.api.transport.problems import ApiProblem
from orbit_store.access.credentials import Role
from orbit_store.db import run_transaction
from orbit_store.weave import control, queries, service
from orbit_store.weave.definitions import get_definition
from orbit_store.weave.dsl.spec import InvalidDefinition
from orbit_store.weave.model import AdvanceReport, ControlResult
from orbit_store.weave.start import StartRequest

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["workflows"])

WorkflowId = Annotated[str, Path(min_length=1, max_length=36)]
DefinitionName = Annotated[str, Path(pattern=NAME_PATTERN, max_length=63)]


def _definition(ctx: AppContext, namespace: str, name: str, **extra: Any) -> wire.Definition:
    with ctx.engine.connect() as conn:
        info = get_definition(conn, namespace, name)
    if info is None:
        raise ApiProblem(
            404, "not-found", f"workflow definition {name!r} not found in namespace {namespace!r}"
        )
    return wire.Definition.model_validate(
        {**info.__dict__, "versions": [v.__dict__ for v in info.versions], **extra}
    )


def _workflow(ctx: AppContext, namespace: str, instance_id: str, **extra: Any) -> wire.Workflow:
    with ctx.engine.connect() as conn:
        view = queries.get_instance(conn, namespace, instance_id)
    if view is None:
        raise ApiProblem(
            404, "not-found", f"workflow {instance_id} not found in namespace {namespace!r}"
        )
    return wire.Workflow.model_validate({**view.__dict__, **extra})


def _record(ctx: AppContext, report: AdvanceReport) -> None:
    ctx.metrics.workflows.record(report)
    if report.deferred_advance:  # a signal or resume left the follow-ups to the inbox loop
        ctx.wake_weave()
    if report.timer_sooner:  # a new sleep or wait may end before the timer loop's wait
        ctx.wake_timers()
    for queue, handler in report.ready_tasks:  # new step tasks: wake a worker for each
        ctx.wakeups.notify(report.namespace, queue, handler)


@router.post(
    "/workflow-definitions",
    status_code=201,
    response_model=wire.Definition,
    responses=PROBLEMS,
    summary="Publish a workflow definition (a new immutable version when the spec changed)",
)
def publish(
    namespace: Namespace,
    body: wire.DefinitionPublish,
    credential: CurrentCredential,
    ctx: Ctx,
    response: Response,
) -> wire.Definition:
    """201 with a new version when the spec differs from the latest (audited); 200 when it is
    the same (by canonical digest). 422 lists every problem in the spec by field."""
    authorize(credential, namespace, Role.ADMIN)
    limits.check_payload(ctx.settings.max_payload_bytes, spec=body.spec)
    try:
        result = service.publish(
            ctx.engine,
            namespace=namespace,
            name=body.name,
            document=body.spec,
            actor=credential.name,
            reason=body.reason,
        )
    except InvalidDefinition as exc:
        errors = [{"loc": ["spec", p.path], "msg": p.message} for p in exc.problems]
        raise ApiProblem(422, "validation", f"invalid spec: {exc}", errors=errors) from exc
    if not result.changed:
        response.status_code = 200
    return _definition(
        ctx, namespace, body.name, published_version=result.version, changed=result.changed
    )


@router.get(
    "/workflow-definitions/{name}",
    response_model=wire.Definition,
    responses=PROBLEMS,
    summary="A workflow definition with its versions",
)
def get_definition_(
    namespace: Namespace, name: DefinitionName, credential: CurrentCredential, ctx: Ctx
) -> wire.Definition:
    authorize(credential, namespace, *READ_ROLES)
    return _definition(ctx, namespace, name)


@router.post(
    "/workflows",
    status_code=201,
    response_model=wire.Workflow,
    responses=PROBLEMS,
    summary="Start a workflow (idempotent by start key)",
)
async def start(
    namespace: Namespace,
    body: wire.WorkflowStart,
    credential: CurrentCredential,
    ctx: Ctx,
    response: Response,
) -> wire.Workflow:
    """201 for a new workflow; 200 with ``replayed: true`` when the start key names an identical
    request; 409 ``idempotency-conflict`` for another request under the same key; 422 when the
    input does not match the definition's inputSchema; 429 when a quota refuses a first task.

    Starts that arrive together share a transaction (group commit, ``start_groups``); each is
    answered as it would have been alone."""
    authorize(credential, namespace, Role.SUBMIT)
    limits.check_payload(ctx.settings.max_payload_bytes, input=body.input)
    request = StartRequest(
        namespace=namespace,
        definition=body.definition,
        start_key=body.start_key or str(uuid.uuid4()),
        input=body.input,
        version=body.version,
        started_by=credential.name,
        max_payload_bytes=ctx.settings.max_payload_bytes,
    )
    result, report = await ctx.start_groups.submit(request)
    if result.replayed:
        response.status_code = 200
    else:
        _record(ctx, report)
    response.headers["Location"] = f"/v1/namespaces/{namespace}/workflows/{result.instance_id}"
    return await anyio.to_thread.run_sync(
        functools.partial(_workflow, ctx, namespace, result.instance_id, replayed=result.replayed)
    )


@router.get(
    "/workflows/{workflow_id}",
    response_model=wire.WorkflowDetail,
    responses=PROBLEMS,
    summary="A workflow with its steps, activations, linked tasks and inbox lag",
)
def get(
    namespace: Namespace, workflow_id: WorkflowId, credential: CurrentCredential, ctx: Ctx
) -> wire.WorkflowDetail:
    authorize(credential, namespace, *READ_ROLES)
    with ctx.engine.connect() as conn:
        detail = queries.get_detail(conn, namespace, workflow_id)
    if detail is None:
        raise ApiProblem(
            404, "not-found", f"workflow {workflow_id} not found in namespace {namespace!r}"
        )
    return wire.WorkflowDetail.model_validate(
        {
            **detail.instance.__dict__,
            "steps": [
                {**s.__dict__, "activations": [a.__dict__ for a in s.activations]}
                for s in detail.steps
            ],
            "pending_signals": [s.__dict__ for s in detail.pending_signals],
            "inbox_pending": detail.inbox_pending,
            "inbox_oldest_age_seconds": detail.inbox_oldest_age_seconds,
            "pending_continuations": detail.pending_continuations,
            "orchestration_error": detail.orchestration_error,
            "orchestration_retry_at": detail.orchestration_retry_at,
        }
    )


@router.get(
    "/workflows/{workflow_id}/history",
    response_model=wire.WorkflowHistory,
    responses=PROBLEMS,
    summary="Every event of a workflow, in order",
)
def history(
    namespace: Namespace, workflow_id: WorkflowId, credential: CurrentCredential, ctx: Ctx
) -> wire.WorkflowHistory:
    authorize(credential, namespace, *READ_ROLES)
    _workflow(ctx, namespace, workflow_id)
    with ctx.engine.connect() as conn:
        events = queries.history(conn, namespace, workflow_id)
    return wire.WorkflowHistory(events=[wire.WorkflowEvent.model_validate(e) for e in events])


@router.get("/workflows", response_model=wire.WorkflowPage, responses=PROBLEMS, summary="List")
def list_(
    namespace: Namespace,
    credential: CurrentCredential,
    ctx: Ctx,
    state: Annotated[wire.InstanceStateName | None, Query()] = None,
    definition: Annotated[str | None, Query(max_length=63)] = None,
    page_size: Annotated[int, Query(ge=1, le=500)] = 50,
    page_token: Annotated[str | None, Query(max_length=200)] = None,
) -> wire.WorkflowPage:
    """Newest first; pass ``next_page_token`` back as ``page_token`` for the next page."""
    authorize(credential, namespace, *READ_ROLES)
    with ctx.engine.connect() as conn:
        page, last = queries.list_instances(
            conn,
            namespace,
            state=state,
            definition=definition,
            limit=page_size,
            before_id=_decode_token(page_token),
        )
    token = urlsafe_b64encode(last.encode()).decode() if last else None
    return wire.WorkflowPage(
        items=[wire.Workflow.model_validate(v.__dict__) for v in page], next_page_token=token
    )


@router.post(
    "/workflows/{workflow_id}/signals",
    status_code=201,
    response_model=wire.Signal,
    responses=PROBLEMS,
    summary="Send a signal (idempotent by signal_id)",
)
def signal(
    namespace: Namespace,
    workflow_id: WorkflowId,
    body: wire.SignalSend,
    credential: CurrentCredential,
    ctx: Ctx,
    response: Response,
) -> wire.Signal:
    """201 for a new signal, ``CONSUMED`` when an active wait of its name took it at once,
    ``PENDING`` when it waits for a later wait of that name; 200 for a replay of the same
    ``signal_id``; 409 for the same id with other content, or a finished workflow; 422 for a
    name no wait of the workflow's definition uses."""
    authorize(credential, namespace, Role.SUBMIT)
    limits.check_payload(ctx.settings.max_payload_bytes, payload=body.payload)
    result, report = service.signal(
        ctx.engine,
        namespace=namespace,
        instance_id=workflow_id,
        signal_id=body.signal_id,
        name=body.name,
        payload=body.payload,
        sent_by=credential.name,
        max_payload_bytes=ctx.settings.max_payload_bytes,
    )
    if result.replayed:
        response.status_code = 200
    else:
        _record(ctx, report)
    return wire.Signal(
        signal_id=result.signal_id,
        name=body.name,
        state=result.state.value,
        consumed_by_step=result.consumed_by_step,
        replayed=result.replayed,
    )


CONTROLS: dict[str, tuple[Callable[..., ControlResult], str]] = {
    "pause": (
        control.pause_workflow,
        "Pause: no new tasks are granted; running ones finish and are recorded",
    ),
    "resume": (
        control.resume_workflow,
        "Resume: reopen the gate and apply what happened while paused",
    ),
    "cancel": (
        control.cancel_workflow,
        "Cancel: open steps cancelled, their tasks cancelled by Pulse's rules",
    ),
}


def _control_route(name: str, action: Callable[..., ControlResult], summary: str) -> None:
    def endpoint(
        namespace: Namespace,
        workflow_id: WorkflowId,
        credential: CurrentCredential,
        ctx: Ctx,
        body: wire.ControlRequest | None = None,
    ) -> wire.Workflow:
        authorize(credential, namespace, Role.SUBMIT)
        # Resuming may create step tasks: they are held to the server's payload limit.
        limit = {"max_payload_bytes": ctx.settings.max_payload_bytes} if name == "resume" else {}
        result = run_transaction(
            ctx.engine,
            functools.partial(
                action,
                namespace=namespace,
                instance_id=workflow_id,
                actor=credential.name,
                reason=body.reason if body else "",
                **limit,
            ),
        )
        if result.report is not None:
            _record(ctx, result.report)
        return _workflow(ctx, namespace, workflow_id)

    endpoint.__name__ = name
    router.post(
        f"/workflows/{{workflow_id}}/{name}",
        response_model=wire.Workflow,
        responses=PROBLEMS,
        summary=summary,
    )(endpoint)


for _name, (_action, _summary) in CONTROLS.items():
    _control_route(_name, _action, _summary)
