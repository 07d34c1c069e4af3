"""Reconcile and delete with an audit row in the same transaction (invariant 8).

The operator and ``orbit apply`` both go through these two functions, so a resource change is
audited the same way whoever applied it: actor, action, the resource and its generation, and
digests of the row before and after (with the meaningful fields, never a token hash). A reconcile
that changes nothing (a resync, a repeated apply) writes no audit row.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from orbit_store.audit import declared_fields, record_change
from orbit_store.schema import credentials, queues, quotas, schedules, workflow_definitions

from .kinds import Kind, SecretLookup
from .resource import Deletion, Outcome, Resource, Superseded

#: Where each kind's declared row lives, for the before/after digests.
STORED_TABLES: dict[str, sa.Table] = {
    "Queue": queues,
    "Quota": quotas,
    "Credential": credentials,
    "Schedule": schedules,
    "WorkflowDefinition": workflow_definitions,  # a spec change shows as a new latest_version
}


def stored_row(conn: sa.Connection, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    """The kind's row as plain values (secrets replaced by their digest), or None."""
    table = STORED_TABLES.get(kind)
    return None if table is None else declared_fields(conn, table, namespace, name)


def refuse_older_generation(conn: sa.Connection, resource: Resource) -> None:
    """Superseded when the kind's row holds a newer generation from the same source: an older
    body must not write an older spec back (invariant 8). Generations of different sources
    (the operator's, `orbit apply`'s) are not comparable."""
    table = STORED_TABLES.get(resource.kind)
    if table is None or "spec_generation" not in table.c:
        return
    stored = conn.execute(
        sa.select(table.c.spec_generation, table.c.source).where(
            table.c.namespace == resource.namespace, table.c.name == resource.name
        )
    ).one_or_none()
    if (
        stored is not None
        and stored.source == resource.source
        and stored.spec_generation > resource.generation
    ):
        raise Superseded(
            f"{resource.ref}: generation {stored.spec_generation} is in effect; "
            f"generation {resource.generation} is not applied"
        )


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
    record_change(
        conn,
        namespace=resource.namespace,
        actor=actor,
        action=_action(resource.kind, before, after),
        resource_kind=resource.kind,
        resource_id=resource.name,
        resource_version=resource.generation,
        reason=reason,
        before=before,
        after=after,
    )


def reconcile_audited(
    conn: sa.Connection, kind: Kind, resource: Resource, secrets: SecretLookup, *, actor: str
) -> Outcome:
    refuse_older_generation(conn, resource)
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
