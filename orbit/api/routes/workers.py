"""The worker protocol (ORBIT.md §6): sessions → lease (long-poll) → start → heartbeat →
complete. Every call is scoped to the token's namespace; attempts need their secret token.

The calls a worker makes per task or per interval are ``async`` routes that send only their
transactions to a thread (see ``routes_attempt_batches``: a plain ``def`` route costs two thread
hand-offs)."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import time
from typing import Annotated

import anyio
from fastapi import APIRouter, Path, Request, Response

from orbit.api.context import AppContext, Ctx
from orbit.api.reports import ON_LEASE, answer_reports, check_reports, completion_refusal
from orbit.api.routes.tasks import PROBLEMS
from orbit.api.schemas import workers as schemas
from orbit.api.transport import limits
from orbit.api.transport.auth import CurrentCredential, authorize
from orbit.api.transport.problems import ApiProblem
from orbit.api.unstorable_reports import Report, storable_report
from orbit_store.access.credentials import Credential, Role
from orbit_store.db import run_transaction
from orbit_store.pulse import cycle, service
from orbit_store.pulse.claim.claim import Claimant, claim_tasks, require_active_session
from orbit_store.pulse.claim.probe import ClaimPreview, preview_claim
from orbit_store.pulse.leases.complete import complete_attempt
from orbit_store.pulse.leases.heartbeat import renew_leases
from orbit_store.pulse.leases.start import start_attempt
from orbit_store.pulse.leases.unreceived import hand_back_unreceived
from orbit_store.pulse.model import (
    OUTCOME_TASK_STATES,
    CompletionStatus,
    LeaseGrant,
    Outcome,
    Progress,
    RenewRequest,
    RenewResult,
    Safety,
    StartRefusal,
)
from orbit_store.pulse.workers import sessions

router = APIRouter(tags=["workers"])

SessionId = Annotated[str, Path(min_length=1, max_length=36)]
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


def worker_namespace(credential: Credential) -> str:
    authorize(credential, credential.namespace, Role.WORK)
    return credential.namespace


def _session(ctx: AppContext, view: sessions.WorkerSession) -> schemas.Session:
    return schemas.Session(
        id=view.id,
        namespace=view.namespace,
        worker_name=view.worker_name,
        generation=view.generation,
        state=view.state,
        expires_at=view.expires_at,
        heartbeat_interval_seconds=ctx.settings.heartbeat_interval,
        handlers=view.handlers,
    )


@router.post(
    "/v1/worker-sessions",
    status_code=201,
    response_model=schemas.Session,
    responses=PROBLEMS,
    summary="Register a worker session",
)
def create_session(
    body: schemas.SessionCreate, credential: CurrentCredential, ctx: Ctx
) -> schemas.Session:
    """A worker that names ``handlers`` is granted only their tasks; re-registering a worker
    name closes its older live session. A resent registration carrying the same
    ``registration_key`` answers the session it already opened (whatever its state now)."""
    authorize(credential, body.namespace, Role.WORK)
    view = service.register(
        ctx.engine,
        functools.partial(
            sessions.register_session,
            namespace=body.namespace,
            worker_name=body.worker_name,
            queues=body.queues,
            ttl_seconds=body.ttl_seconds,
            pod_uid=body.pod_uid,
            require_registered_pod=ctx.settings.require_registered_pods,
            handlers=body.handlers,
            registration_key=body.registration_key,
        ),
    )
    return _session(ctx, view)


@router.post(
    "/v1/worker-sessions/{session_id}/lease",
    response_model=schemas.LeaseBatch,
    responses=PROBLEMS,
    summary="Lease due tasks (long-poll)",
)
async def lease(
    session_id: SessionId,
    body: schemas.LeaseRequest,
    request: Request,
    credential: CurrentCredential,
    ctx: Ctx,
) -> schemas.LeaseBatch:
    """Returns as soon as at least one task is leased, or after ``wait_seconds`` with none.

    A submission to this server of a task this session can run wakes the request within
    milliseconds (one waiting request per task). While nothing is due the request runs no
    claim transaction: it sleeps until a wake-up, the next scheduled task's due time or the
    poll interval, then asks a read-only probe whether a claim would find anything.

    ``start_handlers`` (worker protocol 3): grants of these handlers' tasks are started in the
    claim itself (``started``: RUNNING, no start call). Tasks granted to a client that has
    disconnected meanwhile — leased or started — are handed back at once, their attempt not
    spent: the worker never received them, so no handler ran.

    ``claimed_after_seconds`` says how long the request waited here before the claim that
    granted: the worker counts each lease from its sending plus that, so an answer that sat
    undelivered (a worker paused mid-poll) cannot stretch a lease past its end here.

    ``reports`` (worker protocol 4): outcomes of the worker's finished attempts, applied before
    the claim as ``POST /v1/attempts:complete`` applies them, each answered in ``reports`` —
    one round trip per cycle of a busy worker instead of two, and one transaction
    (``pulse.cycle``). Its answers wait for the end of
    the long poll: a worker sending reports asks with ``wait_seconds`` 0, and the grants of
    such a request are not handed back for a disconnected client (they lapse like any grant
    whose answer was lost)."""
    received = time.monotonic()
    namespace = worker_namespace(credential)
    deadline = received + body.wait_seconds
    claim_began = received
    claim = functools.partial(
        claim_tasks,
        namespace=namespace,
        queues_=None,
        limit=body.max_tasks,
        worker_session_id=session_id,
        start_handlers=frozenset(body.start_handlers),
    )
    claimant = ctx.claimants.get(namespace, session_id)
    if claimant is None:  # the claims below refuse a session that ended since
        claimant = await anyio.to_thread.run_sync(_claimant, ctx, namespace, session_id)
        ctx.claimants.put(namespace, session_id, claimant)
    grants: list[LeaseGrant] = []
    reports: list[schemas.CompletionItemResult] = []
    should_claim = True  # a worker asks when it has room: try at once
    releases = ctx.wakeups.releases
    while True:
        if ctx.wakeups.stopping or ctx.wakeups.releases != releases:
            break  # the server is stopping: "nothing yet", at once (wakeups.Wakeups.release)
        woken = ctx.wakeups.waiter(namespace, claimant.queues, claimant.handlers)
        try:
            next_due = None
            if not should_claim:
                seen = await anyio.to_thread.run_sync(_preview_claim, ctx, namespace, claimant)
                should_claim, next_due = seen.ready, _seconds_until(seen.next_due_at, seen.now)
            if should_claim:
                claim_began = time.monotonic()
                if body.reports and not reports:  # the first claim, in the same thread hop
                    reports, grants = await anyio.to_thread.run_sync(
                        _report_then_claim, ctx, namespace, body.reports, claim
                    )
                else:
                    grants = await anyio.to_thread.run_sync(run_transaction, ctx.engine, claim)
            remaining = deadline - time.monotonic()
            if grants or remaining <= 0 or await request.is_disconnected():
                break
            timeout = min(remaining, ctx.settings.lease_poll_interval, next_due or remaining)
            try:
                await asyncio.wait_for(asyncio.shield(woken), timeout)
                should_claim = True  # a task for us was submitted here
            except TimeoutError:
                should_claim = False  # probe first
        finally:
            woken.cancel()
    # A request carrying reports answers at once (its worker does not long-poll with them): its
    # client is not asked whether it is still there, a question that costs a tenth of the
    # server's CPU per cycle of a busy worker; grants a vanished client never got lapse.
    if grants and not body.reports and await request.is_disconnected():
        await anyio.to_thread.run_sync(_hand_back, ctx, namespace, grants)
        return schemas.LeaseBatch(leases=[], reports=reports)
    _observe_dispatch(ctx, grants)
    return schemas.LeaseBatch(
        leases=[_lease(g) for g in grants],
        claimed_after_seconds=claim_began - received if grants else None,
        reports=reports,
    )


def _report_then_claim(
    ctx: AppContext,
    namespace: str,
    items: list[schemas.CompletionItem],
    claim: functools.partial[list[LeaseGrant]],
) -> tuple[list[schemas.CompletionItemResult], list[LeaseGrant]]:
    """The reports, then the claim, in one transaction when both take their common path
    (``pulse.cycle``): the slots the reports free are the ones the claim fills."""
    checked = check_reports(ctx, items, ON_LEASE)
    if not checked.accepted:
        grants = run_transaction(ctx.engine, claim)
        return answer_reports(ctx, namespace, items, checked, {}), grants
    results, grants = cycle.report_then_claim(
        ctx.engine,
        namespace=namespace,
        session_id=claim.keywords["worker_session_id"],
        items=checked.accepted,
        limit=claim.keywords["limit"],
        start_handlers=claim.keywords["start_handlers"],
    )
    return answer_reports(ctx, namespace, items, checked, results), grants


def _lease(grant: LeaseGrant) -> schemas.Lease:
    lease = schemas.Lease.model_validate(grant)
    if grant.leased_at is not None:
        remaining = (grant.lease_expires_at - grant.leased_at).total_seconds()
        lease = lease.model_copy(update={"lease_remaining_seconds": remaining})
    return lease


def _claimant(ctx: AppContext, namespace: str, session_id: str) -> Claimant:
    with ctx.engine.connect() as conn:
        return require_active_session(conn, namespace, session_id, lock=False)


def _preview_claim(ctx: AppContext, namespace: str, claimant: Claimant) -> ClaimPreview:
    with ctx.engine.connect() as conn:
        return preview_claim(conn, namespace, claimant)


def _seconds_until(instant: dt.datetime | None, now: dt.datetime) -> float | None:
    if instant is None:
        return None
    return max((instant - now).total_seconds(), 0.0) + 0.001


def _hand_back(ctx: AppContext, namespace: str, grants: list[LeaseGrant]) -> None:
    """Each grant back to WAITING in its own transaction (RELEASED: the attempt is not spent),
    also a started one (``pulse.unreceived``)."""
    for grant in grants:
        run_transaction(
            ctx.engine,
            functools.partial(
                hand_back_unreceived,
                namespace=namespace,
                attempt_id=grant.attempt_id,
                token=grant.token,
            ),
        )
    ctx.metrics.handed_back.labels(namespace).inc(len(grants))


def _observe_dispatch(ctx: AppContext, grants: list[LeaseGrant]) -> None:
    ctx.metrics.batch_items.labels("lease").observe(len(grants))  # 0: a poll that found nothing
    for grant in grants:
        if grant.available_at is not None and grant.leased_at is not None:
            latency = max((grant.leased_at - grant.available_at).total_seconds(), 0.0)
            ctx.metrics.dispatch_latency.labels(grant.namespace, grant.queue).observe(latency)


@router.post(
    "/v1/worker-sessions/{session_id}/drain",
    response_model=schemas.Session,
    responses=PROBLEMS,
    summary="Stop leasing; running attempts continue",
)
def drain(session_id: SessionId, credential: CurrentCredential, ctx: Ctx) -> schemas.Session:
    namespace = worker_namespace(credential)
    view = run_transaction(
        ctx.engine,
        functools.partial(sessions.drain_session, namespace=namespace, session_id=session_id),
    )
    return _session(ctx, view)


@router.delete(
    "/v1/worker-sessions/{session_id}",
    status_code=204,
    responses=PROBLEMS,
    summary="Close a session; leases it still holds lapse",
)
def close(session_id: SessionId, credential: CurrentCredential, ctx: Ctx) -> Response:
    namespace = worker_namespace(credential)
    run_transaction(
        ctx.engine,
        functools.partial(sessions.close_session, namespace=namespace, session_id=session_id),
    )
    return Response(status_code=204)


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
        session=_session(ctx, view) if view is not None else None,
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
