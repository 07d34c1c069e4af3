"""API tokens: namespace-scoped, with roles, stored only as a sha256 hash (ORBIT.md §11).

A token is shown once, when created. Each credential belongs to exactly one namespace; every
read and write the API performs is scoped to that namespace. A token hash is unique within a
namespace only: whether the same secret is used in another namespace is never looked at, so
declaring a credential can neither fail because of nor reveal another namespace's tokens (and
each transaction stays in one namespace). A token registered in several namespaces is
accepted in each of them, where the request names one.
"""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa

from orbit_store.namespaces import ensure_namespace

from ..audit import record_audit
from ..clock import db_now
from ..errors import Conflict, InvalidRequest, NotFound
from ..ids import new_id, new_secret
from ..schema import credentials

TOKEN_PREFIX = "orb_"


class Role(enum.StrEnum):
    READ = "read"  # read everything in the namespace, change nothing (the console's viewers)
    SUBMIT = "submit"  # submit, read and cancel tasks
    WORK = "work"  # run a worker: sessions, leases, heartbeats, completions
    REVIEW = "review"  # settle NEEDS_REVIEW tasks, manual retry
    ADMIN = "admin"  # everything in the namespace


@dataclass(frozen=True)
class Credential:
    id: str
    namespace: str
    name: str
    roles: frozenset[Role]
    source: str
    created_at: dt.datetime
    expires_at: dt.datetime | None
    revoked_at: dt.datetime | None

    def allows(self, role: Role) -> bool:
        return Role.ADMIN in self.roles or role in self.roles


@dataclass(frozen=True)
class IssuedToken:
    credential: Credential
    token: str  # shown once; only its hash is stored


def hash_api_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _from_row(row: Any) -> Credential:
    return Credential(
        id=row.id,
        namespace=row.namespace,
        name=row.name,
        roles=frozenset(Role(r) for r in row.roles.split()),
        source=row.source,
        created_at=row.created_at,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
    )


def _roles(roles: list[str] | list[Role]) -> str:
    if not roles:
        raise InvalidRequest(
            "a credential needs at least one role: read, submit, work, review, admin"
        )
    try:
        return " ".join(sorted({Role(r).value for r in roles}))
    except ValueError as exc:
        raise InvalidRequest(f"{exc}; roles are read, submit, work, review, admin") from exc


def create_token(
    conn: sa.Connection,
    *,
    namespace: str,
    name: str,
    roles: list[str] | list[Role],
    source: str = "cli",
    token: str | None = None,
    expires_at: dt.datetime | None = None,
    actor: str | None = None,
    reason: str = "",
) -> IssuedToken:
    """Create a credential; ``token`` lets a caller supply the secret (e.g. from a Secret).
    With an ``actor`` (an admin creating a token by hand) the creation is audited in the same
    transaction; declared credentials are audited by their reconcile instead."""
    role_text = _roles(roles)
    now = db_now(conn)
    ensure_namespace(conn, namespace, now)
    existing = conn.execute(
        sa.select(credentials.c.id).where(
            credentials.c.namespace == namespace, credentials.c.name == name
        )
    ).one_or_none()
    if existing is not None:
        raise Conflict(f"credential {name!r} already exists in namespace {namespace!r}")
    secret = token or TOKEN_PREFIX + new_secret()
    _refuse_shared_token(conn, namespace, name, hash_api_token(secret))
    row = {
        "id": new_id(),
        "namespace": namespace,
        "name": name,
        "token_hash": hash_api_token(secret),
        "roles": role_text,
        "source": source,
        "created_at": now,
        "expires_at": expires_at,
        "revoked_at": None,
    }
    conn.execute(credentials.insert().values(**row))
    if actor is not None:
        _audit(conn, row, actor, "credential.create", reason or "token created", now)
    return IssuedToken(_from_row(SimpleNamespace(**row)), secret)


def _audit(
    conn: sa.Connection, row: Any, actor: str, action: str, reason: str, now: dt.datetime
) -> None:
    """An audit row about a credential: its roles and source, never its token or hash."""
    cred = SimpleNamespace(**row) if isinstance(row, dict) else row
    record_audit(
        conn,
        namespace=cred.namespace,
        actor=actor,
        action=action,
        resource_kind="Credential",
        resource_id=cred.name,
        reason=reason,
        after={"roles": cred.roles.split(), "source": cred.source},
        now=now,
    )


def live_credentials(conn: sa.Connection, token: str) -> list[Credential]:
    """Every live (not revoked, not expired) credential of this bearer token, one per namespace
    it is registered in (usually one)."""
    rows = conn.execute(
        sa.select(credentials)
        .where(credentials.c.token_hash == hash_api_token(token))
        .order_by(credentials.c.namespace)
    ).all()
    now = db_now(conn) if rows else None
    return [
        _from_row(row)
        for row in rows
        if row.revoked_at is None and (row.expires_at is None or row.expires_at > now)
    ]


def authenticate(
    conn: sa.Connection, token: str, namespace: str | None = None
) -> Credential | None:
    """The live credential this bearer token belongs to (in ``namespace`` when given), or None
    — also when the token lives in several namespaces and none is named."""
    found = [c for c in live_credentials(conn, token) if namespace in (None, c.namespace)]
    return found[0] if len(found) == 1 else None


def list_credentials(conn: sa.Connection, namespace: str | None = None) -> list[Credential]:
    query = sa.select(credentials).order_by(credentials.c.namespace, credentials.c.name)
    if namespace is not None:
        query = query.where(credentials.c.namespace == namespace)
    return [_from_row(row) for row in conn.execute(query)]


def revoke_credential(
    conn: sa.Connection, *, namespace: str, name: str, actor: str, reason: str = ""
) -> Credential:
    """Revoke a token (audited in the same transaction)."""
    row = conn.execute(
        sa.select(credentials)
        .where(credentials.c.namespace == namespace, credentials.c.name == name)
        .with_for_update()
    ).one_or_none()
    if row is None:
        raise NotFound(f"credential {name!r} not found in namespace {namespace!r}")
    if row.revoked_at is None:
        now = db_now(conn)
        conn.execute(credentials.update().where(credentials.c.id == row.id).values(revoked_at=now))
        _audit(conn, row, actor, "credential.revoke", reason or "token revoked", now)
    return _from_row(row)


def put_credential_token(
    conn: sa.Connection,
    *,
    namespace: str,
    name: str,
    roles: list[str] | list[Role],
    token: str,
    source: str,
) -> bool:
    """Make credential ``name`` accept exactly ``token`` with ``roles`` (create, rotate, restore).

    Used by the Credential resource: the token comes from a Secret and only its hash is stored;
    rotating the Secret rotates the token. True when anything changed.
    """
    role_text = _roles(roles)
    token_hash = hash_api_token(token)
    row = conn.execute(
        sa.select(credentials)
        .where(credentials.c.namespace == namespace, credentials.c.name == name)
        .with_for_update()
    ).one_or_none()
    if row is None:
        create_token(conn, namespace=namespace, name=name, roles=roles, source=source, token=token)
        return True
    if (row.token_hash, row.roles, row.source, row.revoked_at) == (
        token_hash,
        role_text,
        source,
        None,
    ):
        return False
    _refuse_shared_token(conn, namespace, name, token_hash)
    conn.execute(
        credentials.update()
        .where(credentials.c.id == row.id)
        .values(token_hash=token_hash, roles=role_text, source=source, revoked_at=None)
    )
    return True


def _refuse_shared_token(conn: sa.Connection, namespace: str, name: str, token_hash: str) -> None:
    """Two credentials of one namespace may not share a token (it would be ambiguous which
    roles it carries). Only this namespace is looked at."""
    other = conn.execute(
        sa.select(credentials.c.name).where(
            credentials.c.namespace == namespace,
            credentials.c.token_hash == token_hash,
            credentials.c.name != name,
        )
    ).scalar_one_or_none()
    if other is not None:
        raise Conflict(
            f"credential {other!r} in namespace {namespace!r} already uses this token; "
            "give each credential its own secret"
        )


def delete_credential(conn: sa.Connection, *, namespace: str, name: str) -> bool:
    deleted = conn.execute(
        credentials.delete().where(credentials.c.namespace == namespace, credentials.c.name == name)
    )
    return deleted.rowcount == 1
