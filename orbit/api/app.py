"""The ASGI app: HTTP API, probes, metrics, and the engine loops running beside it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import sqlalchemy as sa
from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from orbit import __version__
from orbit.engines import (
    deliveries,
    gauges,
    promoter,
    reaper,
    scheduler,
    weave_inbox,
    weave_timers,
)
from orbit.engines.liveness import ReplicaLiveness
from orbit.engines.loop import EngineLoop
from orbit.metrics import Metrics
from orbit_store import replicas

from . import (
    body_limit,
    limits,
    problems,
    request_ids,
    routes_audit,
    routes_health,
    routes_identity,
    routes_schedules,
    routes_subscriptions,
    routes_tasks,
    routes_workers,
    routes_workflows,
)
from .auth import TokenCache
from .context import AppContext, ServerSettings
from .wakeups import Wakeups

log = logging.getLogger("orbit.server")

DESCRIPTION = """
Orbit's HTTP API. Authenticate with `Authorization: Bearer <token>`; every token is scoped to
one namespace and carries roles (`submit`, `work`, `review`, `admin`). Errors are RFC 9457
`application/problem+json` documents whose `type` is stable per kind of error.
"""


def engine_loops(ctx: AppContext) -> list[EngineLoop]:
    def on_error(name: str) -> None:
        ctx.metrics.engine_errors.labels(name).inc()

    sender = deliveries.WebhookSender(ctx.engine, ctx.metrics, ctx.settings.webhook_secrets_dir)
    return [
        EngineLoop(
            reaper.LOOP,
            lambda: reaper.reaper_pass(ctx.engine, ctx.metrics, liveness=ctx.liveness),
            ctx.settings.reaper_interval,
            on_error,
        ),
        # Beats on its own too: a long reaper pass must not read as this replica's silence.
        EngineLoop("liveness", ctx.liveness.beat, replicas.BEAT_SECONDS, on_error),
        EngineLoop(deliveries.LOOP, sender.run_pass, ctx.settings.delivery_interval, on_error),
        EngineLoop(gauges.LOOP, ctx.metrics.refresh_gauges, ctx.settings.gauge_interval, on_error),
        EngineLoop(
            scheduler.LOOP,
            lambda: scheduler.scheduler_pass(ctx.engine, ctx.metrics),
            ctx.settings.scheduler_interval,
            on_error,
        ),
        EngineLoop(
            weave_inbox.LOOP,
            lambda: weave_inbox.inbox_pass(
                ctx.engine, ctx.metrics, ctx.wakeups.notify, ctx.settings.weave_workers
            ),
            ctx.settings.inbox_interval,
            on_error,
        ),
        EngineLoop(
            weave_timers.LOOP,
            lambda: weave_timers.timers_pass(
                ctx.engine, ctx.metrics, ctx.wakeups.notify, ctx.settings.weave_workers
            ),
            ctx.settings.timer_interval,
            on_error,
        ),
        EngineLoop(
            promoter.LOOP,
            lambda: promoter.promoter_pass(ctx.engine, ctx.metrics),
            ctx.settings.reaper_interval,
            on_error,
        ),
    ]


def create_app(engine: sa.Engine, settings: ServerSettings) -> FastAPI:
    metrics = Metrics(engine, settings.gauge_interval)
    ctx = AppContext(
        engine=engine,
        settings=settings,
        wakeups=Wakeups(),
        metrics=metrics,
        liveness=ReplicaLiveness(engine),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        ctx.wakeups.bind(asyncio.get_running_loop())
        loops = engine_loops(ctx) if settings.run_engines else []
        if loops:
            # Serving begins now (the socket is bound; uvicorn accepts once startup returns):
            # leases that ran out while no replica served get their grace from this moment.
            try:
                ctx.liveness.start()
            except sa.exc.SQLAlchemyError:
                log.warning("could not record this replica's start; the reaper will retry")
        for loop in loops:
            loop.start()
        yield
        for loop in loops:
            loop.stop()

    # /docs and /redoc load their assets from the package, not a CDN (air-gapped clusters).
    app = FastAPIOffline(
        title="Orbit",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.add_middleware(
        body_limit.BodyLimit, max_bytes=limits.body_limit(settings.max_payload_bytes)
    )
    app.add_middleware(request_ids.RequestIds)  # outermost: every answer carries the id
    app.state.ctx = ctx
    app.state.engine = engine
    app.state.token_cache = TokenCache()
    problems.install(app)
    app.include_router(routes_tasks.router)
    app.include_router(routes_workers.router)
    app.include_router(routes_schedules.router)
    app.include_router(routes_workflows.router)
    app.include_router(routes_health.router)
    app.include_router(routes_subscriptions.router)
    app.include_router(routes_audit.router)
    app.include_router(routes_identity.router)
    return app
