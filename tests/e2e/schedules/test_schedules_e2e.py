"""Schedules end to end, through what users touch: `orbit apply` a Schedule manifest, the running
`orbit server` fires it, a real `orbit worker` runs the task, and `orbit schedule get` shows the
last and next fire and the occurrence. Also the HTTP API and the SDK for the same resource."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from orbit_sdk import Client, Conflict, ValidationFailed

from ..conftest import ORBIT, ROOT, Server, Tenant, delete_schedules, make_tenant, wait_until


def orbit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ORBIT, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_apply_a_schedule_the_server_fires_it_a_worker_runs_it_and_get_shows_it(
    tenant: Tenant, tmp_path: Path, mariadb_engine: sa.Engine
) -> None:
    try:
        apply_and_watch_a_schedule_fire(tenant, tmp_path)
    finally:
        delete_schedules(mariadb_engine, tenant.namespace, "heartbeat")


def apply_and_watch_a_schedule_fire(tenant: Tenant, tmp_path: Path) -> None:
    manifest = tmp_path / "schedule.yaml"
    manifest.write_text(
        "apiVersion: orbit.dev/v1alpha1\nkind: Schedule\n"
        f"metadata: {{name: heartbeat, namespace: {tenant.namespace}}}\n"
        "spec:\n"
        "  schedule: '*/2 * * * * *'\n"  # every two seconds (leading seconds field)
        "  timeZone: Europe/Berlin\n"
        "  concurrencyPolicy: Forbid\n"
        "  taskTemplate: {handler: e2e.echo, params: {from: schedule}}\n"
    )
    applied = orbit("apply", "-f", str(manifest), "--database-url", tenant.server.database_url)
    assert applied.returncode == 0, applied.stderr
    assert f"Schedule/{tenant.namespace}/heartbeat configured: next fire" in applied.stdout
    tenant.start_worker()
    env = tenant.env()

    # The wait polls over HTTP: an `orbit` process per poll cost ~0.3 s of CPU each, and the
    # process boundary is what the one `orbit schedule get` after it shows.
    with Client(tenant.server.url, token=tenant.token) as client:

        def ran() -> bool:
            view = client.get_schedule(tenant.namespace, "heartbeat")
            return any(o.task_state == "SUCCEEDED" for o in view.occurrences)

        wait_until(ran, timeout=30, interval=0.2)
    got = orbit("schedule", "get", "heartbeat", "-o", "json", env=env)
    assert got.returncode == 0, got.stderr
    view: dict[str, Any] = json.loads(got.stdout)
    fired = next(o for o in view["occurrences"] if o["task_state"] == "SUCCEEDED")
    assert (fired["status"], fired["reason"]) == ("FIRED", "Scheduled")
    assert view["last_fire_at"] and view["next_fire_at"] > view["last_fire_at"]
    assert (view["state"], view["source"]) == ("Active", "manifest")
    with Client(tenant.server.url, token=tenant.token) as client:
        task = client.get(tenant.namespace, fired["task_id"])
    assert task.result["echo"] == {"from": "schedule"}

    table = orbit("schedule", "get", "heartbeat", env=env)
    assert "next fire" in table.stdout and "FIRED" in table.stdout
    assert "CET" in table.stdout or "CEST" in table.stdout  # local time in Europe/Berlin
    metrics = httpx.get(f"{tenant.server.url}/metrics").text
    fires = f'orbit_schedule_fires_total{{namespace="{tenant.namespace}",outcome="fired",reason='
    assert fires in metrics
    assert (
        f'orbit_schedule_fire_lateness_seconds_count{{namespace="{tenant.namespace}"}}' in metrics
    )
    # A schedule a manifest declares is changed through the manifest, not the API.
    refused = orbit("schedule", "suspend", "heartbeat", env=env)
    assert refused.returncode == 1 and "declared by a Schedule resource" in refused.stderr


def test_replace_never_runs_the_new_task_beside_the_one_it_replaces(
    tenant: Tenant, tmp_path: Path, mariadb_engine: sa.Engine
) -> None:
    """concurrencyPolicy Replace as a CronJob has it: each fire asks the running task to stop
    and its own task starts only once that one has ended — here the handler ignores the request
    and finishes, so runs follow each other, never overlap."""
    with Client(tenant.server.url, token=tenant.token) as client:
        client.create_schedule(
            tenant.namespace,
            "replacing",
            cron="*/2 * * * * *",
            handler="e2e.alone",
            params={"seconds": 3},
            concurrency_policy="Replace",
        )
    try:
        tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path), ORBIT_E2E_CONCURRENCY="4")
        log = tmp_path / "alone"

        def three_ended() -> list[str] | None:
            found = log.read_text().splitlines() if log.exists() else []
            return found if sum(line.startswith("end ") for line in found) >= 3 else None

        found = [line.split() for line in wait_until(three_ended, timeout=60)]
        runs = len(found) // 2
        assert [kind for kind, _ in found[: 2 * runs]] == ["start", "end"] * runs, found
        assert all(found[2 * i][1] == found[2 * i + 1][1] for i in range(runs)), found
        with Client(tenant.server.url, token=tenant.token) as client:
            view = client.get_schedule(tenant.namespace, "replacing", occurrences=50)
        assert "Replaced" in {o.reason for o in view.occurrences}
    finally:
        delete_schedules(mariadb_engine, tenant.namespace, "replacing")


def test_schedules_through_the_sdk_and_http(tenant: Tenant) -> None:
    ns = tenant.namespace
    with Client(tenant.server.url, token=tenant.token) as client:
        created = client.create_schedule(
            ns, "nightly", cron="30 2 * * *", time_zone="America/New_York", handler="e2e.echo"
        )
        assert (created.version, created.state, created.source) == (1, "Active", "api")
        with pytest.raises(Conflict):
            client.create_schedule(ns, "nightly", cron="@daily", handler="e2e.echo")
        with pytest.raises(ValidationFailed) as bad:
            client.create_schedule(ns, "bad", cron="* * *", handler="e2e.echo")
        assert "cron:" in str(bad.value)

        updated = client.update_schedule(
            ns, "nightly", cron="@hourly", handler="e2e.echo", expected_version=1
        )
        assert updated.version == 2
        with pytest.raises(Conflict):
            client.update_schedule(ns, "nightly", cron="@daily", handler="h", expected_version=1)
        assert client.suspend_schedule(ns, "nightly").state == "Suspended"
        assert client.resume_schedule(ns, "nightly").next_fire_at is not None
        assert [s.name for s in client.list_schedules(ns).items] == ["nightly"]

        preview = client.preview_schedule(ns, "30 2 * * *", "America/New_York", count=3)
        assert len(preview.instants) == 3
        client.delete_schedule(ns, "nightly")
        assert client.list_schedules(ns).items == []

    other = httpx.get(
        f"{tenant.server.url}/v1/namespaces/someone-else/schedules", headers=tenant.headers
    )
    assert other.status_code == 403


def test_a_schedule_suspended_with_the_cli_is_audited_with_the_reason_given(
    server: Server, mariadb_engine: sa.Engine
) -> None:
    """The CLI passes ``--reason`` on; each change through the API is audited with its version
    and what changed (tests/api/test_audit.py)."""
    admin = make_tenant(server, mariadb_engine, ["admin"])
    ns = admin.namespace
    with Client(server.url, token=admin.token) as client:
        client.create_schedule(ns, "nightly", cron="@daily", handler="e2e.echo")
        suspended = orbit("schedule", "suspend", "nightly", "--reason", "INC-8", env=admin.env())
        assert suspended.returncode == 0, suspended.stderr
        trail = client.audit(ns, resource_kind="Schedule", resource_id="nightly").items
    assert [(e.action, e.actor, e.reason, e.resource_version) for e in trail[:1]] == [
        ("schedule.suspend", "e2e", "INC-8", 2)
    ]


def test_schedule_preview_prints_utc_and_local_instants_and_refuses_a_bad_zone() -> None:
    ok = orbit(
        "schedule",
        "preview",
        "--cron",
        "30 2 * * *",
        "--time-zone",
        "America/New_York",
        "--from",
        "2026-03-07T12:00:00Z",
        "--count",
        "2",
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines() == [
        "2026-03-08T07:00:00Z  2026-03-08 03:00:00 EDT (-0400)",
        "2026-03-09T06:30:00Z  2026-03-09 02:30:00 EDT (-0400)",
    ]
    bad = orbit("schedule", "preview", "--cron", "* * * * *", "--time-zone", "Mars/Olympus")
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "not an IANA time zone" in bad.stderr
    assert "Traceback" not in bad.stderr
