"""Orbit's alert rules (deploy/prometheus/orbit-rules.yaml): valid for promtool, unit-tested alert
by alert, shipped unchanged in the chart's PrometheusRule, and each with a runbook."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import CHART, KUBERNETES, REPO, RULE_TESTS, RULES, RUNBOOKS, Run

MONITORING_DOC = REPO / "docs" / "operations" / "monitoring.md"
DEFAULT_RUNBOOK_BASE = "https://github.com/orbit-dev/orbit/blob/main/docs/runbooks/"
RUNBOOK_SECTIONS = ("## What it means", "## How to check", "## How to fix")


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


ALERTS = [rule["alert"] for rule in alert_rules()]


def test_promtool_check_rules_passes(promtool: Run) -> None:
    result = promtool("check", "rules", str(RULES))
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_pass(promtool: Run) -> None:
    result = promtool("test", "rules", str(RULE_TESTS))
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_fail_when_an_alert_misbehaves(promtool: Run, tmp_path: Path) -> None:
    """The unit tests can fail: summing the replicas' identical gauges breaks them."""
    broken = RULES.read_text().replace(
        'max by (namespace, queue) (orbit_queue_tasks{state="NEEDS_REVIEW"})',
        'sum by (namespace, queue) (orbit_queue_tasks{state="NEEDS_REVIEW"})',
    )
    (tmp_path / "orbit-rules.yaml").write_text(broken)
    (tmp_path / "tests.yaml").write_text(RULE_TESTS.read_text())
    result = promtool("test", "rules", str(tmp_path / "tests.yaml"), check=False)
    assert result.returncode != 0
    assert "OrbitTasksNeedReview" in result.stdout + result.stderr


def _cases() -> dict[str, dict[str, int]]:
    """alert → how many unit-test evaluations expect it to fire / to stay quiet."""
    counts: dict[str, dict[str, int]] = {}
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            seen = counts.setdefault(check["alertname"], {"fires": 0, "quiet": 0})
            seen["fires" if check["exp_alerts"] else "quiet"] += 1
    return counts


@pytest.mark.parametrize("alert", ALERTS)
def test_each_alert_is_unit_tested_firing_and_quiet(alert: str) -> None:
    assert _cases().get(alert, {}).get("fires", 0) >= 1, f"{alert}: no test where it fires"
    assert _cases().get(alert, {}).get("quiet", 0) >= 1, f"{alert}: no test where it is quiet"


@pytest.mark.parametrize("alert", ALERTS)
def test_each_alert_links_its_runbook_which_says_what_it_means_and_what_to_do(alert: str) -> None:
    (rule,) = [r for r in alert_rules() if r["alert"] == alert]
    assert rule["annotations"]["runbook_url"] == f"{DEFAULT_RUNBOOK_BASE}{alert}.md"
    assert rule["labels"]["severity"] in ("critical", "warning")
    assert {"summary", "description"} <= set(rule["annotations"])
    runbook = RUNBOOKS / f"{alert}.md"
    assert runbook.is_file(), f"write {runbook.relative_to(REPO)}"
    text = runbook.read_text()
    assert text.startswith(f"# {alert}\n")
    for section in RUNBOOK_SECTIONS:
        assert section in text, f"{runbook.name}: missing {section!r}"
    assert "orbit " in text or "kubectl " in text or "SELECT" in text, "say how to check"


def test_every_runbook_belongs_to_an_alert() -> None:
    documented = {p.stem for p in RUNBOOKS.glob("*.md")} - {"README"}
    assert documented == set(ALERTS)


def test_monitoring_doc_lists_every_alert_and_every_metric_the_rules_use() -> None:
    doc = MONITORING_DOC.read_text()
    for alert in ALERTS:
        assert f"[{alert}](../runbooks/{alert}.md)" in doc, alert
    groups = yaml.safe_load(RULES.read_text())["groups"]
    exprs = " ".join(rule["expr"] for group in groups for rule in group["rules"])
    # metric names, not recording rules (level:orbit_metric:operation)
    used = set(re.findall(r"(?<![:\w])(orbit_[a-z_]+)(?![:\w])", exprs))
    assert used
    for metric in sorted(used):
        assert f"`{metric}`" in doc, f"{metric} is used by an alert but not documented"


def _rendered_rule(helm: Run, base: str) -> dict[str, Any]:
    result = helm(
        "template",
        "rel",
        str(CHART),
        "--kube-version",
        KUBERNETES,
        "--set",
        "metrics.prometheusRule.enabled=true",
        "--set",
        f"metrics.prometheusRule.runbookBaseUrl={base}",
        "--show-only",
        "templates/prometheusrule.yaml",
    )
    doc: dict[str, Any] = yaml.safe_load(result.stdout)
    return doc


def test_chart_prometheus_rule_is_the_rules_file_with_its_own_runbook_base(
    helm: Run, promtool: Run, tmp_path: Path
) -> None:
    base = "https://wiki.internal.example/orbit/"
    rendered = _rendered_rule(helm, base)
    assert rendered["kind"] == "PrometheusRule"
    expected = yaml.safe_load(RULES.read_text().replace(DEFAULT_RUNBOOK_BASE, base))
    assert rendered["spec"]["groups"] == expected["groups"]
    extracted = tmp_path / "rendered-rules.yaml"
    extracted.write_text(yaml.safe_dump({"groups": rendered["spec"]["groups"]}))
    promtool("check", "rules", str(extracted))


def test_chart_service_monitor_keeps_orbit_namespace_label_and_the_rules_job_names(
    helm: Run,
) -> None:
    result = helm(
        "template",
        "rel",
        str(CHART),
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--show-only",
        "templates/servicemonitor.yaml",
    )
    monitor = yaml.safe_load(result.stdout)
    endpoints = {e["port"]: e for e in monitor["spec"]["endpoints"]}
    assert set(endpoints) == {"http", "metrics"}
    assert all(e["honorLabels"] is True for e in endpoints.values())
    jobs = {port: e["relabelings"][0]["replacement"] for port, e in endpoints.items()}
    assert jobs == {"http": "orbit-server", "metrics": "orbit-operator"}
    rules = RULES.read_text()
    assert 'job="orbit-server"' in rules and 'job="orbit-operator"' in rules
