"""The ASGI app: HTTP API, probes, metrics, and the engine loops running beside it."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import sqlalchemy as sa
from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from orbit import __version__, console
from orbit.api.concurrency.ready_watch import ReadyWatch
from orbit.api.concurrency.submit_groups import STARTS, TASKS, SubmitGroups
from orbit.api.concurrency.wakeups import Wakeups
from orbit.api.context import AppContext, ServerSettings
from orbit.api.routes import admin as routes_admin
from orbit.api.routes import attempt_batches as routes_attempt_batches
from orbit.api.routes import attempts as routes_attempts
from orbit.api.routes import audit as routes_audit
from orbit.api.routes import health as routes_health
from orbit.api.routes import identity as routes_identity
from orbit.api.routes import schedules as routes_schedules
from orbit.api.routes import subscriptions as routes_subscriptions
from orbit.api.routes import task_batches as routes_task_batches
from orbit.api.routes import tasks as routes_tasks
from orbit.api.routes import views as routes_views
from orbit.api.routes import workers as routes_workers
from orbit.api.routes import workflows as routes_workflows
from orbit.api.schemas import batches as schemas_batches
from orbit.api.transport import body_limit, limits, problems, request_ids
from orbit.api.transport.auth import TokenCache
from orbit.engines import (
    deliveries,
    promoter,
    reaper,
    scheduler,
    weave_inbox,
    weave_timers,
)
from orbit.engines.egress import EgressPolicy
from orbit.engines.liveness import ReplicaLiveness
from orbit.engines.loop import EngineLoop
from orbit.metrics import gauges
from orbit.metrics.server import Metrics
from orbit_store import replicas
from orbit_store.passes import ItemBackoff

log = logging.getLogger("orbit.server")

DESCRIPTION = """
Orbit's HTTP API. Authenticate with `Authorization: Bearer <token>`; every token is scoped to
one namespace and carries roles (`submit`, `work`, `review`, `admin`). Errors are RFC 9457
`application/problem+json` documents whose `type` is stable per kind of error.
"""


def _on_error(ctx: AppContext) -> Callable[[str], None]:
    def on_error(name: str) -> None:
        ctx.metrics.engine_errors.labels(name).inc()

    return on_error


def gauge_loop(ctx: AppContext) -> EngineLoop:
    """The loop refreshing the MySQL gauges this process's /metrics serves."""
    return EngineLoop(
        gauges.LOOP, ctx.metrics.refresh_gauges, ctx.settings.gauge_interval, _on_error(ctx)
    )


def engine_loops(ctx: AppContext) -> list[EngineLoop]:
    """Every background loop but the gauge loop: the work the engine does besides serving HTTP.
    With ``orbit server --workers N`` these run once per pod, in the supervising process
    (orbit/cli/processes/server_processes.py); otherwise beside the HTTP API."""
    on_error = _on_error(ctx)
    sender = deliveries.WebhookSender(
        ctx.engine,
        ctx.metrics,
        ctx.settings.webhook_secrets_dir,
        egress=EgressPolicy.parse(ctx.settings.webhook_allow),
    )
    timer_loop = EngineLoop(
        weave_timers.LOOP,
        lambda: weave_timers.timers_pass(
            ctx.engine,
            ctx.metrics,
            ctx.wakeups.notify,
            ctx.settings.weave_workers,
            max_payload_bytes=ctx.settings.max_payload_bytes,
        ),
        ctx.settings.timer_interval,
        on_error,
        next_wait=lambda report: report.next_due_in,  # wake for the next timer
    )
    ctx.wake_timers = timer_loop.wake  # timers set sooner by this process's starts and signals
    inbox_loop = EngineLoop(
        weave_inbox.LOOP,
        lambda: weave_inbox.inbox_pass(
            ctx.engine,
            ctx.metrics,
            ctx.wakeups.notify,
            ctx.settings.weave_workers,
            max_payload_bytes=ctx.settings.max_payload_bytes,
            wake_timers=timer_loop.wake,
        ),
        ctx.settings.inbox_interval,
        on_error,
    )
    ctx.wake_weave = inbox_loop.wake  # outcomes landing through this process's routes
    reaper_backoff = ItemBackoff()  # an item that fails backs off alone, across passes
    return [
        EngineLoop(
            reaper.LOOP,
            lambda: reaper.reaper_pass(
                ctx.engine, ctx.metrics, liveness=ctx.liveness, backoff=reaper_backoff
            ),
            ctx.settings.reaper_interval,
            on_error,
        ),
        # Beats on its own too: a long reaper pass must not read as this replica's silence.
        EngineLoop("liveness", ctx.liveness.beat, replicas.BEAT_SECONDS, on_error),
        EngineLoop(deliveries.LOOP, sender.run_pass, ctx.settings.delivery_interval, on_error),
        EngineLoop(
            scheduler.LOOP,
            lambda: scheduler.scheduler_pass(ctx.engine, ctx.metrics),
            ctx.settings.scheduler_interval,
            on_error,
            next_wait=lambda report: report.next_due_in,  # wake for the next instant
        ),
        inbox_loop,
        timer_loop,
        EngineLoop(
            promoter.LOOP,
            lambda: promoter.promoter_pass(ctx.engine, ctx.metrics),
            ctx.settings.reaper_interval,
            on_error,
        ),
    ]


def record_serving(ctx: AppContext) -> None:
    """Serving begins now (the socket is bound; uvicorn accepts once start-up returns): leases
    that ran out while no replica served get their grace from this moment. Called by whichever
    process runs the engine loops, just before they start."""
    log.info("database driver: %s", ctx.engine.dialect.driver)  # mysqldb is the C driver
    try:
        ctx.liveness.start()
    except sa.exc.SQLAlchemyError:
        log.warning("could not record this replica's start; the reaper will retry")


def create_app(engine: sa.Engine, settings: ServerSettings) -> FastAPI:
    metrics = Metrics(engine, settings.gauge_interval)
    ctx = AppContext(
        engine=engine,
        settings=settings,
        wakeups=Wakeups(),
        metrics=metrics,
        liveness=ReplicaLiveness(engine),
        submit_groups=SubmitGroups(
            engine,
            TASKS,
            in_flight=settings.submit_transactions,
            observe=metrics.batch_items.labels("submit_group").observe,
        ),
        start_groups=SubmitGroups(
            engine,
            STARTS,
            in_flight=settings.submit_transactions,
            observe=metrics.batch_items.labels("start_group").observe,
        ),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        ctx.wakeups.bind(asyncio.get_running_loop())
        loops = [gauge_loop(ctx)] if settings.run_engines or settings.run_gauges else []
        if settings.run_engines:
            record_serving(ctx)
            loops += engine_loops(ctx)
        for loop in loops:
            loop.start()
        watch = None
        if settings.wake_probe_interval > 0:
            ready = ReadyWatch(engine, ctx.wakeups, settings.wake_probe_interval, _on_error(ctx))
            watch = asyncio.create_task(ready.run(), name="orbit-ready-watch")
        yield
        if watch is not None:
            watch.cancel()
        for loop in loops:
            loop.stop()

    # /docs and /redoc load their assets from the package, not a CDN (air-gapped clusters).
    app = FastAPIOffline(
        title="Orbit",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        **_no_framework_telemetry(),
    )
    max_body_bytes = limits.body_limit(settings.max_payload_bytes)
    app.add_middleware(body_limit.BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(request_ids.RequestIds)  # added last: outermost of Orbit's middleware
    app.state.ctx = ctx
    _declare_worker_protocol(app)
    app.state.engine = engine
    app.state.token_cache = TokenCache()
    problems.install(app)
    # In the order of traffic: a request is matched against the routers in turn, so the ones
    # the task lifecycle calls most come first.
    docs = list(app.router.routes)  # FastAPI's own /openapi.json, /docs and /redoc
    for routes in (
        routes_tasks,  # submit: one request per task
        routes_workers,  # lease
        routes_attempts,  # start, heartbeat and completion of one attempt
        routes_attempt_batches,  # batched start and completion
        routes_task_batches,
        routes_health,
        routes_schedules,
        routes_workflows,
        routes_subscriptions,
        routes_audit,
        routes_views,
        routes_admin,
        routes_identity,
    ):
        app.include_router(routes.router)
    console.install(app)  # the web console under /ui, a client of the routes above
    app.router.routes[:] = [route for route in app.router.routes if route not in docs] + docs
    return app


def _no_framework_telemetry() -> dict[str, Any]:
    """FastAPI's own OpenTelemetry bridge (newer releases) asks the global providers whether
    anything is configured on every request — ~2% of the server's CPU in a profile, for nothing:
    Orbit's telemetry is its Prometheus metrics and structured logs (docs/operations). Off where
    the installed FastAPI has it."""
    if "telemetry" not in inspect.signature(FastAPI.__init__).parameters:
        return {}
    return {"telemetry": {"tracing": False, "metrics": False, "logs": False}}


def _declare_worker_protocol(app: FastAPI) -> None:
    """``info.x-worker-protocol`` in the OpenAPI document: which worker calls this server has
    (2: batched start and complete), so a client can choose before its first call."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        schema = build()
        schema["info"]["x-worker-protocol"] = schemas_batches.WORKER_PROTOCOL
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
