"""The `orbit` command line.

Command groups are registered by module path in ``LAZY_COMMANDS`` and imported only when used
(lazy.py), so client commands never load the server, the store or the operator.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from orbit.cli.lazy import LazyCommand, LazyGroup


class OrbitGroup(LazyGroup):
    lazy_commands = {
        "task": LazyCommand("orbit.cli.client.tasks:app"),
        "worker": LazyCommand("orbit.cli.processes.worker:worker"),
        "dev": LazyCommand("orbit.cli.processes.dev:dev"),
        "server": LazyCommand("orbit.cli.processes.server:server"),
        "apply": LazyCommand("orbit.cli.apply:apply"),
        "operator": LazyCommand("orbit.cli.processes.operator:operator"),
        "admin": LazyCommand("orbit.cli.database.admin:app"),
        "outbox": LazyCommand("orbit.cli.client.outbox:app"),
        "subscription": LazyCommand("orbit.cli.client.subscriptions:app"),
        "schedule": LazyCommand("orbit.cli.client.schedules:app"),
        "workflow": LazyCommand("orbit.cli.client.workflows:app"),
        "context": LazyCommand("orbit.cli.context:app"),
    }


app = typer.Typer(
    name="orbit",
    cls=OrbitGroup,
    help="Orbit: task scheduling and workflows for Kubernetes, with authoritative state in MySQL.",
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from orbit import __version__

        typer.echo(f"orbit {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
    log_level: Annotated[str, typer.Option(envvar="ORBIT_LOG_LEVEL", help="Log level.")] = "INFO",
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            envvar="ORBIT_CONTEXT",
            help="Use this CLI context instead of the current one (`orbit context list`).",
            show_default=False,
        ),
    ] = None,
) -> None:
    from orbit.logs import configure_logging

    configure_logging(log_level)
    if context:  # read where a command resolves its settings (contexts.active)
        os.environ["ORBIT_CONTEXT"] = context
