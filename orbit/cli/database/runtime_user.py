"""The server's own database user, made by the migration hook (`orbit admin migrate
--runtime-database-url`): created when missing, granted least privilege
(orbit_store/access/grants.py), then checked as that user — a user that can still UPDATE or
DELETE audit rows fails the hook (seed §2: daily application rights cannot rewrite audit
history; invariant 8)."""

from __future__ import annotations

import sqlalchemy as sa
import typer
from sqlalchemy.engine import make_url

from orbit.cli.exits import ExitCode


def _fail(message: str, code: ExitCode = ExitCode.FAILED) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def grant_runtime_user(engine: sa.Engine, runtime_url: str, host: str) -> str:
    """Create and grant the user of ``runtime_url`` through ``engine`` (the migration user's);
    what to report. Raises typer.Exit saying what to change."""
    from orbit.database import open_engine
    from orbit_store.access.grants import (
        apply_grants,
        audit_rewrites_allowed,
        create_user_statement,
        grant_statements,
    )

    if engine.dialect.name == "sqlite":
        raise _fail(
            "--runtime-database-url is for MySQL/MariaDB; SQLite has no users", ExitCode.USAGE
        )
    runtime = make_url(runtime_url)
    user, database = runtime.username, engine.url.database
    if not user or not database or runtime.database != database:
        raise _fail(
            f"--runtime-database-url must name a user and the database {database!r} the "
            "migration runs on",
            ExitCode.USAGE,
        )
    if user == engine.url.username:
        raise _fail(
            f"--runtime-database-url names {user!r}, which is the migration user itself: grants "
            "only add rights, so audit rows would stay writable for the server. Give the server "
            "a user of its own (docs/operations/install.md#database-users)"
        )
    statements = [create_user_statement(user, runtime.password or "", host)]
    statements += grant_statements(database, user, host)
    with engine.begin() as conn:
        apply_grants(conn, statements)
    runtime_engine = open_engine(runtime_url, warn_durability=False)
    try:
        with runtime_engine.connect() as conn:
            allowed = audit_rewrites_allowed(conn)
    except sa.exc.OperationalError as exc:
        raise _fail(
            f"cannot connect as {user!r} with the server's URL ({type(exc.orig).__name__}): an "
            "existing user keeps its password — make the Secret's password match it"
        ) from exc
    finally:
        runtime_engine.dispose()
    if allowed:
        raise _fail(
            f"the server's user '{user}' can still {', '.join(allowed)} audit_log: it holds "
            f"broader privileges than Orbit grants (see SHOW GRANTS FOR '{user}'@'{host}'); "
            "revoke database-wide or global rights so audit history stays append-only"
        )
    return f"granted least privilege to '{user}'@'{host}': audit_log is append-only for it"
