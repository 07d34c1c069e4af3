"""The long-poll lease request: a submission wakes as many waiting requests
as tasks it made ready, and only requests that can run them; an idle request runs no claim
transaction per poll interval; tasks granted to a client that has gone are handed back at once,
their attempt not spent. The app runs in-process on MariaDB; requests are plain ASGI calls."""

from __future__ import annotations

import asyncio
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from orbit.api.concurrency.wakeups import Wakeups
from orbit_store.pulse import service
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.schema import task_attempts, tasks

from ..conftest import Api

# --- wake-ups ---------------------------------------------------------------------------------


async def _waiters(wakeups: Wakeups, *specs: tuple[list[str], list[str] | None]) -> list[Any]:
    wakeups.bind(asyncio.get_running_loop())
    return [wakeups.waiter("ns", queues, handlers) for queues, handlers in specs]


def test_one_submission_wakes_one_waiter() -> None:
    async def scenario() -> list[bool]:
        wakeups = Wakeups()
        waiting = await _waiters(wakeups, *[(["default"], None)] * 5)
        wakeups.notify("ns", "default", "h")
        await asyncio.sleep(0.05)
        return [w.done() for w in waiting]

    assert asyncio.run(scenario()) == [True, False, False, False, False], "oldest first"


def test_a_submission_in_a_request_thread_wakes_a_waiter_through_the_loop() -> None:
    """A synchronous route notifies from its worker thread: the wake-up must cross to the
    event loop (the async submit route wakes waiters directly)."""

    async def scenario() -> list[bool]:
        wakeups = Wakeups()
        waiting = await _waiters(wakeups, *[(["default"], None)] * 2)
        await asyncio.to_thread(wakeups.notify, "ns", "default", "h")
        await asyncio.sleep(0.05)
        return [w.done() for w in waiting]

    assert asyncio.run(scenario()) == [True, False]


def test_a_submission_wakes_only_waiters_that_can_run_it() -> None:
    async def scenario() -> list[bool]:
        wakeups = Wakeups()
        waiting = await _waiters(
            wakeups, (["other"], None), (["default"], ["shop.refund"]), (["default"], ["h"])
        )
        wakeups.notify("ns", "default", "h", count=3)
        await asyncio.sleep(0.05)
        return [w.done() for w in waiting]

    assert asyncio.run(scenario()) == [False, False, True]


# --- the lease route ---------------------------------------------------------------------------


def _count_claims(engine: sa.Engine, namespace: str) -> list[int]:
    claims = [0]

    def hook(conn: Any, cursor: Any, statement: str, params: Any, *args: Any) -> None:
        if "SKIP LOCKED" in statement and namespace in str(params):
            claims[0] += 1

    event.listen(engine, "before_cursor_execute", hook)
    return claims


def test_an_idle_long_poll_runs_no_claim_per_poll_interval(api: Api) -> None:
    """Defect 9: 1.5 s of waiting with a 0.1 s poll interval used to run ~15 claim
    transactions; now one claim on arrival, then read-only probes until something changes."""

    async def scenario() -> Any:
        session = await api.session()
        claims = _count_claims(api.engine, api.namespace)
        leased = await api.call(
            "POST", f"/v1/worker-sessions/{session}/lease", {"max_tasks": 1, "wait_seconds": 1.5}
        )
        return leased, claims[0]

    leased, claims = asyncio.run(scenario())
    assert leased["leases"] == [] and leased["claimed_after_seconds"] is None
    assert claims <= 1, f"{claims} claim statements while idle"


def _lease_while_submitting(api: Api, submit_after: float) -> tuple[str, Any]:
    """A long poll (10 s) that waits; ``submit_after`` seconds into it a task is submitted
    directly to the store (as through another replica: found by the probe). The task's id and
    the lease answer."""

    async def scenario() -> Any:
        session = await api.session()
        poll = asyncio.create_task(
            api.call(
                "POST", f"/v1/worker-sessions/{session}/lease", {"max_tasks": 1, "wait_seconds": 10}
            )
        )
        await asyncio.sleep(submit_after)
        task_id = await asyncio.to_thread(api.submit)
        return task_id, await poll

    answer: tuple[str, Any] = asyncio.run(scenario())
    return answer


def test_a_waiting_long_poll_gets_a_task_submitted_meanwhile(api: Api) -> None:
    task_id, leased = _lease_while_submitting(api, submit_after=0.3)
    assert [lease["task_id"] for lease in leased["leases"]] == [task_id]


def test_a_grant_says_how_long_the_request_waited_before_its_claim(api: Api) -> None:
    """The worker counts the lease from its sending plus this hold, not from the answer's
    arrival (a paused worker's answer may sit in its socket past the lease's end)."""
    _, leased = _lease_while_submitting(api, submit_after=0.5)
    assert len(leased["leases"]) == 1
    assert 0.4 <= leased["claimed_after_seconds"] < 10


def test_grants_to_a_client_that_disconnected_are_handed_back(api: Api) -> None:
    """Defect 9: the grant used to stay LEASED until its lease lapsed, spending an attempt."""

    async def scenario() -> Any:
        session = await api.session()
        return await api.call(
            "POST",
            f"/v1/worker-sessions/{session}/lease",
            {"max_tasks": 1, "wait_seconds": 0},
            disconnect=True,
        )

    task_id = api.submit()
    assert asyncio.run(scenario())["leases"] == []
    with api.engine.connect() as conn:
        task = conn.execute(sa.select(tasks).where(tasks.c.id == task_id)).one()
        [attempt] = conn.execute(
            sa.select(task_attempts).where(task_attempts.c.task_id == task_id)
        ).all()
    assert (task.state, task.wait_path, task.attempts_used) == ("WAITING", "READY", 0)
    assert attempt.outcome == "RELEASED" and "disconnected" in attempt.outcome_reason


def test_metrics_expose_retries_and_unrunnable_tasks(api: Api) -> None:
    """The gauge of tasks no live worker can run, and the transaction retry counter."""
    api.submit()  # handler "h"; nobody serves it yet
    api.app.state.ctx.metrics.gauges.refresh()  # one pass of the gauge loop (it serves a cache)

    async def scrape() -> str:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "path": "/metrics",
            "raw_path": b"/metrics",
            "query_string": b"",
            "root_path": "",
            "scheme": "http",
            "server": ("test", 80),
            "client": ("test", 1),
            "headers": [],
        }
        await api.app(scope, receive, send)
        return b"".join(m.get("body", b"") for m in sent if "body" in m).decode()

    text = asyncio.run(scrape())
    assert f'orbit_tasks_unrunnable{{namespace="{api.namespace}",queue="default"}} 1.0' in text
    assert "# TYPE orbit_db_transaction_retries_total counter" in text
    assert "# TYPE orbit_attempt_batch_fallbacks_total counter" in text


def test_a_long_poll_gets_a_delayed_task_when_it_falls_due(api: Api) -> None:
    """Sleeps until the next scheduled task of its queues is due, then claims it (promoting it)."""

    async def scenario() -> Any:
        session = await api.session()
        request = SubmitRequest(
            namespace=api.namespace, queue="default", handler="h", delay_seconds=0.6
        )
        task_id = await asyncio.to_thread(lambda: service.submit(api.engine, request).task_id)
        path = f"/v1/worker-sessions/{session}/lease"
        leased = await api.call("POST", path, {"max_tasks": 1, "wait_seconds": 10})
        return task_id, leased

    task_id, leased = asyncio.run(scenario())
    assert [lease["task_id"] for lease in leased["leases"]] == [task_id]


def test_each_lease_answer_observes_its_grants_in_the_batch_histogram(api: Api) -> None:
    """``orbit_batch_items{call="lease"}``: grants per answer, 0 for a poll that ended empty —
    how an operator sees whether tasks pay a lease cycle each."""
    registry = api.app.state.ctx.metrics.registry

    def observed() -> tuple[float, float]:
        labels = {"call": "lease"}
        count = registry.get_sample_value("orbit_batch_items_count", labels) or 0.0
        return count, registry.get_sample_value("orbit_batch_items_sum", labels) or 0.0

    async def scenario() -> None:
        session = await api.session()
        path = f"/v1/worker-sessions/{session}/lease"
        await api.call("POST", path, {"max_tasks": 5, "wait_seconds": 0})  # nothing due
        for _ in range(3):
            await asyncio.to_thread(api.submit)
        await api.call("POST", path, {"max_tasks": 5, "wait_seconds": 0})

    before = observed()
    asyncio.run(scenario())
    count, total = observed()
    assert (count - before[0], total - before[1]) == (2.0, 3.0)


def test_a_stopping_server_answers_waiting_long_polls_at_once_with_nothing_yet(api: Api) -> None:
    """On shutdown (`orbit dev`'s Ctrl-C) every waiting long poll gets its "nothing yet" answer
    at once, without a claim, and a poll arriving afterwards does too: the server is not held
    open for their wait (60 s here), and no task is granted to a process going away."""

    async def scenario() -> tuple[Any, Any, int]:
        session = await api.session()
        wakeups = api.app.state.ctx.wakeups
        path = f"/v1/worker-sessions/{session}/lease"
        poll = asyncio.create_task(api.call("POST", path, {"max_tasks": 1, "wait_seconds": 60}))
        while not wakeups.waiting_wants():  # the poll is parked
            await asyncio.sleep(0.01)
        await asyncio.to_thread(wakeups.stop)  # from another thread, as a signal handler's
        first = await poll
        await asyncio.to_thread(api.submit)  # due now
        claims = _count_claims(api.engine, api.namespace)
        later = await api.call("POST", path, {"max_tasks": 1, "wait_seconds": 60})
        return first, later, claims[0]

    first, later, claims = asyncio.run(scenario())
    assert first["leases"] == [] and later["leases"] == []
    assert claims == 0, "a stopping server grants nothing"
