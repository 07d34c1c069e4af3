"""Schedule resources (``/v1/namespaces/{ns}/schedules``): create, read, list, update,
suspend/resume, delete, and a preview of the instants an expression fires at."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
from typing import Annotated

import sqlalchemy as sa
from fastapi import APIRouter, Path, Query, Response

from orbit.api.context import AppContext, Ctx
from orbit.api.routes.tasks import PROBLEMS, Namespace, _utc
from orbit.api.schemas import schedules as wire
from orbit.api.transport import limits
from orbit.api.transport.auth import READ_ROLES, CurrentCredential, authorize
from orbit.api.transport.problems import ApiProblem
from orbit_store.access.credentials import Credential, Role
from orbit_store.clock import db_now
from orbit_store.db import run_transaction
from orbit_store.pulse.model import Safety
from orbit_store.schedules import cron as crons
from orbit_store.schedules import declare
from orbit_store.schedules.model import (
    ConcurrencyPolicy,
    MisfirePolicy,
    ScheduleSpec,
    ScheduleView,
    TaskTemplate,
)
from orbit_store.schedules.queries import get_schedule, list_schedules
from orbit_store.schedules.trigger import trigger_schedule

router = APIRouter(prefix="/v1/namespaces/{namespace}/schedules", tags=["schedules"])

Name = Annotated[str, Path(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", max_length=63)]


def spec_of(name: str, body: wire.ScheduleIn) -> ScheduleSpec:
    task = body.task
    return ScheduleSpec(
        name=name,
        cron=body.cron,
        time_zone=body.time_zone,
        task=TaskTemplate(
            handler=task.handler,
            queue=task.queue,
            params=task.params,
            priority=task.priority,
            safety=Safety(task.safety) if task.safety else None,
            max_attempts=task.max_attempts,
        ),
        suspended=body.suspend,
        concurrency_policy=ConcurrencyPolicy(body.concurrency_policy),
        starting_deadline_seconds=body.starting_deadline_seconds,
        misfire_policy=MisfirePolicy(body.misfire_policy),
        catch_up_limit=body.catch_up_limit,
        start_at=_utc(body.start_at),
        end_at=_utc(body.end_at),
    )


def _check_template(ctx: AppContext, body: wire.ScheduleIn) -> None:
    """The params every fired task will carry: held to the same limit as a task's."""
    limits.check_payload(ctx.settings.max_payload_bytes, **{"task.params": body.task.params})


def to_wire(view: ScheduleView) -> wire.Schedule:
    """The view's own fields as they are, its ``state``, and its spec flattened."""
    spec = view.spec
    stored = {f.name: getattr(view, f.name) for f in dataclasses.fields(view) if f.name != "spec"}
    return wire.Schedule.model_validate(
        {
            **stored,
            "state": view.state,
            "cron": spec.cron,
            "time_zone": spec.time_zone,
            "task": spec.task.as_json(),
            "suspend": spec.suspended,
            "concurrency_policy": spec.concurrency_policy.value,
            "starting_deadline_seconds": spec.starting_deadline_seconds,
            "misfire_policy": spec.misfire_policy.value,
            "catch_up_limit": spec.catch_up_limit,
            "start_at": spec.start_at,
            "end_at": spec.end_at,
        }
    )


def _read(ctx: AppContext, namespace: str, name: str, occurrences: int = 10) -> wire.Schedule:
    with ctx.engine.connect() as conn:
        view = get_schedule(conn, namespace, name, occurrences=occurrences)
    if view is None:
        raise ApiProblem(
            404, "not-found", f"schedule {name!r} not found in namespace {namespace!r}"
        )
    return to_wire(view)


@router.post(
    "",
    status_code=201,
    response_model=wire.Schedule,
    responses=PROBLEMS,
    summary="Create a schedule",
)
def create(
    namespace: Namespace,
    body: wire.ScheduleCreate,
    credential: CurrentCredential,
    ctx: Ctx,
    response: Response,
) -> wire.Schedule:
    """409 when the name is taken; 422 names the field of an invalid expression, zone or queue."""
    authorize(credential, namespace, Role.SUBMIT)
    _check_template(ctx, body)
    work = functools.partial(
        declare.create_schedule,
        namespace=namespace,
        spec=spec_of(body.name, body),
        actor=credential.name,
        reason=body.reason,
    )
    try:
        run_transaction(ctx.engine, work)
    except sa.exc.IntegrityError as exc:
        raise ApiProblem(409, "conflict", f"schedule {body.name!r} already exists") from exc
    response.headers["Location"] = f"/v1/namespaces/{namespace}/schedules/{body.name}"
    return _read(ctx, namespace, body.name)


@router.post(
    "/preview",
    response_model=wire.Preview,
    responses=PROBLEMS,
    summary="The next instants an expression fires at, in UTC and local time",
)
def preview(
    namespace: Namespace, body: wire.PreviewRequest, credential: CurrentCredential, ctx: Ctx
) -> wire.Preview:
    """Check an expression before applying it; nothing is stored."""
    authorize(credential, namespace, *READ_ROLES)
    cron = crons.parse(body.cron, body.time_zone)
    after = _utc(body.after)
    if after is None:
        with ctx.engine.connect() as conn:
            after = db_now(conn)
    found = crons.preview(
        cron, after=after, count=body.count, start_at=_utc(body.start_at), end_at=_utc(body.end_at)
    )
    return wire.Preview(
        cron=body.cron,
        time_zone=body.time_zone,
        instants=[wire.PreviewInstant(at=p.at, local=p.local) for p in found],
    )


@router.get("", response_model=wire.SchedulePage, responses=PROBLEMS, summary="List schedules")
def list_(
    namespace: Namespace,
    credential: CurrentCredential,
    ctx: Ctx,
    page_size: Annotated[int, Query(ge=1, le=500)] = 100,
    page_token: Annotated[str | None, Query(max_length=200)] = None,
) -> wire.SchedulePage:
    """By name; pass ``next_page_token`` back as ``page_token`` for the next page."""
    authorize(credential, namespace, *READ_ROLES)
    after = _decode(page_token)
    with ctx.engine.connect() as conn:
        views = list_schedules(conn, namespace, limit=page_size, after_name=after)
    token = None
    if len(views) == page_size:
        token = base64.urlsafe_b64encode(views[-1].name.encode()).decode()
    return wire.SchedulePage(items=[to_wire(v) for v in views], next_page_token=token)


def _decode(token: str | None) -> str | None:
    if token is None:
        return None
    try:
        return base64.b64decode(token.encode(), altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ApiProblem(422, "validation", "page_token is not one this API issued") from exc


@router.get(
    "/{name}",
    response_model=wire.Schedule,
    responses=PROBLEMS,
    summary="A schedule with its last and next fire and its recent occurrences",
)
def get(
    namespace: Namespace,
    name: Name,
    credential: CurrentCredential,
    ctx: Ctx,
    occurrences: Annotated[int, Query(ge=0, le=100)] = 10,
) -> wire.Schedule:
    authorize(credential, namespace, *READ_ROLES)
    return _read(ctx, namespace, name, occurrences)


@router.put(
    "/{name}",
    response_model=wire.Schedule,
    responses=PROBLEMS,
    summary="Replace a schedule's spec (a change bumps its version)",
)
def update(
    namespace: Namespace,
    name: Name,
    body: wire.ScheduleUpdate,
    credential: CurrentCredential,
    ctx: Ctx,
) -> wire.Schedule:
    """The new version starts from now: no instant fires twice; a due instant of the old one is
    recorded as missed (Superseded). 409 if ``expected_version`` is stale or a Schedule
    resource owns it. Audited when the spec changes."""
    authorize(credential, namespace, Role.SUBMIT)
    _check_template(ctx, body)
    run_transaction(
        ctx.engine,
        functools.partial(
            declare.update_schedule,
            namespace=namespace,
            spec=spec_of(name, body),
            actor=credential.name,
            reason=body.reason,
            expected_version=body.expected_version,
        ),
    )
    return _read(ctx, namespace, name)


def _set_suspended(
    ctx: AppContext,
    credential: Credential,
    namespace: str,
    name: str,
    suspended: bool,
    body: wire.ScheduleControl | None,
) -> wire.Schedule:
    authorize(credential, namespace, Role.SUBMIT)
    run_transaction(
        ctx.engine,
        functools.partial(
            declare.set_suspended,
            namespace=namespace,
            name=name,
            suspended=suspended,
            actor=credential.name,
            reason=body.reason if body else "",
        ),
    )
    return _read(ctx, namespace, name)


@router.post("/{name}/suspend", response_model=wire.Schedule, responses=PROBLEMS, summary="Suspend")
def suspend(
    namespace: Namespace,
    name: Name,
    credential: CurrentCredential,
    ctx: Ctx,
    body: wire.ScheduleControl | None = None,
) -> wire.Schedule:
    """No instant fires while suspended; they are not caught up on resume. Audited."""
    return _set_suspended(ctx, credential, namespace, name, True, body)


@router.post(
    "/{name}/resume",
    response_model=wire.Schedule,
    responses=PROBLEMS,
    summary="Resume from now",
)
def resume(
    namespace: Namespace,
    name: Name,
    credential: CurrentCredential,
    ctx: Ctx,
    body: wire.ScheduleControl | None = None,
) -> wire.Schedule:
    """Audited."""
    return _set_suspended(ctx, credential, namespace, name, False, body)


@router.post(
    "/{name}/trigger",
    response_model=wire.Triggered,
    responses=PROBLEMS,
    summary="Trigger now: fire once at this instant (audited)",
)
def trigger(
    namespace: Namespace,
    name: Name,
    credential: CurrentCredential,
    ctx: Ctx,
    body: wire.ScheduleControl | None = None,
) -> wire.Triggered:
    """Besides the cron instants, which go on as before; a suspended schedule can be triggered.
    The concurrency policy applies: a Forbid schedule with an unfinished task answers SKIPPED
    (recorded in the ledger like any decided instant)."""
    authorize(credential, namespace, Role.SUBMIT)
    fired = run_transaction(
        ctx.engine,
        functools.partial(
            trigger_schedule,
            namespace=namespace,
            name=name,
            actor=credential.name,
            reason=body.reason if body else "",
        ),
    )
    return wire.Triggered.model_validate(fired.__dict__)


@router.delete("/{name}", status_code=204, responses=PROBLEMS, summary="Delete a schedule")
def delete(
    namespace: Namespace,
    name: Name,
    credential: CurrentCredential,
    ctx: Ctx,
    reason: Annotated[str, Query(max_length=1024, description="Recorded in the audit log.")] = "",
) -> Response:
    """Its occurrences stay as history; tasks it fired are left as they are. Audited."""
    authorize(credential, namespace, Role.SUBMIT)
    deleted = run_transaction(
        ctx.engine,
        functools.partial(
            declare.delete_schedule,
            namespace=namespace,
            name=name,
            actor=credential.name,
            reason=reason,
        ),
    )
    if not deleted:
        raise ApiProblem(
            404, "not-found", f"schedule {name!r} not found in namespace {namespace!r}"
        )
    return Response(status_code=204)
