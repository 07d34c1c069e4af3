"""The transport sends each call through httpx's public API: what reaches the wire is what
``httpx.Client.request`` sends for the same call, with the call's own timeout and budget."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from orbit_sdk import AsyncClient, Client
from orbit_sdk._wire.transport import AsyncTransport, Call, SyncTransport

Sent = list[httpx.Request]


def recorder(sent: Sent, answer: Callable[[httpx.Request], httpx.Response] | None = None) -> Any:
    def handle(request: httpx.Request) -> httpx.Response:
        request.read()
        sent.append(request)
        return answer(request) if answer else httpx.Response(200, json={"ok": True})

    return handle


def wire(request: httpx.Request) -> tuple[str, str, list[tuple[bytes, bytes]], bytes, object]:
    return (
        request.method,
        str(request.url),
        sorted(request.headers.raw),
        request.content,
        request.extensions["timeout"],
    )


def both_ways(base_url: str, call: Call, timeout: float = 7.0) -> tuple[httpx.Request, ...]:
    sent: Sent = []
    client = httpx.Client(
        base_url=base_url,
        headers={"authorization": "Bearer t0k", "user-agent": "orbit-sdk/test"},
        timeout=timeout,
        transport=httpx.MockTransport(recorder(sent)),
    )
    with client:
        client.request(call.method, call.path, json=call.json, params=call.clean_params())
        SyncTransport(client).send(call)
    return tuple(sent)


@pytest.mark.parametrize(
    "call",
    [
        Call("POST", "/v1/namespaces/shop/tasks", json={"handler": "h", "params": {"é": [1, 2.5]}}),
        Call("GET", "/v1/namespaces/shop/tasks/0190a8f2-7c1e-7000-8000-00000000000a"),
        Call("GET", "/v1/namespaces/shop/tasks", params={"state": "WAITING", "queue": None}),
        Call("POST", "/v1/attempts:complete", json={"items": []}),
    ],
)
@pytest.mark.parametrize("base_url", ["http://orbit.test:8080", "https://gw.test/orbit/"])
def test_a_built_request_is_what_client_request_sends(base_url: str, call: Call) -> None:
    expected, built = both_ways(base_url, call)
    assert wire(built) == wire(expected)


def test_a_call_s_own_timeout_and_budget_reach_the_request() -> None:
    sent: Sent = []
    client = httpx.Client(
        base_url="http://o.test", timeout=10.0, transport=httpx.MockTransport(recorder(sent))
    )
    send = SyncTransport(client).send
    send(Call("POST", "/v1/worker-sessions/s/lease", json={}, idempotent=False, timeout=40.0))
    send(Call("POST", "/v1/attempts:complete", json={"items": []}, budget=2.5))
    send(Call("GET", "/v1/whoami"))
    long_poll, budgeted, plain = (r.extensions["timeout"] for r in sent)
    assert long_poll == httpx.Timeout(40.0).as_dict()
    assert budgeted == httpx.Timeout(2.5).as_dict()
    assert plain == httpx.Timeout(10.0).as_dict()


def test_cookies_the_server_sets_are_sent_back_as_httpx_would() -> None:
    """An ingress's affinity cookie: once the jar holds one, requests carry it."""
    sent: Sent = []

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={}, headers={"set-cookie": "route=pod-2; Path=/"})

    client = httpx.Client(
        base_url="http://o.test", transport=httpx.MockTransport(recorder(sent, answer))
    )
    send = SyncTransport(client).send
    send(Call("GET", "/v1/whoami"))
    send(Call("GET", "/v1/whoami"))
    assert "cookie" not in sent[0].headers
    assert sent[1].headers["cookie"] == "route=pod-2"


def test_the_client_s_headers_are_read_per_request() -> None:
    sent: Sent = []
    client = httpx.Client(base_url="http://o.test", transport=httpx.MockTransport(recorder(sent)))
    send = SyncTransport(client).send
    send(Call("GET", "/v1/whoami"))
    client.headers["authorization"] = "Bearer rotated"
    send(Call("GET", "/v1/whoami"))
    assert "authorization" not in sent[0].headers
    assert sent[1].headers["authorization"] == "Bearer rotated"


def test_the_async_transport_builds_the_same_request() -> None:
    call = Call("POST", "/v1/namespaces/shop/tasks", json={"handler": "h"})
    sent: Sent = []

    async def handle(request: httpx.Request) -> httpx.Response:
        await request.aread()
        sent.append(request)
        return httpx.Response(200, json={})

    async def go() -> None:
        async with httpx.AsyncClient(
            base_url="http://o.test/sub",
            headers={"authorization": "Bearer a"},
            transport=httpx.MockTransport(handle),
        ) as client:
            await client.request(call.method, call.path, json=call.json)
            await AsyncTransport(client).send(call)

    asyncio.run(go())
    assert wire(sent[1]) == wire(sent[0])


def affinity_after(answers_without: int) -> Callable[[httpx.Request], httpx.Response]:
    """A server whose answers set an affinity cookie from the ``answers_without + 1``-th on."""
    answered = [0]

    def answer(request: httpx.Request) -> httpx.Response:
        answered[0] += 1
        if answered[0] <= answers_without:
            return httpx.Response(200, json={})
        return httpx.Response(200, json={}, headers={"set-cookie": "route=pod-2; Path=/"})

    return answer


@pytest.mark.parametrize("answers_without", [0, 2])
def test_the_sdk_client_keeps_a_cookie_whichever_answer_sets_it(answers_without: int) -> None:
    """An ingress's affinity cookie set by any answer is sent back from then on."""
    sent: Sent = []
    transport = httpx.MockTransport(recorder(sent, affinity_after(answers_without)))
    with Client("http://o.test", token="t", transport=transport) as client:
        for _ in range(answers_without + 2):
            client._transport.send(Call("GET", "/v1/whoami"))
    assert all("cookie" not in r.headers for r in sent[: answers_without + 1])
    assert sent[-1].headers["cookie"] == "route=pod-2"


def test_the_async_sdk_client_keeps_a_cookie_it_is_given() -> None:
    sent: Sent = []

    async def handle(request: httpx.Request) -> httpx.Response:
        await request.aread()
        sent.append(request)
        return affinity(request)

    affinity = affinity_after(1)

    async def go() -> None:
        async with AsyncClient(
            "http://o.test", token="t", transport=httpx.MockTransport(handle)
        ) as client:
            for _ in range(3):
                await client._transport.send(Call("GET", "/v1/whoami"))

    asyncio.run(go())
    assert [r.headers.get("cookie") for r in sent] == [None, None, "route=pod-2"]
