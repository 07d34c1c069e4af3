"""Lease with start (worker protocol 3) through a real `orbit worker` process and a real
`orbit server`: a safe handler's tasks run with no start call — each task's RUNNING event is
written in the lease's own transaction, at the same database instant as its LEASED event — and
an unsafe handler's tasks are still started by a call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from orbit_sdk import Client
from orbit_store.schema import task_events

from ..conftest import Tenant, wait_until
from ..server.test_monitoring import scrape, value

pytestmark = pytest.mark.slow

TASKS = 20


def _start_calls(tenant: Tenant) -> float:
    """Attempts started through ``/v1/attempts:start`` so far, server-wide."""
    return value(scrape(tenant.server), "orbit_batch_items_sum", call="start") or 0.0


def _run(tenant: Tenant, tmp_path: Path, handler: str, params: dict[str, Any]) -> list[str]:
    with Client(tenant.server.url, token=tenant.token) as client:
        ids = [
            client.submit(tenant.namespace, handler=handler, params=params).id for _ in range(TASKS)
        ]
        tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path), ORBIT_E2E_CONCURRENCY="4")

        def all_done() -> bool:
            return all(client.get(tenant.namespace, i).state == "SUCCEEDED" for i in ids)

        wait_until(all_done, timeout=60, interval=0.3)
    return ids


def _leased_and_running(engine: sa.Engine, task_id: str) -> list[Any]:
    with engine.connect() as conn:
        query = (
            sa.select(task_events.c.to_state, task_events.c.at, task_events.c.attempt_id)
            .where(
                task_events.c.task_id == task_id,
                task_events.c.to_state.in_(["LEASED", "RUNNING"]),
            )
            .order_by(task_events.c.state_version)
        )
        return list(conn.execute(query))


def test_a_safe_handler_runs_its_tasks_without_a_start_call(
    tenant: Tenant, tmp_path: Path, mariadb_engine: sa.Engine
) -> None:
    before = _start_calls(tenant)
    ids = _run(tenant, tmp_path, "e2e.echo", {"x": 1})
    assert _start_calls(tenant) == before, "no attempt went through a start call"
    for task_id in ids:
        leased, running = _leased_and_running(mariadb_engine, task_id)
        assert (leased.to_state, running.to_state) == ("LEASED", "RUNNING")
        assert running.at == leased.at, "started in the lease's own transaction"
        assert running.attempt_id == leased.attempt_id


def test_an_unsafe_handler_is_still_started_by_a_call(
    tenant: Tenant, tmp_path: Path, mariadb_engine: sa.Engine
) -> None:
    before = _start_calls(tenant)
    ids = _run(tenant, tmp_path, "e2e.charge", {"seconds": 0})
    assert _start_calls(tenant) - before == TASKS
    leased, running = _leased_and_running(mariadb_engine, ids[0])
    assert running.at > leased.at
