"""Applying examples/manifests/ as one folder: the operator handles the resources concurrently,
so the Quota and the WorkerPool can be reconciled before the Queue they name is in MySQL. Waiting
for a Queue is temporary (Ready=False, QueueNotFound, retried within seconds), so every resource
this server can serve is Ready within 15 s — with a resync of ten minutes, so the retries do it.

Credential and WorkerPool need what this server does not have (a Secret; Deployments): they are
Ready in tests/operator/test_operator_matrix.py against the emulator, which serves both. Here
they report, truthfully, what they wait for.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
import yaml

from .conftest import Cluster, Kube, Operator, Operators, wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "manifests"
READY_WITHIN = 15.0
SERVED_HERE = ["Queue", "Quota", "Schedule", "WorkflowDefinition"]

pytestmark = pytest.mark.slow


@pytest.fixture
def own_operator(operators: Operators) -> Operator:
    """An operator whose resync is too slow to hide a missing retry."""
    return operators.get(resync_seconds=600, retry_seconds=10)


def examples_in(namespace: str, folder: Path) -> dict[str, str]:
    """The examples, copied into ``folder`` with their namespace changed; kind → name."""
    names = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        doc["metadata"]["namespace"] = namespace
        names[doc["kind"]] = doc["metadata"]["name"]
        (folder / path.name).write_text(yaml.safe_dump(doc))
    return names


def test_applying_the_examples_folder_makes_every_resource_ready_within_15_s(
    cluster: Cluster, api: Kube, own_operator: Operator, tmp_path: Path
) -> None:
    namespace = f"shop-{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "manifests"
    folder.mkdir()
    names = examples_in(namespace, folder)

    started = time.monotonic()
    cluster.kubectl("apply", "-f", str(folder))
    for kind in SERVED_HERE:
        remaining = READY_WITHIN - (time.monotonic() - started)
        api.wait_ready(kind, namespace, names[kind], timeout=max(remaining, 0.1))

    # What the two kinds that need core objects say on this server.
    credential = api.wait_ready("Credential", namespace, names["Credential"], status="False")
    assert credential["status"]["conditions"][0]["reason"] == "SecretNotFound"
    log = own_operator.log.read_text(errors="replace")
    assert "failed permanently" not in log, own_operator.tail()


def test_a_quota_before_its_queue_says_what_it_waits_for(
    cluster: Cluster, api: Kube, own_operator: Operator
) -> None:
    namespace = f"order-{uuid.uuid4().hex[:8]}"
    quota = {"queue": "later", "maxRunning": 3}
    cluster.kubectl(
        "apply", "-f", "-",
        stdin=yaml.safe_dump({"apiVersion": "orbit.dev/v1alpha1", "kind": "Quota",
                              "metadata": {"name": "early", "namespace": namespace},
                              "spec": quota}),
    )  # fmt: skip
    waiting = api.wait_ready("Quota", namespace, "early", status="False", reason="QueueNotFound")
    message = waiting["status"]["conditions"][0]["message"]
    assert "waiting for Queue later" in message and "apply the Queue" in message
    shown = cluster.kubectl("-n", namespace, "get", "quota", "early").stdout
    assert "False" in shown.splitlines()[1]

    time.sleep(3)  # a few retries pass without the Queue
    cluster.kubectl(
        "apply", "-f", "-",
        stdin=yaml.safe_dump({"apiVersion": "orbit.dev/v1alpha1", "kind": "Queue",
                              "metadata": {"name": "later", "namespace": namespace},
                              "spec": {}}),
    )  # fmt: skip
    # Backoff doubles up to --retry-seconds (10): the Quota follows within that.
    api.wait_ready("Quota", namespace, "early", timeout=READY_WITHIN)
    wait_for("no permanent failure", lambda: "failed permanently" not in own_operator.tail(200))
