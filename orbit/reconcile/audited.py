"""Reconcile and delete with an audit row in the same transaction (invariant 8).

The operator and ``orbit apply`` both go through these two functions, so a resource change is
audited the same way whoever applied it: actor, action, the resource and its generation, and
digests of the row before and after (with the meaningful fields, never a token hash). A reconcile
that changes nothing (a resync, a repeated apply) writes no audit row.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from orbit_store.audit import digest, record_audit
from orbit_store.clock import db_now
from orbit_store.schema import credentials, queues, quotas, schedules, workflow_definitions

from .kinds import Kind, SecretLookup
from .resource import Deletion, Outcome, Resource

#: Where each kind's declared row lives, for the before/after digests.
STORED_TABLES: dict[str, sa.Table] = {
    "Queue": queues,
    "Quota": quotas,
    "Credential": credentials,
    "Schedule": schedules,
    "WorkflowDefinition": workflow_definitions,  # a spec change shows as a new latest_version
}
#: Columns that say nothing about what was declared (the generation is the audit row's
#: resource_version; a quota's token bucket is runtime state).
NOT_AUDITED = frozenset(
    {
        "id",
        "namespace",
        "created_at",
        "updated_at",
        "spec_generation",
        "rate_tokens",
        "rate_refilled_at",
        "next_fire_at",
        "last_fire_at",
    }
)
SECRET_COLUMNS = frozenset({"token_hash"})


def stored_row(conn: sa.Connection, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    """The kind's row as plain values (secrets replaced by their digest), or None."""
    table = STORED_TABLES.get(kind)
    if table is None:
        return None
    row = (
        conn.execute(sa.select(table).where(table.c.namespace == namespace, table.c.name == name))
        .mappings()
        .one_or_none()
    )
    if row is None:
        return None
    values = {k: v for k, v in row.items() if k not in NOT_AUDITED}
    for key in SECRET_COLUMNS & values.keys():
        values[key] = digest(values[key])
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in values.items()}


def _snapshot(row: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if row is None else {"digest": digest(row), "fields": row}


def _action(kind: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    name = kind.lower()
    if after is None:
        return f"{name}.delete"
    changed = {k for k in after if before is None or before.get(k) != after.get(k)}
    if before is not None and changed == {"paused"}:
        return f"{name}.pause" if after["paused"] else f"{name}.resume"
    if before is not None and changed <= {"suspended", "version"} and "suspended" in changed:
        return f"{name}.suspend" if after["suspended"] else f"{name}.resume"
    if before is not None and "revoked_at" in changed and after["revoked_at"] is not None:
        return f"{name}.revoke"
    if before is not None and changed == {"retired_at"} and after["retired_at"] is not None:
        return f"{name}.retire"  # a deleted WorkflowDefinition: no new starts, runs go on
    if before is not None and changed == {"draining_since"}:
        return f"{name}.drain"
    return f"{name}.apply"


def _record(
    conn: sa.Connection,
    resource: Resource,
    actor: str,
    reason: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
) -> None:
    after_snapshot = _snapshot(after)
    if after is not None and after_snapshot is not None and before is not None:
        after_snapshot["changed"] = sorted(k for k in after if before.get(k) != after[k])
    record_audit(
        conn,
        namespace=resource.namespace,
        actor=actor,
        action=_action(resource.kind, before, after),
        resource_kind=resource.kind,
        resource_id=resource.name,
        resource_version=resource.generation,
        reason=reason,
        before=_snapshot(before),
        after=after_snapshot,
        now=db_now(conn),
    )


def reconcile_audited(
    conn: sa.Connection, kind: Kind, resource: Resource, secrets: SecretLookup, *, actor: str
) -> Outcome:
    before = stored_row(conn, resource.kind, resource.namespace, resource.name)
    outcome = kind.reconcile(conn, resource, secrets)
    if outcome.changed:
        after = stored_row(conn, resource.kind, resource.namespace, resource.name)
        reason = f"{resource.source} applied generation {resource.generation}"
        if not outcome.ready:
            reason += f" ({outcome.reason})"
        _record(conn, resource, actor, reason, before, after)
    return outcome


def delete_audited(
    conn: sa.Connection, kind: Kind, resource: Resource, *, actor: str, reason: str
) -> Deletion:
    """Delete; audited when the row went away or its deletion began (a queue draining)."""
    before = stored_row(conn, resource.kind, resource.namespace, resource.name)
    deletion = kind.delete(conn, resource)
    after = stored_row(conn, resource.kind, resource.namespace, resource.name)
    if before is not None and before != after:
        _record(conn, resource, actor, reason, before, after)
    return deletion
