"""``LeanRoute`` answers as FastAPI's own route does (orbit/api/lean_routes.py).

The app's submit route is a LeanRoute; the same endpoint is mounted a second time as a plain
FastAPI route on the same app, and every request here goes to both: same status, same headers,
same document (ids and times aside). The cases are the order FastAPI keeps — the body read and
parsed before authentication, authentication before validation, path errors before body
errors — and the answers in between."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi import FastAPI

from orbit.api import routes_tasks, schemas
from orbit.api.lean_routes import LeanRoute
from orbit.api.limits import ENVELOPE_BYTES
from orbit.api.routes_tasks import submit

from .conftest import Api, asgi_request, authed

LEAN = "/v1/namespaces/{ns}/tasks"
PLAIN = "/plain/v1/namespaces/{ns}/tasks"
VARYING = {"id", "created_at", "updated_at", "available_at", "instance"}


@pytest.fixture
def twins(mariadb_engine: sa.Engine) -> Api:
    api = Api(mariadb_engine, max_payload_bytes=4096)
    served = [r for r in routes_tasks.router.routes if getattr(r, "endpoint", None) is submit]
    assert [type(r) for r in served] == [LeanRoute]
    api.app.router.add_api_route(
        PLAIN.format(ns="{namespace}"),
        submit,
        methods=["POST"],
        status_code=201,
        response_model=schemas.Task,
        responses=routes_tasks.PROBLEMS,
    )
    return api


def comparable(answer: tuple[int, dict[str, str], Any]) -> tuple[int, dict[str, str], Any]:
    status, head, doc = answer
    head = {
        k: v for k, v in head.items() if k not in {"x-request-id", "location", "content-length"}
    }
    if isinstance(doc, dict):
        doc = {k: v for k, v in doc.items() if k not in VARYING}
    return status, head, doc


def both(
    api: Api, body: bytes | Any, *, ns: str = "", **headers: str
) -> tuple[int, dict[str, str], Any]:
    """The lean route's answer, after checking that the plain route gave the same."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    ns = ns or api.namespace
    lean = asgi_request(api.app, LEAN.format(ns=ns), raw, headers)
    plain = asgi_request(api.app, PLAIN.format(ns=ns), raw, headers)
    assert comparable(lean) == comparable(plain)
    return lean


def key() -> str:
    return uuid.uuid4().hex


def test_a_new_submission_is_answered_alike(twins: Api) -> None:
    status, head, doc = both(twins, {"handler": "h", "params": {"n": 1}}, **authed(twins))
    assert status == 201 and doc["state"] == "WAITING" and doc["replayed"] is False
    assert head["location"] == f"/v1/namespaces/{twins.namespace}/tasks/{doc['id']}"


def test_a_replayed_submission_is_answered_alike(twins: Api) -> None:
    for path in (LEAN, PLAIN):
        body = json.dumps({"handler": "h", "idempotency_key": "same"}).encode()
        asgi_request(twins.app, path.format(ns=twins.namespace), body, authed(twins))
    status, _, doc = both(twins, {"handler": "h", "idempotency_key": "same"}, **authed(twins))
    assert status == 200 and doc["replayed"] is True


def test_a_key_reused_for_another_request_is_a_conflict_alike(twins: Api) -> None:
    for path in (LEAN, PLAIN):
        body = json.dumps({"handler": "h", "idempotency_key": "k"}).encode()
        asgi_request(twins.app, path.format(ns=twins.namespace), body, authed(twins))
    status, _, doc = both(twins, {"handler": "other", "idempotency_key": "k"}, **authed(twins))
    assert status == 409 and doc["type"].endswith("idempotency-conflict")


def test_a_missing_token_is_refused_before_the_body_is_validated(twins: Api) -> None:
    status, head, _ = both(twins, {"handler": ""}, **{"content-type": "application/json"})
    assert status == 401 and head["www-authenticate"] == "Bearer"


def test_malformed_json_is_refused_before_the_token_is_checked(twins: Api) -> None:
    status, _, doc = both(twins, b'{"handler": ', **{"content-type": "application/json"})
    assert status == 422 and doc["errors"][0]["type"] == "json_invalid"
    assert doc["errors"][0]["loc"] == ["body", 12]


def test_path_errors_come_before_body_errors(twins: Api) -> None:
    body = {"handler": "", "surprise": 1, "key": key()}
    status, _, doc = both(twins, body, ns="Not_A_Name", **authed(twins))
    assert status == 422
    assert [e["loc"][0] for e in doc["errors"]] == ["path", "body", "body", "body"]


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/merge-patch+json; charset=utf-8", None]
)
def test_the_content_type_decides_whether_the_body_is_json(
    twins: Api, content_type: str | None
) -> None:
    headers = authed(twins)
    if content_type is None:
        del headers["content-type"]
    else:
        headers["content-type"] = content_type
    status, _, doc = both(twins, {"handler": "h"}, **headers)
    assert status == (201 if content_type and "json" in content_type else 422), doc


def test_an_empty_body_is_a_missing_body(twins: Api) -> None:
    status, _, doc = both(twins, b"", **authed(twins))
    assert status == 422 and doc["errors"] == [
        {"loc": ["body"], "msg": "Field required", "type": "missing"}
    ]


def test_a_body_over_the_limit_is_refused_before_the_token_is_checked(twins: Api) -> None:
    status, _, doc = both(twins, {"handler": "h", "params": "x" * (4096 + ENVELOPE_BYTES)})
    assert status == 413 and doc["type"].endswith("payload-too-large")


def test_params_over_the_limit_are_refused_alike(twins: Api) -> None:
    status, _, doc = both(twins, {"handler": "h", "params": "x" * 4200}, **authed(twins))
    assert status == 413 and doc["field"] == "params"


def test_a_token_of_another_namespace_is_forbidden_alike(twins: Api) -> None:
    status, _, doc = both(twins, {"handler": "h"}, ns="elsewhere", **authed(twins))
    assert status in (401, 403) and doc["status"] == status


def test_a_route_needing_what_it_cannot_give_fails_when_made() -> None:
    app = FastAPI()

    async def listing(limit: int = 10) -> dict[str, int]:
        return {"limit": limit}

    with pytest.raises(TypeError, match="query parameters"):
        app.router.add_api_route("/x", listing, route_class_override=LeanRoute)
