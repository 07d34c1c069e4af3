"""The audit trail (``GET /v1/audit``): who did what to which resource, why, with what evidence —
admin role, scoped to the token's namespace, filtered by actor, action, resource and time."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from typing import Annotated

from fastapi import APIRouter, Query

from orbit.api.context import Ctx
from orbit.api.routes.tasks import PROBLEMS, _utc
from orbit.api.schemas import results as schemas
from orbit.api.transport.auth import CurrentCredential, authorize
from orbit.api.transport.problems import ApiProblem
from orbit_store.access.credentials import Role
from orbit_store.audit import AuditEntry, AuditQuery, list_audit

router = APIRouter(prefix="/v1/audit", tags=["audit"])


def encode_page_token(entry: AuditEntry) -> str:
    raw = json.dumps([entry.at.isoformat(), entry.id]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_page_token(token: str | None) -> tuple[dt.datetime, str] | None:
    if token is None:
        return None
    try:
        at, last_id = json.loads(base64.urlsafe_b64decode(token.encode()))
        if not isinstance(last_id, str):  # the ids this API writes are strings: forged
            raise TypeError(last_id)
        return dt.datetime.fromisoformat(at), last_id
    except (binascii.Error, ValueError, TypeError) as exc:
        raise ApiProblem(422, "validation", "page_token is not one this API issued") from exc


@router.get("", response_model=schemas.AuditPage, responses=PROBLEMS, summary="Audit trail")
def audit(
    credential: CurrentCredential,
    ctx: Ctx,
    namespace: Annotated[
        str | None, Query(max_length=63, description="Default: the token's namespace.")
    ] = None,
    actor: Annotated[str | None, Query(max_length=255)] = None,
    action: Annotated[
        str | None, Query(max_length=64, description="Exact, or a family such as 'task.*'.")
    ] = None,
    resource_kind: Annotated[str | None, Query(max_length=64)] = None,
    resource_id: Annotated[str | None, Query(max_length=255)] = None,
    since: Annotated[dt.datetime | None, Query(description="Inclusive, RFC 3339.")] = None,
    until: Annotated[dt.datetime | None, Query(description="Exclusive, RFC 3339.")] = None,
    page_size: Annotated[int, Query(ge=1, le=500)] = 100,
    page_token: Annotated[str | None, Query(max_length=400)] = None,
) -> schemas.AuditPage:
    """Newest first; pass ``next_page_token`` back as ``page_token`` for the next page."""
    scope = namespace or credential.namespace
    authorize(credential, scope, Role.ADMIN)
    query = AuditQuery(
        namespace=scope,
        actor=actor,
        action=action,
        resource_kind=resource_kind,
        resource_id=resource_id,
        since=_utc(since),
        until=_utc(until),
    )
    with ctx.engine.connect() as conn:
        rows = list_audit(conn, query, limit=page_size, after=decode_page_token(page_token))
    token = encode_page_token(rows[-1]) if len(rows) == page_size else None
    return schemas.AuditPage(
        items=[schemas.AuditEntry.model_validate(r.__dict__) for r in rows], next_page_token=token
    )
