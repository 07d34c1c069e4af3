"""The ASGI app: HTTP API, probes, metrics, and the engine loops running beside it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import sqlalchemy as sa
from fastapi import FastAPI

from orbit import __version__
from orbit.engines.loop import EngineLoop
from orbit.engines.promoter import promoter_pass
from orbit.engines.reaper import reaper_pass
from orbit.metrics import Metrics

from . import problems, routes_health, routes_tasks, routes_workers
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

    return [
        EngineLoop(
            "reaper",
            lambda: reaper_pass(ctx.engine, ctx.metrics),
            ctx.settings.reaper_interval,
            on_error,
        ),
        EngineLoop(
            "promoter",
            lambda: promoter_pass(ctx.engine, ctx.metrics),
            ctx.settings.reaper_interval,
            on_error,
        ),
    ]


def create_app(engine: sa.Engine, settings: ServerSettings) -> FastAPI:
    ctx = AppContext(engine=engine, settings=settings, wakeups=Wakeups(), metrics=Metrics(engine))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        ctx.wakeups.bind(asyncio.get_running_loop())
        loops = engine_loops(ctx) if settings.run_engines else []
        for loop in loops:
            loop.start()
        yield
        for loop in loops:
            loop.stop()

    app = FastAPI(title="Orbit", version=__version__, description=DESCRIPTION, lifespan=lifespan)
    app.state.ctx = ctx
    app.state.engine = engine
    app.state.token_cache = TokenCache()
    problems.install(app)
    app.include_router(routes_tasks.router)
    app.include_router(routes_workers.router)
    app.include_router(routes_health.router)
    return app
