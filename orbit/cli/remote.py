"""Options for commands that talk to a server through the SDK."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated, TypeVar

import typer
from rich.console import Console

from orbit_sdk import Client, OrbitError

T = TypeVar("T")

Server = Annotated[
    str,
    typer.Option("--server", envvar="ORBIT_SERVER", help="Orbit server URL (env ORBIT_SERVER)."),
]
Token = Annotated[
    str,
    typer.Option(
        "--token", envvar="ORBIT_TOKEN", help="Bearer token (env ORBIT_TOKEN).", show_default=False
    ),
]
Namespace = Annotated[
    str,
    typer.Option(
        "--namespace", "-n", envvar="ORBIT_NAMESPACE", help="Namespace (env ORBIT_NAMESPACE)."
    ),
]
Output = Annotated[str, typer.Option("--output", "-o", help="table or json")]

DEFAULT_SERVER = "http://127.0.0.1:8080"


def console() -> Console:
    """A console for tables: full width when piped, so ids are never cut short."""
    return Console(width=None if sys.stdout.isatty() else 240)


def call_server(server: str, token: str, action: Callable[[Client], T]) -> T:
    """Run ``action`` with a client; an API error is one line on stderr and exit code 1."""
    try:
        with Client(server, token=token) as client:
            return action(client)
    except OrbitError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
