"""Failure paths of coalesced submissions (``orbit_sdk._client.coalesce``), with faults injected in
front of canned answers: a request failing as a whole is every caller's failure, as alone; a request
refused for its body is sent again one submission at a time; a server without ``with_tasks``
is spoken to one submission at a time from then on. (Their success paths run against the real
server: tests/e2e/sdk/test_submit_coalescing_e2e.py.)"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from orbit_sdk import Client, ServerUnreachable, Task
from orbit_sdk._wire.transport import RetryPolicy

from .conftest import problem, task_body

Handler = Callable[[httpx.Request], httpx.Response]


class Held:
    """A mock server whose first request waits until the test has every caller waiting."""

    def __init__(self, answer: Handler) -> None:
        self.answer, self.bodies = answer, []  # type: ignore[var-annotated]
        self.first, self.gate = threading.Event(), threading.Event()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.bodies.append((request.url.path, body))
        if not self.first.is_set():
            self.first.set()
            self.gate.wait(10)
        return self.answer(request)


def _together(server: Held, params: list[Any], **client: Any) -> list[Any]:
    with Client(
        "http://orbit.test",
        token="t",
        transport=httpx.MockTransport(server),
        retry=RetryPolicy(max_attempts=1),
        **client,
    ) as sdk:

        def submit(p: Any) -> Any:
            try:
                return sdk.submit("shop", handler="shop.echo", params=p)
            except Exception as exc:
                return exc

        with ThreadPoolExecutor(len(params)) as pool:
            futures = [pool.submit(submit, p) for p in params]
            assert server.first.wait(10)
            time.sleep(0.3)  # the others wait for the held request
            server.gate.set()
            return [f.result() for f in futures]


def _answer_each(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    if request.url.path.endswith(":batch"):
        results = [
            {"index": k, "status": "created", "task": task_body(id=f"t{k}", params=item["params"])}
            for k, item in enumerate(body["items"])
        ]
        return httpx.Response(200, json={"results": results, "created": len(results)})
    return httpx.Response(201, json=task_body(params=body["params"]))


def test_a_request_that_fails_as_a_whole_fails_every_caller_alike() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    answers = _together(Held(down), [1, 2, 3])
    assert all(isinstance(a, ServerUnreachable) for a in answers)


def test_params_that_cannot_be_sent_fail_their_caller_alone_as_alone() -> None:
    """A set is not JSON: its caller gets the error its submission alone gets (refused before
    anything is sent), its neighbours their tasks."""
    server = Held(_answer_each)
    answers = _together(server, [1, {2}, 3])
    alone = Held(_answer_each)
    alone.first.set()
    alone.gate.set()
    with Client("http://orbit.test", transport=httpx.MockTransport(alone), submit_linger=None) as c:
        try:
            c.submit("shop", handler="shop.echo", params={2})
        except Exception as exc:
            expected = exc
    assert type(answers[1]) is type(expected) and str(answers[1]) == str(expected)
    assert [a.params for a in (answers[0], answers[2])] == [1, 3]


def test_a_server_without_with_tasks_is_sent_one_submission_at_a_time() -> None:
    def old(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith(":batch"):
            refusal = [{"loc": ["body", "with_tasks"], "msg": "Extra inputs", "type": "x"}]
            return problem(422, "validation", errors=refusal)
        return _answer_each(request)

    server = Held(old)
    answers = _together(server, [1, 2, 3, 4])
    assert all(isinstance(a, Task) for a in answers)
    assert [a.params for a in answers] == [1, 2, 3, 4]
    batches = [path for path, _ in server.bodies if path.endswith(":batch")]
    assert len(batches) == 1, "refused once, then one submission per request"


def test_a_lone_caller_sends_its_submission_by_itself() -> None:
    server = Held(_answer_each)
    server.first.set()  # nothing held
    server.gate.set()
    with Client("http://orbit.test", token="t", transport=httpx.MockTransport(server)) as sdk:
        for n in range(3):
            assert sdk.submit("shop", handler="shop.echo", params=n).params == n
    assert [path for path, _ in server.bodies] == ["/v1/namespaces/shop/tasks"] * 3


def test_a_negative_linger_is_refused_naming_the_option() -> None:
    try:
        Client("http://orbit.test", submit_linger=-1)
    except ValueError as exc:
        assert "submit_linger" in str(exc)
    else:
        raise AssertionError("a negative linger was accepted")


def test_a_sender_waits_for_company_only_after_a_request_that_had_some() -> None:
    """A lone caller's submissions go at once (no linger); once a request carried several, the
    next sender waits up to the linger for the callers coming back."""
    from orbit_sdk._client.coalesce import Gathering, Waiting

    gathering = Gathering(0.25)
    assert gathering.lingers() == 0.0
    gathering.pending = [Waiting("shop", {"n": 1})]
    gathering.take()
    assert gathering.lingers() == 0.0, "after a request of one submission"
    gathering.pending = [Waiting("shop", {"n": n}) for n in range(3)]
    gathering.take()
    assert gathering.lingers() == 0.25
