"""Options shared by the commands that open the database themselves."""

from __future__ import annotations

import getpass
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orbit.cli.exits import ExitCode
from orbit.cli.remote import fail
from orbit_store.timeouts import IO_TIMEOUT_SECONDS

if TYPE_CHECKING:
    import sqlalchemy as sa

_URL_FORMS = (
    "mysql://USER:PASS@HOST:PORT/DB (the C driver when installed, else PyMySQL; "
    "mysql+pymysql:// or mysql+mysqldb:// names one) or sqlite:///PATH"
)

#: For a server process: the database is always named, never taken from a CLI context.
ServerDatabaseUrl = Annotated[
    str,
    typer.Option(
        "--database-url", envvar="ORBIT_DATABASE_URL", help=f"{_URL_FORMS}.", show_default=False
    ),
]

#: For admin commands: default, the CLI context's database (`orbit dev` writes its SQLite file's).
DatabaseUrl = Annotated[
    str,
    typer.Option(
        "--database-url",
        envvar="ORBIT_DATABASE_URL",
        default_factory=str,  # "": the context's, resolved by database_url()
        help=f"{_URL_FORMS} (default: the context's).",
        show_default=False,
    ),
]


def resolve_database_url(given: str) -> str:
    """The flag's or environment's URL, else the CLI context's, else exit 2 saying how."""
    if given:
        return given
    from orbit.cli import contexts

    try:
        context = contexts.active()
    except contexts.ContextError as exc:
        fail(str(exc), ExitCode.USAGE)
    if context is None or not context.database_url:
        fail(
            "no database: pass --database-url or set ORBIT_DATABASE_URL (with `orbit dev` "
            "running, its context names its SQLite file; `orbit context` shows it)",
            ExitCode.USAGE,
        )
    return context.database_url


def context_namespace() -> str | None:
    from orbit.cli import contexts

    try:
        context = contexts.active()
    except contexts.ContextError as exc:
        fail(str(exc), ExitCode.USAGE)
    return context.namespace if context else None


def missing_sqlite_file(database_url: str) -> Path | None:
    """The SQLite file a URL names, when it does not exist (connecting would create it empty)."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    path = Path(url.database)
    return None if path.exists() else path


def store_engine(
    database_url: str,
    *,
    warn_durability: bool = False,
    pool_size: int | None = None,
    io_timeout: float | None = IO_TIMEOUT_SECONDS,
) -> sa.Engine:
    """An engine on a reachable database whose schema matches this code, or a clear exit 5
    (without creating an empty SQLite file where none was)."""
    import sqlalchemy as sa

    from orbit.database import open_engine, require_compatible_schema
    from orbit_store.errors import SchemaOutOfDate

    database_url = resolve_database_url(database_url)
    missing = missing_sqlite_file(database_url)
    if missing is not None:
        fail(
            f"no database at {missing}: create it with `orbit admin migrate --database-url "
            f"sqlite:///{missing}` (or use `orbit dev`)",
            ExitCode.UNAVAILABLE,
        )
    try:
        engine = open_engine(
            database_url,
            warn_durability=warn_durability,
            pool_size=pool_size,
            io_timeout=io_timeout,
        )
    except sa.exc.OperationalError as exc:
        fail(f"cannot reach the database: {exc.orig}", ExitCode.UNAVAILABLE)
    try:
        require_compatible_schema(engine)
    except (SchemaOutOfDate, sa.exc.OperationalError) as exc:
        engine.dispose()
        fail(str(exc), ExitCode.UNAVAILABLE)
    return engine


def default_actor() -> str:
    """Who an admin command acts as in the audit log when --actor is not given."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


Actor = Annotated[
    str | None,
    typer.Option(
        "--actor",
        envvar="ORBIT_ACTOR",
        help="Your identity in the audit log (env ORBIT_ACTOR; default USER@HOST).",
        show_default=False,
    ),
]


WebhookAllow = Annotated[
    list[str] | None,
    typer.Option(
        envvar="ORBIT_WEBHOOK_ALLOW",
        help="Let push deliveries reach this CIDR, address, host name or *.suffix although it "
        "is loopback, link-local, private or metadata (repeat; env: space-separated). "
        "Everything else that is not public is refused.",
    ),
]


def allow_list(entries: list[str] | None, *, loopback: bool = False) -> tuple[str, ...]:
    """The webhook allow-list as given (plus loopback for `orbit dev`), checked: a bad entry is
    a usage error naming it."""
    from orbit.engines.egress import LOOPBACK, EgressPolicy

    values = tuple(entries or ()) + (LOOPBACK if loopback else ())
    try:
        EgressPolicy.parse(values)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--webhook-allow'") from exc
    return values
