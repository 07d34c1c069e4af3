"""The Grafana dashboard (deploy/grafana/orbit-dashboard.json): every query is valid PromQL
(promtool parses it), uses documented metrics, and counts the replicas' MySQL gauges once."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from .conftest import CHART, REPO, Run

DASHBOARD = REPO / "deploy" / "grafana" / "orbit-dashboard.json"
MONITORING_DOC = REPO / "docs" / "operations" / "monitoring.md"
# Gauges every server replica reports with the same value (monitoring.md): never summed raw.
MYSQL_GAUGES = (
    "orbit_queue_tasks",
    "orbit_worker_sessions",
    "orbit_queue_oldest_waiting_seconds",
    "orbit_workflow_instances",
    "orbit_workflow_inbox_backlog",
    "orbit_workflow_inbox_oldest_age_seconds",
    "orbit_workflow_signal_backlog",
    "orbit_workflow_timers_backing_off",
    "orbit_delivery_backlog",
    "orbit_delivery_oldest_age_seconds",
    "orbit_deliveries_parked",
    "orbit_dispatch_fenced",
    "orbit_restore_epoch",
)


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def queries() -> list[str]:
    return [
        target["expr"] for panel in dashboard()["panels"] for target in panel.get("targets", [])
    ]


def as_promql(expr: str) -> str:
    """Grafana's variables replaced by values Prometheus accepts."""
    return expr.replace("$__rate_interval", "5m").replace("$namespace", ".*")


def test_every_query_is_valid_promql(promtool: Run, tmp_path: Path) -> None:
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query_{i}", "expr": as_promql(expr)}
                    for i, expr in enumerate(queries())
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump(rules))
    result = promtool("check", "rules", str(path))
    assert f"SUCCESS: {len(queries())} rules found" in result.stdout


def test_every_metric_the_dashboard_shows_is_documented() -> None:
    doc = MONITORING_DOC.read_text()
    used = {m for expr in queries() for m in re.findall(r"(?<![:\w])(orbit_[a-z_]+)", expr)}
    used = {re.sub(r"_(bucket|count|sum)$", "", m) for m in used}
    assert used
    assert not [m for m in sorted(used) if f"`{m}`" not in doc]


def test_mysql_gauges_are_taken_once_across_replicas() -> None:
    for expr in queries():
        for gauge in MYSQL_GAUGES:
            if gauge in expr:
                taken_once = re.search(r"\bmax(\(| by )", expr)
                assert taken_once, f"aggregate {gauge} with max first: {expr}"


def test_it_shows_throughput_latency_backlog_and_the_review_queue() -> None:
    titles = " | ".join(p["title"] for p in dashboard()["panels"]).lower()
    topics = ("submissions", "outcomes", "latency", "waiting", "review", "worker sessions")
    for topic in (*topics, "outage graces", "batched call", "restore fence"):
        assert topic in titles, topic


def test_panels_use_the_datasource_variable_and_a_namespace_filter() -> None:
    board = dashboard()
    variables = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", "namespace"} <= variables
    for panel in board["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
    assert any('namespace=~"$namespace"' in expr for expr in queries())


def test_the_chart_ships_the_dashboard_as_a_configmap(helm: Run) -> None:
    result = helm(
        "template",
        "rel",
        str(CHART),
        "--set",
        "metrics.dashboard.enabled=true",
        "--show-only",
        "templates/dashboard-configmap.yaml",
    )
    configmap = yaml.safe_load(result.stdout)
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["orbit.json"]) == dashboard()
