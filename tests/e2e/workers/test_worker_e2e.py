"""A user submits a task and a worker process runs it — through the real server, the real SDK
and real worker subprocesses (ORBIT.md §6, seed invariants 3, 6, 7)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from orbit_sdk import Client, Worker

from ..conftest import ORBIT, Tenant, short_lease_queue, wait_until

pytestmark = pytest.mark.slow


def lines(directory: Path, name: str) -> list[str]:
    path = directory / name
    return path.read_text().split() if path.exists() else []


def test_a_submitted_task_is_leased_run_and_succeeds(tenant: Tenant, tmp_path: Path) -> None:
    tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path))
    with Client(tenant.server.url, token=tenant.token) as client:
        task = client.submit(
            tenant.namespace,
            queue="default",
            handler="e2e.echo",
            params={"x": 1},
            idempotency_key="k1",
        )
        done = client.wait(tenant.namespace, task.id, timeout=30)
    assert done.state == "SUCCEEDED"
    assert done.result["echo"] == {"x": 1}
    assert done.result["generation"] == done.attempts[0].generation
    assert [e.to_state for e in done.events] == ["WAITING", "LEASED", "RUNNING", "SUCCEEDED"]


def test_an_attempt_logs_one_info_line_with_its_outcome_duration_and_report(
    tenant: Tenant, tmp_path: Path
) -> None:
    """Per attempt, one INFO record (a busy worker's log volume, and a share of its CPU, is per
    task): the outcome, how long the handler ran, and what the server made of the report."""
    worker = tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path))
    with Client(tenant.server.url, token=tenant.token) as client:
        task = client.submit(tenant.namespace, handler="e2e.echo", params={"x": 1})
        assert client.wait(tenant.namespace, task.id, timeout=30).state == "SUCCEEDED"
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    records = [json.loads(line) for line in tenant.log_of(worker).splitlines()]
    about = [r for r in records if r.get("orbit_task_id") == task.id and r["level"] == "info"]
    assert len(about) == 1, about
    (record,) = about
    assert record["logger"] == "orbit_sdk.worker"
    assert "succeeded in" in record["msg"] and "task now SUCCEEDED" in record["msg"], record
    assert record["orbit_attempt_id"] and record["orbit_generation"] == 2


def test_a_retryable_failure_is_retried_until_it_succeeds(tenant: Tenant, tmp_path: Path) -> None:
    tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path))
    with Client(tenant.server.url, token=tenant.token) as client:
        task = client.submit(
            tenant.namespace,
            handler="e2e.flaky",
            params={"failures": 2},
            max_attempts=5,
            backoff_initial_seconds=0.1,
        )
        done = client.wait(tenant.namespace, task.id, timeout=30)
    assert done.state == "SUCCEEDED" and done.result == {"calls": 3}
    assert [a.outcome for a in done.attempts] == ["FAILED", "FAILED", "SUCCEEDED"]


def test_an_unsafe_handler_killed_mid_run_goes_to_review_and_is_not_rerun_inv7(
    tenant: Tenant, tmp_path: Path, mariadb_engine: sa.Engine
) -> None:
    queue = short_lease_queue(mariadb_engine, tenant)
    worker = tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path), ORBIT_E2E_QUEUES=queue)
    with Client(tenant.server.url, token=tenant.token) as client:
        task = client.submit(
            tenant.namespace, queue=queue, handler="e2e.charge", params={"seconds": 60}
        )
        wait_until(lambda: lines(tmp_path, "charge-started"), timeout=30)
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path), ORBIT_E2E_QUEUES=queue)
        done = client.wait(tenant.namespace, task.id, timeout=30)
        assert done.state == "NEEDS_REVIEW"
        assert [a.outcome for a in done.attempts] == ["LAPSED"]
        # The second worker runs a later task of the same queue: it has leased past this one.
        later = client.submit(tenant.namespace, queue=queue, handler="e2e.echo", params={})
        assert client.wait(tenant.namespace, later.id, timeout=30).state == "SUCCEEDED"
        assert client.get(tenant.namespace, task.id).state == "NEEDS_REVIEW"
    assert lines(tmp_path, "charge-started") == [task.id], "never run a second time"
    metrics = httpx.get(f"{tenant.server.url}/metrics").text
    assert (
        f'orbit_task_outcomes_total{{namespace="{tenant.namespace}",queue="{queue}",'
        f'state="NEEDS_REVIEW"}} 1.0'
    ) in metrics, "the reaper's decision is counted"


def test_sigterm_drains_the_worker_and_loses_nothing(tenant: Tenant, tmp_path: Path) -> None:
    worker = tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path), ORBIT_E2E_CONCURRENCY="2")
    with Client(tenant.server.url, token=tenant.token) as client:
        ids = [
            client.submit(tenant.namespace, handler="e2e.slow", params={"seconds": 1.5}).id
            for _ in range(6)
        ]
        wait_until(lambda: lines(tmp_path, "slow-started"), timeout=30)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0, tenant.log_of(worker)[-2000:]
        started_before_stop = set(lines(tmp_path, "slow-started"))
        assert started_before_stop <= set(lines(tmp_path, "slow-finished")), (
            "every handler that started before SIGTERM finished"
        )
        tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path), ORBIT_E2E_CONCURRENCY="4")
        states = [client.wait(tenant.namespace, task_id, timeout=60).state for task_id in ids]
    assert states == ["SUCCEEDED"] * 6
    assert sorted(lines(tmp_path, "slow-started")) == sorted(ids), "each ran exactly once"


def test_sigterm_on_the_main_thread_lets_the_handler_in_flight_finish_and_report(
    tenant: Tenant,
) -> None:
    """In-process ``Worker.run()``: the handler itself receives SIGTERM in the middle of its
    work, so something is in flight when the drain begins."""
    assert threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM)
    worker = Worker(
        tenant.server.url,
        token=tenant.token,
        namespace=tenant.namespace,
        concurrency=1,
        lease_wait_seconds=1,
    )
    steps: list[str] = []

    @worker.handler("drain.me")
    def drain_me(ctx: Any, params: Any) -> Any:
        steps.append("began")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)  # still working while the worker stops leasing and drains
        steps.append("finished")
        return {"drained": True}

    with Client(tenant.server.url, token=tenant.token) as client:
        task = client.submit(tenant.namespace, handler="drain.me")
        worker.run()  # returns after the drain
        detail = client.get(tenant.namespace, task.id)
    assert steps == ["began", "finished"]
    assert detail.state == "SUCCEEDED" and detail.result == {"drained": True}
    assert signal.getsignal(signal.SIGTERM) is before


def test_cancelling_a_running_task_reaches_its_handler_and_ends_cancelled(
    tenant: Tenant, tmp_path: Path
) -> None:
    tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path))
    with Client(tenant.server.url, token=tenant.token) as client:
        task = client.submit(tenant.namespace, handler="e2e.cancellable", params={"seconds": 60})
        wait_until(lambda: lines(tmp_path, "cancellable-started"), timeout=30)
        requested = client.cancel(tenant.namespace, task.id, reason="customer changed mind")
        assert requested.state == "RUNNING" and requested.cancel_requested
        done = client.wait(tenant.namespace, task.id, timeout=30)
    assert done.state == "CANCELLED"
    assert lines(tmp_path, "cancellable-saw-cancel") == [task.id]


def test_orbit_worker_runs_a_module_whose_worker_names_its_own_server_and_token(
    tenant: Tenant, tmp_path: Path
) -> None:
    """`orbit worker --help`: --server and --token apply to a Worker that does not name its own;
    one that does needs neither (no ORBIT_TOKEN, no ORBIT_SERVER in the environment)."""
    (tmp_path / "own_token_worker.py").write_text(
        "from orbit_sdk import Worker\n"
        f"worker = Worker({tenant.server.url!r}, token={tenant.token!r})\n"
        "@worker.handler('own.echo')\n"
        "def echo(ctx, params):\n"
        "    return params\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORBIT_")}
    log = tmp_path / "worker.log"
    with log.open("wb") as sink:
        worker = subprocess.Popen(
            [ORBIT, "worker", "own_token_worker:worker"],
            env={**env, "PYTHONPATH": str(tmp_path)},
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    try:
        with Client(tenant.server.url, token=tenant.token) as client:
            task = client.submit(tenant.namespace, handler="own.echo", params={"x": 1})
            done = client.wait(tenant.namespace, task.id, timeout=60)
        assert (done.state, done.result) == ("SUCCEEDED", {"x": 1}), log.read_text()
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
    assert worker.returncode == 0, log.read_text()
