"""The operator as a process: probes, metrics, peering, logs, configuration, the CLI, and what
it reports when MySQL is unavailable."""

from __future__ import annotations

import json
import logging
import secrets as random
from typing import Any, cast

import httpx
import kopf
import pytest
from conftest import Kube, orbit_resource, secret, wait_for
from kube_emulator import EmulatorThread
from typer.testing import CliRunner

from orbit.cli.main import app
from orbit_store.db import create_store_engine

pytestmark = pytest.mark.slow


def test_liveness_probe_reports_the_database(kube: Kube, operator_ports: dict[str, int]) -> None:
    response = httpx.get(f"http://127.0.0.1:{operator_ports['liveness']}/healthz", timeout=5)
    assert response.status_code == 200
    assert response.json()["database"] == "ok"


def test_reconcile_errors_are_counted_and_durations_measured_by_kind(
    kube: Kube, operator_ports: dict[str, int], namespace: str
) -> None:
    kube.create(orbit_resource("Quota", namespace, "none", {}))
    kube.create(orbit_resource("Queue", namespace, "counted", {}))
    kube.wait_ready("Quota", namespace, "none", status="False", reason="InvalidSpec")
    kube.wait_ready("Queue", namespace, "counted")

    def scraped() -> str:
        url = f"http://127.0.0.1:{operator_ports['metrics']}/metrics"
        text = httpx.get(url, timeout=5).text
        line = 'orbit_operator_reconcile_errors_total{kind="Quota",reason="InvalidSpec"}'
        return text if line in text else ""

    text = wait_for("error counter", scraped)
    assert 'orbit_operator_reconciles_total{kind="Queue",reason="Reconciled"}' in text
    (count,) = [
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith('orbit_operator_reconcile_duration_seconds_count{kind="Queue"}')
    ]
    assert count >= 1, "reconcile durations are measured"


def test_the_operator_runs_standalone_without_peering_objects(
    kube: Kube, kube_api: EmulatorThread, namespace: str
) -> None:
    """One replica with the Recreate strategy (the chart), so Kopf peering is not used: it would
    pause every replica of equal priority, and its CRD is not installed."""
    kube.create(orbit_resource("Queue", namespace, "standalone", {}))
    kube.wait_ready("Queue", namespace, "standalone")
    assert not [r for r in kube_api.served() if r[1] in ("clusterkopfpeerings", "kopfpeerings")]


def test_the_operator_reads_secrets_only_by_name(
    kube: Kube, kube_api: EmulatorThread, namespace: str
) -> None:
    """It never lists or watches Secrets (RBAC grants only get): Credentials name theirs."""
    kube.create(secret(namespace, "by-name", token=random.token_hex(20)))
    kube.create(
        orbit_resource(
            "Credential",
            namespace,
            "by-name",
            {"secretRef": {"name": "by-name"}, "roles": ["submit"]},
        )
    )
    kube.wait_ready("Credential", namespace, "by-name")
    actions = {action for action, plural in kube_api.served() if plural == "secrets"}
    assert "FETCH" in actions
    assert not actions & {"LIST", "WATCH"}, actions


def test_database_unavailable_reports_unknown_and_retries() -> None:
    from orbit_operator.adapter import raise_for, reconcile_resource
    from orbit_operator.context import Context
    from orbit_operator.kube import Kube as OperatorKube
    from orbit_operator.metrics import OperatorMetrics
    from orbit_operator.settings import OperatorConfig

    engine = create_store_engine("mysql+pymysql://root@127.0.0.1:1/nowhere?connect_timeout=2")
    metrics = OperatorMetrics()
    ctx = Context(OperatorConfig(retry_seconds=3), engine, cast(OperatorKube, None), metrics)
    body: dict[str, Any] = {
        "metadata": {"name": "q", "namespace": "ns", "generation": 4},
        "spec": {},
        "status": {"observedGeneration": 3},
    }
    status: dict[str, Any] = {}

    failure = reconcile_resource(ctx, "Queue", body, status, logging.getLogger("test"))

    assert failure is not None and failure.temporary
    ready = status["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("Unknown", "DatabaseUnavailable")
    assert ready["observedGeneration"] == 4 and "retrying every 3s" in ready["message"]
    assert "observedGeneration" not in status  # the change is not in effect
    with pytest.raises(kopf.TemporaryError) as raised:
        raise_for(failure, ctx)
    assert raised.value.delay == 3
    counted = metrics.registry.get_sample_value(
        "orbit_operator_reconcile_errors_total", {"kind": "Queue", "reason": "DatabaseUnavailable"}
    )
    assert counted == 1
    engine.dispose()


def test_configuration_from_the_environment() -> None:
    from orbit_operator.settings import DEFAULT_SERVER_URL, ConfigError, OperatorConfig

    config = OperatorConfig.from_env(
        {
            "ORBIT_DATABASE_URL": "mysql+pymysql://orbit@db/orbit",
            "ORBIT_OPERATOR_RESYNC_SECONDS": "30",
            "ORBIT_OPERATOR_METRICS_PORT": "0",
        }
    )
    assert config.database_url == "mysql+pymysql://orbit@db/orbit"
    assert config.server_url == DEFAULT_SERVER_URL
    assert (config.resync_seconds, config.metrics_port) == (30.0, 0)
    for bad in ({"ORBIT_OPERATOR_RETRY_SECONDS": "soon"}, {"ORBIT_OPERATOR_METRICS_PORT": "-1"}):
        with pytest.raises(ConfigError):
            OperatorConfig.from_env(bad)


def test_json_logs_carry_the_object_not_kopf_internals() -> None:
    from orbit_operator.logs import OperatorJsonFormatter

    record = logging.LogRecord("kopf.objects", logging.INFO, "", 0, "hello %s", ("you",), None)
    record.__dict__.update(
        settings=object(),
        k8s_skip=False,
        k8s_ref={
            "apiVersion": "orbit.dev/v1alpha1",
            "kind": "Queue",
            "name": "q",
            "namespace": "n",
        },
    )
    line = json.loads(OperatorJsonFormatter().format(record))
    assert line["msg"] == "hello you"
    assert line["object"] == {"kind": "Queue", "name": "q", "namespace": "n"}
    assert "settings" not in line and "k8s_ref" not in line
    assert "settings" in record.__dict__  # the record is left as it was, for other handlers


def test_orbit_operator_help() -> None:
    # `orbit` points the root logger at the runner's soon-closed stream; keep the operator's.
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        result = CliRunner().invoke(app, ["operator", "--help"], env={"COLUMNS": "200"})
    finally:
        root.handlers[:], root.level = handlers, level
    assert result.exit_code == 0, result.output
    for option in ("--database-url", "--server-url", "--liveness", "--metrics-port"):
        assert option in result.output
    assert "--peering" not in result.output, "one replica, no peering"
