"""Rows that mirror a declared resource (a Queue, a Quota, …): one helper makes such a row match
its spec — create it, update it, or leave it alone — so every reconcile is level-based and
reports whether anything changed."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from .errors import Conflict
from .ids import new_id

#: Sources of rows a person declared through the API or the CLI. Any other source is a
#: resource (a Kubernetes resource through the operator, a manifest through `orbit apply`),
#: which owns its row: the resource is what a resync makes the row match again.
API_SOURCES = ("api", "cli")


def require_own(what: str, kind: str, name: str, declared_by: str, source: str) -> None:
    """Refuse a change through the API or CLI (``source``) to a row a resource declared
    (``declared_by``): the resource would put its own spec back at the next resync."""
    if source in API_SOURCES and declared_by not in API_SOURCES:
        raise Conflict(
            f"{what} {name!r} is declared by a {kind} resource ({declared_by}); change "
            "or delete the resource (kubectl, `orbit apply`) instead"
        )


def lock_declared(
    conn: sa.Connection, table: sa.Table, namespace: str, name: str
) -> sa.Row[Any] | None:
    return conn.execute(
        sa.select(table)
        .where(table.c.namespace == namespace, table.c.name == name)
        .with_for_update()
    ).one_or_none()


def upsert_declared(
    conn: sa.Connection,
    table: sa.Table,
    namespace: str,
    name: str,
    values: dict[str, Any],
    now: dt.datetime,
    *,
    on_update: dict[str, Any] | None = None,
) -> bool:
    """Make row (namespace, name) hold ``values``; True when it was created or changed.
    ``on_update`` holds extra columns to set only when an existing row changes."""
    row = lock_declared(conn, table, namespace, name)
    if row is None:
        conn.execute(
            table.insert().values(
                id=new_id(),
                namespace=namespace,
                name=name,
                created_at=now,
                updated_at=now,
                **values,
            )
        )
        return True
    if all(getattr(row, key) == value for key, value in values.items()):
        return False
    conn.execute(
        table.update()
        .where(table.c.id == row.id)
        .values(updated_at=now, **values, **(on_update or {}))
    )
    return True
