"""`orbit outbox relay`: send the pending submissions your application wrote to its own
database (``orbit_sdk.outbox``) to Orbit, each under its stored idempotency key."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from orbit.cli.exits import ExitCode
from orbit.cli.remote import Server, Token, target

app = typer.Typer(help="The client-side transactional outbox.", no_args_is_help=True)


@app.command()
def relay(
    database_url: Annotated[
        str,
        typer.Option(
            "--database-url",
            envvar="ORBIT_OUTBOX_DATABASE_URL",
            help="Your application's database (SQLAlchemy URL) holding the outbox table "
            "(env ORBIT_OUTBOX_DATABASE_URL).",
            show_default=False,
        ),
    ],
    table: Annotated[str, typer.Option(help="The outbox table's name.")] = "orbit_outbox",
    batch: Annotated[int, typer.Option(min=1, max=500, help="Rows leased per round.")] = 50,
    lease_seconds: Annotated[
        float, typer.Option(min=1, help="How long a leased row is left to this relay.")
    ] = 60,
    max_attempts: Annotated[
        int, typer.Option(min=1, help="Tries per row before it is PARKED.")
    ] = 20,
    until_idle: Annotated[
        bool, typer.Option("--until-idle", help="Exit once nothing is due (cron, tests).")
    ] = False,
    max_seconds: Annotated[
        float | None, typer.Option(help="Stop after this long (a time budget).")
    ] = None,
    server: Server = None,
    token: Token = None,
) -> None:
    """Relay pending outbox rows: lease, submit outside any transaction, mark delivered with the
    task id. Safe to run several at once and to kill at any moment: a row sent but not marked is
    sent again later under the same key and Orbit answers with the original task."""
    import sqlalchemy as sa

    from orbit_sdk import Client
    from orbit_sdk.outbox import Relay, RelayPolicy, outbox_table

    where = target(server, token, None)
    engine = sa.create_engine(database_url)
    policy = RelayPolicy(batch=batch, lease_seconds=lease_seconds, max_attempts=max_attempts)
    try:
        with Client(where.server, token=where.token) as client:
            outbox = outbox_table(sa.MetaData(), table)
            report = Relay(engine, outbox, client, policy).run(
                until_idle=until_idle, max_seconds=max_seconds
            )
    except sa.exc.OperationalError as exc:
        typer.echo(f"error: cannot use the outbox database: {exc.orig}", err=True)
        raise typer.Exit(ExitCode.UNAVAILABLE) from exc
    finally:
        engine.dispose()
    typer.echo(json.dumps(report.__dict__))
