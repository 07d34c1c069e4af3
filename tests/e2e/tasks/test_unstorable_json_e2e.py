"""What the database cannot store, through the real server and a real worker: a handler whose
result is nested 40 deep fails its task at once, saying why — safe or unsafe — instead of being
reported again and again until the worker gives up (and then re-run, or sent to review,
although the handler finished: invariant 7). NaN submissions from some processes are refused
with 422 while valid ones sent at the same time from others are all accepted (invariant 1)."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import httpx
import pytest

from orbit_sdk import Client

from ..conftest import Tenant

PROCESSES = 4
PER_PROCESS = 60


@pytest.mark.parametrize("handler", ["e2e.nested", "e2e.nested_unsafe"])
def test_a_handler_result_nested_40_deep_fails_the_task_saying_why_inv7(
    tenant: Tenant, handler: str
) -> None:
    tenant.start_worker()
    with Client(tenant.server.url, token=tenant.token) as client:
        task = client.submit(tenant.namespace, handler=handler, params={"depth": 40})
        done = client.wait(tenant.namespace, task.id, timeout=60)
        detail = client.get(tenant.namespace, task.id)
    assert done.state == "FAILED", done
    assert done.error["type"] == "ResultNotStorable"
    assert "nested more than 20" in done.error["message"]
    assert len(detail.attempts) == 1, "reported once, not re-run"


def _submitter(url: str, namespace: str, token: str, poison: bool, out: str) -> None:
    """Submit PER_PROCESS tasks as fast as answers come: NaN params when ``poison``."""
    statuses = []
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with httpx.Client(headers=headers, timeout=60) as http:
        for n in range(PER_PROCESS):
            body = {"handler": "e2e.echo", "params": {"n": n, "x": float("nan") if poison else n}}
            answer = http.post(f"{url}/v1/namespaces/{namespace}/tasks", content=json.dumps(body))
            statuses.append(answer.status_code)
    Path(out).write_text(json.dumps(statuses))


def test_nan_submissions_beside_valid_ones_from_other_processes_leave_those_accepted_inv1(
    tenant: Tenant, tmp_path: Path
) -> None:
    logged_before = tenant.server.log.stat().st_size
    ctx = multiprocessing.get_context("spawn")
    outs = [tmp_path / f"statuses-{i}.json" for i in range(PROCESSES)]
    poisoned = {0, 1}
    args = [
        (tenant.server.url, tenant.namespace, tenant.token, i in poisoned, str(out))
        for i, out in enumerate(outs)
    ]
    procs = [ctx.Process(target=_submitter, args=a) for a in args]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    statuses = [json.loads(out.read_text()) for out in outs]
    assert all(s == [422] * PER_PROCESS for i, s in enumerate(statuses) if i in poisoned)
    assert all(s == [201] * PER_PROCESS for i, s in enumerate(statuses) if i not in poisoned)
    with Client(tenant.server.url, token=tenant.token) as client:
        page = client.list(tenant.namespace, page_size=500)
    assert len(page.items) == PER_PROCESS * (PROCESSES - len(poisoned))
    with tenant.server.log.open("rb") as log:
        log.seek(logged_before)
        assert b"database unavailable" not in log.read(), "a refusal is not an outage"
