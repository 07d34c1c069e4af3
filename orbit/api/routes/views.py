"""Read-only views of a namespace for people: ``GET /v1/namespaces/{ns}/overview`` (queues,
throughput, what needs attention) and ``GET …/worker-sessions`` (who is connected). The web
console's Overview and Workers pages read these; they need no role beyond reading."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from orbit.api.context import Ctx
from orbit.api.routes.tasks import PROBLEMS, Namespace
from orbit.api.schemas import views as wire
from orbit.api.transport.auth import READ_ROLES, CurrentCredential, authorize
from orbit_store.overview import namespace_overview
from orbit_store.pulse.workers.worker_views import MAX_ENDED, list_sessions

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["views"])


@router.get(
    "/overview",
    response_model=wire.Overview,
    responses=PROBLEMS,
    summary="The namespace at a glance: queues, outcomes per minute, what needs attention",
)
def overview(namespace: Namespace, credential: CurrentCredential, ctx: Ctx) -> wire.Overview:
    """Read from MySQL on each call (a few index range scans): poll it every few seconds at
    most. Prometheus has the same numbers as gauges where it is at hand."""
    authorize(credential, namespace, *READ_ROLES)
    with ctx.engine.connect() as conn:
        view = namespace_overview(conn, namespace)
    return wire.Overview.model_validate(
        {**view.__dict__, "queues": [q.__dict__ for q in view.queues]}
    )


@router.get(
    "/worker-sessions",
    response_model=wire.WorkerSessionList,
    responses=PROBLEMS,
    summary="Worker sessions: live ones, then recently ended",
)
def worker_sessions(
    namespace: Namespace,
    credential: CurrentCredential,
    ctx: Ctx,
    ended: Annotated[
        int, Query(ge=0, le=MAX_ENDED, description="How many ended sessions to add.")
    ] = 20,
) -> wire.WorkerSessionList:
    authorize(credential, namespace, *READ_ROLES)
    with ctx.engine.connect() as conn:
        at, sessions = list_sessions(conn, namespace, ended=ended)
    return wire.WorkerSessionList(
        at=at, items=[wire.WorkerSession.model_validate(s.__dict__) for s in sessions]
    )
