"""Administrative audit rows (seed §2): appended in the same transaction as the change they
describe. The application's grants allow only INSERT and SELECT on ``audit_log``."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

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
