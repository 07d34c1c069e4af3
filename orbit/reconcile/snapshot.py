"""What the reconcile functions declared in MySQL for one namespace, as plain comparable rows.

The operator and `orbit apply` reconcile the same manifests through the same functions, so for
the same manifests they must leave the same rows; this is the view both are compared by. Only the
meaning is kept: ids, timestamps, who applied it (``source``, ``spec_generation``) and runtime
state (a quota's token bucket and counters, a queue's drain start, a schedule's progress) are left
out; a credential keeps its token hash and whether it is revoked.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from orbit_store.schema import (
    credentials,
    queues,
    quotas,
    schedules,
    workflow_definition_versions,
    workflow_definitions,
)

IGNORED = frozenset(
    {
        "id",
        "namespace",
        "created_at",
        "updated_at",
        "source",
        "spec_generation",
        "draining_since",
        "rate_tokens",
        "rate_refilled_at",
        "next_fire_at",
        "last_fire_at",
        "waiting",  # a quota's counters of the tasks it counts
        "running",
    }
)

Rows = dict[str, list[dict[str, Any]]]


def _rows(conn: sa.Connection, table: sa.Table, namespace: str) -> list[dict[str, Any]]:
    result = conn.execute(
        sa.select(table).where(table.c.namespace == namespace).order_by(table.c.name)
    )
    rows = []
    for row in result.mappings():
        kept = {key: value for key, value in row.items() if key not in IGNORED}
        if "revoked_at" in kept:
            kept["revoked"] = kept.pop("revoked_at") is not None
        if "retired_at" in kept:
            kept["retired"] = kept.pop("retired_at") is not None
        rows.append(kept)
    return rows


def _versions(conn: sa.Connection, namespace: str) -> list[dict[str, Any]]:
    """Published workflow versions: what was published, not when or by whom."""
    rows = conn.execute(
        sa.select(
            workflow_definitions.c.name,
            workflow_definition_versions.c.version,
            workflow_definition_versions.c.digest,
            workflow_definition_versions.c.spec,
        )
        .join(
            workflow_definitions,
            workflow_definitions.c.id == workflow_definition_versions.c.definition_id,
        )
        .where(workflow_definition_versions.c.namespace == namespace)
        .order_by(workflow_definitions.c.name, workflow_definition_versions.c.version)
    )
    return [dict(row) for row in rows.mappings()]


def declared_rows(conn: sa.Connection, namespace: str) -> Rows:
    """The namespace's queues, quotas, credentials, schedules and workflow definitions (with
    their versions) by table name, ordered by name."""
    rows = {
        table.name: _rows(conn, table, namespace)
        for table in (queues, quotas, credentials, schedules, workflow_definitions)
    }
    rows[workflow_definition_versions.name] = _versions(conn, namespace)
    return rows
