"""`orbit operator` itself, as a process: logs in through the kubeconfig, reconciles a Queue,
writes JSON log lines, stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from conftest import Kube, free_port, orbit_resource, start_api, wait_for, write_kubeconfig

from orbit_store.schema import queues

pytestmark = pytest.mark.slow

ORBIT = str(Path(sys.executable).with_name("orbit"))


@pytest.fixture
def own_api(tmp_path: Path) -> Iterator[tuple[Kube, Path]]:
    """A second emulated API server, so this operator does not meet the session's one.
    (Cluster-wide only: KMock 0.8 cannot parse ``/api/v1/namespaces``, which Kopf lists when
    it serves named namespaces.)"""
    api = start_api()
    kube = Kube(api.url)
    try:
        yield kube, write_kubeconfig(tmp_path / "kubeconfig", api.url)
    finally:
        kube.http.close()
        api.stop()


def test_orbit_operator_reconciles_and_logs_json(
    own_api: tuple[Kube, Path],
    mariadb_url: str,
    engine: sa.Engine,
    namespace: str,
    tmp_path: Path,
) -> None:
    kube, kubeconfig = own_api
    liveness = f"http://127.0.0.1:{free_port()}/healthz"
    log = tmp_path / "operator.log"
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "ORBIT_DATABASE_URL": mariadb_url}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                ORBIT,
                "operator",
                "--metrics-port",
                "0",
                "--liveness",
                liveness,
            ],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        kube.create(orbit_resource("Queue", namespace, "cli", {"priority": 3}))
        kube.wait_ready("Queue", namespace, "cli")
        with engine.connect() as conn:
            row = conn.execute(
                sa.select(queues).where(queues.c.namespace == namespace, queues.c.name == "cli")
            ).one()
        assert row.priority == 3
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
    output = log.read_text()
    assert code == 0, output[-3000:]
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert lines, output[-3000:]
    handled = [
        line
        for line in lines
        if line.get("object", {}).get("name") == "cli" and "succeeded" in line["msg"]
    ]
    assert handled, output[-3000:]
    assert handled[0]["object"]["kind"] == "Queue"
    assert all("settings" not in line for line in lines)
    wait_for("the process is gone", lambda: process.poll() is not None)


def test_a_restarted_operator_resumes_and_repairs_what_changed_while_it_was_down(
    own_api: tuple[Kube, Path],
    mariadb_url: str,
    engine: sa.Engine,
    namespace: str,
    tmp_path: Path,
) -> None:
    kube, kubeconfig = own_api
    # A long resync: only the resume handler can bring the row back within the test.
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "ORBIT_DATABASE_URL": mariadb_url,
        "ORBIT_OPERATOR_RESYNC_SECONDS": "3600",
    }

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                ORBIT,
                "operator",
                "--metrics-port",
                "0",
                "--liveness",
                f"http://127.0.0.1:{free_port()}/healthz",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def row() -> object:
        with engine.connect() as conn:
            return conn.execute(
                sa.select(queues.c.priority).where(
                    queues.c.namespace == namespace, queues.c.name == "resumed"
                )
            ).one_or_none()

    first = start()
    try:
        kube.create(orbit_resource("Queue", namespace, "resumed", {"priority": 4}))
        kube.wait_ready("Queue", namespace, "resumed")
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=30) == 0
    with engine.begin() as conn:  # drift while no operator runs
        conn.execute(
            queues.delete().where(queues.c.namespace == namespace, queues.c.name == "resumed")
        )
    second = start()
    try:
        wait_for("the queue row restored on resume", lambda: row() is not None)
        assert row()[0] == 4  # type: ignore[index]
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=30) == 0
