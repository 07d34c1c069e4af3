"""`orbit admin …`: schema migrations, database grants, verify, tokens, audit, retention, restore
fencing."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from orbit.cli.database import audit, restore_fence, retention, tokens
from orbit.cli.database.options import DatabaseUrl, resolve_database_url, store_engine
from orbit.cli.exits import ExitCode

# The store is imported inside each command: `orbit admin --help` stays light.
app = typer.Typer(help="Administer an Orbit database.", no_args_is_help=True)
app.add_typer(tokens.app, name="token")
app.add_typer(audit.app, name="audit")
app.add_typer(retention.app, name="retention")
app.command("restore-fence")(restore_fence.restore_fence)


def _out(text: str) -> None:
    typer.echo(text)


def _err(text: str) -> None:
    typer.echo(text, err=True)


@app.command()
def migrate(
    database_url: DatabaseUrl,
    check: Annotated[
        bool,
        typer.Option("--check", help="Only check: exit 1 when the database is behind the code."),
    ] = False,
    runtime_database_url: Annotated[
        str | None,
        typer.Option(
            envvar="ORBIT_RUNTIME_DATABASE_URL",
            help="The server's database URL (its own user): after migrating, create that user "
            "if missing, grant it least privilege and check it cannot UPDATE or DELETE audit "
            "rows (exit 1 if it can).",
            show_default=False,
        ),
    ] = None,
    runtime_user_host: Annotated[
        str,
        typer.Option(
            envvar="ORBIT_RUNTIME_USER_HOST", help="Host pattern of the server's user's grants."
        ),
    ] = "%",
) -> None:
    """Upgrade the database schema to this version of Orbit (idempotent)."""
    from orbit.database import open_engine, redacted
    from orbit_store.upgrade import migrate as store_migrate
    from orbit_store.upgrade.compatibility import Verdict

    database_url = resolve_database_url(database_url)
    engine = open_engine(database_url, io_timeout=None)  # DDL on a large table takes long
    try:
        current, head = store_migrate.current_revision(engine), store_migrate.head_revision()
        compatibility = store_migrate.compatibility(engine)
        if compatibility.verdict in (Verdict.NEWER_COMPATIBLE, Verdict.NEWER_INCOMPATIBLE):
            # A newer release migrated this database (e.g. this is a rollback): nothing to apply.
            if compatibility.compatible:
                _out(f"nothing to do: {compatibility.explain()}")
                return
            _err(f"error: {compatibility.explain()}")
            raise typer.Exit(ExitCode.FAILED)
        if check:
            if current == head:
                _out(f"schema is current (revision {head})")
                return
            _err(f"schema is behind: database at {current or 'none'}, code needs {head}")
            raise typer.Exit(ExitCode.FAILED)
        _out(f"migrating {redacted(database_url)} from {current or 'empty'} to {head} …")
        report = store_migrate.upgrade(engine)
        if report.changed:
            for revision in report.applied:
                _out(f"  applied revision {revision}")
            _out(f"schema is now at revision {report.after}")
        else:
            _out(f"nothing to do: schema already at revision {report.after}")
        if runtime_database_url:
            from orbit.cli.database.runtime_user import grant_runtime_user

            _out(grant_runtime_user(engine, runtime_database_url, runtime_user_host))
    finally:
        engine.dispose()


@app.command()
def grants(
    database_url: DatabaseUrl,
    app_user: Annotated[str, typer.Option("--app-user", help="The application's MySQL user.")],
    host: Annotated[str, typer.Option(help="Host pattern of the user.")] = "%",
    password: Annotated[
        str | None,
        typer.Option(
            envvar="ORBIT_APP_PASSWORD",
            help="Also create the user with this password (env ORBIT_APP_PASSWORD).",
        ),
    ] = None,
    print_only: Annotated[
        bool, typer.Option("--print", help="Print the statements (the default).")
    ] = False,
    apply: Annotated[bool, typer.Option("--apply", help="Run the statements.")] = False,
) -> None:
    """Grant the application user least privilege: audit_log is INSERT/SELECT only."""
    from orbit.database import open_engine
    from orbit_store.access.grants import apply_grants, create_user_statement, grant_statements

    engine = open_engine(resolve_database_url(database_url), warn_durability=False)
    try:
        if engine.dialect.name == "sqlite":
            _err("grants apply to MySQL/MariaDB only; SQLite has no users")
            raise typer.Exit(ExitCode.USAGE)
        database = engine.url.database
        if not database:
            _err("the --database-url must name a database")
            raise typer.Exit(ExitCode.USAGE)
        statements = grant_statements(database, app_user, host)
        if password is not None:
            statements.insert(0, create_user_statement(app_user, password, host))
        shown = [
            s
            if password is None
            else s.replace(
                create_user_statement(app_user, password, host),
                create_user_statement(app_user, "<password>", host),
            )
            for s in statements
        ]
        if print_only or not apply:
            for statement in shown:
                _out(f"{statement};")
        if apply:
            with engine.begin() as conn:
                apply_grants(conn, statements)
            _out(f"applied {len(statements)} statements for '{app_user}'@'{host}'")
    finally:
        engine.dispose()


@app.command()
def verify(
    database_url: DatabaseUrl,
    namespace: Annotated[
        str | None, typer.Option(help="Only check this namespace (default: all).")
    ] = None,
) -> None:
    """Scan for violations of the invariants; print a JSON summary; exit 0 only when clean."""
    from orbit_store.recovery.verify import verify as store_verify

    engine = store_engine(database_url)
    try:
        with engine.connect() as conn:
            report = store_verify(conn, namespace)
    finally:
        engine.dispose()
    typer.echo(json.dumps(report.as_dict(), indent=2))
    if not report.clean:
        raise typer.Exit(ExitCode.FAILED)
