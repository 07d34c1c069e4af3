"""Credential: the token lives in a Secret; MySQL keeps only its hash, scoped to the
Credential's namespace with its roles. Rotating the Secret rotates the token; a missing Secret
(or key) revokes it until the Secret is back."""

from __future__ import annotations

import sqlalchemy as sa

from orbit_store.access.credentials import delete_credential, put_credential_token
from orbit_store.clock import utc_now
from orbit_store.errors import Conflict
from orbit_store.schema import credentials

from .resource import SECRET_NOT_FOUND, Deletion, InvalidSpec, Outcome, Resource

MIN_TOKEN_LENGTH = 24


def reconcile(conn: sa.Connection, resource: Resource, secret: dict[str, str] | None) -> Outcome:
    """``secret`` is the referenced Secret's decoded data, or None when it does not exist."""
    ref = resource.spec["secretRef"]
    key = ref.get("key", "token")
    token = None if secret is None else secret.get(key)
    if token is None:
        changed = _revoke(conn, resource)
        what = (
            f"Secret {ref['name']!r}"
            if secret is None
            else f"key {key!r} of Secret {ref['name']!r}"
        )
        return Outcome(
            changed=changed,
            ready=False,
            reason=SECRET_NOT_FOUND,
            message=f"{what} not found in namespace {resource.namespace!r}; no token is "
            f"accepted until it exists (kubectl -n {resource.namespace} create secret "
            f"generic {ref['name']} --from-literal={key}=$(openssl rand -hex 32))",
        )
    token = token.strip()
    if len(token) < MIN_TOKEN_LENGTH:
        raise InvalidSpec(
            "spec.secretRef",
            f"the token in Secret {ref['name']!r} is shorter "
            f"than {MIN_TOKEN_LENGTH} characters; use a random one",
        )
    try:
        changed = put_credential_token(
            conn,
            namespace=resource.namespace,
            name=resource.name,
            roles=resource.spec["roles"],
            token=token,
            source=resource.source,
        )
    except Conflict as exc:  # a spec problem: retrying cannot fix it
        raise InvalidSpec("spec.secretRef", str(exc)) from exc
    roles = " ".join(sorted(resource.spec["roles"]))
    return Outcome(changed=changed, message=f"token accepted with roles {roles}")


def _revoke(conn: sa.Connection, resource: Resource) -> bool:
    revoked = conn.execute(
        credentials.update()
        .where(
            credentials.c.namespace == resource.namespace,
            credentials.c.name == resource.name,
            credentials.c.revoked_at.is_(None),
        )
        .values(revoked_at=utc_now())
    )
    return revoked.rowcount > 0


def delete(conn: sa.Connection, resource: Resource) -> Deletion:
    delete_credential(conn, namespace=resource.namespace, name=resource.name)
    return Deletion(done=True, message="credential removed")
