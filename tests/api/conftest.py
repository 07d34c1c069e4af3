"""The app in-process on MariaDB: requests are plain ASGI calls (``Api.call``)."""

from __future__ import annotations

import asyncio
import functools
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from fastapi.testclient import TestClient
from locality.plugin import locality_watch, namespace_locality  # noqa: F401 (fixtures)

from orbit.api.app import create_app
from orbit.api.context import ServerSettings
from orbit.api.routes import attempts as routes_attempts
from orbit_store.access.credentials import create_token
from orbit_store.db import run_transaction
from orbit_store.pulse import service
from orbit_store.pulse.submit.accept import SubmitRequest


def http_scope(method: str, path: str, headers: dict[str, str]) -> dict[str, Any]:
    """The ASGI scope of one HTTP request to the app in process."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "scheme": "http",
        "server": ("test", 80),
        "client": ("test", 1),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }


Answer = tuple[int, dict[str, str], Any]


def authed(api: Api, **more: str) -> dict[str, str]:
    """JSON request headers with the test token of ``api``, and ``more``."""
    return {"authorization": f"Bearer {api.token}", "content-type": "application/json", **more}


def asgi_request(
    asgi: Callable[..., Any],
    path: str,
    body: bytes,
    headers: dict[str, str],
    *,
    method: str = "POST",
    chunks: int = 1,
    root_path: str = "",
) -> Answer:
    """One request to an ASGI app in process, its body in ``chunks`` messages: status, headers
    and JSON document. An error raised after the answer was sent (Starlette's error layer
    answers a 500, then raises to the server) is the server's to log, not the test's."""
    scope = http_scope(method, path, headers)
    scope["root_path"] = root_path
    size = -(-len(body) // chunks) if body else 1
    parts = [body[i : i + size] for i in range(0, len(body), size)] or [b""]
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": part, "more_body": i < len(parts) - 1}
        for i, part in enumerate(parts)
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    try:
        asyncio.run(asgi(scope, receive, send))
    except Exception:
        if not any(m["type"] == "http.response.start" for m in sent):
            raise
    start = next(m for m in sent if m["type"] == "http.response.start")
    head = {k.decode(): v.decode() for k, v in start["headers"]}
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], head, json.loads(data) if data else None


class Api:
    """The app in-process, a namespace and a token with every role."""

    def __init__(
        self, engine: sa.Engine, *, roles: tuple[str, ...] = ("submit", "work"), **settings_: Any
    ) -> None:
        self.engine = engine
        self.namespace = f"api-{uuid.uuid4().hex[:8]}"
        settings = ServerSettings(
            database_url=engine.url.render_as_string(hide_password=False),
            lease_poll_interval=0.1,
            run_engines=False,
            **settings_,
        )
        self.app: FastAPI = create_app(engine, settings)
        self.token = run_transaction(
            engine,
            functools.partial(create_token, namespace=self.namespace, name="t", roles=list(roles)),
        ).token

    async def call(
        self, method: str, path: str, body: Any, *, disconnect: bool = False, expect: int = 0
    ) -> Any:
        """One request; with ``disconnect`` the client is gone once the body was read.
        Any success is expected unless ``expect`` names the status."""
        payload = json.dumps(body).encode()
        scope = http_scope(
            method,
            path,
            {"authorization": f"Bearer {self.token}", "content-type": "application/json"},
        )
        messages = [{"type": "http.request", "body": payload, "more_body": False}]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            if messages:
                return messages.pop(0)
            if disconnect:
                return {"type": "http.disconnect"}
            await asyncio.Event().wait()  # connected: nothing more arrives
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await self.app(scope, receive, send)
        status = next(m["status"] for m in sent if m["type"] == "http.response.start")
        data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        assert status == expect if expect else status < 300, (status, data)
        return json.loads(data)

    async def session(self) -> str:
        body = {"namespace": self.namespace, "worker_name": "w", "handlers": ["h"]}
        return str((await self.call("POST", "/v1/worker-sessions", body))["id"])

    def submit(self) -> str:
        request = SubmitRequest(namespace=self.namespace, queue="default", handler="h")
        return service.submit(self.engine, request).task_id


@pytest.fixture
def api(mariadb_engine: sa.Engine) -> Iterator[Api]:
    yield Api(mariadb_engine)


@pytest.fixture
def admin_api(mariadb_engine: sa.Engine) -> Iterator[Api]:
    """As ``api``, with a token that may do everything in its namespace."""
    yield Api(mariadb_engine, roles=("submit", "work", "review", "admin"))


def token_headers(engine: sa.Engine, namespace: str, *roles: str) -> dict[str, str]:
    """The Authorization header of a new token of ``namespace`` holding ``roles``."""
    issued = run_transaction(
        engine,
        functools.partial(
            create_token,
            namespace=namespace,
            name=f"t-{'-'.join(roles)}-{uuid.uuid4().hex[:6]}",
            roles=list(roles),
        ),
    )
    return {"Authorization": f"Bearer {issued.token}"}


@pytest.fixture
def http(api: Api) -> Iterator[TestClient]:
    """A client of ``api``'s app in process, sending its token unless a request names another."""
    with TestClient(api.app) as client:
        client.headers["Authorization"] = f"Bearer {api.token}"
        yield client


@pytest.fixture
def admin_http(admin_api: Api) -> Iterator[TestClient]:
    """As ``http``, for ``admin_api``."""
    with TestClient(admin_api.app) as client:
        client.headers["Authorization"] = f"Bearer {admin_api.token}"
        yield client


@pytest.fixture
def broken_worker_routes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The attempt routes' transactions raise an unexpected error: a defect, answered with 500."""

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("an unexpected defect")

    monkeypatch.setattr(routes_attempts, "run_transaction", broken)
