"""`orbit admin token …`: create, list and revoke API tokens directly in the database."""

from __future__ import annotations

import functools
from typing import Annotated, Any

import typer

from orbit.cli.database.options import Actor, DatabaseUrl, default_actor, store_engine
from orbit.cli.exits import ExitCode
from orbit.cli.output import Column, LocalTime, Output, OutputFormat, print_list

app = typer.Typer(help="Create, list and revoke API tokens.", no_args_is_help=True)

TOKEN_COLUMNS = [
    Column("NAMESPACE", lambda r: r["namespace"]),
    Column("NAME", lambda r: r["name"]),
    Column("ROLES", lambda r: " ".join(r["roles"])),
    Column("SOURCE", lambda r: r["source"]),
    Column("CREATED_AT", lambda r: r["created_at"]),
    Column("REVOKED_AT", lambda r: r["revoked_at"]),
]


@app.command()
def create(
    database_url: DatabaseUrl,
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="The token's namespace.")],
    role: Annotated[
        list[str],
        typer.Option("--role", "-r", help="read, submit, work, review or admin (repeat)."),
    ],
    name: Annotated[
        str | None, typer.Option(help="A name to find it by (default: random).")
    ] = None,
    reason: Annotated[str, typer.Option(help="Why (recorded in the audit log).")] = "",
    actor: Actor = None,
) -> None:
    """Create a token; it is printed once and only its hash is stored (audited)."""
    from orbit_store.access.credentials import create_token
    from orbit_store.db import run_transaction
    from orbit_store.errors import StoreError
    from orbit_store.ids import new_id

    engine = store_engine(database_url)
    try:
        issued = run_transaction(
            engine,
            functools.partial(
                create_token,
                namespace=namespace,
                name=name or f"token-{new_id()[-12:]}",
                roles=role,
                source="cli",
                actor=actor or default_actor(),
                reason=reason,
            ),
        )
    except StoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(ExitCode.FAILED) from exc
    finally:
        engine.dispose()
    cred = issued.credential
    typer.echo(
        f"created token {cred.name!r} in namespace {cred.namespace!r} with roles "
        f"{' '.join(sorted(cred.roles))}; it is shown only now:",
        err=True,
    )
    typer.echo(issued.token)


@app.command("list")
def list_(
    database_url: DatabaseUrl,
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="Only this namespace.")
    ] = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """List tokens (never their secrets)."""
    from orbit_store.access.credentials import list_credentials

    engine = store_engine(database_url)
    try:
        with engine.connect() as conn:
            creds = list_credentials(conn, namespace)
    finally:
        engine.dispose()
    rows: list[dict[str, Any]] = [
        {
            "namespace": c.namespace,
            "name": c.name,
            "roles": sorted(r.value for r in c.roles),
            "source": c.source,
            "created_at": c.created_at,
            "revoked_at": c.revoked_at,
        }
        for c in creds
    ]
    print_list(rows, TOKEN_COLUMNS, output, empty="no tokens found")


@app.command()
def revoke(
    database_url: DatabaseUrl,
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="The token's namespace.")],
    name: Annotated[str, typer.Option(help="The token's name.")],
    reason: Annotated[str, typer.Option(help="Why (recorded in the audit log).")] = "",
    actor: Actor = None,
) -> None:
    """Revoke a token (servers stop accepting it within seconds; audited)."""
    from orbit_store.access.credentials import revoke_credential
    from orbit_store.db import run_transaction
    from orbit_store.errors import StoreError

    engine = store_engine(database_url)
    try:
        run_transaction(
            engine,
            functools.partial(
                revoke_credential,
                namespace=namespace,
                name=name,
                actor=actor or default_actor(),
                reason=reason,
            ),
        )
    except StoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(ExitCode.FAILED) from exc
    finally:
        engine.dispose()
    typer.echo(f"revoked token {name!r} in namespace {namespace!r}")
