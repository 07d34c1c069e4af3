"""``POST /v1/namespaces/{ns}/tasks`` with group commit: submissions that arrive while
earlier ones are in their transaction share the next one, and each is answered as alone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import sqlalchemy as sa

from orbit_store.pulse.model import SubmitResult
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.schema import namespaces, task_events, tasks

from .conftest import Api

PROBLEMS = "https://orbit.dev/problems/"


def _group_sizes(api: Api) -> tuple[float, float]:
    """(groups run, submissions in them) from the app's own ``orbit_batch_items`` histogram."""
    registry = api.app.state.ctx.metrics.registry
    labels = {"call": "submit_group"}
    count = registry.get_sample_value("orbit_batch_items_count", labels) or 0.0
    total = registry.get_sample_value("orbit_batch_items_sum", labels) or 0.0
    return count, total


def _lock_namespace(blocker: sa.Connection, namespace: str) -> None:
    """Begin a transaction on ``blocker`` holding the namespace row: submission transactions of
    that namespace wait on it (``lock_submission_scope``) until ``blocker`` commits."""
    blocker.begin()
    blocker.execute(
        sa.select(namespaces.c.name).where(namespaces.c.name == namespace).with_for_update()
    )


async def _with_namespace_locked(
    api: Api, first: list[dict[str, Any]], queued: list[dict[str, Any]]
) -> list[Any]:
    """Submit ``first`` (they start their transactions and wait on the namespace row, which a
    transaction of the test holds), then ``queued`` (they wait for a group); release the row
    and return every answer, ``first`` then ``queued``."""
    groups = api.app.state.ctx.submit_groups
    path = f"/v1/namespaces/{api.namespace}/tasks"

    def post(body: dict[str, Any]) -> Awaitable[Any]:
        expect = body.pop("_expect", 0)
        return asyncio.ensure_future(api.call("POST", path, body, expect=expect))

    with api.engine.connect() as blocker:
        _lock_namespace(blocker, api.namespace)
        running = [post(body) for body in first]
        await _until(lambda: groups.running == len(first))
        waiting = [post(body) for body in queued]
        await _until(lambda: groups.waiting == len(queued))
        blocker.commit()
    return list(await asyncio.gather(*running, *waiting))


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in 5 s")


def test_submissions_that_arrive_during_a_transaction_share_the_next_one(api: Api) -> None:
    api.submit()  # the namespace row exists
    before = _group_sizes(api)
    first = [{"handler": "h", "params": {"n": 0}}]
    queued = [{"handler": "h", "params": {"n": n}, "idempotency_key": f"k{n}"} for n in range(1, 8)]
    answers = asyncio.run(_with_namespace_locked(api, first, queued))
    count, total = _group_sizes(api)
    assert (count - before[0], total - before[1]) == (2, 8), "one alone, then seven together"
    assert len({a["id"] for a in answers}) == 8
    assert [a["params"]["n"] for a in answers] == list(range(8)), "each its own answer"
    assert all(a["state"] == "WAITING" and a["replayed"] is False for a in answers)
    with api.engine.connect() as conn:
        accepted = conn.execute(
            sa.select(sa.func.count()).where(
                task_events.c.namespace == api.namespace, task_events.c.reason == "submitted"
            )
        ).scalar_one()
    assert accepted == 9, "every task has its accepted event (invariant 1)"


def test_in_one_group_a_repeated_key_replays_and_a_refusal_leaves_its_neighbours(
    api: Api,
) -> None:
    api.submit()
    first = [{"handler": "h"}]
    queued = [
        {"handler": "h", "idempotency_key": "same", "params": {"n": 1}},
        {"handler": "h", "idempotency_key": "same", "params": {"n": 1}, "_expect": 200},
        {"handler": "h", "idempotency_key": "same", "params": {"n": 2}, "_expect": 409},
        {"handler": "h", "queue": "undeclared", "_expect": 404},
        {"handler": "h", "params": {"n": 3}},
    ]
    answers = asyncio.run(_with_namespace_locked(api, first, queued))
    created, replayed, conflict, refused, neighbour = answers[1:]
    assert replayed["id"] == created["id"] and replayed["replayed"] is True
    assert conflict["type"] == PROBLEMS + "idempotency-conflict"
    assert refused["type"] == PROBLEMS + "not-found"
    assert "undeclared" in refused["detail"]
    assert neighbour["params"] == {"n": 3} and neighbour["state"] == "WAITING"


def test_the_number_of_submission_transactions_at_once_is_the_server_s_setting(
    mariadb_engine: sa.Engine,
) -> None:
    """``--submit-transactions 2``: while two submissions are in their transactions side by
    side, the next four wait and share one."""
    api = Api(mariadb_engine, submit_transactions=2)
    api.submit()
    before = _group_sizes(api)
    first = [{"handler": "h"}, {"handler": "h"}]
    queued = [{"handler": "h", "params": {"n": n}} for n in range(4)]
    answers = asyncio.run(_with_namespace_locked(api, first, queued))
    count, total = _group_sizes(api)
    assert (count - before[0], total - before[1]) == (3, 6)
    assert len({a["id"] for a in answers}) == 6


def _tasks_committed_within(api: Api, expected: int, seconds: float) -> int:
    """Blocking (whoever calls it holds its thread): the namespace's task count once it reaches
    ``expected``, or after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        with api.engine.connect() as conn:
            count = conn.execute(
                sa.select(sa.func.count()).where(tasks.c.namespace == api.namespace)
            ).scalar_one()
        if count >= expected or time.monotonic() > deadline:
            return int(count)
        time.sleep(0.02)


def test_the_next_group_commits_without_a_turn_of_the_event_loop(api: Api) -> None:
    """A transaction's thread takes the waiting group itself once its own is done: the queued
    submissions are committed while the event loop is held from the moment the first group's
    lock is released (before, the next group waited for the loop to start it)."""
    api.submit()
    groups = api.app.state.ctx.submit_groups
    path = f"/v1/namespaces/{api.namespace}/tasks"

    async def go() -> tuple[int, list[Any]]:
        def post(n: int) -> Awaitable[Any]:
            return asyncio.ensure_future(
                api.call("POST", path, {"handler": "h", "params": {"n": n}})
            )

        with api.engine.connect() as blocker:
            _lock_namespace(blocker, api.namespace)
            first = post(0)
            await _until(lambda: groups.running == 1)
            queued = [post(n) for n in range(1, 4)]
            await _until(lambda: groups.waiting == 3)
            blocker.commit()
        committed = _tasks_committed_within(api, 5, seconds=3.0)  # the loop is held meanwhile
        return committed, list(await asyncio.gather(first, *queued))

    committed, answers = asyncio.run(go())
    assert committed == 5, "the queued group committed while the event loop was held"
    assert [a["params"]["n"] for a in answers] == [0, 1, 2, 3]


def _poll(condition: Callable[[], bool]) -> None:
    """Blocking ``_until``, for a test thread that runs no event loop."""
    for _ in range(500):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("condition not reached in 5 s")


def test_a_group_answers_each_submission_on_the_event_loop_it_waits_on(api: Api) -> None:
    """Submissions of two event loops in one process (an app outliving a loop, as tests do):
    the second waits for the group after the first's, and is answered on its own loop although
    the first's loop is gone by then."""
    api.submit()
    groups = api.app.state.ctx.submit_groups

    def submitted(n: int) -> SubmitResult:
        """On an event loop of its own; a lost answer fails in 10 s rather than hang."""
        request = SubmitRequest(
            namespace=api.namespace, queue="default", handler="h", params={"n": n}
        )
        return asyncio.run(asyncio.wait_for(groups.submit(request), 10))

    with api.engine.connect() as blocker, ThreadPoolExecutor(2) as loops:
        _lock_namespace(blocker, api.namespace)
        first = loops.submit(submitted, 1)
        _poll(lambda: groups.running == 1)
        second = loops.submit(submitted, 2)
        _poll(lambda: groups.waiting == 1)
        blocker.commit()
        answers = [first.result(), second.result()]
    assert len({answer.task_id for answer in answers}) == 2
