"""The SDK's own transport (``orbit_sdk._http11``) against real sockets: connections kept and
reused, never a request on a connection the server closed, httpx's errors for each way an
exchange fails (so the SDK's retry rules hold: ``_transport``), httpx's timeouts and pool
limits, TLS with a certificate the client trusts."""

from __future__ import annotations

import gzip
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from orbit_sdk import Client
from orbit_sdk._http11 import Http11Transport

from .scripted_server import ScriptedServer, answer


def post(transport: Http11Transport, url: str, **timeouts: float) -> httpx.Response:
    request = httpx.Request("POST", url, json={"n": 1})
    if timeouts:
        request.extensions["timeout"] = httpx.Timeout(5.0, **timeouts).as_dict()
    response = transport.handle_request(request)
    response.read()
    return response


def test_one_connection_carries_every_request_of_a_caller(
    serve: Callable[..., ScriptedServer],
) -> None:
    server = serve()
    transport = Http11Transport()
    answers = [post(transport, server.url + "/v1/x?q=1") for _ in range(5)]
    transport.close()
    assert [(r.status_code, r.json()) for r in answers] == [(200, {"ok": True})] * 5
    assert server.connections == 1
    assert server.requests[0].startswith(b"POST /v1/x?q=1 HTTP/1.1\r\n")
    assert b"\r\ncontent-length: 7\r\n" in server.requests[0].lower()
    assert server.requests[0].endswith(b'\r\n\r\n{"n":1}')


def test_a_request_never_goes_on_a_connection_the_server_closed_while_idle(
    serve: Callable[..., ScriptedServer],
) -> None:
    # The server closes after each answer without saying so (as an idle timeout does): the
    # next request must open a new connection, not fail on the dead one (a POST is not retried).
    server = serve(lambda request: (answer(), True))
    transport = Http11Transport()
    first = post(transport, server.url)
    time.sleep(0.2)  # the FIN has arrived
    second = post(transport, server.url)
    transport.close()
    assert (first.status_code, second.status_code) == (200, 200)
    assert server.connections == 2
    assert len(server.requests) == 2


def test_an_answer_with_connection_close_is_not_kept(serve: Callable[..., ScriptedServer]) -> None:
    server = serve(lambda request: (answer(b"{}", "200 OK", "connection: close"), False))
    transport = Http11Transport()
    post(transport, server.url)
    post(transport, server.url)
    transport.close()
    assert server.connections == 2


def test_an_idle_connection_older_than_the_keepalive_expiry_is_replaced(
    serve: Callable[..., ScriptedServer],
) -> None:
    server = serve()
    transport = Http11Transport(limits=httpx.Limits(keepalive_expiry=0.05))
    post(transport, server.url)
    time.sleep(0.2)
    post(transport, server.url)
    transport.close()
    assert server.connections == 2


def test_at_most_max_keepalive_connections_stay_idle(serve: Callable[..., ScriptedServer]) -> None:
    server = serve()
    transport = Http11Transport(limits=httpx.Limits(max_keepalive_connections=1))
    barrier = threading.Barrier(3)

    def call() -> None:
        barrier.wait()
        post(transport, server.url)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    opened = server.connections
    for _ in range(3):
        post(transport, server.url)
    transport.close()
    assert server.connections == opened  # the one kept carried the next three


def test_a_refused_connection_is_a_connect_error_nothing_was_sent() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    transport = Http11Transport()
    with pytest.raises(httpx.ConnectError):
        post(transport, f"http://127.0.0.1:{port}/")


def test_no_answer_in_time_is_a_read_timeout(serve: Callable[..., ScriptedServer]) -> None:
    server = serve(lambda request: (None, False))
    transport = Http11Transport()
    with pytest.raises(httpx.ReadTimeout):
        post(transport, server.url, read=0.2)


def test_an_answer_cut_short_is_a_remote_protocol_error(
    serve: Callable[..., ScriptedServer],
) -> None:
    cut = b'HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"partial'
    server = serve(lambda request: (cut, True))
    transport = Http11Transport()
    with pytest.raises(httpx.RemoteProtocolError):
        post(transport, server.url)


def test_a_connection_closed_before_any_answer_is_a_remote_protocol_error(
    serve: Callable[..., ScriptedServer],
) -> None:
    server = serve(lambda request: (b"", True))
    transport = Http11Transport()
    with pytest.raises(httpx.RemoteProtocolError):
        post(transport, server.url)


def test_an_answer_sent_before_the_body_was_read_is_returned() -> None:
    # A server that refuses a large body answers 413 from its head alone and closes; the client
    # is then still sending (broken pipe / reset) and must see the 413, as with httpcore.
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def refuse_the_body() -> None:
        conn, _ = listener.accept()
        reader = conn.makefile("rb")
        while reader.readline() not in (b"\r\n", b""):
            pass
        conn.sendall(
            answer(b'{"title": "too large"}', "413 Content Too Large", "connection: close")
        )
        conn.shutdown(socket.SHUT_WR)
        time.sleep(0.3)  # unread body in the buffer: the close resets the connection
        conn.close()
        listener.close()

    threading.Thread(target=refuse_the_body, daemon=True).start()
    request = httpx.Request("POST", f"http://127.0.0.1:{port}/", content=b"x" * 16_000_000)
    response = Http11Transport().handle_request(request)
    assert response.status_code == 413
    assert response.read() == b'{"title": "too large"}'


def test_no_free_connection_in_time_is_a_pool_timeout(serve: Callable[..., ScriptedServer]) -> None:
    holding = threading.Event()

    def hold_the_first(request: bytes) -> tuple[bytes | None, bool]:
        if not holding.is_set():
            holding.set()
            return None, False
        return answer(), False

    server = serve(hold_the_first)
    transport = Http11Transport(limits=httpx.Limits(max_connections=1))

    def held() -> None:
        with pytest.raises(httpx.ReadTimeout):
            post(transport, server.url, read=1.0)

    first = threading.Thread(target=held)
    first.start()
    holding.wait(5)
    with pytest.raises(httpx.PoolTimeout):
        post(transport, server.url, pool=0.1)
    first.join()


def test_chunked_and_gzip_answers_are_decoded(serve: Callable[..., ScriptedServer]) -> None:
    packed = gzip.compress(b'{"ok": "gzip"}')
    chunked = (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-encoding: gzip\r\n\r\n"
        + b"%x\r\n%s\r\n0\r\n\r\n" % (len(packed), packed)
    )
    server = serve(lambda request: (chunked, False))
    transport = Http11Transport()
    response = post(transport, server.url)
    again = post(transport, server.url)
    transport.close()
    assert response.json() == again.json() == {"ok": "gzip"}
    assert server.connections == 1  # the chunked answer was read to its end


def test_an_interim_answer_is_skipped_for_the_final_one(
    serve: Callable[..., ScriptedServer],
) -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + answer(b'{"ok": "final"}', "201 Created")
    server = serve(lambda request: (interim, False))
    transport = Http11Transport()
    first, second = post(transport, server.url), post(transport, server.url)
    assert (first.status_code, first.json()) == (201, {"ok": "final"})
    assert (second.status_code, server.connections) == (201, 1)


def test_a_connection_closed_after_an_interim_answer_is_a_remote_protocol_error(
    serve: Callable[..., ScriptedServer],
) -> None:
    server = serve(lambda request: (b"HTTP/1.1 100 Continue\r\n\r\n", True))
    with pytest.raises(httpx.RemoteProtocolError):
        post(Http11Transport(), server.url)


def test_an_answer_without_length_runs_to_the_close_and_its_connection_is_not_kept(
    serve: Callable[..., ScriptedServer],
) -> None:
    to_the_close = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"ok": "eof"}'
    server = serve(lambda request: (to_the_close, True))
    transport = Http11Transport()
    assert post(transport, server.url).json() == {"ok": "eof"}
    assert post(transport, server.url).json() == {"ok": "eof"}
    assert server.connections == 2


def test_an_answer_to_head_ends_with_its_headers(serve: Callable[..., ScriptedServer]) -> None:
    server = serve(lambda request: (b"HTTP/1.1 200 OK\r\ncontent-length: 42\r\n\r\n", False))
    transport = Http11Transport()
    request = httpx.Request("HEAD", server.url)
    request.extensions["timeout"] = httpx.Timeout(5.0).as_dict()
    response = transport.handle_request(request)
    assert (response.status_code, response.read(), response.headers["content-length"]) == (
        200,
        b"",
        "42",
    )


def test_bytes_after_an_answer_keep_its_connection_from_reuse(
    serve: Callable[..., ScriptedServer],
) -> None:
    server = serve(lambda request: (answer() + b"HTTP/1.1 200 OK\r\n", False))
    transport = Http11Transport()
    assert post(transport, server.url).json() == post(transport, server.url).json() == {"ok": True}
    assert server.connections == 2


def test_a_malformed_answer_is_a_remote_protocol_error(
    serve: Callable[..., ScriptedServer],
) -> None:
    server = serve(lambda request: (b"HTTP/1.1 OK 200\r\n\r\n", True))
    with pytest.raises(httpx.RemoteProtocolError):
        post(Http11Transport(), server.url)


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_https_with_a_trusted_certificate_and_refused_without(
    serve: Callable[..., ScriptedServer], certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(cert, key)
    server = serve(tls=server_side)
    trusting = Http11Transport(ssl_context=ssl.create_default_context(cafile=str(cert)))
    assert post(trusting, server.url).json() == {"ok": True}
    assert post(trusting, server.url).json() == {"ok": True}
    trusting.close()
    assert server.connections == 1
    with pytest.raises(httpx.ConnectError):  # httpx's default CAs do not know this one
        post(Http11Transport(), server.url)


def test_the_client_submits_through_it_by_default(serve: Callable[..., ScriptedServer]) -> None:
    task = (
        b'{"id": "0190d0b8-0000-7000-8000-000000000001", "namespace": "shop", "queue": "default",'
        b' "handler": "h", "params": null, "state": "WAITING", "state_version": 1, "priority": 0,'
        b' "available_at": "2025-01-01T00:00:00Z", "deadline_at": null,'
        b' "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:00Z",'
        b' "finished_at": null, "attempts_used": 0, "max_attempts": 3, "safety": "safe",'
        b' "concurrency_key": null, "cancel_requested": false, "retry_of": null,'
        b' "result": null, "error": null, "replayed": false}'
    )
    server = serve(lambda request: (answer(task, "201 Created"), False))
    with Client(server.url, token="t") as client:
        assert isinstance(client._transport.direct, Http11Transport)
        submitted = [client.submit("shop", handler="h").id for _ in range(3)]
    assert submitted == ["0190d0b8-0000-7000-8000-000000000001"] * 3
    assert server.connections == 1
    assert all(b"\r\nauthorization: bearer t\r\n" in r.lower() for r in server.requests)
