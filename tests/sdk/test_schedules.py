"""Schedule methods of the SDK that need no server: the body sent, and which calls are resent
after a failure that may have reached the server (the behaviour itself is tested end to end)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import httpx
import pytest

from orbit_sdk import AsyncClient, Client, RetryPolicy, errors

from .conftest import Faults, problem

FAST = RetryPolicy(initial_backoff=0.001, max_backoff=0.002)


def schedule_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "0190d0b8-0000-7000-8000-000000000009",
        "namespace": "shop",
        "name": "nightly",
        "cron": "30 2 * * *",
        "time_zone": "Europe/Berlin",
        "task": {"handler": "shop.report", "queue": "default", "params": {}},
        "version": 1,
        "state": "Active",
        "next_fire_at": "2026-06-02T00:30:00Z",
        "created_at": "2026-06-01T00:00:00Z",
        "updated_at": "2026-06-01T00:00:00Z",
    }
    body.update(overrides)
    return body


def ok(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=schedule_body())


def client(faults: Faults) -> Client:
    return Client("http://orbit.test", transport=httpx.MockTransport(faults), retry=FAST)


def test_create_sends_the_spec_and_parses_the_schedule() -> None:
    faults = Faults([], success=ok)
    start = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
    with client(faults) as c:
        made = c.create_schedule(
            "shop",
            "nightly",
            cron="30 2 * * *",
            time_zone="Europe/Berlin",
            handler="shop.report",
            misfire_policy="CatchUp",
            catch_up_limit=3,
            start_at=start,
            max_attempts=2,
        )
    assert made.next_fire_at == dt.datetime(2026, 6, 2, 0, 30, tzinfo=dt.UTC)
    [request] = faults.requests
    assert (request.method, request.url.path) == ("POST", "/v1/namespaces/shop/schedules")
    assert faults.bodies[0] == {
        "name": "nightly",
        "cron": "30 2 * * *",
        "time_zone": "Europe/Berlin",
        "task": {"handler": "shop.report", "queue": "default", "params": {}, "max_attempts": 2},
        "suspend": False,
        "concurrency_policy": "Allow",
        "misfire_policy": "CatchUp",
        "catch_up_limit": 3,
        "start_at": "2026-06-01T00:00:00+00:00",
    }


def test_a_create_that_may_have_been_applied_is_not_resent() -> None:
    faults = Faults([httpx.ReadTimeout("lost answer")], success=ok)
    with client(faults) as c, pytest.raises(errors.ServerUnreachable):
        c.create_schedule("shop", "nightly", cron="@daily", handler="h")
    assert len(faults.requests) == 1


def test_suspend_is_resent_after_a_lost_answer() -> None:
    faults = Faults([problem(503, "unavailable")], success=ok)
    with client(faults) as c:
        c.suspend_schedule("shop", "nightly")
    assert [r.url.path for r in faults.requests] == [
        "/v1/namespaces/shop/schedules/nightly/suspend"
    ] * 2


def test_a_conditional_update_is_not_resent_but_sends_its_version() -> None:
    faults = Faults([problem(503, "unavailable")], success=ok)
    with client(faults) as c, pytest.raises(errors.Unavailable):
        c.update_schedule("shop", "nightly", cron="@daily", handler="h", expected_version=4)
    assert len(faults.requests) == 1 and faults.bodies[0]["expected_version"] == 4


def test_async_client_has_the_same_schedule_methods() -> None:
    faults = Faults([], success=ok)

    async def run() -> str:
        async with AsyncClient(
            "http://orbit.test", transport=httpx.MockTransport(faults), retry=FAST
        ) as c:
            await c.resume_schedule("shop", "nightly")
            return (await c.get_schedule("shop", "nightly", occurrences=3)).state

    assert asyncio.run(run()) == "Active"
    assert [r.url.path for r in faults.requests][-1] == "/v1/namespaces/shop/schedules/nightly"
    assert faults.requests[-1].url.params["occurrences"] == "3"
