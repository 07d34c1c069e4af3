"""Declaring quotas (the Quota resource): create/update to match a spec, delete."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.declared import lock_declared, upsert_declared
from orbit_store.schema import quotas

from .queues import ensure_namespace
from .quota import WHOLE_NAMESPACE


@dataclass(frozen=True)
class QuotaSpec:
    name: str
    queue: str = WHOLE_NAMESPACE
    max_waiting: int | None = None
    max_running: int | None = None
    submit_rate_per_second: float | None = None
    submit_burst: int | None = None


def put_quota(
    conn: sa.Connection,
    namespace: str,
    spec: QuotaSpec,
    *,
    source: str = "api",
    spec_generation: int = 1,
) -> bool:
    """Create or update the quota to match ``spec``; True when anything changed. Changing the
    rate resets its token bucket."""
    now = db_now(conn)
    ensure_namespace(conn, namespace, now)
    values = {
        "queue": spec.queue,
        "max_waiting": spec.max_waiting,
        "max_running": spec.max_running,
        "submit_rate_per_second": spec.submit_rate_per_second,
        "submit_burst": spec.submit_burst,
        "source": source,
        "spec_generation": spec_generation,
    }
    row = lock_declared(conn, quotas, namespace, spec.name)
    rate_changed = row is not None and (row.submit_rate_per_second, row.submit_burst) != (
        spec.submit_rate_per_second,
        spec.submit_burst,
    )
    # A new rate starts with a full token bucket.
    reset = {"rate_tokens": None, "rate_refilled_at": None} if rate_changed else None
    return upsert_declared(conn, quotas, namespace, spec.name, values, now, on_update=reset)


def delete_quota(conn: sa.Connection, namespace: str, name: str) -> bool:
    deleted = conn.execute(
        quotas.delete().where(quotas.c.namespace == namespace, quotas.c.name == name)
    )
    return deleted.rowcount == 1


def list_quotas(conn: sa.Connection, namespace: str | None = None) -> list[tuple[str, str, str]]:
    """(namespace, name, source) of every declared quota."""
    query = sa.select(quotas.c.namespace, quotas.c.name, quotas.c.source)
    if namespace is not None:
        query = query.where(quotas.c.namespace == namespace)
    return [(r.namespace, r.name, r.source) for r in conn.execute(query)]
