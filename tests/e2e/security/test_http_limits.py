"""Size limits and the air-gapped /docs, over real HTTP against
`orbit server`: params and results above `--max-payload-bytes` (1 MiB by default) are a 413
problem naming the field, and a body that is too large is refused before it is read."""

from __future__ import annotations

import json
import re
import socket
from urllib.parse import urlsplit

import httpx

from orbit_sdk import Client

from ..conftest import Server, Tenant, lease_and_start

LIMIT = 1024 * 1024
TOO_BIG = {"blob": "x" * (LIMIT + 1)}


def test_params_over_the_limit_are_a_413_problem_naming_params(tenant: Tenant) -> None:
    url = f"{tenant.server.url}/v1/namespaces/{tenant.namespace}/tasks"
    answer = httpx.post(url, headers=tenant.headers, json={"handler": "x", "params": TOO_BIG})
    problem = answer.json()
    assert answer.status_code == 413 and problem["type"].endswith("/payload-too-large")
    assert (problem["field"], problem["limit_bytes"]) == ("params", LIMIT)
    assert httpx.get(url, headers=tenant.headers).json()["items"] == []


def test_a_result_over_the_limit_is_refused_and_a_smaller_report_still_lands(
    tenant: Tenant,
) -> None:
    url = f"{tenant.server.url}/v1/namespaces/{tenant.namespace}/tasks"
    httpx.post(url, headers=tenant.headers, json={"handler": "x"})
    attempt, token = lease_and_start(tenant)
    headers = tenant.headers
    big = {"token": token, "outcome": "succeeded", "result": TOO_BIG}
    refused = httpx.post(f"{attempt}/complete", json=big, headers=headers)
    assert refused.status_code == 413 and refused.json()["field"] == "result"
    small = {"token": token, "outcome": "succeeded", "result": {"ok": True}}
    assert (
        httpx.post(f"{attempt}/complete", json=small, headers=headers).json()["status"] == "applied"
    )


def test_a_handlers_result_over_the_limit_fails_the_task_instead_of_hanging(
    tenant: Tenant,
) -> None:
    tenant.start_worker()
    params = {"blob": "x" * (LIMIT - 20)}  # under the limit; its echo with the generation is not
    with Client(tenant.server.url, token=tenant.token) as client:
        task = client.submit(tenant.namespace, handler="e2e.echo", params=params)
        done = client.wait(tenant.namespace, task.id, timeout=30)
    assert done.state == "FAILED" and done.error["type"] == "CompletionRejected"
    assert "the limit is 1048576 bytes" in done.error["message"]


def _raw(server: Server) -> socket.socket:
    parts = urlsplit(server.url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=15)
    return sock


def _status_and_body(sock: socket.socket) -> tuple[int, dict]:  # type: ignore[type-arg]
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    return int(head.split()[1]), json.loads(body)


def _length(data: bytes) -> int:
    found = re.search(rb"content-length: (\d+)", data.lower())
    return int(found.group(1)) if found else 0


def test_a_body_declared_too_large_is_refused_before_a_byte_of_it_is_sent(
    tenant: Tenant,
) -> None:
    with _raw(tenant.server) as sock:
        sock.sendall(
            f"POST /v1/namespaces/{tenant.namespace}/tasks HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {tenant.token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {50 * LIMIT}\r\n\r\n".encode()
        )
        status, problem = _status_and_body(sock)  # answered although no body was sent
    assert status == 413 and problem["field"] == "body"


def test_a_body_without_a_length_is_cut_off_once_it_passes_the_limit(tenant: Tenant) -> None:
    chunk = b"x" * 65536
    with _raw(tenant.server) as sock:
        sock.sendall(
            f"POST /v1/namespaces/{tenant.namespace}/tasks HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {tenant.token}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        try:
            for _ in range(2 * LIMIT // len(chunk)):  # twice the limit, never the final chunk
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading: the answer is already waiting
        status, problem = _status_and_body(sock)
    assert status == 413 and problem["type"].endswith("/payload-too-large")


def test_the_api_docs_load_every_asset_from_the_server_itself(server: Server) -> None:
    for page in ("/docs", "/redoc"):
        html = httpx.get(f"{server.url}{page}").text
        assets = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert assets and all(a.startswith("/") for a in assets), assets
        for asset in assets:
            assert httpx.get(f"{server.url}{asset}").status_code == 200, asset
