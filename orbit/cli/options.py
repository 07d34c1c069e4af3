"""Options shared by several commands."""

from __future__ import annotations

import getpass
import socket
from typing import Annotated

import sqlalchemy as sa
import typer

from orbit.database import open_engine, require_compatible_schema
from orbit_store.errors import SchemaOutOfDate

DatabaseUrl = Annotated[
    str,
    typer.Option(
        "--database-url",
        envvar="ORBIT_DATABASE_URL",
        help="mysql+pymysql://USER:PASS@HOST:PORT/DB or sqlite:///PATH (env ORBIT_DATABASE_URL).",
        show_default=False,
    ),
]


def store_engine(database_url: str, *, warn_durability: bool = False) -> sa.Engine:
    """An engine on a reachable database whose schema matches this code, or a clear exit 2."""
    try:
        engine = open_engine(database_url, warn_durability=warn_durability)
    except sa.exc.OperationalError as exc:
        typer.echo(f"error: cannot reach the database: {exc.orig}", err=True)
        raise typer.Exit(2) from exc
    try:
        require_compatible_schema(engine)
    except (SchemaOutOfDate, sa.exc.OperationalError) as exc:
        engine.dispose()
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
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
