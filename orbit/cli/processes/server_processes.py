"""`orbit server --workers N`: N HTTP processes on one port, the engine loops run once per pod.

The supervising process binds the port, starts N uvicorn processes sharing the socket (the
kernel spreads connections among them), restarts one that dies, and on SIGTERM stops them all
(each finishes its requests in flight). It also runs the engine loops — reaper, promoter,
scheduler, deliveries, Weave — once for the pod: they would be safe N times over (every decision
is a conditional transaction, SKIP LOCKED), but each copy adds its queries every interval for
nothing. Each HTTP process runs only the gauge loop (its /metrics serves that snapshot) and its
own shared wake-up probe (orbit/api/concurrency/ready_watch.py): a task made READY by a submission
to one process, or by the engine loops here, reaches a lease request waiting in another process
through that probe, as it reaches one waiting in another replica (docs/operations/scaling.md).
One process per pod and more replicas is the default and the documented way to scale.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import TYPE_CHECKING

from orbit.cli.database.options import store_engine
from orbit.metrics.processes import prepare_directory, remove_directory

if TYPE_CHECKING:  # imported late: orbit.api.context loads prometheus_client
    from orbit.api.context import ServerSettings

log = logging.getLogger("orbit.server")

#: Warm connections of the supervising process (as many again may overflow): seven loops, each
#: one transaction at a time, the Weave loops up to ``weave_workers`` threads each.
ENGINE_POOL_SIZE = 10


def serve_processes(settings: ServerSettings, workers: int, sock: socket.socket) -> None:
    # Before anything imports prometheus_client: the mode is chosen at its import.
    metrics_dir, created = prepare_directory()
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from orbit.api.app import engine_loops, record_serving
    from orbit.api.concurrency.submit_groups import STARTS, TASKS, SubmitGroups
    from orbit.api.concurrency.wakeups import Wakeups
    from orbit.api.context import AppContext
    from orbit.api.process_app import SETTINGS_ENV, SUPERVISOR_ENV, settings_for_processes
    from orbit.engines.liveness import ReplicaLiveness
    from orbit.metrics.server import Metrics

    # The engine loops need few connections: a small pool, not an HTTP process's.
    engine = store_engine(
        settings.database_url,
        warn_durability=True,
        pool_size=ENGINE_POOL_SIZE,
        io_timeout=settings.database_timeout,
    )
    os.environ[SETTINGS_ENV] = settings_for_processes(settings)
    os.environ[SUPERVISOR_ENV] = str(os.getpid())
    os.environ["ORBIT_LOG_LEVEL"] = logging.getLevelName(logging.getLogger().level)
    config = uvicorn.Config(
        "orbit.api.process_app:http_app",
        factory=True,
        workers=workers,
        host=settings.host,
        port=settings.port,
        ws="none",  # Orbit serves no WebSocket
        log_config=None,
        access_log=False,
    )
    # No lease request waits in this process: what the loops make ready (Weave) is found by
    # the HTTP processes' probes.
    ctx = AppContext(
        engine,
        settings,
        Wakeups(),
        Metrics(engine, settings.gauge_interval),
        ReplicaLiveness(engine),
        # Unused: this process serves no request.
        SubmitGroups(engine, TASKS, in_flight=settings.submit_transactions),
        SubmitGroups(engine, STARTS, in_flight=settings.submit_transactions),
    )
    record_serving(ctx)
    loops = engine_loops(ctx)
    log.info(
        "serving with several processes",
        extra={"http_processes": workers, "metrics_dir": str(metrics_dir)},
    )
    for loop in loops:
        loop.start()
    try:
        Multiprocess(config, sockets=[sock]).run()
    finally:
        for loop in loops:
            loop.stop()
        engine.dispose()
        if created:
            remove_directory(metrics_dir)
