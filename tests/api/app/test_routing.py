"""The app orders its routers by traffic, and FastAPI's documentation routes after them
(orbit/api/app.py): whatever the order, every documented operation must be served by its own
route, and the documentation must still be served."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi import FastAPI

from orbit.api.app import create_app
from orbit.api.context import ServerSettings

from ..conftest import http_scope


@pytest.fixture(scope="module")
def app() -> FastAPI:
    # No request here reaches the database: each is refused at authentication, after routing.
    engine = sa.create_engine("mysql+pymysql://nobody@127.0.0.1:1/none")
    return create_app(engine, ServerSettings(database_url="x", run_engines=False))


def route_of(app: FastAPI, method: str, path: str) -> tuple[Any, int]:
    scope = http_scope(method, path, {"content-type": "application/json"})
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return scope.get("route"), sent[0]["status"]


def operations(app: FastAPI) -> list[tuple[str, str]]:
    paths = app.openapi()["paths"]
    return [(method.upper(), path) for path, ops in paths.items() for method in ops]


def test_every_documented_operation_is_served_by_its_own_route(app: FastAPI) -> None:
    served = []
    for method, template in operations(app):
        path = re.sub(r"\{[^}]+\}", "a1", template)
        route, _ = route_of(app, method, path)
        served.append((method, template, getattr(route, "path", None)))
    assert [s for s in served if s[1] != s[2]] == []
    assert len(served) > 40  # the document lists them all (49 today)


def test_the_task_lifecycle_s_routers_come_first(app: FastAPI) -> None:
    first = app.router.routes[0]
    assert (
        route_of(app, "POST", "/v1/namespaces/a1/tasks")[0].path
        == "/v1/namespaces/{namespace}/tasks"
    )
    assert getattr(first, "original_router", None) is not None  # an API router, not the docs


@pytest.mark.parametrize("path", ["/openapi.json", "/docs", "/redoc"])
def test_the_documentation_is_still_served(app: FastAPI, path: str) -> None:
    assert route_of(app, "GET", path)[1] == 200
