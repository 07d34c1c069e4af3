"""`orbit admin audit list|export|correct`: read the audit trail straight from the database, and
correct a row by appending a linked one (rows are never edited)."""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

import typer

from orbit.cli import timeflags
from orbit.cli.database.options import Actor, DatabaseUrl, default_actor, store_engine
from orbit.cli.exits import ExitCode
from orbit.cli.inputs import storable_json
from orbit.cli.output import Column, LocalTime, Output, OutputFormat, plain, print_list
from orbit.cli.timeflags import parse_utc

if TYPE_CHECKING:  # the store is imported inside each command: `orbit admin --help` stays light
    import sqlalchemy as sa

    from orbit_store.audit import AuditEntry, AuditQuery

app = typer.Typer(help="Read, export and correct the audit trail.", no_args_is_help=True)
PAGE = 500

AUDIT_COLUMNS = [
    Column("AT", lambda r: r["at"]),
    Column("NAMESPACE", lambda r: r["namespace"]),
    Column("ACTOR", lambda r: r["actor"]),
    Column(
        "ACTION",
        lambda r: r["action"] + (f" (corrects {r['corrects_id']})" if r["corrects_id"] else ""),
    ),
    Column("RESOURCE", lambda r: f"{r['resource_kind']}/{r['resource_id']}"),
    Column("VERSION", lambda r: r["resource_version"]),
    Column("REASON", lambda r: r["reason"]),
    Column("EVIDENCE", lambda r: r["evidence_ref"], wide=True),
    Column("ID", lambda r: r["id"], wide=True),
]

NamespaceFilter = Annotated[
    str | None, typer.Option("--namespace", "-n", help="Only this namespace (default: all).")
]
ActorFilter = Annotated[str | None, typer.Option("--by", help="Only rows by this actor.")]
ActionFilter = Annotated[
    str | None, typer.Option("--action", help="An action, or a family such as 'task.*'.")
]
ResourceFilter = Annotated[
    str | None,
    typer.Option("--resource", help="KIND or KIND/ID, e.g. task/0193… or Queue/checkout."),
]
Since = Annotated[
    str | None, typer.Option(help=f"From this instant (inclusive): {timeflags.HELP}.")
]
Until = Annotated[str | None, typer.Option(help=f"Before this instant: {timeflags.HELP}.")]


def _query(
    namespace: str | None,
    actor: str | None,
    action: str | None,
    resource: str | None,
    since: str | None,
    until: str | None,
    newest_first: bool,
) -> AuditQuery:
    from orbit_store.audit import AuditQuery

    kind, _, resource_id = (resource or "").partition("/")
    return AuditQuery(
        namespace=namespace,
        actor=actor,
        action=action,
        resource_kind=kind or None,
        resource_id=resource_id or None,
        since=parse_utc(since, "--since") if since else None,
        until=parse_utc(until, "--until") if until else None,
        newest_first=newest_first,
    )


def _rows(engine: sa.Engine, query: AuditQuery, limit: int | None) -> Iterator[AuditEntry]:
    """Every matching row, page by page, from ONE snapshot (REPEATABLE READ, read only): an
    export never mixes rows from before and after a concurrent change."""
    from orbit_store.audit import list_audit

    with engine.connect() as conn:
        if conn.dialect.name != "sqlite":
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            after: tuple[dt.datetime, str] | None = None
            left = limit
            while left is None or left > 0:
                size = PAGE if left is None else min(PAGE, left)
                page = list_audit(conn, query, limit=size, after=after)
                yield from page
                if len(page) < size:
                    return
                after = (page[-1].at, page[-1].id)
                left = None if left is None else left - len(page)


@app.command("list")
def list_(
    database_url: DatabaseUrl,
    namespace: NamespaceFilter = None,
    by: ActorFilter = None,
    action: ActionFilter = None,
    resource: ResourceFilter = None,
    since: Since = None,
    until: Until = None,
    limit: Annotated[int, typer.Option(help="At most this many rows (newest first).")] = 50,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Show audit rows, newest first."""
    query = _query(namespace, by, action, resource, since, until, newest_first=True)
    engine = store_engine(database_url)
    try:
        rows = list(_rows(engine, query, limit))
    finally:
        engine.dispose()
    items = [{**r.as_json(), "at": r.at} for r in rows]  # formatted where printed (output.py)
    print_list(items, AUDIT_COLUMNS, output, empty="no audit rows match")


@app.command()
def export(
    database_url: DatabaseUrl,
    format: Annotated[str, typer.Option("--format", help="jsonl (one row per line).")] = "jsonl",
    namespace: NamespaceFilter = None,
    by: ActorFilter = None,
    action: ActionFilter = None,
    resource: ResourceFilter = None,
    since: Since = None,
    until: Until = None,
) -> None:
    """Write every matching row, oldest first, to standard output (one consistent snapshot)."""
    if format != "jsonl":
        typer.echo("error: --format must be jsonl", err=True)
        raise typer.Exit(ExitCode.USAGE)
    query = _query(namespace, by, action, resource, since, until, newest_first=False)
    engine = store_engine(database_url)
    try:
        for row in _rows(engine, query, None):
            line = plain({**row.as_json(), "at": row.at})
            typer.echo(json.dumps(line, sort_keys=True, default=str))
    finally:
        engine.dispose()


@app.command()
def correct(
    database_url: DatabaseUrl,
    audit_id: Annotated[str, typer.Argument(help="The id of the row to correct.")],
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="The row's namespace.")],
    reason: Annotated[str, typer.Option(help="What was wrong, and what is right.")],
    evidence: Annotated[str | None, typer.Option(help="Where the evidence is.")] = None,
    correction: Annotated[
        str | None, typer.Option(help="JSON with the corrected values, if any.")
    ] = None,
    actor: Actor = None,
) -> None:
    """Append a row that corrects another (linked by corrects_id); nothing is edited."""
    from orbit_store.audit import correct_audit
    from orbit_store.db import run_transaction
    from orbit_store.errors import StoreError

    try:
        values = storable_json(correction) if correction else None
    except ValueError as exc:  # not JSON (JSONDecodeError), or JSON the database cannot store
        typer.echo(f"error: --correction is not valid JSON: {exc}", err=True)
        raise typer.Exit(ExitCode.USAGE) from exc
    engine = store_engine(database_url)
    try:
        new_id = run_transaction(
            engine,
            functools.partial(
                correct_audit,
                namespace=namespace,
                audit_id=audit_id,
                actor=actor or default_actor(),
                reason=reason,
                evidence_ref=evidence,
                correction=values,
            ),
        )
    except StoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(ExitCode.FAILED) from exc
    finally:
        engine.dispose()
    typer.echo(f"appended correction {new_id} (corrects {audit_id})")
