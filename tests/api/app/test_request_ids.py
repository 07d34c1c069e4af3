"""Every answer carries an ``X-Request-Id`` (orbit/api/transport/request_ids.py): the client's when
it sent a sane one, else a new one, unique across requests and processes."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest

from orbit.api.transport import request_ids

from ..conftest import Answer, Api, asgi_request, authed


def call(api: Api, path: str, body: Any, **headers: str) -> Answer:
    return asgi_request(api.app, path, json.dumps(body).encode(), authed(api, **headers))


def test_each_request_without_an_id_gets_a_new_one(api: Api) -> None:
    path = f"/v1/namespaces/{api.namespace}/tasks"
    made = [call(api, path, {"handler": "h"})[1]["x-request-id"] for _ in range(3)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", rid) for rid in made)
    assert len(set(made)) == 3


def test_a_sane_id_is_echoed_and_another_replaced(api: Api) -> None:
    path = f"/v1/namespaces/{api.namespace}/tasks"
    assert call(api, path, {"handler": "h"}, **{"x-request-id": "job-7:a"})[1]["x-request-id"] == (
        "job-7:a"
    )
    replaced = call(api, path, {"handler": "h"}, **{"x-request-id": "a b"})[1]["x-request-id"]
    assert replaced != "a b" and re.fullmatch(r"[0-9a-f]{32}", replaced)


@pytest.mark.usefixtures("broken_worker_routes")
def test_an_unexpected_errors_500_carries_the_request_id(api: Api) -> None:
    body = {"items": [{"attempt_id": "a", "token": "t"}]}
    status, head, doc = call(api, "/v1/attempts/heartbeat", body, **{"x-request-id": "r-500"})
    assert status == 500 and doc["request_id"] == "r-500"
    assert head["x-request-id"] == "r-500"


def test_a_forked_process_makes_ids_of_its_own() -> None:
    """`orbit server --workers N` may fork: a child must not repeat its parent's ids."""
    parent = request_ids._new_ids.next()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first id, then gone
        os.write(write, request_ids._new_ids.next().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert len(child) == len(parent) == 32
    assert child[:16] != parent[:16]
