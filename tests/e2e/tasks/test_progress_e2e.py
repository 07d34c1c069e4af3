"""Progress from handlers, end to end: a real worker's handler calls ``ctx.progress``; the next
heartbeat carries it (no extra request); the server keeps the latest, bounded, on the attempt
in MariaDB; `orbit task get` and `task watch` show it, and so does the API's task detail."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from orbit_sdk import Client

from ..conftest import ORBIT, ROOT, Tenant, wait_until

pytestmark = pytest.mark.slow


def orbit(tenant: Tenant, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ORBIT, *args], cwd=ROOT, env=tenant.env(), capture_output=True, text=True, timeout=60
    )


def task_json(tenant: Tenant, task_id: str) -> dict:  # type: ignore[type-arg]
    done = orbit(tenant, "task", "get", task_id, "-o", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_progress_reported_by_a_handler_is_shown_by_the_api_and_the_cli(
    tenant: Tenant, tmp_path: Path
) -> None:
    tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path))
    steps = [
        {"fraction": 0.25, "details": {"rows": 250}},
        {"message": "writing the report"},
        {"fraction": 0.75, "details": {"rows": 750, "file": "r.csv"}},
    ]
    with Client(tenant.server.url, token=tenant.token) as client:
        task = client.submit(tenant.namespace, handler="e2e.progress", params={"steps": steps})

        def progress_is(expected: dict) -> bool:  # type: ignore[type-arg]
            shown = client.get(tenant.namespace, task.id).progress
            return shown is not None and all(getattr(shown, k) == v for k, v in expected.items())

        wait_until(lambda: progress_is({"fraction": 0.25, "details": {"rows": 250}}), 60)
        seen = task_json(tenant, task.id)["progress"]
        assert (seen["fraction"], seen["message"], seen["details"]) == (0.25, None, {"rows": 250})
        assert seen["at"].endswith("Z")
        (tmp_path / f"progress-go-{task.id}-1").touch()
        wait_until(lambda: progress_is({"message": "writing the report"}), 60)
        (tmp_path / f"progress-go-{task.id}-2").touch()
        wait_until(lambda: progress_is({"fraction": 0.75}), 60)
        described = orbit(tenant, "task", "get", task.id)
        assert "progress:" in described.stdout
        assert '75%  {"rows":750,"file":"r.csv"}' in described.stdout, described.stdout
        (tmp_path / f"progress-go-{task.id}-3").touch()
        done = client.wait(tenant.namespace, task.id, timeout=60)
    assert done.state == "SUCCEEDED"
    # The attempt keeps the last word it had: where it stopped, after it ended too.
    assert done.progress is not None and done.progress.fraction == 0.75
    assert done.attempts[-1].progress is not None


def test_task_watch_shows_progress_as_it_changes(tenant: Tenant, tmp_path: Path) -> None:
    tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path))
    steps = [{"fraction": 0.5, "details": {"rows": 500}}]
    with Client(tenant.server.url, token=tenant.token) as client:
        task = client.submit(tenant.namespace, handler="e2e.progress", params={"steps": steps})
        watch = subprocess.Popen(
            [ORBIT, "task", "watch", task.id, "--interval", "0.1", "--timeout", "90"],
            cwd=ROOT,
            env=tenant.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until(lambda: client.get(tenant.namespace, task.id).progress is not None, 60)
            (tmp_path / f"progress-go-{task.id}-1").touch()
            out, err = watch.communicate(timeout=90)
        finally:
            if watch.poll() is None:
                watch.kill()
    assert watch.returncode == 0, err
    # not a terminal: one line per change of progress (a terminal gets a live bar)
    assert any("progress  50%" in line and '{"rows":500}' in line for line in out.splitlines())
    assert "-> SUCCEEDED" in out
