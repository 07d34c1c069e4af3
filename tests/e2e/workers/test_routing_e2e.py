"""Handler routing end to end: a worker process registers the handlers it runs, so it is never
granted a task it cannot run — that task waits, and `orbit task get` says no live worker runs
it (before, the worker leased it and failed it as "no handler named …")."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orbit_sdk import Client

from ..conftest import ORBIT, ROOT, Tenant, wait_until

pytestmark = pytest.mark.slow


def test_a_task_no_worker_runs_waits_and_says_so(tenant: Tenant, tmp_path: Path) -> None:
    tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path))
    with Client(tenant.server.url, token=tenant.token) as client:
        nobody = client.submit(tenant.namespace, handler="e2e.nobody_runs_this", params={})
        echo = client.submit(tenant.namespace, handler="e2e.echo", params={"x": 1})
        assert client.wait(tenant.namespace, echo.id, timeout=30).state == "SUCCEEDED"
        waiting = wait_until(
            lambda: (
                (t := client.get(tenant.namespace, nobody.id)).runnable_by_live_worker is False
                and t
            )
        )
    assert (waiting.state, waiting.attempts_used, waiting.waiting_reason) == ("WAITING", 0, "ready")
    shown = subprocess.run(
        [ORBIT, "task", "get", nobody.id],
        cwd=ROOT,
        env=tenant.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "no live worker serves queue 'default'" in " ".join(shown.stdout.split())


def test_a_worker_told_to_serve_only_some_handlers_is_granted_only_those(
    tenant: Tenant, tmp_path: Path
) -> None:
    """`orbit worker --handlers` (how a WorkerPool's spec.handlers reaches its pods): a handler
    the module registers but the pool does not name is not granted to this worker."""
    tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path), ORBIT_WORKER_HANDLERS="e2e.echo")
    with Client(tenant.server.url, token=tenant.token) as client:
        left = client.submit(tenant.namespace, handler="e2e.flaky", params={"failures": 0})
        echo = client.submit(tenant.namespace, handler="e2e.echo", params={"x": 1})
        assert client.wait(tenant.namespace, echo.id, timeout=30).state == "SUCCEEDED"
        waiting = wait_until(
            lambda: (
                (t := client.get(tenant.namespace, left.id)).runnable_by_live_worker is False and t
            )
        )
    assert (waiting.state, waiting.attempts_used) == ("WAITING", 0)


def test_naming_a_handler_the_module_does_not_register_is_a_usage_error(tenant: Tenant) -> None:
    done = subprocess.run(
        [ORBIT, "worker", "tests.e2e.handlers:worker", "--handlers", "e2e.echo,e2e.nope"],
        cwd=ROOT,
        env=tenant.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "e2e.nope" in done.stderr and "--handlers" in done.stderr
    assert "Traceback" not in done.stderr
