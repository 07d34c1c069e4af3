"""The README's workflow quick start, exactly: `orbit dev` with the example workflow worker on
SQLite, then the CLI publishes the example definition, starts a workflow, approves it, and the
workflow finishes with its output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from ..conftest import ORBIT, ROOT, free_port, wait_until
from .test_quickstart import _ready

pytestmark = pytest.mark.slow


def test_workflow_quick_start_on_orbit_dev(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORBIT_")}
    worker = ["--worker", "examples.workflows.worker:worker"]
    dev = subprocess.Popen(
        [ORBIT, "dev", "--db", str(tmp_path / "dev.db"), "--port", str(port), *worker],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    server = f"http://127.0.0.1:{port}"
    cli_env = {**env, "ORBIT_SERVER": server, "ORBIT_NAMESPACE": "dev"}

    def orbit(*args: str) -> str:
        done = subprocess.run(
            [ORBIT, *args], cwd=ROOT, env=cli_env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    try:
        wait_until(lambda: _ready(server, dev), timeout=90)
        cli_env["ORBIT_TOKEN"] = (tmp_path / "dev-token").read_text().strip()
        manifest = "examples/manifests/workflowdefinition-order.yaml"
        assert orbit("workflow", "publish", "-f", manifest).startswith(
            "published order-fulfilment version 1"
        )
        started = json.loads(
            orbit(
                "workflow",
                "start",
                "order-fulfilment",
                "--input",
                '{"order": 7, "amount": 12.5}',
                "--key",
                "order-7",
                "-o",
                "json",
            )
        )

        def approval_active() -> bool:
            view = json.loads(orbit("workflow", "get", started["id"], "-o", "json"))
            return any(s["name"] == "approval" and s["state"] == "ACTIVE" for s in view["steps"])

        wait_until(approval_active, timeout=60, interval=0.5)
        orbit("workflow", "signal", started["id"], "approved", "--payload", '{"by": "me"}')

        def finished() -> dict[str, object] | None:
            view = json.loads(orbit("workflow", "get", started["id"], "-o", "json"))
            return view if view["state"] != "RUNNING" else None

        view = wait_until(finished, timeout=60, interval=0.5)
        assert view["state"] == "SUCCEEDED"
        assert view["output"] == {"approvedBy": "me", "order": 7, "tracking": "TRK-BOX-7"}
    finally:
        dev.send_signal(signal.SIGTERM)
        dev.wait(30)
