"""The worker protocol's calls for attempts it holds: start (LEASED → RUNNING), heartbeat (renew
leases and the session) and complete, one attempt per start or completion. The batched starts
and completions are ``attempt_batches``; sessions and the lease are ``workers``.

Each is an ``async`` route that sends only its transaction to a thread: a worker makes these
calls per task or per interval, and a plain ``def`` route costs two thread hand-offs."""

from __future__ import annotations

import functools
from typing import Annotated

import anyio
from fastapi import APIRouter, Path

from orbit.api.context import AppContext, Ctx
from orbit.api.reports import completion_refusal
from orbit.api.routes.tasks import PROBLEMS
from orbit.api.routes.workers import session_body, worker_namespace
from orbit.api.schemas import workers as schemas
from orbit.api.transport import limits
from orbit.api.transport.auth import CurrentCredential
from orbit.api.transport.problems import ApiProblem
from orbit.api.unstorable_reports import Report, storable_report
from orbit_store.db import run_transaction
from orbit_store.pulse.leases.complete import complete_attempt
from orbit_store.pulse.leases.heartbeat import renew_leases
from orbit_store.pulse.leases.start import start_attempt
from orbit_store.pulse.model import (
    OUTCOME_TASK_STATES,
    CompletionStatus,
    Outcome,
    Progress,
    RenewRequest,
    RenewResult,
    Safety,
    StartRefusal,
)
from orbit_store.pulse.workers import sessions

router = APIRouter(tags=["workers"])

AttemptId = Annotated[str, Path(min_length=1, max_length=36)]

START_REFUSALS = {
    StartRefusal.NOT_FOUND: (404, "not-found"),
    StartRefusal.INVALID_TOKEN: (403, "invalid-attempt-token"),
    StartRefusal.STALE_ATTEMPT: (409, "stale-attempt"),
    StartRefusal.LEASE_EXPIRED: (409, "lease-lost"),
    StartRefusal.GATE_CLOSED: (409, "gate-closed"),
    StartRefusal.CANCEL_REQUESTED: (409, "cancel-requested"),
    StartRefusal.RESTORE_FENCED: (409, "restore-fenced"),
}


@router.post(
    "/v1/attempts/{attempt_id}/start",
    response_model=schemas.StartResponse,
    responses=PROBLEMS,
    summary="Start an attempt (LEASED → RUNNING)",
)
async def start(
    attempt_id: AttemptId, body: schemas.StartRequest, credential: CurrentCredential, ctx: Ctx
) -> schemas.StartResponse:
    namespace = worker_namespace(credential)
    work = functools.partial(
        start_attempt,
        namespace=namespace,
        attempt_id=attempt_id,
        token=body.token,
        handler_safety=Safety(body.safety) if body.safety else None,
    )
    result = await anyio.to_thread.run_sync(run_transaction, ctx.engine, work)
    if not result.started:
        assert result.refusal is not None
        status, slug = START_REFUSALS[result.refusal]
        raise ApiProblem(status, slug, f"attempt {attempt_id}: {result.refusal.value}")
    return schemas.StartResponse(
        started=True,
        already_started=result.already_started,
        lease_expires_at=result.lease_expires_at,
        lease_remaining_seconds=result.lease_remaining_seconds,
    )


@router.post(
    "/v1/attempts/heartbeat",
    response_model=schemas.HeartbeatResponse,
    responses=PROBLEMS,
    summary="Renew leases (batch) and the worker session",
)
async def heartbeat(
    body: schemas.HeartbeatRequest, credential: CurrentCredential, ctx: Ctx
) -> schemas.HeartbeatResponse:
    namespace = worker_namespace(credential)
    items = [RenewRequest(i.attempt_id, i.token, _progress(i.progress)) for i in body.items]
    view, results = await anyio.to_thread.run_sync(_renew, ctx, namespace, body.session_id, items)
    return schemas.HeartbeatResponse(
        results=[schemas.HeartbeatResult.model_validate(r) for r in results],
        session=session_body(ctx, view) if view is not None else None,
    )


def _progress(given: schemas.ProgressIn | None) -> Progress | None:
    if given is None:
        return None
    return Progress(fraction=given.fraction, message=given.message, details=given.details)


def _renew(
    ctx: AppContext, namespace: str, session_id: str | None, items: list[RenewRequest]
) -> tuple[sessions.WorkerSession | None, list[RenewResult]]:
    """The session, then the leases: two transactions, one thread hand-off."""
    view = None
    if session_id is not None:
        renew = functools.partial(
            sessions.renew_session, namespace=namespace, session_id=session_id
        )
        view = run_transaction(ctx.engine, renew)
    if not items:
        return view, []
    leases = functools.partial(renew_leases, namespace=namespace, items=items)
    return view, run_transaction(ctx.engine, leases)


@router.post(
    "/v1/attempts/{attempt_id}/complete",
    response_model=schemas.CompletionResponse,
    responses=PROBLEMS,
    summary="Report an attempt's outcome",
)
async def complete(
    attempt_id: AttemptId, body: schemas.Completion, credential: CurrentCredential, ctx: Ctx
) -> schemas.CompletionResponse:
    """``duplicate`` when this outcome was already recorded; 409 ``stale-attempt`` when the
    attempt was superseded (the report is kept on the attempt as evidence). A result the
    database cannot store fails the attempt saying why (``unstorable_reports``)."""
    namespace = worker_namespace(credential)
    report = storable_report(Report(body.outcome, body.result, body.error, body.retryable))
    limits.check_payload(ctx.settings.max_payload_bytes, result=report.result, error=report.error)
    work = functools.partial(
        complete_attempt,
        namespace=namespace,
        attempt_id=attempt_id,
        token=body.token,
        outcome=Outcome(report.outcome),
        result=report.result,
        error=report.error,
        retryable=report.retryable,
    )
    result = await anyio.to_thread.run_sync(run_transaction, ctx.engine, work)
    refusal = completion_refusal(attempt_id, result)
    if refusal is not None:
        raise ApiProblem(*refusal)
    state = result.task_state
    if result.status is CompletionStatus.APPLIED and state in OUTCOME_TASK_STATES:
        ctx.metrics.outcomes.labels(namespace, result.queue or "", state).inc()
        if result.workflow:  # its workflow waits on it: apply it now, not at the next poll
            ctx.wake_weave()
    return schemas.CompletionResponse(
        status=result.status.value, task_state=result.task_state, reason=result.reason
    )
