"""The namespace row, created by the first thing declared in a namespace (a queue, a quota, a
subscription, a schedule, a workflow definition, a credential).

Apart from the engines so that each can create it without importing another (pulse and
delivery imported each other through it).
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from orbit_store.db import insert_or_lock
from orbit_store.schema import namespaces


def ensure_namespace(conn: sa.Connection, namespace: str, now: dt.datetime) -> None:
    """Create ``namespace``'s row unless it exists (a racing creator's row is locked instead)."""
    exists = conn.execute(
        sa.select(namespaces.c.name).where(namespaces.c.name == namespace)
    ).one_or_none()
    if exists is None:
        insert_or_lock(conn, namespaces, {"name": namespace, "created_at": now})
