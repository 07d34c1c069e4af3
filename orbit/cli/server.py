"""`orbit server`: the HTTP API and the engine loops in one process (N replicas are safe)."""

from __future__ import annotations

from typing import Annotated

import typer
import uvicorn

from orbit.api.app import create_app
from orbit.api.context import ServerSettings

from .options import DatabaseUrl, store_engine


def server(
    database_url: DatabaseUrl,
    host: Annotated[
        str, typer.Option(envvar="ORBIT_HOST", help="Address to listen on.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="ORBIT_PORT", help="Port to listen on.")] = 8080,
    require_registered_pods: Annotated[
        bool,
        typer.Option(
            envvar="ORBIT_REQUIRE_REGISTERED_PODS",
            help="Cluster mode: accept worker sessions only from registered pods.",
        ),
    ] = False,
    reaper_interval: Annotated[float, typer.Option(help="Seconds between reaper passes.")] = 1.0,
    scheduler_interval: Annotated[
        float, typer.Option(help="Seconds between scheduler passes (firing due schedules).")
    ] = 1.0,
    heartbeat_interval: Annotated[
        float, typer.Option(help="Seconds between worker heartbeats (told to workers).")
    ] = 10.0,
) -> None:
    """Serve the HTTP API, /metrics and probes, and run the engine loops."""
    engine = store_engine(database_url, warn_durability=True)
    settings = ServerSettings(
        database_url=database_url,
        host=host,
        port=port,
        reaper_interval=reaper_interval,
        scheduler_interval=scheduler_interval,
        heartbeat_interval=heartbeat_interval,
        require_registered_pods=require_registered_pods,
    )
    uvicorn.run(
        create_app(engine, settings), host=host, port=port, log_config=None, access_log=False
    )
