"""A worker paused past its lease (SIGSTOP: a GC pause, a frozen VM) stops its handler's side
effects on resuming, before any heartbeat tells it: the SDK keeps the lease's
deadline on its own monotonic clock, measured from when it sent the request that set it, and
``ctx.check()`` raises ``LeaseLost`` past it. Its outcome is not reported as valid. Seed
invariant 3: a superseded attempt's effects must not land after its successor's began."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from orbit_store.schema import task_attempts, worker_sessions

from ..conftest import Tenant, short_lease_queue, wait_until

pytestmark = pytest.mark.slow

LEASE_SECONDS = 2


def ledger(directory: Path) -> list[tuple[int, int, float]]:
    """(generation, step, wall time) of every side effect the handlers wrote."""
    path = directory / "ledger"
    rows = path.read_text().split() if path.exists() else []
    return [(int(g), int(s), float(t)) for _, g, s, t in (r.split(":") for r in rows)]


def submit_ledger(tenant: Tenant, *, steps: int, pause: float) -> str:
    """A task of the ``e2e.ledger`` handler on the short-lease queue, retried (safe); its id."""
    answer = httpx.post(
        f"{tenant.server.url}/v1/namespaces/{tenant.namespace}/tasks",
        json={
            "queue": "paused",
            "handler": "e2e.ledger",
            "params": {"steps": steps, "pause": pause},
            "retry": {"max_attempts": 3, "backoff_initial_seconds": 0.1},
        },
        headers=tenant.headers,
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def task_state(tenant: Tenant, task_id: str) -> str:
    url = f"{tenant.server.url}/v1/namespaces/{tenant.namespace}/tasks/{task_id}"
    return str(httpx.get(url, headers=tenant.headers).json()["state"])


def test_a_worker_paused_past_its_lease_writes_nothing_after_its_successor_began(
    tenant: Tenant, tmp_path: Path, mariadb_engine: sa.Engine
) -> None:
    short_lease_queue(mariadb_engine, tenant, "paused", LEASE_SECONDS)
    task_id = submit_ledger(tenant, steps=25, pause=0.2)
    paused = tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path), ORBIT_E2E_QUEUES="paused")
    wait_until(lambda: len(ledger(tmp_path)) >= 3, timeout=30)
    paused.send_signal(signal.SIGSTOP)
    first = ledger(tmp_path)[0][0]  # generations are fencing numbers, not 1, 2, ...
    try:
        tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path), ORBIT_E2E_QUEUES="paused")
        wait_until(lambda: any(g > first for g, _, _ in ledger(tmp_path)), timeout=30)
        time.sleep(0.5)  # the successor is writing
    finally:
        paused.send_signal(signal.SIGCONT)

    wait_until(lambda: task_state(tenant, task_id) == "SUCCEEDED", timeout=30)
    time.sleep(1.0)  # the resumed worker has had every chance to write and to report
    effects = ledger(tmp_path)
    successor = min(g for g, _, _ in effects if g > first)
    successor_began = min(t for g, _, t in effects if g == successor)
    late = [(g, s, t) for g, s, t in effects if g == first and t >= successor_began]
    assert late == [], "the paused generation wrote after its successor began"
    assert sorted(s for g, s, _ in effects if g == successor) == list(range(25))
    with mariadb_engine.connect() as conn:
        rows = conn.execute(
            sa.select(
                task_attempts.c.generation, task_attempts.c.outcome, task_attempts.c.late_outcome
            ).where(task_attempts.c.task_id == task_id)
        ).all()
    by_generation = {r.generation: r for r in rows}
    assert sorted(by_generation) == [first, successor], rows
    paused_attempt = by_generation[first]
    assert paused_attempt.outcome == "LAPSED" and paused_attempt.late_outcome is None, (
        "no report from the paused"
    )


def test_a_grant_that_reaches_a_paused_worker_after_its_lease_ended_is_not_run(
    tenant: Tenant, tmp_path: Path, mariadb_engine: sa.Engine
) -> None:
    """The worker is paused while its long poll waits; the server grants (and starts) a task
    and the answer sits in the socket past the lease's end. Counted from the answer's arrival
    the lease would look fresh and the handler would run on a lapsed lease (the chaos run's
    re-run after finish, seed 9127); counted from the request's sending plus the server's hold
    (``claimed_after_seconds``) it is already over: nothing runs, the task runs again later."""
    short_lease_queue(mariadb_engine, tenant, "paused", LEASE_SECONDS)
    worker = tenant.start_worker(
        ORBIT_E2E_DIR=str(tmp_path), ORBIT_E2E_QUEUES="paused", ORBIT_E2E_LEASE_WAIT="30"
    )

    def has_session() -> bool:
        with mariadb_engine.connect() as conn:
            query = sa.select(sa.func.count()).where(
                worker_sessions.c.namespace == tenant.namespace
            )
            return bool(conn.execute(query).scalar_one())

    wait_until(has_session, timeout=30)
    time.sleep(1.0)  # its first long poll is waiting on the server
    worker.send_signal(signal.SIGSTOP)
    try:
        task_id = submit_ledger(tenant, steps=3, pause=0.05)

        def attempts() -> list[int]:
            with mariadb_engine.connect() as conn:
                query = sa.select(task_attempts.c.generation).where(
                    task_attempts.c.task_id == task_id
                )
                return sorted(conn.execute(query).scalars())

        granted = wait_until(attempts, timeout=30)[0]
        time.sleep(LEASE_SECONDS + 1.5)  # the grant's answer waits in the paused worker
    finally:
        worker.send_signal(signal.SIGCONT)

    wait_until(lambda: task_state(tenant, task_id) == "SUCCEEDED", timeout=30)
    effects = ledger(tmp_path)
    assert [s for g, s, _ in effects if g == granted] == [], (
        "the handler ran on a grant whose lease had ended while the worker was paused"
    )
    assert sorted(s for g, s, _ in effects if g > granted) == [0, 1, 2]
