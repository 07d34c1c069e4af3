"""The shared wake-up probe: work made ready anywhere but this process — another
server process or replica, the scheduler, Weave, a delay or backoff ending — wakes the lease
requests waiting here that can run it, within one probe interval. Wake-ups are an acceleration
structure, never authority (seed §1: in-memory queues and indexes are rebuilt from MySQL): the
probe only reads, a claim decides. Runs on MariaDB; "elsewhere" is a submission through the
store that this process's in-memory wake-ups never hear of."""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import sqlalchemy as sa

from orbit.api.concurrency.ready_watch import ReadyWatch
from orbit.api.concurrency.wakeups import Wakeups
from orbit_store.db import run_transaction
from orbit_store.pulse import service
from orbit_store.pulse.claim.claim import claim_tasks
from orbit_store.pulse.claim.readiness import readiness
from orbit_store.pulse.limits.queues import put_queue
from orbit_store.pulse.limits.quota_declarations import QuotaSpec, put_quota
from orbit_store.pulse.manual.cancel import cancel_task
from orbit_store.pulse.model import QueuePolicy
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.schema import tasks

T = TypeVar("T")


@pytest.fixture
def namespace() -> str:
    return f"watch-{uuid.uuid4().hex[:8]}"


def submit_elsewhere(engine: sa.Engine, namespace: str, handler: str = "h", **extra: Any) -> str:
    request = SubmitRequest(namespace=namespace, queue="default", handler=handler, **extra)
    return service.submit(engine, request).task_id


def run(scenario: Callable[[Wakeups, ReadyWatch], Awaitable[T]], engine: sa.Engine) -> T:
    async def bound() -> T:
        wakeups = Wakeups()
        wakeups.bind(asyncio.get_running_loop())
        return await scenario(wakeups, ReadyWatch(engine, wakeups))

    return asyncio.run(bound())


def test_a_task_made_ready_elsewhere_wakes_only_the_waiters_that_can_run_it(
    mariadb_engine: sa.Engine, namespace: str
) -> None:
    async def scenario(wakeups: Wakeups, watch: ReadyWatch) -> list[bool]:
        waiting = [
            wakeups.waiter(namespace, ["default"], ["h"]),
            wakeups.waiter(namespace, ["default"], None),
            wakeups.waiter(namespace, ["default"], ["other"]),
            wakeups.waiter(namespace, ["elsewhere"], None),
        ]
        await watch.probe_once()  # nothing yet
        assert not any(w.done() for w in waiting)
        await asyncio.to_thread(submit_elsewhere, mariadb_engine, namespace)
        await watch.probe_once()
        return [w.done() for w in waiting]

    assert run(scenario, mariadb_engine) == [True, True, False, False]


def test_work_that_stays_ready_wakes_nobody_twice(
    mariadb_engine: sa.Engine, namespace: str
) -> None:
    """Edge-triggered: READY work a claim still leaves behind (nobody took it) must not turn
    the probe into a claim loop; each request's own poll is the fallback for it."""

    async def scenario(wakeups: Wakeups, watch: ReadyWatch) -> tuple[int, int]:
        wakeups.waiter(namespace, ["default"], None)
        await asyncio.to_thread(submit_elsewhere, mariadb_engine, namespace)
        first = await watch.probe_once()
        wakeups.waiter(namespace, ["default"], None)  # the woken request waits again
        return first, await watch.probe_once()

    assert run(scenario, mariadb_engine) == (1, 0)


def test_new_work_that_arrives_while_work_stays_ready_wakes_the_waiters_again(
    mariadb_engine: sa.Engine, namespace: str
) -> None:
    """A steady trickle into another process: by each probe the task seen at the last one was
    taken and a new one is READY. "Something ready" never turns off between the probes, but the
    head of the ready index changed: the waiters are woken again (before, they waited for their
    own poll — dispatch p99 ~1 s with two server processes, docs/performance.md)."""

    async def scenario(wakeups: Wakeups, watch: ReadyWatch) -> tuple[int, int]:
        wakeups.waiter(namespace, ["default"], None)
        first = await asyncio.to_thread(submit_elsewhere, mariadb_engine, namespace)
        woken_first = await watch.probe_once()
        wakeups.waiter(namespace, ["default"], None)  # the woken request took it and waits again
        await asyncio.to_thread(take, mariadb_engine, namespace, first)
        await asyncio.to_thread(submit_elsewhere, mariadb_engine, namespace)  # the next one
        return woken_first, await watch.probe_once()

    assert run(scenario, mariadb_engine) == (1, 1)


def take(engine: sa.Engine, namespace: str, task_id: str) -> None:
    """The task leaves the ready index as a claim would take it (here: cancelled)."""
    run_transaction(
        engine, functools.partial(cancel_task, namespace=namespace, task_id=task_id, actor="t")
    )


def test_a_delay_ending_wakes_the_waiter(mariadb_engine: sa.Engine, namespace: str) -> None:
    async def scenario(wakeups: Wakeups, watch: ReadyWatch) -> tuple[bool, bool]:
        woken = wakeups.waiter(namespace, ["default"], None)
        await asyncio.to_thread(submit_elsewhere, mariadb_engine, namespace, delay_seconds=0.5)
        await watch.probe_once()
        before = woken.done()
        await asyncio.sleep(0.7)
        await watch.probe_once()
        return before, woken.done()

    assert run(scenario, mariadb_engine) == (False, True)


def test_the_watch_wakes_within_its_interval_while_it_runs(
    mariadb_engine: sa.Engine, namespace: str
) -> None:
    async def scenario(wakeups: Wakeups, watch: ReadyWatch) -> float:
        running = asyncio.create_task(watch.run())
        try:
            woken = wakeups.waiter(namespace, ["default"], None)
            await asyncio.sleep(0.2)
            submitted = time.monotonic()
            await asyncio.to_thread(submit_elsewhere, mariadb_engine, namespace)
            await asyncio.wait_for(woken, 5)
            return time.monotonic() - submitted
        finally:
            running.cancel()

    # Correctness, not speed: woken by the probe, long before any per-request poll (1 s).
    assert run(scenario, mariadb_engine) < 0.9


def test_no_waiting_request_means_no_query(mariadb_engine: sa.Engine, namespace: str) -> None:
    async def scenario(wakeups: Wakeups, watch: ReadyWatch) -> int:
        await asyncio.to_thread(submit_elsewhere, mariadb_engine, namespace)
        await watch.probe_once()
        waiter = wakeups.waiter(namespace, ["default"], None)
        waiter.cancel()  # a request that stopped waiting
        await asyncio.sleep(0)
        await watch.probe_once()
        return watch.probes

    assert run(scenario, mariadb_engine) == 0


def copies_of(engine: sa.Engine, task_id: str, namespace: str, count: int) -> None:
    """``count`` READY copies of a task (MariaDB's sequence engine: one INSERT … SELECT)."""
    with engine.begin() as conn:
        columns = [c.name for c in tasks.columns]
        picked = [f"CONCAT('{namespace}-', seq)" if c == "id" else c for c in columns]
        statement = (
            f"INSERT INTO tasks ({', '.join(columns)}) SELECT {', '.join(picked)} "
            f"FROM tasks, seq_1_to_{count} WHERE tasks.id = :task_id"
        )
        conn.execute(sa.text(statement), {"task_id": task_id})


def test_a_backlog_nobody_waiting_can_run_costs_the_probe_nothing(
    mariadb_engine: sa.Engine, namespace: str
) -> None:
    """Idle workers for handler h beside 2,000 READY tasks of handler x (no worker runs it): the
    probe reads a few index entries, not the backlog (rows counted by MariaDB, not timed)."""
    copies_of(mariadb_engine, submit_elsewhere(mariadb_engine, namespace, "x"), namespace, 2000)
    with mariadb_engine.connect() as conn:
        conn.exec_driver_sql("FLUSH STATUS")
        served = readiness(conn, namespace, {("default", "h")})
        reads = {
            name: int(value)
            for name, value in conn.exec_driver_sql("SHOW SESSION STATUS LIKE 'Handler_read%%'")
        }
    assert served.satisfied == frozenset()
    assert reads["Handler_read_next"] + reads["Handler_read_rnd_next"] < 50, reads


def _statements_sent(conn: sa.Connection) -> int:
    return int(conn.exec_driver_sql("SHOW SESSION STATUS LIKE 'Questions'").one()[1])


def test_a_probe_that_finds_nothing_ready_costs_two_statements(
    mariadb_engine: sa.Engine, namespace: str
) -> None:
    """The probe runs every interval while any request waits, in every server process: when
    nothing is ready (the common case) it reads the ready flags and the time in one statement
    and the due scheduled rows in another; queue and quota rows only once something is ready."""
    submit_elsewhere(mariadb_engine, namespace, "x", delay_seconds=3600)  # not due, nor wanted
    with mariadb_engine.connect() as conn:
        before = _statements_sent(conn)
        served = readiness(conn, namespace, {("default", "h"), ("default", None), ("q2", "h")})
        sent = _statements_sent(conn) - before - 1  # not counting the SHOW itself
    assert served.satisfied == frozenset()
    assert sent == 2


def test_a_paused_queue_s_ready_task_wakes_nobody(
    mariadb_engine: sa.Engine, namespace: str
) -> None:
    run_transaction(
        mariadb_engine,
        functools.partial(put_queue, namespace=namespace, policy=QueuePolicy("p", paused=True)),
    )
    request = SubmitRequest(namespace=namespace, queue="p", handler="h")
    service.submit(mariadb_engine, request)
    submit_elsewhere(mariadb_engine, namespace, "h")
    with mariadb_engine.connect() as conn:
        served = readiness(conn, namespace, {("p", "h"), ("p", None), ("default", "h")})
    assert served.satisfied == frozenset({("default", "h")})


def test_a_queue_whose_running_quota_is_full_wakes_nobody(
    mariadb_engine: sa.Engine, namespace: str
) -> None:
    spec = QuotaSpec(name="cap", queue="default", max_running=1)
    run_transaction(mariadb_engine, functools.partial(put_quota, namespace=namespace, spec=spec))
    submit_elsewhere(mariadb_engine, namespace, "h")
    with mariadb_engine.connect() as conn:
        assert readiness(conn, namespace, {("default", "h")}).satisfied == {("default", "h")}
    run_transaction(
        mariadb_engine,
        functools.partial(claim_tasks, namespace=namespace, queues_=["default"], limit=1),
    )
    submit_elsewhere(mariadb_engine, namespace, "h")  # ready, but the quota allows no grant
    with mariadb_engine.connect() as conn:
        assert readiness(conn, namespace, {("default", "h")}).satisfied == frozenset()
