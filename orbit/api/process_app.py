"""The app of one HTTP process of `orbit server --workers N` (uvicorn imports it by name).

uvicorn starts each process fresh (spawn), so the settings travel in the environment, written by
the supervising process (orbit/cli/processes/server_processes.py) before it starts them. The schema
and durability were checked there once; each process opens its own pool.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import threading
import time

from fastapi import FastAPI

from orbit.api.app import create_app
from orbit.api.context import ServerSettings
from orbit.database import open_engine
from orbit.logs import configure_logging

SETTINGS_ENV = "ORBIT_SERVER_PROCESS_SETTINGS"
#: The supervising process's pid, set by it before it spawns the HTTP processes.
SUPERVISOR_ENV = "ORBIT_SERVER_SUPERVISOR_PID"

log = logging.getLogger("orbit.server")


def settings_for_processes(settings: ServerSettings) -> str:
    """The JSON an HTTP process rebuilds its settings from: every loop but the gauge loop is
    the supervising process's."""
    http_only = dataclasses.replace(settings, run_engines=False, run_gauges=True)
    return json.dumps(dataclasses.asdict(http_only))


def http_app() -> FastAPI:
    configure_logging(os.environ.get("ORBIT_LOG_LEVEL", "INFO"))
    settings = ServerSettings(**json.loads(os.environ[SETTINGS_ENV]))
    watch_supervisor()
    engine = open_engine(
        settings.database_url,
        warn_durability=False,
        pool_size=settings.db_pool_size,
        io_timeout=settings.database_timeout,
    )
    return create_app(engine, settings)


def watch_supervisor() -> None:
    """Stop this HTTP process when its supervisor is gone. The supervisor's pid comes from the
    supervisor itself, not from getppid(): a process that loads the app after its supervisor
    died already has init as its parent and would otherwise serve on forever."""
    supervisor = int(os.environ.get(SUPERVISOR_ENV) or os.getppid())
    threading.Thread(
        target=_stop_with, args=(supervisor,), name="orbit-parent-watch", daemon=True
    ).start()


def _stop_with(supervisor: int) -> None:
    """Stop (gracefully, as on SIGTERM) when the supervising process is gone — killed without
    the chance to stop its HTTP processes — rather than serve on without the engine loops."""
    while os.getppid() == supervisor:
        time.sleep(1.0)
    log.warning("the supervising process is gone: stopping", extra={"supervisor": supervisor})
    os.kill(os.getpid(), signal.SIGTERM)
