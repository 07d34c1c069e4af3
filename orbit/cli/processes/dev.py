"""`orbit dev`: the whole of Orbit in one process on an embedded SQLite file — the HTTP API, the
engine loops, a development token, and optionally workers — for trying Orbit and for tests."""

from __future__ import annotations

import functools
import os
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orbit.cli.database.options import WebhookAllow, allow_list
from orbit.cli.exits import ExitCode
from orbit.cli.processes.listen import MaxPayloadBytes, bind
from orbit.cli.processes.worker import load_worker
from orbit_store.payload import DEFAULT_MAX_PAYLOAD_BYTES

if TYPE_CHECKING:
    import uvicorn

    from orbit.api.concurrency.wakeups import Wakeups


DEV_CONTEXT = "dev"


def _say(text: str) -> None:
    typer.echo(text, err=True)


def ensure_dev_token(engine: Any, namespace: str, token_file: Path) -> str:
    """Reuse the token saved beside the database, or create one with every role."""
    from orbit_store.access.credentials import Role, authenticate, create_token
    from orbit_store.db import run_transaction
    from orbit_store.ids import new_id

    if token_file.exists():
        token = token_file.read_text().strip()
        with engine.connect() as conn:
            credential = authenticate(conn, token)
        if credential is not None and credential.namespace == namespace:
            return token
    issued = run_transaction(
        engine,
        functools.partial(
            create_token,
            namespace=namespace,
            name=f"dev-{new_id()[-12:]}",
            roles=[Role.ADMIN],
            source="dev",
            actor="orbit-dev",
            reason="development token for orbit dev",
        ),
    )
    token_file.write_text(issued.token + "\n")
    token_file.chmod(0o600)
    return issued.token


def _write_context(server: str, namespace: str, db: Path) -> None:
    """The context `dev` (made current): every orbit command in another shell finds this server,
    its token and, for admin commands and `orbit apply`, its database."""
    from orbit.cli import contexts

    context = contexts.Context(
        DEV_CONTEXT,
        server=server,
        token_file=str(token_file_for(db).resolve()),
        namespace=namespace,
        database_url=f"sqlite:///{db.resolve()}",
    )
    try:
        path = contexts.put(context, make_current=True)
    except (contexts.ContextError, OSError) as exc:  # the server still serves without one
        _say(f"orbit dev: no context written ({exc}); use the export line below")
        return
    _say(f"orbit dev: context {DEV_CONTEXT!r} is current ({path}): orbit commands in any shell use")
    _say("  this server, its token and its database (`orbit context` shows it)")


def token_file_for(db: Path) -> Path:
    return db.with_name(db.stem + "-token")


def dev(
    db: Annotated[Path, typer.Option("--db", help="SQLite file for Orbit's state.")] = Path(
        ".orbit/dev.db"
    ),
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    namespace: Annotated[
        str, typer.Option("--namespace", "-n", help="Namespace of the development token.")
    ] = "dev",
    manifests: Annotated[
        list[Path] | None,
        typer.Option("--manifests", "-m", help="Apply these manifest files/folders at start."),
    ] = None,
    worker: Annotated[
        list[str] | None,
        typer.Option(
            "--worker",
            "-w",
            metavar="MODULE:WORKER",
            help="Also run this SDK worker in-process (repeatable).",
        ),
    ] = None,
    max_payload_bytes: MaxPayloadBytes = DEFAULT_MAX_PAYLOAD_BYTES,
    webhook_allow: WebhookAllow = None,
) -> None:
    """Run Orbit locally: API + engines on SQLite, a dev token, optional in-process workers.

    Exit codes: 0 stopped by SIGTERM/Ctrl-C; 2 invalid --manifests or --worker; 5 the port is
    taken."""
    import uvicorn

    from orbit.api.app import create_app
    from orbit.api.context import ServerSettings
    from orbit.database import open_engine
    from orbit.reconcile.apply import apply_manifests
    from orbit.reconcile.manifests import ManifestError
    from orbit_store.upgrade import migrate

    sock = bind(host, port, "dev")  # first: a taken port is all the user needs to hear about
    db.parent.mkdir(parents=True, exist_ok=True)
    engine = open_engine(f"sqlite:///{db}")
    report = migrate.upgrade(engine)
    token = ensure_dev_token(engine, namespace, token_file_for(db))
    if manifests:
        try:
            lines = apply_manifests(engine, manifests, default_namespace=namespace)
        except ManifestError as exc:
            _say(f"orbit dev: manifests not applied:\n{exc}")
            raise typer.Exit(ExitCode.USAGE) from exc
        for line in lines:
            _say(f"  {line.ref} {line.action}")
    server = f"http://{host}:{port}"
    os.environ.update(ORBIT_SERVER=server, ORBIT_NAMESPACE=namespace, ORBIT_TOKEN=token)
    workers = [load_worker(spec) for spec in worker or []]
    _say(f"orbit dev: state in {db} (schema {report.after}); serving {server}")
    _write_context(server, namespace, db)
    _say("for the SDK and scripts, the same as environment variables:")
    print(
        f"export ORBIT_SERVER={server} ORBIT_NAMESPACE={namespace} ORBIT_TOKEN={token}", flush=True
    )
    # The token rides in the fragment, which browsers never send to a server: the login page
    # reads it, signs in and drops it from the address.
    _say(f"web console: {server}/ui/login#token={token}")
    settings = ServerSettings(
        database_url=str(engine.url),
        host=host,
        port=port,
        max_payload_bytes=max_payload_bytes,
        webhook_secrets_dir=os.environ.get("ORBIT_WEBHOOK_SECRETS_DIR"),
        webhook_allow=allow_list(webhook_allow, loopback=True),  # receivers on this machine
    )
    app = create_app(engine, settings)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=15,
    )
    api = uvicorn.Server(config)
    threads = _start_workers_once_serving(api, workers)
    stop = _drain_then_stop(api, app.state.ctx.wakeups, workers, threads)
    api.handle_exit = stop  # type: ignore[method-assign]
    try:
        api.run(sockets=[sock])
    finally:
        engine.dispose()
        _say("orbit dev: stopped")


def _start_workers_once_serving(api: uvicorn.Server, workers: list[Any]) -> list[threading.Thread]:
    """Workers start when the API answers, so their first session call does not fail."""
    threads: list[threading.Thread] = []

    def start() -> None:
        while not api.started and not api.should_exit:
            time.sleep(0.02)
        if not api.should_exit:
            threads.extend(w.run_in_thread() for w in workers)

    threading.Thread(target=start, name="orbit-dev-workers", daemon=True).start()
    return threads


def _drain_then_stop(
    api: uvicorn.Server, wakeups: Wakeups, workers: list[Any], threads: list[threading.Thread]
) -> Any:
    """Workers drain while the API is still up (they finish, hand back, close sessions); only
    then does the API stop, and the process exits 0. A second signal forces it.

    Long polls are answered at once ("nothing yet"), or a worker's 10 s poll would hold both
    its own drain and the server's shutdown: first the polls waiting when the drain begins
    (the stopping workers' own among them), then, as the API stops, every one."""
    stop_api = api.handle_exit
    draining = threading.Event()

    def handle(sig: int, frame: FrameType | None) -> None:
        if draining.is_set():
            stop_api(sig, frame)
            return
        draining.set()

        def drain() -> None:
            for w in workers:
                w.stop()
            wakeups.release()
            for t in list(threads):
                t.join(timeout=60)
            wakeups.stop()
            api.should_exit = True

        threading.Thread(target=drain, name="orbit-dev-drain", daemon=True).start()

    return handle
