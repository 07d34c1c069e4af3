"""A workflow runs end to end through the real server, the SDK, the CLI and real `orbit worker`
processes: the example order-fulfilment definition — a parallel branch, a signal wait and a
bounded poll — from publish to output (ORBIT.md §8; seed invariants 9-11)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa

from orbit_sdk import Client
from orbit_store.recovery.verify import verify
from orbit_store.schema import tasks

from ..conftest import ORBIT, ROOT, Server, make_tenant, wait_until

pytestmark = pytest.mark.slow

MANIFEST = ROOT / "examples" / "manifests" / "workflowdefinition-order.yaml"
WORKER = "examples.workflows.worker:worker"


def cli(tenant_env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [ORBIT, "workflow", *args], env=tenant_env, cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_order_fulfilment_runs_to_completion_with_real_workers(
    server: Server, mariadb_engine: sa.Engine, tmp_path: Path
) -> None:
    tenant = make_tenant(server, mariadb_engine, ["admin"])
    env = tenant.env()
    published = json.loads(cli(env, "publish", "-f", str(MANIFEST), "--output", "json"))
    assert (published["published_version"], published["changed"]) == (1, True)
    for _ in range(2):
        tenant.start_worker(WORKER)
    try:
        with Client(server.url, token=tenant.token) as client:
            orders = [
                client.start_workflow(
                    tenant.namespace,
                    "order-fulfilment",
                    input={"order": n, "amount": 10.5 * n},
                    start_key=f"order-{n}",
                )
                for n in (1, 2, 3)
            ]

            def waiting_for_approval() -> bool:
                views = [client.get_workflow(tenant.namespace, w.id) for w in orders]
                return all(v.step("approval").state == "ACTIVE" for v in views)

            wait_until(waiting_for_approval, timeout=60)
            view = client.get_workflow(tenant.namespace, orders[0].id)
            assert view.step("approval").detail.startswith("waiting for signal 'approved'")
            assert {view.step("charge").state, view.step("pack").state} == {"SUCCEEDED"}
            for w in orders[1:]:
                client.signal_workflow(tenant.namespace, w.id, "approved", {"by": "ann"})
            said = cli(env, "signal", orders[0].id, "approved", "--payload", '{"by": "bob"}')
            assert "CONSUMED by step approval" in said
            done = [client.wait_workflow(tenant.namespace, w.id, timeout=90) for w in orders]
    finally:
        for process in tenant.workers:
            process.kill()
    assert [d.state for d in done] == ["SUCCEEDED"] * 3
    assert done[0].output == {"order": 1, "approvedBy": "bob", "tracking": "TRK-BOX-1"}
    track = done[1].step("track")
    assert (track.state, track.activations[0].rounds_used) == ("SUCCEEDED", 3)
    with mariadb_engine.connect() as conn:
        handlers = conn.execute(
            sa.select(tasks.c.workflow_instance_id, tasks.c.handler).where(
                tasks.c.namespace == tenant.namespace
            )
        ).all()
        report = verify(conn, tenant.namespace)
    for w in orders:
        mine = sorted(h for i, h in handlers if i == w.id)
        assert mine == sorted(
            ["orders.reserve", "orders.charge", "orders.pack"] + ["orders.track"] * 3
        ), "each step's task created once, a task per poll round"
    assert report.clean, report.as_dict()
    shown = cli(env, "get", orders[0].id)
    assert "track" in shown and "SUCCEEDED" in shown


NAP_THEN_RESERVE = {
    "steps": [
        {"name": "nap", "sleep": {"seconds": 1}},
        {
            "name": "reserve",
            "dependsOn": ["nap"],
            "task": {"handler": "orders.reserve", "params": {"order": "${input.order}"}},
        },
    ]
}


def test_sleeps_started_together_end_and_their_next_steps_run(
    server: Server, mariadb_engine: sa.Engine
) -> None:
    """Several workflows sleep at once: the server's timer loop ends every sleep (a set of
    them in one transaction) and the next step's task runs on a real worker."""
    tenant = make_tenant(server, mariadb_engine, ["admin"])
    tenant.start_worker(WORKER)
    try:
        with Client(server.url, token=tenant.token) as client:
            client.publish_workflow(tenant.namespace, "nap", NAP_THEN_RESERVE)
            naps = [
                client.start_workflow(
                    tenant.namespace, "nap", input={"order": n}, start_key=f"nap-{n}"
                )
                for n in range(5)
            ]
            done = [client.wait_workflow(tenant.namespace, w.id, timeout=60) for w in naps]
    finally:
        for process in tenant.workers:
            process.kill()
    assert [d.state for d in done] == ["SUCCEEDED"] * 5
    for n, finished in enumerate(done):
        assert finished.step("nap").state == "SUCCEEDED"
        assert finished.output["reserve"] == {"order": n, "items": ["book", "lamp"]}
    with mariadb_engine.connect() as conn:
        report = verify(conn, tenant.namespace)
    assert report.clean, report.as_dict()


def test_the_cli_lists_pauses_resumes_cancels_and_shows_history(
    server: Server, mariadb_engine: sa.Engine
) -> None:
    tenant = make_tenant(server, mariadb_engine, ["admin"])
    env = tenant.env()
    cli(env, "publish", "-f", str(MANIFEST))
    started = json.loads(
        cli(env, "start", "order-fulfilment", "--input", '{"order": 9, "amount": 1}', "-o", "json")
    )
    wid = started["id"]
    assert wid in cli(env, "list") and "RUNNING" in cli(env, "list", "--state", "RUNNING")
    paused = json.loads(cli(env, "pause", wid, "--reason", "incident", "-o", "json"))
    assert (paused["paused"], paused["control_version"]) == (True, 2)
    assert "reserve" in cli(env, "get", wid), "the table lists the steps"
    assert json.loads(cli(env, "resume", wid, "-o", "json"))["paused"] is False
    assert json.loads(cli(env, "cancel", wid, "-o", "json"))["state"] == "CANCELLED"
    kinds = [e["kind"] for e in json.loads(cli(env, "history", wid, "-o", "json"))["items"]]
    assert kinds[0] == "instance.started" and kinds[-1] == "instance.cancelled"
    assert "instance.paused" in cli(env, "history", wid)
    missing = subprocess.run(
        [ORBIT, "workflow", "get", "0190d5a8-0000-7000-8000-000000000000"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 1 and "not found" in missing.stderr
    assert "Traceback" not in missing.stderr
