"""The worker protocol (ORBIT.md §6): sessions → lease (long-poll) → start → heartbeat →
complete. Every call is scoped to the token's namespace; attempts need their secret token.

Here: sessions (register, drain, close) and the lease. The calls for attempts a worker holds
are ``attempts`` (one at a time) and ``attempt_batches``.

The lease is an ``async`` route that sends only its transactions to a thread: a worker makes it
once per cycle, and a plain ``def`` route costs two thread hand-offs."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import time
from typing import Annotated

import anyio
from fastapi import APIRouter, Path, Request, Response

from orbit.api.context import AppContext, Ctx
from orbit.api.reports import ON_LEASE, answer_reports, check_reports
from orbit.api.routes.tasks import PROBLEMS
from orbit.api.schemas import workers as schemas
from orbit.api.transport.auth import CurrentCredential, authorize
from orbit_store.access.credentials import Credential, Role
from orbit_store.db import run_transaction
from orbit_store.pulse import cycle, service
from orbit_store.pulse.claim.claim import Claimant, claim_tasks, require_active_session
from orbit_store.pulse.claim.probe import ClaimPreview, preview_claim
from orbit_store.pulse.leases.unreceived import hand_back_unreceived
from orbit_store.pulse.model import LeaseGrant
from orbit_store.pulse.workers import sessions

router = APIRouter(tags=["workers"])

SessionId = Annotated[str, Path(min_length=1, max_length=36)]


def worker_namespace(credential: Credential) -> str:
    authorize(credential, credential.namespace, Role.WORK)
    return credential.namespace


def session_body(ctx: AppContext, view: sessions.WorkerSession) -> schemas.Session:
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
    return session_body(ctx, view)


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
    return session_body(ctx, view)


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
