"""The `orbit` command line."""

from __future__ import annotations

from typing import Annotated

import typer

from orbit import __version__
from orbit.logs import configure_logging

from . import admin, apply, dev, operator, server, tasks, worker, workflows

app = typer.Typer(
    name="orbit",
    help="Orbit: task scheduling and workflows for Kubernetes, with authoritative state in MySQL.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)
app.add_typer(admin.app, name="admin")
app.command("dev")(dev.dev)
app.command("apply")(apply.apply)
app.command("server")(server.server)
app.command("operator")(operator.operator)
app.command("worker")(worker.worker)
app.add_typer(tasks.app, name="task")
app.add_typer(workflows.app, name="workflow")


def _print_version(value: bool) -> None:
    if value:
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
) -> None:
    configure_logging(log_level)
