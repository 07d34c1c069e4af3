"""Rows that mirror a declared resource (a Queue, a Quota, …): one helper makes such a row match
its spec — create it, update it, or leave it alone — so every reconcile is level-based and
reports whether anything changed."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from .ids import new_id


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
