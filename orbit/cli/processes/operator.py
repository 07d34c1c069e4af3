"""`orbit operator`: the Kopf operator (``orbit_operator``) with Orbit's options and JSON logs.

The same operator runs as ``kopf run -m orbit_operator -A`` with the options given as
environment variables (docs/operations/operator.md).
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from orbit.cli.database.options import ServerDatabaseUrl

DEFAULT_SERVER_URL = "http://orbit.orbit-system:8080"


def operator(
    database_url: ServerDatabaseUrl,
    server_url: Annotated[
        str,
        typer.Option(envvar="ORBIT_SERVER_URL", help="The Orbit server URL worker pods are given."),
    ] = DEFAULT_SERVER_URL,
    namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--namespace",
            "-n",
            help="Serve only this namespace (repeatable; globs allowed). Default: all.",
        ),
    ] = None,
    resync_seconds: Annotated[
        float,
        typer.Option(
            envvar="ORBIT_OPERATOR_RESYNC_SECONDS",
            min=0.1,
            help="Re-reconcile every resource this often (repairs drift, refreshes counts).",
        ),
    ] = 60.0,
    autoscale_seconds: Annotated[
        float,
        typer.Option(
            envvar="ORBIT_OPERATOR_AUTOSCALE_SECONDS",
            min=0.1,
            help="Re-size WorkerPools from the backlog this often.",
        ),
    ] = 15.0,
    retry_seconds: Annotated[
        float,
        typer.Option(
            envvar="ORBIT_OPERATOR_RETRY_SECONDS",
            min=0.1,
            help="Retry delay while the database is unavailable; the longest wait between "
            "tries of a resource waiting for its Queue.",
        ),
    ] = 10.0,
    metrics_port: Annotated[
        int,
        typer.Option(
            envvar="ORBIT_OPERATOR_METRICS_PORT",
            min=0,
            max=65535,
            help="Port of /metrics (0 turns it off).",
        ),
    ] = 9090,
    metrics_host: Annotated[
        str, typer.Option(envvar="ORBIT_OPERATOR_METRICS_HOST", help="Address of /metrics.")
    ] = "0.0.0.0",
    liveness: Annotated[
        str | None,
        typer.Option(
            envvar="ORBIT_OPERATOR_LIVENESS",
            help="Serve Kopf's liveness probe at this URL, e.g. http://0.0.0.0:8081/healthz.",
        ),
    ] = None,
) -> None:
    """Reconcile Orbit's custom resources into MySQL, run WorkerPools, register worker pods."""
    # The operator reads its configuration from the environment when its handlers are
    # declared (Kopf fixes timer intervals then), so set it before importing them.
    os.environ.update(
        {
            "ORBIT_DATABASE_URL": database_url,
            "ORBIT_SERVER_URL": server_url,
            "ORBIT_OPERATOR_RESYNC_SECONDS": str(resync_seconds),
            "ORBIT_OPERATOR_AUTOSCALE_SECONDS": str(autoscale_seconds),
            "ORBIT_OPERATOR_RETRY_SECONDS": str(retry_seconds),
            "ORBIT_OPERATOR_METRICS_PORT": str(metrics_port),
            "ORBIT_OPERATOR_METRICS_HOST": metrics_host,
        }
    )
    import kopf
    from orbit_operator.logs import use_json_logs  # imports (declares) every handler

    use_json_logs()
    kopf.run(
        clusterwide=not namespace,
        namespaces=namespace or (),
        # One replica, no peering: Kopf's peering pauses every replica of equal priority, and
        # the chart runs exactly one operator with the Recreate strategy instead
        # (docs/operations/operator.md#one-replica).
        standalone=True,
        liveness_endpoint=liveness,
    )
