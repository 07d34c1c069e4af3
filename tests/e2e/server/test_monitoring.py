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

from ..conftest import ROOT, Server, Tenant, free_port, make_tenant, wait_for_http, wait_until
from ..receiver import new_secret
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
    flows: Tenant  # a firing schedule, workflows, result subscriptions, a worker connected


ORDER = {  # waits for "approved" after its first task; "shipped" may arrive early
    "steps": [
        {"name": "reserve", "task": {"handler": "e2e.echo"}},
        {"name": "approval", "dependsOn": ["reserve"], "wait": {"signal": "approved"}},
        {"name": "shipping", "dependsOn": ["approval"], "wait": {"signal": "shipped"}},
    ]
}
TRACKING = {  # one poll round, which matches
    "steps": [
        {
            "name": "track",
            "poll": {
                "handler": "e2e.echo",
                "params": {"status": "delivered"},
                "until": 'result.echo.status == "delivered"',
                "intervalSeconds": 1,
                "maxRounds": 3,
            },
        }
    ]
}


def task_work(busy: Tenant, tmp_path: Path) -> None:
    busy.start_worker(ORBIT_E2E_DIR=str(tmp_path))
    with Client(busy.server.url, token=busy.token) as client:
        ns = busy.namespace
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


def delivery_work(client: Client, flows: Tenant) -> None:
    """A pull subscription with one delivery never acknowledged (pulled once), and a webhook to
    a closed port whose one delivery is parked after its only attempt."""
    ns = flows.namespace
    client.put_subscription(ns, "receipts", mode="pull", outcomes=["CANCELLED"])
    secret_ref = "monitoring-hook"
    flows.server.put_webhook_secret(ns, secret_ref, new_secret())
    client.put_subscription(
        ns,
        "hook",
        mode="push",
        outcomes=["CANCELLED"],
        url=f"http://127.0.0.1:{free_port()}/closed",
        secret_ref=secret_ref,
        max_attempts=1,
    )
    task = client.submit(ns, handler="e2e.receipt", delay=3600)
    client.cancel(ns, task.id, reason="an outcome for the subscriptions")
    assert len(client.pull_events(ns, "receipts", ack_deadline_seconds=3600).events) == 1


def workflow_work(client: Client, flows: Tenant) -> tuple[str, str]:
    """One workflow finished by a matching poll round, one running (waiting for a signal, with
    another signal pending), one paused; returns the running and the paused workflow's ids."""
    ns = flows.namespace
    client.publish_workflow(ns, "tracking", TRACKING)
    client.publish_workflow(ns, "order", ORDER)
    finished = client.start_workflow(ns, "tracking")
    assert client.wait_workflow(ns, finished.id, timeout=30).state == "SUCCEEDED"
    running = client.start_workflow(ns, "order")
    client.signal_workflow(ns, running.id, "shipped")  # no wait for it is active yet: pending
    wait_until(lambda: client.get_workflow(ns, running.id).steps[1].state == "ACTIVE", timeout=30)
    paused = client.start_workflow(ns, "order")
    wait_until(lambda: client.get_workflow(ns, paused.id).steps[1].state == "ACTIVE", timeout=30)
    client.pause_workflow(ns, paused.id, reason="monitoring test")
    return running.id, paused.id


def step_state(client: Client, namespace: str, workflow_id: str, step: str) -> str:
    steps = client.get_workflow(namespace, workflow_id).steps
    return next(s.state for s in steps if s.name == step)


@pytest.fixture
def work(
    tenant: Tenant, server: Server, mariadb_engine: sa.Engine, tmp_path: Path
) -> Iterator[Work]:
    task_work(tenant, tmp_path)
    idle = make_tenant(server, mariadb_engine, ["submit"])
    with Client(server.url, token=idle.token) as client:
        for _ in range(2):
            client.submit(idle.namespace, handler="e2e.echo")
    flows = make_tenant(server, mariadb_engine, ["admin", "submit", "work"])
    flows.start_worker(ORBIT_E2E_DIR=str(tmp_path))
    with Client(server.url, token=flows.token) as client:
        client.create_schedule(
            flows.namespace, "every-second", cron="* * * * * *", handler="e2e.echo"
        )
        delivery_work(client, flows)
        workflow_work(client, flows)
        yield Work(tenant, idle, flows)
        client.delete_schedule(flows.namespace, "every-second")
    for process in flows.workers:
        process.kill()
        process.wait(10)


def test_scrape_shows_every_expected_metric_with_the_values_the_work_implies(work: Work) -> None:
    ns, idle, flows = work.busy.namespace, work.idle.namespace, work.flows.namespace

    def refreshed() -> Samples | None:
        samples = scrape(work.busy.server)
        waiting = value(samples, "orbit_queue_tasks", namespace=idle, state="WAITING")
        review = value(samples, "orbit_queue_tasks", namespace=ns, state="NEEDS_REVIEW")
        paused = value(samples, "orbit_workflow_instances", namespace=flows, state="PAUSED")
        parked = value(samples, "orbit_deliveries_parked", namespace=flows, subscription="hook")
        ready = (waiting, review, paused, parked) == (2, 1, 1, 1) and fires(samples, flows) >= 1
        return samples if ready else None

    try:  # the scheduler fires on its own clock: wait for its first fire as for the gauges
        samples = wait_until(refreshed, timeout=30)
    except AssertionError as exc:
        said = work.busy.server.log.read_text().splitlines()
        scheduler = [line for line in said if "schedul" in line][-20:]
        raise AssertionError(f"{exc}; the server's scheduler lines: {scheduler}") from exc
    for name in SERVER_METRICS:
        assert name in samples, f"{name} is not exposed"
    assert_task_metrics(samples, ns, idle)
    assert_schedule_metrics(samples, flows)
    assert_workflow_metrics(samples, flows)
    assert_delivery_metrics(samples, flows)
    stamp = value(samples, "orbit_gauges_refreshed_timestamp_seconds")
    assert stamp is not None and abs(time.time() - stamp) < 30


def assert_task_metrics(samples: Samples, ns: str, idle: str) -> None:
    assert value(samples, "orbit_tasks_submitted_total", namespace=ns, queue="default") == 5
    assert value(samples, "orbit_tasks_submitted_total", namespace=idle, queue="default") == 2
    # No worker serves the idle namespace: both its tasks wait for one.
    assert value(samples, "orbit_tasks_unrunnable", namespace=idle, queue="default") == 2
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


def fires(samples: Samples, flows: str) -> float:
    return sum(  # by reason: Scheduled, or FireOnce/CatchUp after a slow pass
        v
        for found, v in samples.get("orbit_schedule_fires_total", [])
        if found.get("namespace") == flows and found.get("outcome") == "fired"
    )


def assert_schedule_metrics(samples: Samples, flows: str) -> None:
    fired = fires(samples, flows)
    assert fired >= 1, "the every-second schedule fired"
    lateness = value(samples, "orbit_schedule_fire_lateness_seconds_count", namespace=flows)
    assert lateness == fired, "each fire's lateness is observed once"


def assert_workflow_metrics(samples: Samples, flows: str) -> None:
    for state, live in (("RUNNING", 1), ("PAUSED", 1)):
        assert value(samples, "orbit_workflow_instances", namespace=flows, state=state) == live
    assert value(samples, "orbit_workflow_signal_backlog", namespace=flows) == 1, "shipped"
    assert value(samples, "orbit_workflow_inbox_backlog", namespace=flows) == 0, "consumed"
    assert value(samples, "orbit_workflow_inbox_oldest_age_seconds", namespace=flows) == 0
    finished = value(samples, "orbit_workflows_finished_total", namespace=flows, state="SUCCEEDED")
    assert finished == 1
    matched = value(samples, "orbit_workflow_poll_rounds_total", namespace=flows, outcome="matched")
    assert matched == 1
    advances = value(samples, "orbit_workflow_step_advances_total", namespace=flows)
    # tracking: track activated, succeeded; each order: reserve activated, succeeded, approval
    # activated (the paused one had got that far before its pause)
    assert advances == 2 + 2 * 3


def assert_delivery_metrics(samples: Samples, flows: str) -> None:
    pull, push = (
        {"namespace": flows, "subscription": "receipts"},
        {"namespace": flows, "subscription": "hook"},
    )
    assert value(samples, "orbit_delivery_backlog", **pull) == 1, "pulled, never acknowledged"
    age = value(samples, "orbit_delivery_oldest_age_seconds", **pull)
    assert age is not None and 0 <= age < 120
    assert value(samples, "orbit_deliveries_parked", **pull) == 0
    assert value(samples, "orbit_delivery_attempts_total", **pull, result="pulled") == 1
    assert value(samples, "orbit_delivery_backlog", **push) == 0
    assert value(samples, "orbit_delivery_attempts_total", **push, result="parked") == 1


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
