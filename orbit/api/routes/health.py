"""Probes and metrics: /healthz (process up), /readyz (database reachable, schema within this
code's compatibility window), /metrics (Prometheus); and / , where a person starts."""

from __future__ import annotations

import sqlalchemy as sa
from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from orbit import __version__
from orbit.api.context import Ctx
from orbit.api.routes.tasks import PROBLEMS
from orbit.api.transport.problems import problem
from orbit_store.upgrade import migrate

router = APIRouter(tags=["health"])


#: What GET / points at.
LINKS = {
    "console": "/ui/",
    "docs": "/docs",
    "redoc": "/redoc",
    "openapi": "/openapi.json",
    "health": "/healthz",
    "ready": "/readyz",
    "metrics": "/metrics",
}


@router.get(
    "/", summary="Where to start: the console, the API docs, the probes", response_model=None
)
def root(request: Request) -> Response | dict[str, str]:
    """A browser is sent to the web console; anything else gets the links as JSON."""
    if "text/html" in request.headers.get("accept", ""):
        return RedirectResponse(LINKS["console"], status_code=307)
    return {"name": "Orbit", "version": __version__, **LINKS}


@router.get("/healthz", summary="The process is up")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="Database reachable and its schema within this code's compatibility window",
    response_model=None,
    responses={503: PROBLEMS[503]},
)
def readyz(request: Request, ctx: Ctx) -> Response | dict[str, str]:
    """Ready while the schema is this code's revision, or newer within its compatibility window
    (a rolling upgrade's migration has run, and only expanded the schema)."""
    try:
        compatibility = migrate.compatibility(ctx.engine)
    except sa.exc.SQLAlchemyError as exc:
        return problem(
            503, "unavailable", f"database unreachable: {exc.__class__.__name__}", request
        )
    if not compatibility.compatible:
        return problem(503, "unavailable", compatibility.explain(), request)
    return {
        "status": "ready",
        "schema": compatibility.database or "",
        "code": compatibility.code or "",
    }


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(ctx: Ctx) -> Response:
    return Response(generate_latest(ctx.metrics.exposition), media_type=CONTENT_TYPE_LATEST)
