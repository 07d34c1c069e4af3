"""Monitoring end to end: a real `orbit server` does some work, its /metrics shows every metric
of expected_metrics.py with the values that work implies, and a real Prometheus scraping it on
127.0.0.1 evaluates Orbit's own rules (deploy/prometheus/orbit-rules.yaml) against it."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
import yaml
from prometheus_client.parser import text_string_to_metric_families

from orbit_sdk import Client

from .conftest import ROOT, Server, Tenant, free_port, make_tenant, wait_for_http, wait_until
from .expected_metrics import OPERATOR_METRICS, SERVER_METRICS

RULES = ROOT / "deploy" / "prometheus" / "orbit-rules.yaml"
MONITORING_DOC = ROOT / "docs" / "operations" / "monitoring.md"

Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(server: Server) -> Samples:
    """Family name → (labels, value) of every sample (counters keep their _total name)."""
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
        samples.setdefault(family.name, [])
        samples.setdefault(f"{family.name}_total", []) if family.type == "counter" else None
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    for found, v in samples.get(name, []):
        if all(found.get(k) == want for k, want in labels.items()):
            return v
    return None


@dataclass
class Work:
    busy: Tenant  # three tasks done, one reviewed, one left in NEEDS_REVIEW, a worker connected
    idle: Tenant  # two tasks waiting, no worker


@pytest.fixture
def work(tenant: Tenant, mariadb_engine: sa.Engine, tmp_path: Path) -> Work:
    tenant.start_worker(ORBIT_E2E_DIR=str(tmp_path))
    with Client(tenant.server.url, token=tenant.token) as client:
        ns = tenant.namespace
        done = [client.submit(ns, handler="e2e.echo", params={"i": i}) for i in range(3)]
        uncertain = [client.submit(ns, handler="e2e.uncertain") for _ in range(2)]
        for task in [*done, *uncertain]:
            client.wait(ns, task.id, timeout=30)
        reviewed = client.get(ns, uncertain[0].id)
        assert reviewed.state == "NEEDS_REVIEW"
        client.review(
            ns,
            reviewed.id,
            decision="failed",
            reason="provider says it never charged",
            evidence_ref="ticket-1",
            expected_state_version=reviewed.state_version,
            execution_ended=True,
        )
    idle = make_tenant(tenant.server, mariadb_engine, ["submit"])
    with Client(idle.server.url, token=idle.token) as client:
        for _ in range(2):
            client.submit(idle.namespace, handler="e2e.echo")
    return Work(tenant, idle)


def test_scrape_shows_every_expected_metric_with_the_values_the_work_implies(work: Work) -> None:
    ns, idle = work.busy.namespace, work.idle.namespace

    def refreshed() -> Samples | None:
        samples = scrape(work.busy.server)
        waiting = value(samples, "orbit_queue_tasks", namespace=idle, state="WAITING")
        review = value(samples, "orbit_queue_tasks", namespace=ns, state="NEEDS_REVIEW")
        return samples if waiting == 2 and review == 1 else None

    samples = wait_until(refreshed, timeout=20)
    for name in SERVER_METRICS:
        assert name in samples, f"{name} is not exposed"
    assert value(samples, "orbit_tasks_submitted_total", namespace=ns, queue="default") == 5
    assert value(samples, "orbit_tasks_submitted_total", namespace=idle, queue="default") == 2
    assert value(samples, "orbit_task_outcomes_total", namespace=ns, state="SUCCEEDED") == 3
    assert value(samples, "orbit_task_outcomes_total", namespace=ns, state="NEEDS_REVIEW") == 2
    assert value(samples, "orbit_task_reviews_total", namespace=ns, decision="failed") == 1
    assert value(samples, "orbit_dispatch_latency_seconds_count", namespace=ns) == 5
    assert value(samples, "orbit_worker_sessions", namespace=ns, state="ACTIVE") == 1
    assert value(samples, "orbit_worker_sessions", namespace=idle) is None
    oldest = value(samples, "orbit_queue_oldest_waiting_seconds", namespace=idle, queue="default")
    assert oldest is not None and 0 <= oldest < 60
    live = {f["state"] for f, _v in samples["orbit_queue_tasks"] if f["namespace"] == ns}
    assert live == {"NEEDS_REVIEW"}, "finished tasks are not backlog"
    stamp = value(samples, "orbit_gauges_refreshed_timestamp_seconds")
    assert stamp is not None and abs(time.time() - stamp) < 30


def test_labels_are_the_bounded_documented_sets(work: Work) -> None:
    samples = scrape(work.busy.server)
    for name, labels in SERVER_METRICS.items():
        for found, _v in samples.get(name, []):
            assert set(found) == set(labels), (name, found)
    ids = {t for samples_ in samples.values() for found, _v in samples_ for t in found.values()}
    assert not [i for i in ids if len(i) == 36 and i.count("-") == 4], "never a task id label"


def test_monitoring_doc_documents_every_expected_metric() -> None:
    doc = MONITORING_DOC.read_text()
    for name in [*SERVER_METRICS, *OPERATOR_METRICS]:
        assert f"`{name}`" in doc, f"document {name} in docs/operations/monitoring.md"


# --- a real Prometheus ----------------------------------------------------------------------------


@pytest.fixture
def prometheus(server: Server, tmp_path: Path) -> Iterator[str]:
    """Prometheus on 127.0.0.1 scraping the test server every second as job orbit-server, with
    Orbit's rules loaded and evaluated every second."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus not found: run scripts/ensure-tools (scripts/test does)")
    target = server.url.removeprefix("http://")
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {
                "job_name": "orbit-server",
                "honor_labels": True,
                "static_configs": [{"targets": [target]}],
            }
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = tmp_path / "prometheus.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(process, f"{url}/-/ready", log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


def query(prometheus: str, promql: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{prometheus}/api/v1/query", params={"query": promql}, timeout=10).json()
    assert answer["status"] == "success", answer
    return list(answer["data"]["result"])


def test_prometheus_scrapes_the_server_and_orbits_rules_see_its_state(
    work: Work, prometheus: str
) -> None:
    ns, idle = work.busy.namespace, work.idle.namespace
    wait_until(lambda: query(prometheus, 'up{job="orbit-server"} == 1'), timeout=30)

    recorded = wait_until(
        lambda: query(
            prometheus,
            f'namespace_queue:orbit_tasks_waiting:max{{namespace="{idle}",queue="default"}}',
        ),
        timeout=30,
    )
    assert float(recorded[0]["value"][1]) == 2, "the recording rule sees the real gauge"

    def review_alert() -> list[dict[str, Any]]:
        alerts = httpx.get(f"{prometheus}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
        return [
            a
            for a in alerts
            if a["labels"]["alertname"] == "OrbitTasksNeedReview"
            and a["labels"].get("namespace") == ns
        ]

    (alert,) = wait_until(review_alert, timeout=30)
    assert alert["state"] == "pending", "true now, firing after its `for` of 15 minutes"
    assert alert["labels"]["queue"] == "default"
    assert alert["annotations"]["runbook_url"].endswith("/OrbitTasksNeedReview.md")
    assert not query(prometheus, 'ALERTS{alertname="OrbitServerDown"}'), "the server is up"
