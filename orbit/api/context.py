"""What every route needs from the running app: the engine, wake-ups, metrics, settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import sqlalchemy as sa
from fastapi import Depends, Request

from orbit.engines.liveness import ReplicaLiveness
from orbit.metrics import Metrics

from .limits import DEFAULT_MAX_PAYLOAD_BYTES
from .wakeups import Wakeups


@dataclass(frozen=True)
class ServerSettings:
    database_url: str
    host: str = "127.0.0.1"
    port: int = 8080
    reaper_interval: float = 1.0
    scheduler_interval: float = 1.0
    inbox_interval: float = 0.2
    timer_interval: float = 1.0
    weave_workers: int = 4  # threads consuming the inbox / firing timers side by side
    lease_poll_interval: float = 1.0
    heartbeat_interval: float = 10.0
    gauge_interval: float = 15.0  # backlog gauges on /metrics (orbit/engines/gauges.py)
    require_registered_pods: bool = False
    run_engines: bool = True
    delivery_interval: float = 1.0
    webhook_secrets_dir: str | None = None
    #: Largest params of a submission, or result + error of a completion (api/limits.py).
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES


@dataclass
class AppContext:
    engine: sa.Engine
    settings: ServerSettings
    wakeups: Wakeups
    metrics: Metrics
    liveness: ReplicaLiveness


def app_context(request: Request) -> AppContext:
    return request.app.state.ctx  # type: ignore[no-any-return]


Ctx = Annotated[AppContext, Depends(app_context)]
