"""Administrative audit rows (seed §2, invariant 8): appended in the same transaction as the change
they describe, read back by filters, corrected only by new linked rows. The application's grants
allow only INSERT and SELECT on ``audit_log``."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .clock import db_now
from .errors import InvalidRequest, NotFound
from .ids import new_id
from .schema import audit_log


def record_audit(
    conn: sa.Connection,
    *,
    namespace: str,
    actor: str,
    action: str,
    resource_kind: str,
    resource_id: str,
    reason: str,
    now: dt.datetime,
    resource_version: int | None = None,
    evidence_ref: str | None = None,
    before: Any = None,
    after: Any = None,
    corrects_id: str | None = None,
) -> str:
    audit_id = new_id()
    conn.execute(
        audit_log.insert().values(
            id=audit_id,
            namespace=namespace,
            at=now,
            actor=actor,
            action=action,
            resource_kind=resource_kind,
            resource_id=resource_id,
            resource_version=resource_version,
            reason=reason[:1024],
            evidence_ref=evidence_ref,
            before=before,
            after=after,
            corrects_id=corrects_id,
        )
    )
    return audit_id


def digest(value: Any) -> str:
    """A stable sha256 of a JSON-able value, for before/after digests of what changed."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


#: Columns of a declared row that say nothing about what was declared: identity and timestamps,
#: the declaring resource's generation (the audit row's resource_version), runtime state (a
#: quota's token bucket, a schedule's progress).
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


def declared_fields(
    conn: sa.Connection, table: sa.Table, namespace: str, name: str
) -> dict[str, Any] | None:
    """The declared row ``name`` of ``table`` as plain values for an audit row (secrets replaced
    by their digest, runtime columns left out), or None when there is none."""
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


def record_change(
    conn: sa.Connection,
    *,
    namespace: str,
    actor: str,
    action: str,
    resource_kind: str,
    resource_id: str,
    resource_version: int | None,
    reason: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
) -> str:
    """Audit a change of a declared resource: ``before``/``after`` are its fields (from
    :func:`declared_fields`), recorded as ``{"digest", "fields"}`` and, for an update, the names
    of the fields that ``changed``."""
    after_snapshot = _snapshot(after)
    if after is not None and after_snapshot is not None and before is not None:
        after_snapshot["changed"] = sorted(k for k in after if before.get(k) != after[k])
    return record_audit(
        conn,
        namespace=namespace,
        actor=actor,
        action=action,
        resource_kind=resource_kind,
        resource_id=resource_id,
        resource_version=resource_version,
        reason=reason,
        before=_snapshot(before),
        after=after_snapshot,
        now=db_now(conn),
    )


def _snapshot(fields: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if fields is None else {"digest": digest(fields), "fields": fields}


@dataclass(frozen=True)
class AuditEntry:
    id: str
    namespace: str
    at: dt.datetime
    actor: str
    action: str
    resource_kind: str
    resource_id: str
    resource_version: int | None
    reason: str
    evidence_ref: str | None
    before: Any
    after: Any
    corrects_id: str | None

    def as_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["at"] = self.at.replace(tzinfo=dt.UTC).isoformat().replace("+00:00", "Z")
        return out


@dataclass(frozen=True)
class AuditQuery:
    """Filters of ``GET /v1/audit`` and ``orbit admin audit list``; None means any. ``action``
    ending in ``.*`` matches a family (``task.*``)."""

    namespace: str | None = None
    actor: str | None = None
    action: str | None = None
    resource_kind: str | None = None
    resource_id: str | None = None
    since: dt.datetime | None = None  # inclusive
    until: dt.datetime | None = None  # exclusive
    newest_first: bool = True


def _entry(row: Any) -> AuditEntry:
    return AuditEntry(**{c.name: getattr(row, c.name) for c in audit_log.columns})


def list_audit(
    conn: sa.Connection,
    query: AuditQuery,
    *,
    limit: int,
    after: tuple[dt.datetime, str] | None = None,
) -> list[AuditEntry]:
    """One page of matching rows ordered by (at, id); ``after`` is the last row of the previous
    page (a keyset: pages never repeat or skip rows that were there when the first was read)."""
    stmt = sa.select(audit_log)
    c = audit_log.c
    filters = {
        c.namespace: query.namespace,
        c.actor: query.actor,
        c.resource_kind: query.resource_kind,
        c.resource_id: query.resource_id,
    }
    for column, value in filters.items():
        if value is not None:
            stmt = stmt.where(column == value)
    if query.action is not None:
        if query.action.endswith(".*"):
            stmt = stmt.where(c.action.startswith(query.action[:-1], autoescape=True))
        else:
            stmt = stmt.where(c.action == query.action)
    if query.since is not None:
        stmt = stmt.where(c.at >= query.since)
    if query.until is not None:
        stmt = stmt.where(c.at < query.until)
    if after is not None:
        at, last_id = after
        if query.newest_first:
            stmt = stmt.where(sa.or_(c.at < at, sa.and_(c.at == at, c.id < last_id)))
        else:
            stmt = stmt.where(sa.or_(c.at > at, sa.and_(c.at == at, c.id > last_id)))
    order = (c.at.desc(), c.id.desc()) if query.newest_first else (c.at, c.id)
    return [_entry(row) for row in conn.execute(stmt.order_by(*order).limit(limit))]


def correct_audit(
    conn: sa.Connection,
    *,
    namespace: str,
    audit_id: str,
    actor: str,
    reason: str,
    evidence_ref: str | None = None,
    correction: Any = None,
) -> str:
    """Append a row that corrects row ``audit_id`` (history is never rewritten): it names the
    same resource, carries ``correction`` as its ``after`` and links back by ``corrects_id``."""
    if not actor.strip() or not reason.strip():
        raise InvalidRequest("a correction needs an actor and a reason")
    original = conn.execute(
        sa.select(audit_log).where(audit_log.c.id == audit_id, audit_log.c.namespace == namespace)
    ).one_or_none()
    if original is None:
        raise NotFound(f"audit row {audit_id} not found in namespace {namespace!r}")
    return record_audit(
        conn,
        namespace=namespace,
        actor=actor,
        action="audit.correct",
        resource_kind=original.resource_kind,
        resource_id=original.resource_id,
        resource_version=original.resource_version,
        reason=reason,
        evidence_ref=evidence_ref,
        before={"action": original.action, "reason": original.reason},
        after=correction,
        corrects_id=audit_id,
        now=db_now(conn),
    )
