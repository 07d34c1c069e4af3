"""Calls sent straight to the SDK's own transport (``orbit_sdk._wire.LeanWire``), against a
scripted server on a real socket: the bytes are the request httpx would send for the same call,
a 2xx answer comes back without httpx's response, and everything httpx must see (errors,
retries, cookies, encoded answers, query parameters) still goes to httpx."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable

import httpx
import pytest

from orbit_sdk import Client
from orbit_sdk._transport import Call
from orbit_sdk._wire import LeanAnswer, exchange
from orbit_sdk.errors import IdempotencyConflict

from .conftest import PROBLEM_JSON, task_body
from .scripted_server import ScriptedServer, answer

Serve = Callable[..., ScriptedServer]
TASK = json.dumps(task_body()).encode()
SUBMIT = Call("POST", "/v1/namespaces/shop/tasks", json={"handler": "h", "params": {"é": 1.5}})


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def task_server(serve: Serve, *headers: str) -> ScriptedServer:
    return serve(lambda request: (answer(TASK, "201 Created", *headers), False))


def sent_both_ways(server: ScriptedServer, call: Call) -> tuple[bytes, bytes]:
    """The request the lean path wrote and the one httpx wrote for the same call."""
    with Client(server.url, token="t") as client:
        transport = client._transport
        assert transport._lean is not None and transport.direct is not None
        transport.send(call)
        exchange(client._transport.client, transport.direct, transport._requests.build(call))
    lean, through_httpx = server.requests
    return lean, through_httpx


def test_a_call_goes_out_as_the_request_httpx_would_send(serve: Serve) -> None:
    lean, through_httpx = sent_both_ways(task_server(serve), SUBMIT)
    assert lean == through_httpx


def test_a_call_without_a_body_goes_out_as_httpx_would_send_it(serve: Serve) -> None:
    server = serve(lambda request: (answer(b'{"drained": true}'), False))
    for call in (Call("POST", "/v1/worker-sessions/s1/drain"), Call("GET", "/v1/whoami")):
        server.requests.clear()
        lean, through_httpx = sent_both_ways(server, call)
        assert lean == through_httpx


def test_headers_changed_on_the_client_go_out_with_the_next_call(serve: Serve) -> None:
    server = task_server(serve)
    with Client(server.url, token="t") as client:
        client.submit("shop", handler="h")
        client._transport.client.headers["X-Trace"] = "abc"
        client.submit("shop", handler="h")
    first, second = server.requests
    assert b"x-trace: abc" not in first.lower() and b"x-trace: abc\r\n" in second.lower()


def test_a_2xx_answer_comes_back_without_httpx(serve: Serve) -> None:
    server = task_server(serve)
    with Client(server.url, token="t") as client:
        answered = client._transport.send(SUBMIT)
        task = client.submit("shop", handler="h")
    assert isinstance(answered, LeanAnswer)
    assert (answered.status_code, answered.json()) == (201, task_body())
    assert task.id == task_body()["id"] and server.connections == 1


def test_an_error_answer_is_the_typed_error(serve: Serve) -> None:
    problem = {
        "type": "https://orbit.dev/problems/idempotency-conflict",
        "title": "Idempotency key reused",
        "status": 409,
    }
    conflict = answer(json.dumps(problem).encode(), "409 Conflict", f"content-type: {PROBLEM_JSON}")
    server = serve(lambda request: (conflict, False))
    with Client(server.url, token="t") as client, pytest.raises(IdempotencyConflict):
        client.submit("shop", handler="h", idempotency_key="k")


def test_a_gateway_error_is_retried_for_an_idempotent_call(serve: Serve) -> None:
    answers = [answer(b"", "503 Service Unavailable"), answer(TASK, "201 Created")]
    server = serve(lambda request: (answers.pop(0), False))
    with Client(server.url, token="t") as client:
        client._transport.policy = client._transport.policy.__class__(initial_backoff=0.01)
        assert client.submit("shop", handler="h").id == task_body()["id"]
    assert len(server.requests) == 2


def test_a_cookie_an_answer_sets_is_sent_with_the_next_call(serve: Serve) -> None:
    server = task_server(serve, "set-cookie: affinity=pod-2; Path=/")
    with Client(server.url, token="t") as client:
        client.submit("shop", handler="h")
        client.submit("shop", handler="h")
    first, second = server.requests
    assert b"cookie:" not in first.lower()
    assert b"\r\ncookie: affinity=pod-2\r\n" in second.lower()


def test_an_encoded_answer_is_decoded(serve: Serve) -> None:
    packed = gzip.compress(TASK)
    server = serve(lambda request: (answer(packed, "201 Created", "content-encoding: gzip"), False))
    with Client(server.url, token="t") as client:
        assert client.submit("shop", handler="h").id == task_body()["id"]


def test_a_call_with_query_parameters_goes_through_httpx(serve: Serve) -> None:
    page = json.dumps({"items": [], "next_page_token": None}).encode()
    server = serve(lambda request: (answer(page), False))
    with Client(server.url, token="t") as client:
        answered = client._transport.send(
            Call("GET", "/v1/namespaces/shop/tasks", params={"state": "WAITING", "queue": None})
        )
    assert isinstance(answered, httpx.Response)
    assert server.requests[0].startswith(b"GET /v1/namespaces/shop/tasks?state=WAITING HTTP/1.1")


def test_a_server_url_with_a_path_prefix_is_kept(serve: Serve) -> None:
    server = task_server(serve)
    with Client(server.url + "/orbit", token="t") as client:
        client.submit("shop", handler="h")
    assert server.requests[0].startswith(b"POST /orbit/v1/namespaces/shop/tasks HTTP/1.1\r\n")


def test_a_closed_client_refuses_to_send_as_httpx_does(serve: Serve) -> None:
    client = Client(task_server(serve).url, token="t")
    client.close()
    with pytest.raises(RuntimeError, match="client has been closed"):
        client._transport.send(SUBMIT)
