"""The SDK hands each request to the transport that carries it (``orbit_sdk._wire``) instead of
going through ``httpx.Client.send``, and keeps what it relies on of ``send``: a closed client
refuses to send, answers are read in full, cookies are kept. Where httpx would route a request
elsewhere -- a proxy from the environment, credentials in the server URL -- ``send`` does it."""

from __future__ import annotations

import asyncio
import base64
import http.server
import threading
from collections.abc import Iterator

import httpx
import pytest

from orbit_sdk import AsyncClient, Client, Worker
from orbit_sdk._http11 import Http11Transport
from orbit_sdk._transport import Call

from .test_request_building import Sent, affinity_after, recorder

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.fixture
def send_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """``httpx.Client.send`` and its async twin fail the test if anything calls them."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("httpx's send was used")

    monkeypatch.setattr(httpx.Client, "send", refuse)
    monkeypatch.setattr(httpx.AsyncClient, "send", refuse)


@pytest.mark.usefixtures("send_refused")
def test_the_client_hands_each_request_to_its_transport() -> None:
    sent: Sent = []
    with Client("http://o.test", token="t", transport=httpx.MockTransport(recorder(sent))) as c:
        c._transport.send(Call("POST", "/v1/namespaces/shop/tasks", json={"handler": "h"}))
    assert [(r.method, str(r.url)) for r in sent] == [
        ("POST", "http://o.test/v1/namespaces/shop/tasks")
    ]
    assert sent[0].headers["authorization"] == "Bearer t"


@pytest.mark.usefixtures("send_refused")
def test_the_async_client_hands_each_request_to_its_transport() -> None:
    sent: Sent = []

    async def handle(request: httpx.Request) -> httpx.Response:
        await request.aread()
        sent.append(request)
        return httpx.Response(200, json={})

    async def go() -> None:
        async with AsyncClient("http://o.test", transport=httpx.MockTransport(handle)) as c:
            await c._transport.send(Call("GET", "/v1/whoami"))

    asyncio.run(go())
    assert [str(r.url) for r in sent] == ["http://o.test/v1/whoami"]


def test_a_worker_without_a_transport_of_its_own_makes_one_with_its_pool_limits() -> None:
    worker = Worker("http://o.test", namespace="shop", concurrency=3)
    direct = worker._transport.direct
    worker._transport.close()
    assert isinstance(direct, Http11Transport)
    # a worker needs 2x concurrency + 8 connections
    assert direct.max_connections == 2 * 3 + 8


@pytest.mark.usefixtures("send_refused")
def test_the_answer_is_read_in_full_and_knows_its_request() -> None:
    answer = httpx.Response(
        200, content=b'{"ok": true}', headers={"content-type": "application/json"}
    )
    with Client("http://o.test", transport=httpx.MockTransport(lambda request: answer)) as c:
        response = c._transport.send(Call("GET", "/v1/whoami"))
    assert isinstance(response, httpx.Response)  # a transport passed in: httpx's response
    assert response.is_closed and response.json() == {"ok": True}
    assert str(response.request.url) == "http://o.test/v1/whoami"


def test_a_closed_client_refuses_to_send_as_httpx_does() -> None:
    client = Client("http://o.test", transport=httpx.MockTransport(recorder([])))
    client.close()
    with pytest.raises(RuntimeError, match="client has been closed"):
        client._transport.send(Call("GET", "/v1/whoami"))


@pytest.mark.usefixtures("send_refused")
def test_the_direct_path_keeps_the_cookie_an_answer_sets() -> None:
    sent: Sent = []
    transport = httpx.MockTransport(recorder(sent, affinity_after(1)))
    with Client("http://o.test", transport=transport) as c:
        for _ in range(3):
            c._transport.send(Call("GET", "/v1/whoami"))
    assert [r.headers.get("cookie") for r in sent] == [None, None, "route=pod-2"]


def test_credentials_in_the_server_url_still_become_basic_authentication() -> None:
    sent: Sent = []
    with Client("http://ann:s3cret@o.test", transport=httpx.MockTransport(recorder(sent))) as c:
        assert c._transport.direct is None
        c._transport.send(Call("GET", "/v1/whoami"))
    assert sent[0].headers["authorization"] == "Basic " + base64.b64encode(b"ann:s3cret").decode()


class _Proxy(http.server.BaseHTTPRequestHandler):
    """Records each request line it is sent and answers it with an empty JSON object."""

    lines: list[str] = []

    def do_GET(self) -> None:
        self.lines.append(self.requestline)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[str]:
    _Proxy.lines = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Proxy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_client_under_an_environment_proxy_sends_through_the_proxy(
    monkeypatch: pytest.MonkeyPatch, proxy: str
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy)
    with Client("http://orbit.internal.test", token="t") as c:
        assert c._transport.direct is None
        c._transport.send(Call("GET", "/v1/whoami"))
    assert _Proxy.lines == ["GET http://orbit.internal.test/v1/whoami HTTP/1.1"]
