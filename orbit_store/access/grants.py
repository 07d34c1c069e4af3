"""Least-privilege grants for the application's database user (seed §2).

The application may read and write runtime tables but may only INSERT and SELECT ``audit_log``:
daily application rights cannot rewrite audit history; corrections are new linked rows.
"""

from __future__ import annotations

import re

import sqlalchemy as sa

from ..schema import audit_log, metadata

_USER = re.compile(r"^[A-Za-z0-9_.-]{1,80}$")
_HOST = re.compile(r"^[A-Za-z0-9_.%:-]{1,255}$")

APPEND_ONLY_TABLES = (audit_log.name,)


def _quote_user(user: str, host: str) -> str:
    if not _USER.match(user):
        raise ValueError(f"invalid MySQL user name {user!r}: use letters, digits, '_', '.', '-'")
    if not _HOST.match(host):
        raise ValueError(f"invalid MySQL host pattern {host!r}")
    return f"'{user}'@'{host}'"


def grant_statements(database: str, user: str, host: str = "%") -> list[str]:
    """The GRANT statements for ``user`` on every Orbit table of ``database``."""
    if not re.match(r"^[A-Za-z0-9_$]{1,64}$", database):
        raise ValueError(f"invalid database name {database!r}")
    who = _quote_user(user, host)
    statements = []
    for table in sorted(metadata.tables):
        rights = (
            "SELECT, INSERT" if table in APPEND_ONLY_TABLES else "SELECT, INSERT, UPDATE, DELETE"
        )
        statements.append(f"GRANT {rights} ON `{database}`.`{table}` TO {who}")
    statements.append(f"GRANT SELECT ON `{database}`.`alembic_version` TO {who}")
    return statements


def create_user_statement(user: str, password: str, host: str = "%") -> str:
    escaped = password.replace("\\", "\\\\").replace("'", "\\'")
    return f"CREATE USER IF NOT EXISTS {_quote_user(user, host)} IDENTIFIED BY '{escaped}'"


def apply_grants(conn: sa.Connection, statements: list[str]) -> None:
    """Run the statements (one DDL each; MySQL commits GRANTs implicitly)."""
    # The raw DBAPI cursor with no parameters: host patterns contain '%', which a
    # parameter-formatting layer would try to interpret.
    cursor = conn.connection.cursor()
    try:
        for statement in statements:
            cursor.execute(statement)
    finally:
        cursor.close()


#: MySQL/MariaDB "command denied to user for table".
_DENIED = 1142


def audit_rewrites_allowed(conn: sa.Connection) -> list[str]:
    """The statements among UPDATE and DELETE that this connection's user may run on
    ``audit_log`` — none, if audit history is append-only for it. Each probe matches no row
    and is rolled back; the database checks the privilege before it looks at any row."""
    probes = {
        "UPDATE": audit_log.update().where(sa.false()).values(reason=audit_log.c.reason),
        "DELETE": audit_log.delete().where(sa.false()),
    }
    allowed = []
    for verb, statement in probes.items():
        try:
            with conn.begin():
                conn.execute(statement)
                allowed.append(verb)
                raise _Probed
        except _Probed:
            pass
        except sa.exc.OperationalError as exc:
            if getattr(exc.orig, "args", (None,))[0] != _DENIED:
                raise
    return allowed


class _Probed(Exception):
    """Rolls a probe's transaction back."""
