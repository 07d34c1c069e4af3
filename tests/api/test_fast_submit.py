"""The one-by-one submission's fast path answers as the route does (orbit/api/fast_submit.py).

Each request is sent to the app as uvicorn sends it (the fast path in front) and straight to the
full stack, and the two answers are compared (ids and times aside). The token is in the token
cache first, as it is for every submission but a token's first: the fast path answers only from
the cache. ``took_fast`` tells which requests the fast path answered itself and which it handed
to the route."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from orbit.api.fast_submit import FastSubmit
from orbit.api.limits import ENVELOPE_BYTES
from orbit_store.credentials import create_token
from orbit_store.db import run_transaction
from orbit_store.pulse.quota_declarations import QuotaSpec, put_quota

from .conftest import Answer, Api, asgi_request, authed
from .test_hot_routes import comparable, full_stack, hot_layer

PLAIN = {"handler": "h", "params": {"n": 1}}


@pytest.fixture
def api(mariadb_engine: sa.Engine) -> Api:
    api = Api(mariadb_engine, max_payload_bytes=4096)
    asgi_request(api.app, tasks_path(api), json.dumps(PLAIN).encode(), authed(api))  # caches
    return api


@pytest.fixture
def handed_on(api: Api, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The paths of the requests the fast path handed to the route, as they happen."""
    fast: FastSubmit = hot_layer(api.app).fast_submit
    taken: list[str] = []
    route = fast.fallback

    async def spy(scope: Any, receive: Any, send: Any) -> None:
        taken.append(scope["path"])
        await route(scope, receive, send)

    monkeypatch.setattr(fast, "fallback", spy)
    yield taken


def tasks_path(api: Api, namespace: str | None = None) -> str:
    return f"/v1/namespaces/{namespace or api.namespace}/tasks"


def both(
    api: Api, body: bytes | Any, *, path: str = "", length: bool = True, **options: Any
) -> Answer:
    """The answer through the fast path, after checking the full stack gave the same. The
    request declares its body's length (as the SDK's do) unless ``length`` is false."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = options.pop("headers", None) or authed(api)
    if length:
        headers = {"content-length": str(len(raw)), **headers}
    path = path or tasks_path(api)
    fast = asgi_request(api.app, path, raw, headers, **options)
    full = asgi_request(full_stack(api.app), path, raw, headers, **options)
    assert comparable(fast) == comparable(full)
    return fast


def send(api: Api, body: Any) -> Answer:
    """One submission through the app as uvicorn passes it, with its body's length."""
    raw = json.dumps(body).encode()
    return asgi_request(
        api.app, tasks_path(api), raw, authed(api, **{"content-length": str(len(raw))})
    )


def test_a_plain_submission_is_answered_by_the_fast_path(api: Api, handed_on: list[str]) -> None:
    status, head, doc = both(api, PLAIN)
    assert status == 201 and doc["state"] == "WAITING" and doc["replayed"] is False
    assert head["location"] == f"{tasks_path(api)}/{doc['id']}"
    assert head["content-type"] == "application/json" and head["x-request-id"]
    assert handed_on == []


def test_a_repeated_key_is_a_replay_from_the_fast_path(api: Api, handed_on: list[str]) -> None:
    first = send(api, {"handler": "h", "idempotency_key": "k"})
    status, head, doc = both(api, {"handler": "h", "idempotency_key": "k"})
    assert (status, doc["replayed"], doc["id"]) == (200, True, first[2]["id"])
    assert head["location"] == f"{tasks_path(api)}/{first[2]['id']}"
    assert handed_on == []


def test_a_key_conflict_is_the_routes_problem(api: Api, handed_on: list[str]) -> None:
    send(api, {"handler": "h", "idempotency_key": "c"})
    status, _, doc = both(api, {"handler": "other", "idempotency_key": "c"})
    assert status == 409 and doc["type"].endswith("/idempotency-conflict")
    assert handed_on == []  # refused by the store: answered through the app's error layers


def test_a_quota_refusal_is_the_routes_problem(
    api: Api, handed_on: list[str], mariadb_engine: sa.Engine
) -> None:
    spec = QuotaSpec(name="cap", max_waiting=1)  # the fixture's task waits
    run_transaction(
        mariadb_engine, functools.partial(put_quota, namespace=api.namespace, spec=spec)
    )
    status, _, doc = both(api, PLAIN)
    assert status == 429 and doc["type"].endswith("/quota-exceeded"), doc
    assert handed_on == []


def test_a_submission_with_a_concurrency_key_is_answered_by_the_fast_path(
    api: Api, handed_on: list[str]
) -> None:
    status, _, doc = both(api, {"handler": "h", "concurrency_key": "t", "concurrency_limit": 5})
    assert status == 201 and doc["concurrency_key"] == "t"
    assert handed_on == []


@pytest.mark.parametrize(
    ("case", "body", "headers", "status"),
    [
        ("malformed JSON", b'{"handler": ', None, 422),
        ("JSON nested too deep", b'{"handler": "h", "params": ' + b"[" * 100_000, None, 400),
        ("not an object", b'["h"]', None, 422),
        ("an invalid field", {"handler": ""}, None, 422),
        ("an unknown field", {"handler": "h", "colour": "red"}, None, 422),
        ("params over the payload limit", {"handler": "h", "params": {"x": "y" * 5000}}, None, 413),
        ("another content type", PLAIN, {"content-type": "text/plain"}, 422),
        ("no token", PLAIN, {"authorization": ""}, 401),
        ("a token not cached", PLAIN, {"authorization": "Bearer unknown-token"}, 401),
        ("not a bearer token", PLAIN, {"authorization": "Basic dTpw"}, 401),
    ],
)
def test_other_requests_are_answered_by_the_route(
    api: Api, handed_on: list[str], case: str, body: Any, headers: Any, status: int
) -> None:
    answer = both(api, body, headers=authed(api, **headers) if headers else None)
    assert answer[0] == status, (case, answer)
    assert handed_on == [tasks_path(api)], case


def test_a_namespace_the_token_does_not_hold_is_answered_by_the_route(
    api: Api, handed_on: list[str]
) -> None:
    status, _, doc = both(api, PLAIN, path=tasks_path(api, "elsewhere"))
    assert status == 403 and doc["type"].endswith("/forbidden")
    status, _, doc = both(api, PLAIN, path=tasks_path(api, "Not_A_Name"))
    assert status == 422 and "namespace" in json.dumps(doc)
    assert len(handed_on) == 2


def test_a_token_without_the_submit_role_is_answered_by_the_route(
    api: Api, handed_on: list[str], mariadb_engine: sa.Engine
) -> None:
    worker = run_transaction(
        mariadb_engine,
        functools.partial(create_token, namespace=api.namespace, name="w", roles=["work"]),
    ).token
    headers = authed(api, authorization=f"Bearer {worker}")
    asgi_request(api.app, tasks_path(api), b"{}", headers)  # now cached
    handed_on.clear()
    status, _, doc = both(api, PLAIN, headers=headers)
    assert status == 403 and "submit" in doc["detail"]
    assert handed_on == [tasks_path(api)]


def test_a_body_in_pieces_is_answered_by_the_fast_path(api: Api, handed_on: list[str]) -> None:
    body = json.dumps(PLAIN).encode()
    status, _, _ = both(
        api, body, headers=authed(api, **{"content-length": str(len(body))}), chunks=3
    )
    assert status == 201 and handed_on == []


def test_a_body_without_a_length_is_answered_by_the_route(api: Api, handed_on: list[str]) -> None:
    body = json.dumps({"handler": "h", "params": {"x": "y" * (4096 + ENVELOPE_BYTES)}}).encode()
    status, _, doc = both(api, body, length=False, chunks=8)  # streamed
    assert status == 413 and doc["type"].endswith("/payload-too-large")
    assert handed_on == [tasks_path(api)]


def test_an_unexpected_error_after_the_checks_is_a_500_problem_alike(
    api: Api, handed_on: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(request: Any) -> Any:
        raise RuntimeError("the store broke")

    monkeypatch.setattr(api.app.state.ctx.submit_groups, "submit", broken)
    status, head, doc = both(api, PLAIN)
    assert status == 500 and doc["type"].endswith("/internal") and head["x-request-id"]
    assert "the store broke" not in json.dumps(doc)
    assert handed_on == []
