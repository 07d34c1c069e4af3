"""Bearer-token authentication and namespace/role authorisation for every request.

Tokens are looked up by their sha256 hash. A short cache keeps the lookup off the hot path; a
revoked token stops working within ``CACHE_SECONDS``. A token registered in several namespaces
(token hashes are unique per namespace only) is resolved by the namespace the request names.
"""

from __future__ import annotations

import threading
import time
from typing import Annotated

import anyio
import sqlalchemy as sa
from fastapi import Depends, Header, Request

from orbit.api.transport.problems import ApiProblem
from orbit_store.access.credentials import Credential, Role, hash_api_token, live_credentials

CACHE_SECONDS = 5.0


class TokenCache:
    def __init__(self) -> None:
        self._entries: dict[str, tuple[float, list[Credential]]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> list[Credential] | None:
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def put(self, key: str, found: list[Credential]) -> None:
        with self._lock:
            if len(self._entries) > 10_000:
                self._entries.clear()
            self._entries[key] = (time.monotonic() + CACHE_SECONDS, found)


async def current_credential(
    request: Request, authorization: Annotated[str | None, Header()] = None
) -> Credential:
    """Async, so a cached token costs no thread hand-off (FastAPI runs a sync dependency in
    its thread pool, one hand-off per dependency per request); a miss reads in a thread."""
    token = bearer_token(authorization)
    if token is None:
        raise ApiProblem(401, "unauthorized", "send 'Authorization: Bearer <token>'")
    cache: TokenCache = request.app.state.token_cache
    key = hash_api_token(token)
    found = cache.get(key)
    if found is None:
        found = await anyio.to_thread.run_sync(_lookup, request.app.state.engine, token)
        cache.put(key, found)
    if not found:
        raise ApiProblem(401, "unauthorized", "the token is unknown, expired or revoked")
    credential = credential_for(found, request.path_params.get("namespace"))
    if credential is not None:
        return credential
    raise ApiProblem(
        401,
        "unauthorized",
        "this token is registered in several namespaces and this request names none of them; "
        "use a token of one namespace only",
    )


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; None for any other value."""
    if not authorization or not authorization.lower().startswith("bearer "):
        return None
    return authorization[7:].strip()


def credential_for(found: list[Credential], namespace: str | None) -> Credential | None:
    """Which of a token's credentials a request uses: its only one, else the one of the
    namespace the request names (None: the request names none of them)."""
    if len(found) == 1:
        return found[0]
    return next((c for c in found if c.namespace == namespace), None)


def _lookup(engine: sa.Engine, token: str) -> list[Credential]:
    with engine.connect() as conn:
        return live_credentials(conn, token)


CurrentCredential = Annotated[Credential, Depends(current_credential)]


def authorize(credential: Credential, namespace: str, *roles: Role) -> None:
    """403 unless the token belongs to ``namespace`` and holds one of ``roles`` (or admin)."""
    if credential.namespace != namespace:
        raise ApiProblem(
            403,
            "forbidden",
            f"this token belongs to namespace {credential.namespace!r}, not {namespace!r}: "
            f"use namespace {credential.namespace!r} or a token of {namespace!r}",
            token_namespace=credential.namespace,
        )
    if not any(credential.allows(role) for role in roles):
        wanted = " or ".join(r.value for r in roles)
        raise ApiProblem(403, "forbidden", f"this needs the {wanted} role in {namespace!r}")


READ_ROLES = (Role.READ, Role.SUBMIT, Role.WORK, Role.REVIEW)
