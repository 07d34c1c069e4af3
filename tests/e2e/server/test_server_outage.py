"""A whole-server outage longer than a lease is not charged to the workers.

Workers that finished their handlers while no server replica was serving keep their results
and report them once the API is back; the reaper must not lapse those leases first (seed
invariant 3: the current attempt's report applies; invariant 7: an unsafe task goes to review
only when its worker is truly lost). Real `orbit server` and `orbit worker` subprocesses.
"""

from __future__ import annotations

import signal
import time
import urllib.parse
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from orbit_store.db import create_store_engine

from ..conftest import (
    Server,
    Tenant,
    make_tenant,
    short_lease_queue,
    start_server,
    stop_server,
    wait_until,
)

pytestmark = pytest.mark.slow

# After the restart a lease has its own length of grace for the worker's report to land (a
# report call may take a third of it): 3 s were too little for a restarted server on a
# starved CI machine, where its first answers take seconds.
LEASE_SECONDS = 5
OUTAGE_SECONDS = 3 * LEASE_SECONDS  # well past every lease held when the server died
TERMINAL = ("SUCCEEDED", "NEEDS_REVIEW", "FAILED", "CANCELLED")
FAST = ("--reaper-interval", "0.2", "--heartbeat-interval", "0.5")


def lines(directory: Path, name: str) -> list[str]:
    path = directory / name
    return path.read_text().split() if path.exists() else []


@pytest.fixture
def own_server(migrated_database, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A server of this test's own, on its own database: the test kills it."""
    url = migrated_database()
    server = start_server(url, tmp_path / "server.log", *FAST)
    engine = create_store_engine(url)
    yield server, engine
    if server.process.poll() is None:
        stop_server(server)
    engine.dispose()


def test_work_finished_during_a_server_outage_longer_than_a_lease_is_accepted_after_restart(
    own_server: tuple[Server, sa.Engine], tmp_path: Path
) -> None:
    server, engine = own_server
    tenant: Tenant = make_tenant(server, engine, ["submit", "work", "review"])
    short_lease_queue(engine, tenant, "default", LEASE_SECONDS)
    submitted: list[str] = []
    for i in range(8):
        handler, safety = ("e2e.slow", "safe") if i % 2 == 0 else ("e2e.charge", "unsafe")
        answer = httpx.post(
            f"{server.url}/v1/namespaces/{tenant.namespace}/tasks",
            json={"handler": handler, "params": {"seconds": 1.5}, "safety": safety},
            headers=tenant.headers,
        )
        assert answer.status_code == 201, answer.text
        submitted.append(answer.json()["id"])
    workers = [tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path)) for _ in range(2)]
    try:
        wait_until(
            lambda: len(lines(tmp_path, "slow-started") + lines(tmp_path, "charge-started")) == 8,
            timeout=30,
        )
        server.process.send_signal(signal.SIGKILL)  # every replica gone, handlers mid-run
        server.process.wait(10)
        time.sleep(OUTAGE_SECONDS)  # handlers finish; reports and heartbeats fail meanwhile
        port = urllib.parse.urlsplit(server.url).port
        restarted = start_server(server.database_url, server.log, *FAST, port=port)
        server.process = restarted.process

        def states() -> dict[str, str]:
            return {
                task_id: httpx.get(
                    f"{server.url}/v1/namespaces/{tenant.namespace}/tasks/{task_id}",
                    headers=tenant.headers,
                ).json()["state"]
                for task_id in submitted
            }

        def settled() -> dict[str, str] | None:
            now = states()
            return now if all(v in TERMINAL for v in now.values()) else None

        final = wait_until(settled, timeout=60)
    finally:
        for worker in workers:
            worker.kill()
            worker.wait(10)
    assert set(final.values()) == {"SUCCEEDED"}, final
    started = lines(tmp_path, "slow-started") + lines(tmp_path, "charge-started")
    assert sorted(started) == sorted(submitted), "every task ran exactly once"
