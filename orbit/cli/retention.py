"""`orbit admin retention inventory`: what is older than a UTC cutoff, per data group, and how
much of it is protected. It counts; it never deletes."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from orbit_store.retention import Inventory, retention_inventory

from .options import DatabaseUrl, store_engine
from .remote import console
from .timeflags import parse_utc

app = typer.Typer(help="Retention: count what is old, delete nothing.", no_args_is_help=True)
out = console()


@app.command()
def inventory(
    database_url: DatabaseUrl,
    before: Annotated[
        str, typer.Option(help="The UTC cutoff, ISO 8601 with Z: e.g. 2026-01-01T00:00:00Z.")
    ],
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="Only this namespace (default: all).")
    ] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="table or json")] = "table",
) -> None:
    """Count rows created before --before per data group, protected vs unprotected. Read-only:
    nothing is deleted, and the counts are not a licence to delete."""
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
    if output == "json":
        typer.echo(json.dumps(report.as_json(), indent=2))
        return
    _print(report)


def _print(report: Inventory) -> None:
    scope = f"namespace {report.namespace}" if report.namespace else "all namespaces"
    out.print(f"Rows created before {report.before.isoformat()}Z ({scope}):", markup=False)
    table = Table("GROUP", "TABLE", "OLDER", "PROTECTED", "UNPROTECTED", "PROTECTED BECAUSE")
    for g in report.groups:
        table.add_row(
            g.group,
            g.table,
            str(g.older),
            str(g.protected),
            str(g.unprotected),
            g.protected_because,
        )
    out.print(table)
    out.print("Inventory only: nothing was deleted.")
