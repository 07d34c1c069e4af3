"""The app in-process on MariaDB: requests are plain ASGI calls (``Api.call``)."""

from __future__ import annotations

import asyncio
import functools
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi import FastAPI

from orbit.api.app import create_app
from orbit.api.context import ServerSettings
from orbit_store.credentials import create_token
from orbit_store.db import run_transaction
from orbit_store.pulse import service
from orbit_store.pulse.submit import SubmitRequest


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


class Api:
    """The app in-process, a namespace and a token with every role."""

    def __init__(self, engine: sa.Engine, **settings_: Any) -> None:
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
            functools.partial(
                create_token, namespace=self.namespace, name="t", roles=["submit", "work"]
            ),
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
