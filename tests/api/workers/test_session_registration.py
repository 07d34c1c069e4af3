"""A worker resends a registration whose answer it lost; a copy that reaches the server after
the resend opened the worker's session must not replace it (the chaos run found leases lapsing
under a running worker that way). The key the client sends with each registration tells a
copy from a new registration."""

from __future__ import annotations

import asyncio
from typing import Any

import sqlalchemy as sa

from orbit_store.schema import worker_sessions

from ..conftest import Api


def _register(api: Api, key: str | None, expect: int = 0) -> Any:
    body: dict[str, Any] = {"namespace": api.namespace, "worker_name": "w"}
    if key is not None:
        body["registration_key"] = key
    return asyncio.run(api.call("POST", "/v1/worker-sessions", body, expect=expect))


def _state(api: Api, session_id: str) -> str:
    with api.engine.connect() as conn:
        query = sa.select(worker_sessions.c.state).where(worker_sessions.c.id == session_id)
        return str(conn.execute(query).scalar_one())


def test_a_copy_of_a_registration_answers_the_session_it_opened(api: Api) -> None:
    first = _register(api, "k-1")
    copy = _register(api, "k-1")
    assert copy["id"] == first["id"] and copy["state"] == "ACTIVE"
    assert _state(api, first["id"]) == "ACTIVE"


def test_a_new_registration_key_replaces_the_worker_s_older_session(api: Api) -> None:
    first = _register(api, "k-1")
    second = _register(api, "k-2")
    assert second["id"] != first["id"] and second["generation"] == first["generation"] + 1
    assert _state(api, first["id"]) == "CLOSED"


def test_a_registration_without_a_key_opens_a_session_each_time(api: Api) -> None:
    """Older clients send none: as before, each registration replaces the last."""
    assert _register(api, None)["id"] != _register(api, None)["id"]


def test_an_overlong_registration_key_is_refused_naming_the_field(api: Api) -> None:
    answer = _register(api, "k" * 65, expect=422)
    assert "registration_key" in str(answer)
