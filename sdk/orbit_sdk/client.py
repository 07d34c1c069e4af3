"""``Client`` and ``AsyncClient``: submit, inspect, list, cancel and wait for tasks over HTTP;
schedules come from the ``_client.schedules`` mixins.

Both build their requests with ``_wire.calls`` and send them through ``_wire.transport``, so
retries, idempotency and error mapping are the same whichever one you use.
"""

from __future__ import annotations

import asyncio
import builtins
import os
import time
from collections.abc import AsyncIterator, Iterator
from types import TracebackType
from typing import Self, Unpack

import httpx

from ._client.bulk import AsyncBulkMethods, BulkMethods
from ._client.coalesce import DEFAULT_SUBMIT_LINGER, AsyncSubmitCoalescer, SubmitCoalescer
from ._client.schedules import AsyncScheduleMethods, ScheduleMethods
from ._version import __version__
from ._wire import calls
from ._wire.calls import SubmitOptions
from ._wire.transport import AsyncTransport, RetryPolicy, SyncTransport
from .errors import TimeoutExpired
from .models import SETTLED_STATES, Identity, Task, TaskDetail, TaskPage
from .results import AsyncResultsMethods, ResultsMethods
from .workflows import AsyncWorkflowMethods, WorkflowMethods

DEFAULT_SERVER = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = 10.0


def resolve_server(server: str | None) -> str:
    return (server or os.environ.get("ORBIT_SERVER") or DEFAULT_SERVER).rstrip("/")


def resolve_token(token: str | None) -> str | None:
    return token or os.environ.get("ORBIT_TOKEN") or None


def default_headers(token: str | None) -> dict[str, str]:
    headers = {"User-Agent": f"orbit-sdk-python/{__version__}", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def sync_http(
    server: str,
    token: str | None,
    timeout: float,
    transport: httpx.BaseTransport | None,
    limits: httpx.Limits = httpx.Limits(),
) -> httpx.Client:
    """The httpx client a ``Client`` or ``Worker`` sends through."""
    return httpx.Client(
        base_url=server,
        headers=default_headers(token),
        timeout=timeout,
        transport=transport,
        limits=limits,
    )


def _timeout_error(task_id: str, timeout: float | None, last: TaskDetail | None) -> TimeoutExpired:
    state = last.state if last is not None else "unknown"
    err = TimeoutExpired.from_detail(
        f"task {task_id} still {state} after {timeout}s", title="Timed out waiting for task"
    )
    assert isinstance(err, TimeoutExpired)
    err.task = last
    return err


class Client(BulkMethods, ResultsMethods, ScheduleMethods, WorkflowMethods):
    """Synchronous client. Thread-safe; reuse one per process (it pools connections).

    ``server`` and ``token`` default to the ``ORBIT_SERVER`` and ``ORBIT_TOKEN`` environment
    variables. ``transport`` is passed to httpx (tests use it to inject faults).
    ``submit_linger``: submissions of several threads that wait while one is on its way are
    sent together in one request, each still answered on its own; a sender waits this many
    seconds for company first (0: not at all). ``None`` sends every submission by itself.
    """

    def __init__(
        self,
        server: str | None = None,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        submit_linger: float | None = DEFAULT_SUBMIT_LINGER,
    ) -> None:
        self.server = resolve_server(server)
        http = sync_http(self.server, resolve_token(token), timeout, transport)
        self._transport = SyncTransport(http, retry)
        self._coalescer = (
            None if submit_linger is None else SubmitCoalescer(self._transport.send, submit_linger)
        )

    def __repr__(self) -> str:  # never the token
        return f"Client({self.server!r})"

    def whoami(self) -> Identity:
        """The token's namespace, name and roles: use ``whoami().namespace`` when you hold a
        token but not the name of its namespace."""
        return Identity.model_validate(self._transport.send(calls.whoami()).json())

    def submit(self, namespace: str, **options: Unpack[SubmitOptions]) -> Task:
        """Submit a task. Without ``idempotency_key`` a fresh one is made for this call, so
        transport retries are safe; pass your own to make *your* retries safe too.
        ``task.replayed`` tells whether the key found an existing task."""
        body = calls.submission_body(**options)
        if self._coalescer is not None:
            return self._coalescer.submit(namespace, body)
        response = self._transport.send(calls.submit(namespace, body))
        return Task.model_validate(response.json())

    def get(self, namespace: str, task_id: str) -> TaskDetail:
        response = self._transport.send(calls.get_task(namespace, task_id))
        return TaskDetail.model_validate(response.json())

    def cancel(self, namespace: str, task_id: str, reason: str = "") -> Task:
        """Request cancellation. WAITING/LEASED tasks are cancelled at once; a RUNNING one is
        cancelled when its handler confirms it stopped; a finished one is left as it is."""
        response = self._transport.send(calls.cancel_task(namespace, task_id, reason))
        return Task.model_validate(response.json())

    def review(
        self,
        namespace: str,
        task_id: str,
        *,
        decision: str,
        reason: str,
        evidence_ref: str,
        expected_state_version: int,
        execution_ended: bool,
    ) -> Task:
        """Settle a NEEDS_REVIEW task as ``"succeeded"`` or ``"failed"`` (audited; needs the
        review role). ``execution_ended=True`` confirms no handler is still running."""
        response = self._transport.send(
            calls.review_task(
                namespace,
                task_id,
                decision=decision,
                reason=reason,
                evidence_ref=evidence_ref,
                expected_state_version=expected_state_version,
                execution_ended=execution_ended,
            )
        )
        return Task.model_validate(response.json())

    def retry(
        self,
        namespace: str,
        task_id: str,
        *,
        reason: str,
        expected_state_version: int,
        safe_to_retry: bool,
    ) -> Task:
        """Create the one manual retry of a FAILED or CANCELLED task (a new task linked by
        ``retry_of``); ``safe_to_retry=True`` confirms running it again is safe."""
        response = self._transport.send(
            calls.retry_task(
                namespace,
                task_id,
                reason=reason,
                expected_state_version=expected_state_version,
                safe_to_retry=safe_to_retry,
            )
        )
        return Task.model_validate(response.json())

    def wait(
        self,
        namespace: str,
        task_id: str,
        timeout: float | None = 30,
        poll_interval: float = 0.2,
    ) -> TaskDetail:
        """Poll until the task is terminal or NEEDS_REVIEW; ``TimeoutExpired`` otherwise (its
        ``task`` is the last state seen). ``timeout=None`` waits forever."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            detail = self.get(namespace, task_id)
            if detail.state in SETTLED_STATES:
                return detail
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise _timeout_error(task_id, timeout, detail)
            time.sleep(poll_interval if remaining is None else min(poll_interval, remaining))

    def list(
        self,
        namespace: str,
        queue: str | None = None,
        state: str | None = None,
        page_size: int = 50,
        page_token: str | None = None,
        handler: str | None = None,
    ) -> TaskPage:
        call = calls.list_tasks(
            namespace,
            queue=queue,
            state=state,
            page_size=page_size,
            page_token=page_token,
            handler=handler,
        )
        return TaskPage.model_validate(self._transport.send(call).json())

    def iter_tasks(
        self,
        namespace: str,
        queue: str | None = None,
        state: str | None = None,
        page_size: int = 50,
        handler: str | None = None,
    ) -> Iterator[Task]:
        """Every matching task, fetching pages lazily."""
        token: str | None = None
        while True:
            page = self.list(namespace, queue, state, page_size, token, handler=handler)
            yield from page.items
            if not page.next_page_token:
                return
            token = page.next_page_token

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: builtins.type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClient(
    AsyncBulkMethods, AsyncResultsMethods, AsyncScheduleMethods, AsyncWorkflowMethods
):
    """The asyncio twin of ``Client`` (same methods, awaitable; ``submit_linger`` coalesces the
    submissions of concurrent tasks)."""

    def __init__(
        self,
        server: str | None = None,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        submit_linger: float | None = DEFAULT_SUBMIT_LINGER,
    ) -> None:
        self.server = resolve_server(server)
        http = httpx.AsyncClient(
            base_url=self.server,
            headers=default_headers(resolve_token(token)),
            timeout=timeout,
            transport=transport,
        )
        self._transport = AsyncTransport(http, retry)
        self._coalescer = (
            None
            if submit_linger is None
            else AsyncSubmitCoalescer(self._transport.send, submit_linger)
        )

    def __repr__(self) -> str:
        return f"AsyncClient({self.server!r})"

    async def whoami(self) -> Identity:
        """See ``Client.whoami``."""
        return Identity.model_validate((await self._transport.send(calls.whoami())).json())

    async def submit(self, namespace: str, **options: Unpack[SubmitOptions]) -> Task:
        """See ``Client.submit``."""
        body = calls.submission_body(**options)
        if self._coalescer is not None:
            return await self._coalescer.submit(namespace, body)
        response = await self._transport.send(calls.submit(namespace, body))
        return Task.model_validate(response.json())

    async def get(self, namespace: str, task_id: str) -> TaskDetail:
        response = await self._transport.send(calls.get_task(namespace, task_id))
        return TaskDetail.model_validate(response.json())

    async def cancel(self, namespace: str, task_id: str, reason: str = "") -> Task:
        response = await self._transport.send(calls.cancel_task(namespace, task_id, reason))
        return Task.model_validate(response.json())

    async def wait(
        self,
        namespace: str,
        task_id: str,
        timeout: float | None = 30,
        poll_interval: float = 0.2,
    ) -> TaskDetail:
        """See ``Client.wait``."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            detail = await self.get(namespace, task_id)
            if detail.state in SETTLED_STATES:
                return detail
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                raise _timeout_error(task_id, timeout, detail)
            await asyncio.sleep(
                poll_interval if remaining is None else min(poll_interval, remaining)
            )

    async def list(
        self,
        namespace: str,
        queue: str | None = None,
        state: str | None = None,
        page_size: int = 50,
        page_token: str | None = None,
        handler: str | None = None,
    ) -> TaskPage:
        call = calls.list_tasks(
            namespace,
            queue=queue,
            state=state,
            page_size=page_size,
            page_token=page_token,
            handler=handler,
        )
        return TaskPage.model_validate((await self._transport.send(call)).json())

    async def iter_tasks(
        self,
        namespace: str,
        queue: str | None = None,
        state: str | None = None,
        page_size: int = 50,
        handler: str | None = None,
    ) -> AsyncIterator[Task]:
        token: str | None = None
        while True:
            page = await self.list(namespace, queue, state, page_size, token, handler=handler)
            for task in page.items:
                yield task
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def aclose(self) -> None:
        await self._transport.aclose()

    async def close(self) -> None:
        await self.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: builtins.type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
