"""`orbit worker MODULE:WORKER`: run the SDK worker a module defines."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Annotated, Any

import typer

from orbit.cli.remote import Namespace, Server, Token


def load_worker(spec: str) -> Any:
    """Import ``module:attribute`` (the working directory is importable, as with uvicorn)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise typer.BadParameter(f"expected MODULE:WORKER, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise typer.BadParameter(f"cannot import {module_name!r}: {exc}") from exc
    worker = getattr(module, attribute, None)
    if worker is None or not hasattr(worker, "run"):
        raise typer.BadParameter(f"{spec!r} is not an orbit_sdk.Worker")
    return worker


def worker(
    ctx: typer.Context,
    spec: Annotated[str, typer.Argument(metavar="MODULE:WORKER", help="e.g. myapp.tasks:worker")],
    server: Server = None,
    token: Token = None,
    namespace: Namespace = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            envvar="ORBIT_WORKER_CONCURRENCY",
            min=1,
            help="Override the worker's concurrency (a WorkerPool sets it).",
        ),
    ] = None,
    queues: Annotated[
        str | None,
        typer.Option(
            envvar="ORBIT_WORKER_QUEUES",
            help="Override the queues, comma-separated (a WorkerPool sets them).",
        ),
    ] = None,
    handlers: Annotated[
        str | None,
        typer.Option(
            envvar="ORBIT_WORKER_HANDLERS",
            help="Serve only these registered handlers, comma-separated (a WorkerPool's "
            "spec.handlers); the server then grants this worker no other task types.",
        ),
    ] = None,
) -> None:
    """Run a worker: lease, run handlers, heartbeat; drain gracefully on SIGTERM.

    The token needs the work role. --server and --token (else ORBIT_SERVER and ORBIT_TOKEN, else
    the CLI context's) apply to a Worker that does not name its own; without --namespace the
    worker serves the token's namespace.

    Exit codes: 0 stopped by SIGTERM/Ctrl-C; 2 MODULE:WORKER cannot be loaded, or --server
    contradicts the server the Worker names; 4 no token anywhere."""
    from orbit.cli.exits import ExitCode
    from orbit.cli.remote import NO_TOKEN, fail, report, target
    from orbit_sdk import OrbitError

    where = target(server, token, namespace)
    # The SDK reads these when the Worker is constructed, i.e. while its module is imported.
    os.environ["ORBIT_SERVER"] = where.server
    if where.token:
        os.environ["ORBIT_TOKEN"] = where.token
    loaded = load_worker(spec)
    if not loaded.has_token:
        fail(f"{NO_TOKEN}; or name it in the Worker (Worker(token=…))", ExitCode.AUTH)
    source = ctx.get_parameter_source("server")  # typer's click: compare the enum by name
    flagged = source is not None and source.name == "COMMANDLINE"
    if flagged and server and loaded.server != server.rstrip("/"):
        raise typer.BadParameter(
            f"{spec} names its own server {loaded.server}; --server {server} would be ignored: "
            "leave out one of them",
            param_hint="--server",
        )
    if namespace:
        loaded.namespace = namespace
    if concurrency is not None:
        loaded.concurrency = concurrency
    if queues:
        loaded.queues = [q.strip() for q in queues.split(",") if q.strip()]
    if handlers is not None:
        try:
            loaded.serve_only([h.strip() for h in handlers.split(",") if h.strip()])
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--handlers") from exc
    try:
        loaded.run()
    except OrbitError as exc:
        report(exc, server=loaded.server)
