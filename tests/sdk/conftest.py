"""Helpers for SDK tests that need no server: fault-injecting httpx transports and canned bodies.

``httpx.MockTransport`` is used only to inject faults (5xx, 429, dropped connections) in front of
a minimal success answer; the server's behaviour is tested end to end against the real server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from orbit_sdk._wire.transport import RetryPolicy, SyncTransport

PROBLEM_JSON = "application/problem+json"


def task_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "0190d0b8-0000-7000-8000-000000000001",
        "namespace": "shop",
        "queue": "default",
        "handler": "shop.echo",
        "params": {"x": 1},
        "state": "WAITING",
        "state_version": 1,
        "priority": 0,
        "available_at": "2025-01-01T00:00:00Z",
        "deadline_at": None,
        "created_at": "2025-01-01T00:00:00Z",
        "updated_at": "2025-01-01T00:00:00Z",
        "finished_at": None,
        "attempts_used": 0,
        "max_attempts": 3,
        "safety": "safe",
        "concurrency_key": None,
        "cancel_requested": False,
        "retry_of": None,
        "result": None,
        "error": None,
        "replayed": False,
    }
    body.update(overrides)
    return body


def problem(status: int, slug: str, detail: str = "", **extra: Any) -> httpx.Response:
    body = {
        "type": f"https://orbit.dev/problems/{slug}",
        "title": slug.replace("-", " "),
        "status": status,
        "detail": detail,
        **extra,
    }
    return httpx.Response(status, content=json.dumps(body), headers={"content-type": PROBLEM_JSON})


Fault = httpx.Response | Exception
MakeTransport = Callable[..., SyncTransport]


@dataclass
class Faults:
    """Answers each request with the next scripted fault, then with ``success``. Records every
    request so tests can check what was (re)sent."""

    script: list[Fault]
    success: Callable[[httpx.Request], httpx.Response] = field(
        default=lambda request: httpx.Response(200, json={})
    )
    requests: list[httpx.Request] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.script:
            fault = self.script.pop(0)
            if isinstance(fault, Exception):
                raise fault
            return fault
        return self.success(request)

    @property
    def bodies(self) -> list[Any]:
        return [json.loads(r.content) if r.content else None for r in self.requests]


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def make_transport(sleeps: list[float]) -> Iterator[MakeTransport]:
    made: list[SyncTransport] = []

    def make(faults: Faults, policy: RetryPolicy | None = None) -> SyncTransport:
        client = httpx.Client(base_url="http://orbit.test", transport=httpx.MockTransport(faults))
        transport = SyncTransport(client, policy, sleep=sleeps.append)
        made.append(transport)
        return transport

    yield make
    for transport in made:
        transport.close()
