"""`orbit worker MODULE:WORKER`: run the SDK worker a module defines."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Annotated, Any

import typer

from .remote import Namespace, Server, Token


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
    spec: Annotated[str, typer.Argument(metavar="MODULE:WORKER", help="e.g. myapp.tasks:worker")],
    server: Server = "",
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

    The token needs the work role. --server and --token (or ORBIT_SERVER and ORBIT_TOKEN) apply
    to a Worker that does not name its own; without --namespace the worker serves the token's
    namespace."""
    from orbit_sdk import OrbitError

    from .exits import ExitCode
    from .remote import fail, report

    if not (token or os.environ.get("ORBIT_TOKEN")):
        fail(
            "no token: pass --token or set ORBIT_TOKEN (a token with the work role)", ExitCode.AUTH
        )
    # The SDK reads these when the Worker is constructed, i.e. while its module is imported.
    os.environ.update({k: v for k, v in (("ORBIT_SERVER", server), ("ORBIT_TOKEN", token)) if v})
    loaded = load_worker(spec)
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
