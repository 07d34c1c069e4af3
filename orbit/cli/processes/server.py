"""`orbit server`: the HTTP API and the engine loops, in one process or, with ``--workers N``,
in N HTTP processes plus the supervising one running the loops (N replicas are safe too)."""

from __future__ import annotations

from typing import Annotated

import typer

from orbit.cli.database.options import ServerDatabaseUrl, WebhookAllow, allow_list, store_engine
from orbit.cli.processes.listen import MaxPayloadBytes, bind
from orbit_store.payload import DEFAULT_MAX_PAYLOAD_BYTES
from orbit_store.timeouts import IO_TIMEOUT_SECONDS


def server(
    database_url: ServerDatabaseUrl,
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
        float,
        typer.Option(
            help="Seconds between scheduler passes at most (firing due schedules); a pass also "
            "starts at the next instant."
        ),
    ] = 1.0,
    heartbeat_interval: Annotated[
        float, typer.Option(help="Seconds between worker heartbeats (told to workers).")
    ] = 10.0,
    delivery_interval: Annotated[
        float, typer.Option(help="Seconds between webhook sender passes.")
    ] = 1.0,
    webhook_secrets_dir: Annotated[
        str | None,
        typer.Option(
            envvar="ORBIT_WEBHOOK_SECRETS_DIR",
            help="Directory of webhook signing secrets: a folder per namespace holding a file "
            "per secret_ref, DIR/NAMESPACE/SECRET_REF (mount one Secret per namespace; env "
            "ORBIT_WEBHOOK_SECRETS_DIR).",
        ),
    ] = None,
    webhook_allow: WebhookAllow = None,
    gauge_interval: Annotated[
        float,
        typer.Option(
            min=0.1,
            help="Seconds between refreshes of the MySQL gauges served on /metrics.",
        ),
    ] = 15.0,
    max_payload_bytes: MaxPayloadBytes = DEFAULT_MAX_PAYLOAD_BYTES,
    workers: Annotated[
        str,
        typer.Option(
            envvar="ORBIT_SERVER_WORKERS",
            help="HTTP processes serving the port: a number, or 'auto' for one per CPU. The "
            "default, 1, is the documented way: add cores by adding replicas "
            "(docs/operations/scaling.md). With more than 1 the engine loops run once, in the "
            "supervising process.",
        ),
    ] = "1",
    lease_poll_interval: Annotated[
        float,
        typer.Option(
            min=0.05,
            help="Seconds between a waiting lease request's own checks for work (the fallback "
            "behind the shared wake-up probe).",
        ),
    ] = 1.0,
    wake_probe_interval: Annotated[
        float,
        typer.Option(
            min=0.0,
            help="Seconds between the shared probes that wake waiting lease requests for work "
            "made ready elsewhere (other processes and replicas, schedules, workflows, "
            "backoff); 0 turns the probe off.",
        ),
    ] = 0.075,
    db_pool_size: Annotated[
        int,
        typer.Option(
            envvar="ORBIT_DB_POOL_SIZE",
            min=1,
            help="Warm database connections per HTTP process; as many again may open under "
            "load. Keep processes x replicas x 2 x this below MySQL's max_connections.",
        ),
    ] = 20,
    database_timeout: Annotated[
        float,
        typer.Option(
            envvar="ORBIT_DATABASE_TIMEOUT",
            min=1.0,
            help="Seconds one database read or write may take before its connection is taken "
            "as lost and the transaction runs again on a new one (a half-open connection after "
            "a failover). Keep it under the shortest queue lease (docs/operations/database.md).",
        ),
    ] = IO_TIMEOUT_SECONDS,
    submit_transactions: Annotated[
        int,
        typer.Option(
            envvar="ORBIT_SUBMIT_TRANSACTIONS",
            min=1,
            help="Submission transactions each HTTP process runs at once; one-by-one "
            "submissions that arrive meanwhile wait and share the next (group commit).",
        ),
    ] = 1,
) -> None:
    """Serve the HTTP API, /metrics and probes, and run the engine loops."""
    from orbit.api.settings import ServerSettings

    processes = _process_count(workers)
    sock = bind(host, port, "server")
    settings = ServerSettings(
        database_url=database_url,
        host=host,
        port=port,
        reaper_interval=reaper_interval,
        scheduler_interval=scheduler_interval,
        heartbeat_interval=heartbeat_interval,
        gauge_interval=gauge_interval,
        require_registered_pods=require_registered_pods,
        delivery_interval=delivery_interval,
        webhook_secrets_dir=webhook_secrets_dir,
        webhook_allow=allow_list(webhook_allow),
        max_payload_bytes=max_payload_bytes,
        lease_poll_interval=lease_poll_interval,
        wake_probe_interval=wake_probe_interval,
        db_pool_size=db_pool_size,
        database_timeout=database_timeout,
        submit_transactions=submit_transactions,
    )
    if processes > 1:
        from orbit.cli.processes.server_processes import serve_processes

        serve_processes(settings, processes, sock)
        return
    import uvicorn

    from orbit.api.app import create_app

    engine = store_engine(
        database_url,
        warn_durability=True,
        pool_size=db_pool_size,
        io_timeout=database_timeout,
    )
    config = uvicorn.Config(
        create_app(engine, settings),
        host=host,
        port=port,
        ws="none",  # Orbit serves no WebSocket
        log_config=None,
        access_log=False,
    )
    uvicorn.Server(config).run(sockets=[sock])


def _process_count(workers: str) -> int:
    if workers == "auto":
        from orbit.cli.processes.cpus import usable_cpus

        return usable_cpus()
    if workers.isdigit() and int(workers) >= 1:
        return int(workers)
    raise typer.BadParameter(
        f"{workers!r} is neither a number of processes (1 or more) nor 'auto'",
        param_hint="'--workers'",
    )
