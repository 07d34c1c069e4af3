"""The lifecycle's requests answer alike from the top of the stack and through the full one
(orbit/api/hot_routes.py).

Every request here is sent twice to the same app: once as uvicorn sends it (``app``: the hot
routes in front) and once straight to the full middleware stack that they bypass. Same status,
same headers, same document (ids and times aside) — for answers that succeed and for each kind
of refusal on the way: body limits, malformed JSON, tokens, validation, store errors and an
unexpected error's 500."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi import FastAPI

from orbit.api.hot_routes import HOT, HotRoutes
from orbit.api.limits import ENVELOPE_BYTES
from orbit.api.request_ids import RequestIds

from .conftest import Answer, Api, asgi_request, authed

VARYING = {"id", "created_at", "updated_at", "available_at", "instance", "request_id"}


@pytest.fixture
def api(mariadb_engine: sa.Engine) -> Api:
    return Api(mariadb_engine, max_payload_bytes=4096)


def hot_layer(app: FastAPI) -> HotRoutes:
    ids = app.middleware_stack
    assert isinstance(ids, RequestIds) and isinstance(ids.app, HotRoutes)
    return ids.app


def full_stack(app: FastAPI) -> Callable[..., Any]:
    """The app as it answers without the hot routes (Starlette sets ``app`` in the scope)."""

    async def call(scope: dict[str, Any], receive: Any, send: Any) -> None:
        scope["app"] = app
        await RequestIds(hot_layer(app).full)(scope, receive, send)

    return call


def comparable(answer: Answer) -> Answer:
    status, head, doc = answer
    head = {
        k: v for k, v in head.items() if k not in {"x-request-id", "location", "content-length"}
    }
    return status, head, _without_varying(doc)


def _without_varying(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _without_varying(v) for k, v in doc.items() if k not in VARYING}
    if isinstance(doc, list):
        return [_without_varying(v) for v in doc]
    return doc


def both(api: Api, path: str, body: bytes | Any, **options: Any) -> Answer:
    """The answer from the top of the stack, after checking the full stack gave the same."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = options.pop("headers", None)
    headers = authed(api) if headers is None else headers
    hot = asgi_request(api.app, path, raw, headers, **options)
    full = asgi_request(full_stack(api.app), path, raw, headers, **options)
    assert comparable(hot) == comparable(full)
    return hot


def tasks_path(api: Api) -> str:
    return f"/v1/namespaces/{api.namespace}/tasks"


def test_a_submission_is_answered_alike(api: Api) -> None:
    status, _, doc = both(api, tasks_path(api), {"handler": "h", "params": {"n": 1}})
    assert status == 201 and doc["state"] == "WAITING"


def test_lifecycle_requests_do_not_go_through_the_full_stack(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refuse(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError(f"{scope['path']} went through the full stack")

    monkeypatch.setattr(hot_layer(api.app), "full", refuse)
    session = json.dumps({"namespace": api.namespace, "worker_name": "w", "handlers": ["h"]})
    submitted = asgi_request(api.app, tasks_path(api), b'{"handler": "h"}', authed(api))
    assert submitted[0] == 201
    for path, body in [
        (f"{tasks_path(api)}:batch", {"items": [{"handler": "h"}]}),
        (f"/v1/worker-sessions/{uuid.uuid4()}/lease", {"max_tasks": 1}),
        ("/v1/attempts:start", {"items": [{"attempt_id": "a", "token": "t"}]}),
        (
            "/v1/attempts:complete",
            {"items": [{"attempt_id": "a", "token": "t", "outcome": "failed"}]},
        ),
        ("/v1/attempts/heartbeat", {"items": []}),
        ("/v1/attempts/a/start", {"token": "t"}),
        ("/v1/attempts/a/complete", {"token": "t", "outcome": "failed"}),
    ]:
        status, _, _ = asgi_request(api.app, path, json.dumps(body).encode(), authed(api))
        assert status < 500, path
    with pytest.raises(AssertionError, match="full stack"):
        asgi_request(api.app, "/v1/worker-sessions", session.encode(), authed(api))


def test_a_request_id_is_echoed_or_made_alike(api: Api) -> None:
    _, head, _ = both(
        api, tasks_path(api), {"handler": "h"}, headers=authed(api, **{"x-request-id": "r-1"})
    )
    assert head["x-request-id"] == "r-1"
    _, head, _ = both(
        api, tasks_path(api), {"handler": "h"}, headers=authed(api, **{"x-request-id": "bad id!"})
    )
    assert re.fullmatch(r"[0-9a-f]{32}", head["x-request-id"])


def test_a_missing_token_is_refused_alike(api: Api) -> None:
    status, head, doc = both(
        api, tasks_path(api), {"handler": "h"}, headers={"content-type": "application/json"}
    )
    assert status == 401 and head["www-authenticate"] == "Bearer"
    assert doc["type"].endswith("/unauthorized")


def test_a_token_of_another_namespace_is_forbidden_alike(api: Api) -> None:
    status, _, doc = both(api, "/v1/namespaces/elsewhere/tasks", {"handler": "h"})
    assert status == 403 and doc["type"].endswith("/forbidden")


def test_malformed_json_is_refused_alike(api: Api) -> None:
    status, _, doc = both(api, tasks_path(api), b'{"handler": ')
    assert status == 422 and doc["type"].endswith("/validation")


def test_an_invalid_body_and_path_are_refused_alike(api: Api) -> None:
    status, _, doc = both(api, tasks_path(api), {"handler": ""})
    assert status == 422 and "handler" in json.dumps(doc)
    status, _, doc = both(api, "/v1/namespaces/Not_A_Name/tasks", {"handler": "h"})
    assert status == 422 and "namespace" in json.dumps(doc)


def test_a_declared_body_over_the_limit_is_refused_alike(api: Api) -> None:
    body = json.dumps({"handler": "h", "params": {"x": "y" * 8192}}).encode()
    status, _, doc = both(
        api, tasks_path(api), body, headers=authed(api, **{"content-length": str(len(body))})
    )
    assert status == 413 and doc["type"].endswith("/payload-too-large")


def test_a_streamed_body_over_the_limit_is_refused_alike(api: Api) -> None:
    body = json.dumps({"handler": "h", "params": {"x": "y" * (4096 + ENVELOPE_BYTES)}}).encode()
    status, _, doc = both(api, tasks_path(api), body, chunks=8)
    assert status == 413 and doc["type"].endswith("/payload-too-large")


def test_a_store_error_is_the_same_problem(api: Api) -> None:
    status, _, doc = both(api, f"/v1/worker-sessions/{uuid.uuid4()}/lease", {"max_tasks": 1})
    assert status == 404 and doc["type"].endswith("/not-found")


def test_refused_batch_items_are_answered_alike(api: Api) -> None:
    item = {"attempt_id": str(uuid.uuid4()), "token": "t", "outcome": "succeeded"}
    status, _, doc = both(api, "/v1/attempts:complete", {"items": [item]})
    assert status == 200 and doc["results"][0]["status"] == "refused"


@pytest.mark.usefixtures("broken_worker_routes")
def test_an_unexpected_error_is_a_500_problem_alike(api: Api) -> None:
    status, head, doc = both(
        api, "/v1/attempts/heartbeat", {"items": [{"attempt_id": "a", "token": "t"}]}
    )
    assert status == 500 and doc["type"].endswith("/internal")
    assert head["x-request-id"]


@pytest.mark.parametrize(
    ("method", "suffix", "root_path"),
    [("GET", "", ""), ("POST", "/", ""), ("POST", "", "/behind-a-proxy")],
)
def test_other_requests_take_the_full_stack(
    api: Api, monkeypatch: pytest.MonkeyPatch, method: str, suffix: str, root_path: str
) -> None:
    taken: list[str] = []
    full = hot_layer(api.app).full

    async def spy(scope: Any, receive: Any, send_: Any) -> None:
        taken.append(scope["path"])
        await full(scope, receive, send_)

    monkeypatch.setattr(hot_layer(api.app), "full", spy)
    path = root_path + tasks_path(api) + suffix
    asgi_request(
        api.app,
        path,
        b"" if method == "GET" else b"{}",
        authed(api),
        method=method,
        root_path=root_path,
    )
    assert taken == [path]


def test_an_app_without_a_hot_route_is_refused_when_made() -> None:
    app = FastAPI()
    with pytest.raises(RuntimeError, match="hot routes not declared"):
        HotRoutes(app, app.build_middleware_stack(), max_body_bytes=1024)


def test_every_hot_path_is_a_post_route_of_the_app(api: Api) -> None:
    routes = {route.path for _, route in hot_layer(api.app).routes}
    assert routes == set(HOT)
