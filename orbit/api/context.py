"""What every route needs from the running app: the engine, wake-ups, metrics, settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated

import sqlalchemy as sa
from fastapi import Depends, Request

from orbit.api.concurrency.claimants import Claimants
from orbit.api.concurrency.submit_groups import SubmitGroups
from orbit.api.concurrency.wakeups import Wakeups
from orbit.api.settings import ServerSettings
from orbit.engines.liveness import ReplicaLiveness
from orbit.metrics.server import Metrics
from orbit_store.pulse.model import SubmitResult
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.weave.start import StartRequest
from orbit_store.weave.start_group import Started

__all__ = ["AppContext", "Ctx", "ServerSettings", "app_context"]


@dataclass
class AppContext:
    engine: sa.Engine
    settings: ServerSettings
    wakeups: Wakeups
    metrics: Metrics
    liveness: ReplicaLiveness
    submit_groups: SubmitGroups[SubmitRequest, SubmitResult]
    start_groups: SubmitGroups[StartRequest, Started]
    claimants: Claimants = field(default_factory=Claimants)
    #: Wakes this process's Weave inbox loop (a workflow may move on); a no-op in an HTTP
    #: process of `orbit server --workers N`, whose loops run in the supervising process.
    wake_weave: Callable[[], None] = lambda: None
    #: Wakes this process's Weave timer loop (a workflow's next timer comes sooner than the
    #: loop's wait); a no-op where wake_weave is.
    wake_timers: Callable[[], None] = lambda: None


async def app_context(request: Request) -> AppContext:
    """Async: a sync dependency would cost a thread hand-off per request."""
    return request.app.state.ctx  # type: ignore[no-any-return]


Ctx = Annotated[AppContext, Depends(app_context)]
