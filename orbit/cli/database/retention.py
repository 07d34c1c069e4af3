"""`orbit admin retention inventory`: what is older than a UTC cutoff, per data group, and how
much of it is protected. It counts; it never deletes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from orbit.cli import timeflags
from orbit.cli.database.options import DatabaseUrl, store_engine
from orbit.cli.output import (
    LocalTime,
    Output,
    OutputFormat,
    document,
    instant,
    plain,
    refuse_id,
    table,
)
from orbit.cli.timeflags import parse_utc

if TYPE_CHECKING:  # the store is imported inside the command: `orbit admin --help` stays light
    from orbit_store.retention import Inventory

app = typer.Typer(help="Retention: count what is old, delete nothing.", no_args_is_help=True)


@app.command()
def inventory(
    database_url: DatabaseUrl,
    before: Annotated[str, typer.Option(help=f"The cutoff: {timeflags.HELP}.")],
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="Only this namespace (default: all).")
    ] = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Count rows created before --before per data group, protected vs unprotected. Read-only:
    nothing is deleted, and the counts are not a licence to delete."""
    from orbit_store.retention import retention_inventory

    refuse_id(output, "orbit admin retention inventory")
    cutoff = parse_utc(before, "--before")
    engine = store_engine(database_url)
    try:
        with engine.connect() as conn:
            if conn.dialect.name != "sqlite":  # one snapshot for every count
                conn = conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                report = retention_inventory(conn, before=cutoff, namespace=namespace)
    finally:
        engine.dispose()
    if output.is_document:
        data = report.as_json() | {"before": report.before, "counted_at": report.counted_at}
        typer.echo(document(plain(data), output))
        return
    _print(report)


def _print(report: Inventory) -> None:
    scope = f"namespace {report.namespace}" if report.namespace else "all namespaces"
    typer.echo(f"Rows created before {instant(report.before)} ({scope}):")
    headers = ["GROUP", "TABLE", "OLDER", "PROTECTED", "UNPROTECTED", "PROTECTED BECAUSE"]
    cells = [
        [g.group, g.table, str(g.older), str(g.protected), str(g.unprotected), g.protected_because]
        for g in report.groups
    ]
    typer.echo(table(headers, cells))
    typer.echo("Inventory only: nothing was deleted.")
