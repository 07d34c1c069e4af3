"""uvicorn with Orbit's protocol writes each answer to its socket once, and loses or reorders
nothing (orbit/api/http_protocol.py). A real uvicorn server on a real socket; the protocol's
transport is wrapped in one that counts the writes reaching the socket."""

from __future__ import annotations

import asyncio
import http.client
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from orbit.api.http_protocol import CoalescingHttpToolsProtocol

WRITES: list[int] = []  # the size of each write that reached a socket


class _CountingTransport:
    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport

    def write(self, data: bytes) -> None:
        WRITES.append(len(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CountedProtocol(CoalescingHttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_CountingTransport(transport))  # type: ignore[arg-type]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    if scope["path"] == "/streamed":  # three body messages, each in a turn of its own
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for part in (b"one,", b"two,", b"three"):
            await send({"type": "http.response.body", "body": part, "more_body": True})
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    body = b'{"ok": true, "path": "%s"}' % scope["path"].encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if scope["path"] == "/last":
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, http=CountedProtocol, ws="none", log_config=None, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    yield sock.getsockname()[1]
    server.should_exit = True
    thread.join(10)


def test_each_answer_reaches_the_socket_in_one_write(port: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    WRITES.clear()
    for n in range(5):
        conn.request("POST", f"/tasks/{n}", body=b'{"n": 1}')
        answer = conn.getresponse()
        assert answer.status == 200 and answer.read() == b'{"ok": true, "path": "/tasks/%d"}' % n
    conn.close()
    assert len(WRITES) == 5, WRITES  # headers and body together, once per answer


def test_an_answer_streamed_over_several_turns_arrives_whole_and_in_order(port: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/streamed")
    answer = conn.getresponse()
    assert answer.read() == b"one,two,three"
    conn.close()


def test_an_answer_that_closes_the_connection_is_sent_before_the_close(port: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/last", body=b"{}")
    answer = conn.getresponse()
    assert answer.read() == b'{"ok": true, "path": "/last"}'
    assert answer.will_close
    conn.close()


def test_uvicorns_own_answer_to_a_malformed_request_arrives(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
    assert received.startswith(b"HTTP/1.1 400")
