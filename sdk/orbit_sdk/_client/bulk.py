"""Bulk submission for ``Client`` and ``AsyncClient`` (mixed in): ``submit_many``.

Items are cut into requests of at most ``batch_size`` items (the server takes 1,000) and
``MAX_REQUEST_BYTES`` of JSON (the server's body limit is 1 MiB of payload plus an envelope by
default), sent one after the other. Every item gets its idempotency key before the first try,
so a request whose answer was lost is resent as it was and its items come back ``replayed``,
never doubled.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from .._wire.calls import _ns, submission_body
from .._wire.transport import AsyncTransport, Call, SyncTransport
from ..errors import OrbitError, error_for_problem
from ..models import Problem, Task, WireModel

MAX_BATCH = 1000
MAX_REQUEST_BYTES = 768 * 1024

Progress = Callable[[int, int], None]


class SubmissionResult(WireModel):
    """One item's answer. ``status``: ``created``, ``replayed`` (its key named an identical
    request, possibly an earlier item of the same call), ``conflict`` (its key names a
    different request) or ``refused`` (``problem`` says why; nothing was written)."""

    index: int
    status: str
    idempotency_key: str | None = None
    task_id: str | None = None
    state: str | None = None
    problem: Problem | None = None
    #: Asked for with ``with_tasks``: the task created or replayed.
    task: Task | None = None

    @property
    def ok(self) -> bool:
        return self.status in ("created", "replayed")

    @property
    def error(self) -> OrbitError | None:
        """The typed error the single ``submit`` would have raised for this item."""
        return error_for_problem(self.problem) if self.problem is not None else None


def submit_many_call(namespace: str, bodies: list[dict[str, Any]]) -> Call:
    assert all(body.get("idempotency_key") for body in bodies), "resent only under their keys"
    return Call("POST", f"{_ns(namespace)}/tasks:batch", json={"items": bodies})


def _chunks(items: Iterable[Mapping[str, Any]], batch_size: int) -> Iterator[list[dict[str, Any]]]:
    if not 1 <= batch_size <= MAX_BATCH:
        raise ValueError(f"batch_size must be within 1..{MAX_BATCH}")
    chunk: list[dict[str, Any]] = []
    size = 0
    for item in items:
        body = submission_body(**item)
        weight = len(json.dumps(body, default=str)) + 1
        if chunk and (len(chunk) >= batch_size or size + weight > MAX_REQUEST_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(body)
        size += weight
    if chunk:
        yield chunk


def _results(answer: dict[str, Any], offset: int) -> list[SubmissionResult]:
    return [
        SubmissionResult.model_validate({**r, "index": offset + r["index"]})
        for r in answer["results"]
    ]


class BulkMethods:
    _transport: SyncTransport

    def submit_many(
        self,
        namespace: str,
        items: Iterable[Mapping[str, Any]],
        *,
        batch_size: int = MAX_BATCH,
        on_progress: Progress | None = None,
    ) -> list[SubmissionResult]:
        """Submit every item (a mapping of :meth:`submit`'s keywords: ``handler``, ``params``,
        ``idempotency_key`` …) in as few requests as the limits allow; one result per item, in
        order, each answered on its own (check ``result.ok``). Raises only what fails a whole
        request (unreachable server, authentication, a malformed item); the requests sent
        before it stay applied, and sending the same items again is safe when they carry keys.
        ``on_progress(done, sent)`` is called after each request."""
        results: list[SubmissionResult] = []
        for chunk in _chunks(items, batch_size):
            answer = self._transport.send(submit_many_call(namespace, chunk)).json()
            results += _results(answer, len(results))
            if on_progress is not None:
                on_progress(len(results), sum(r.ok for r in results))
        return results


class AsyncBulkMethods:
    _transport: AsyncTransport

    async def submit_many(
        self,
        namespace: str,
        items: Iterable[Mapping[str, Any]],
        *,
        batch_size: int = MAX_BATCH,
        on_progress: Progress | None = None,
    ) -> list[SubmissionResult]:
        """See ``Client.submit_many``."""
        results: list[SubmissionResult] = []
        for chunk in _chunks(items, batch_size):
            answer = (await self._transport.send(submit_many_call(namespace, chunk))).json()
            results += _results(answer, len(results))
            if on_progress is not None:
                on_progress(len(results), sum(r.ok for r in results))
        return results
