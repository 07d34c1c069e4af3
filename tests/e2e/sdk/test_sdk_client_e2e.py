"""The SDK clients against the real server: cursor paging (docs/reference/api.md "List tasks"),
``wait`` running out of time with the last state seen, and the ``AsyncClient`` doing the same
calls."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from orbit_sdk import AsyncClient, Client, TimeoutExpired

from ..conftest import Tenant


class CountingTransport(httpx.HTTPTransport):
    """The ordinary network transport, counting the requests that reach the server."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(f"{request.method} {request.url.path}")
        return super().handle_request(request)


def submit_parked(client: Client, tenant: Tenant, count: int) -> list[str]:
    """Tasks that stay WAITING for an hour (no worker is running)."""
    return [client.submit(tenant.namespace, handler="x.y", delay=3600).id for _ in range(count)]


def test_paging_with_next_page_token_visits_every_task_once_newest_first(tenant: Tenant) -> None:
    with Client(tenant.server.url, token=tenant.token) as client:
        ids = submit_parked(client, tenant, 5)
        url = f"{tenant.server.url}/v1/namespaces/{tenant.namespace}/tasks"
        pages: list[list[str]] = []
        token: str | None = None
        while True:
            query = {"page_size": 2, **({"page_token": token} if token else {})}
            body = httpx.get(url, params=query, headers=tenant.headers).json()
            pages.append([t["id"] for t in body["items"]])
            if len(pages) == 1:  # submitted while paging: before the cursor, not on later pages
                newer = client.submit(tenant.namespace, handler="x.y", delay=3600).id
            token = body["next_page_token"]
            if token is None:
                break
    assert pages == [ids[4:2:-1], ids[2:0:-1], ids[:1]]
    assert all(newer not in page for page in pages)


def test_client_iter_tasks_fetches_every_page_from_the_server(tenant: Tenant) -> None:
    transport = CountingTransport()
    with Client(tenant.server.url, token=tenant.token, transport=transport) as client:
        ids = submit_parked(client, tenant, 5)
        transport.paths.clear()
        listed = [t.id for t in client.iter_tasks(tenant.namespace, page_size=2)]
    assert listed == ids[::-1]
    assert transport.paths == [f"GET /v1/namespaces/{tenant.namespace}/tasks"] * 3


def test_client_wait_times_out_carrying_the_last_state_it_saw(tenant: Tenant) -> None:
    with Client(tenant.server.url, token=tenant.token) as client:
        [task_id] = submit_parked(client, tenant, 1)
        began = time.monotonic()
        with pytest.raises(TimeoutExpired) as caught:
            client.wait(tenant.namespace, task_id, timeout=0.5, poll_interval=0.1)
    assert time.monotonic() - began >= 0.5
    err = caught.value
    assert isinstance(err, TimeoutError) and err.client_side
    assert err.task is not None and err.task.id == task_id and err.task.state == "WAITING"
    assert f"task {task_id} still WAITING after 0.5s" in str(err)


def test_the_async_client_submits_pages_waits_and_cancels_against_the_server(
    tenant: Tenant,
) -> None:
    async def scenario() -> None:
        async with AsyncClient(tenant.server.url, token=tenant.token) as client:
            ids = [
                (await client.submit(tenant.namespace, handler="x.y", delay=3600)).id
                for _ in range(3)
            ]
            first = await client.list(tenant.namespace, page_size=2)
            assert [t.id for t in first.items] == ids[:0:-1] and first.next_page_token
            second = await client.list(
                tenant.namespace, page_size=2, page_token=first.next_page_token
            )
            assert [t.id for t in second.items] == ids[:1] and second.next_page_token is None
            listed = [t.id async for t in client.iter_tasks(tenant.namespace, page_size=2)]
            assert listed == ids[::-1]
            with pytest.raises(TimeoutExpired) as caught:
                await client.wait(tenant.namespace, ids[0], timeout=0.3, poll_interval=0.1)
            assert caught.value.task.id == ids[0] and caught.value.task.state == "WAITING"
            await client.cancel(tenant.namespace, ids[0], reason="async test")
            done = await client.wait(tenant.namespace, ids[0], timeout=10)
            assert done.state == "CANCELLED"

    asyncio.run(scenario())
