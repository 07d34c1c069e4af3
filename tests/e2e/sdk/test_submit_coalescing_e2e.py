"""Concurrent ``Client.submit`` calls sent together (``orbit_sdk._client.coalesce``) against the
real server: each caller still gets its own task or its own typed error — what its submission alone
would have answered —, a key names one task however many callers use it at once (invariant 6),
each thread's tasks are accepted in the order it submitted them, and ``submit_linger=None``
sends every submission by itself. The AsyncClient's tasks are coalesced the same way."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from orbit_sdk import AsyncClient, Client, IdempotencyConflict, NotFound, Task, ValidationFailed

from ..conftest import Tenant

THREADS = 8


class HeldTransport(httpx.HTTPTransport):
    """The network transport, counting requests by path; the first submission request is held
    until ``release()`` so the other callers' submissions wait meanwhile (deterministic
    company for the next request)."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []
        self.gate = threading.Event()
        self.first = threading.Event()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        if not self.first.is_set():
            self.first.set()
            self.gate.wait(30)
        return super().handle_request(request)

    def release(self) -> None:
        self.gate.set()


def _in_threads(calls: list[Callable[[], Any]], transport: HeldTransport) -> list[Any]:
    """Run ``calls`` at once; the first request is held until every call has begun."""

    def outcome(call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(outcome, call) for call in calls]
        assert transport.first.wait(30)
        time.sleep(0.5)  # the other callers reach the client and wait for the held request
        transport.release()
        return [f.result() for f in futures]


def _tasks_path(tenant: Tenant) -> str:
    return f"/v1/namespaces/{tenant.namespace}/tasks"


def test_concurrent_submissions_share_requests_and_each_gets_its_own_task(tenant: Tenant) -> None:
    transport = HeldTransport()
    with Client(tenant.server.url, token=tenant.token, transport=transport) as client:
        calls = [
            (lambda i=i: client.submit(tenant.namespace, handler="e2e.echo", params={"i": i}))
            for i in range(THREADS)
        ]
        tasks = _in_threads(calls, transport)
        assert all(isinstance(t, Task) for t in tasks), tasks
        assert [t.params for t in tasks] == [{"i": i} for i in range(THREADS)]
        assert len({t.id for t in tasks}) == THREADS
        for task in tasks:  # the answer is the task as the single submission answers it
            stored = client.get(tenant.namespace, task.id)
            assert (task.state, task.params, task.created_at) == (
                stored.state,
                stored.params,
                stored.created_at,
            )
            assert task.replayed is False and task.waiting_reason == "ready"
    single, batch = _tasks_path(tenant), _tasks_path(tenant) + ":batch"
    assert transport.paths.count(batch) >= 1, "no submissions went together"
    assert transport.paths.count(single) + transport.paths.count(batch) < THREADS


def test_one_key_used_by_many_callers_at_once_names_one_task_inv6(tenant: Tenant) -> None:
    transport = HeldTransport()
    with Client(tenant.server.url, token=tenant.token, transport=transport) as client:

        def same(params: Any) -> Callable[[], Task]:
            return lambda: client.submit(
                tenant.namespace, handler="e2e.echo", params=params, idempotency_key="order-7"
            )

        answers = _in_threads([same({"n": 1})] * 5 + [same({"n": 2})], transport)
    tasks = [a for a in answers if isinstance(a, Task)]
    assert len({t.id for t in tasks}) == 1
    assert sorted(t.replayed for t in tasks) == [False] + [True] * (len(tasks) - 1)
    conflicts = [a for a in answers if isinstance(a, IdempotencyConflict)]
    # The different request under the key conflicts unless it came first (then the others do).
    assert len(conflicts) in (1, 5) and len(tasks) + len(conflicts) == 6


def test_a_refused_submission_raises_in_its_caller_alone(tenant: Tenant) -> None:
    """An undeclared queue (404, refused by the store) and a handler name over the limit (422,
    refused by the request's validation: the shared request is then sent again one by one)
    each raise their own typed error; the submissions beside them are accepted."""
    transport = HeldTransport()
    with Client(tenant.server.url, token=tenant.token, transport=transport) as client:
        ok = [
            (lambda i=i: client.submit(tenant.namespace, handler="e2e.echo", params={"i": i}))
            for i in range(4)
        ]
        undeclared = lambda: client.submit(tenant.namespace, handler="e2e.echo", queue="nope")  # noqa: E731
        too_long = lambda: client.submit(tenant.namespace, handler="h" * 300)  # noqa: E731
        answers = _in_threads([*ok[:2], undeclared, too_long, *ok[2:]], transport)
    assert isinstance(answers[2], NotFound) and "nope" in str(answers[2])
    assert isinstance(answers[3], ValidationFailed)
    assert any(field.startswith("handler") for field, _ in answers[3].fields)
    accepted = [answers[k] for k in (0, 1, 4, 5)]
    assert [t.params for t in accepted] == [{"i": i} for i in range(4)]


def test_each_thread_s_submissions_are_accepted_in_its_order(tenant: Tenant) -> None:
    with Client(tenant.server.url, token=tenant.token) as client:

        def submit_in_order(thread: int) -> list[Task]:
            return [
                client.submit(tenant.namespace, handler="e2e.echo", params={"t": thread, "n": n})
                for n in range(10)
            ]

        with ThreadPoolExecutor(THREADS) as pool:
            per_thread = list(pool.map(submit_in_order, range(THREADS)))
    for thread, tasks in enumerate(per_thread):
        assert [t.params for t in tasks] == [{"t": thread, "n": n} for n in range(10)]
        assert [t.id for t in tasks] == sorted(t.id for t in tasks), "ids are time-ordered"
        assert [t.created_at for t in tasks] == sorted(t.created_at for t in tasks)


def test_without_coalescing_every_submission_is_its_own_request(tenant: Tenant) -> None:
    transport = HeldTransport()
    with Client(
        tenant.server.url, token=tenant.token, transport=transport, submit_linger=None
    ) as client:
        calls = [
            (lambda i=i: client.submit(tenant.namespace, handler="e2e.echo", params={"i": i}))
            for i in range(4)
        ]
        tasks = _in_threads(calls, transport)
    assert all(isinstance(t, Task) for t in tasks)
    assert transport.paths == [_tasks_path(tenant)] * 4


@pytest.mark.parametrize("linger", [0.0, 0.005])
def test_the_async_client_coalesces_its_tasks_submissions(tenant: Tenant, linger: float) -> None:
    paths: list[str] = []

    async def count(request: httpx.Request) -> None:
        paths.append(request.url.path)

    async def go() -> list[Any]:
        async with AsyncClient(
            tenant.server.url, token=tenant.token, submit_linger=linger
        ) as client:
            client._transport.client.event_hooks["request"] = [count]
            submissions = [
                client.submit(tenant.namespace, handler="e2e.echo", params={"i": i})
                for i in range(THREADS)
            ]
            refused = client.submit(tenant.namespace, handler="e2e.echo", queue="nope")
            return await asyncio.gather(*submissions, refused, return_exceptions=True)

    answers = asyncio.run(go())
    assert [t.params for t in answers[:THREADS]] == [{"i": i} for i in range(THREADS)]
    assert isinstance(answers[THREADS], NotFound)
    assert _tasks_path(tenant) + ":batch" in paths
    assert len(paths) < THREADS + 1
