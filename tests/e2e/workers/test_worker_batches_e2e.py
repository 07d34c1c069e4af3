"""Worker protocols 2 and 4 through a real `orbit worker` process: attempts that finish together
are started and reported in shared calls (reports riding the next lease request), and every task
still ends with its own outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orbit_sdk import Client

from ..conftest import Tenant, wait_until
from ..server.test_monitoring import scrape, value

pytestmark = pytest.mark.slow

TASKS = 40


def _batched(tenant: Tenant, call: str) -> tuple[float, float]:
    """(calls, items) of the batched ``call`` so far, server-wide."""
    samples = scrape(tenant.server)
    calls = value(samples, "orbit_batch_items_count", call=call) or 0.0
    return calls, value(samples, "orbit_batch_items_sum", call=call) or 0.0


CALLS = ("start", "complete", "lease_reports")


def _drained(tenant: Tenant, tmp_path: Path, **worker_env: str) -> tuple[Any, dict[str, Any]]:
    """A backlog of TASKS echo tasks run by a real worker: the stopped worker and the server's
    batched-call counts from before it began; every task ends SUCCEEDED with its own result."""
    with Client(tenant.server.url, token=tenant.token) as client:
        ids = [
            client.submit(tenant.namespace, handler="e2e.echo", params={"i": i}).id
            for i in range(TASKS)
        ]
        before = {call: _batched(tenant, call) for call in CALLS}
        worker = tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path), **worker_env)

        def all_done() -> bool:
            tasks = [client.get(tenant.namespace, task_id) for task_id in ids]
            return all(task.state == "SUCCEEDED" for task in tasks)

        wait_until(all_done, timeout=60, interval=0.5)
        done = [client.get(tenant.namespace, task_id) for task_id in ids]
    assert [task.result["echo"] for task in done] == [{"i": i} for i in range(TASKS)]
    worker.terminate()
    worker.wait(30)
    return worker, before


def test_a_backlog_is_started_and_reported_in_shared_calls(tenant: Tenant, tmp_path: Path) -> None:
    worker, before = _drained(
        tenant,
        tmp_path,
        ORBIT_E2E_CONCURRENCY="10",
        ORBIT_E2E_LEASE_WITH_START="0",  # protocol 2: every grant started by a call
    )
    said = tenant.log_of(worker)
    for call, counted in (("start", ("start",)), ("complete", ("complete", "lease_reports"))):
        calls = sum(_batched(tenant, c)[0] - before[c][0] for c in counted)
        items = sum(_batched(tenant, c)[1] - before[c][1] for c in counted)
        assert items >= TASKS, f"every {call} went through the batched call"
        # A call that outlived its budget (a third of the lease: a loaded machine) is sent
        # again and its items counted again; the worker says so. Nothing else may add items.
        resent = _resends(said, call)
        assert items == TASKS or resent, f"{items:.0f} {call} items for {TASKS} tasks, no resend"
        assert calls < TASKS, f"{TASKS} {call}s in {calls:.0f} calls: none shared a call"


def _resends(worker_log: str, call: str) -> list[str]:
    """The worker's log lines that tell of a ``call`` sent again: the transport's retry of the
    batched call, or an attempt's own retry of its start or report."""
    own = {"start": "start failed", "complete": "report failed"}[call]
    return [
        line
        for line in worker_log.splitlines()
        if f"/v1/attempts:{call} failed" in line or own in line
    ]


def test_a_busy_worker_reports_on_its_next_lease_request_inv4(
    tenant: Tenant, tmp_path: Path
) -> None:
    """Worker protocol 4 through a real `orbit worker`: with a backlog, the outcomes of a cycle's
    attempts ride the next lease request (one round trip per cycle), each still applied with
    its own token — every task ends SUCCEEDED with its own result, and every report reached
    the server once, by a lease request or by its own call."""
    worker, before = _drained(tenant, tmp_path, ORBIT_E2E_CONCURRENCY="8")
    on_lease, by_call = (
        _batched(tenant, call)[1] - before[call][1] for call in ("lease_reports", "complete")
    )
    assert on_lease > 0, "no report rode a lease request"
    resent = _resends(tenant.log_of(worker), "complete")
    assert on_lease + by_call == TASKS or resent, f"{on_lease + by_call:.0f} reports, no resend"
